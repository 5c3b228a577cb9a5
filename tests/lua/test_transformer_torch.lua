-- netcl.transformer against PyTorch: one DecoderBlock forward and backward (output, input gradient and every
-- weight's gradient, float64), and models.GPT checkpoints both ways (a netcl state_dict loads strictly into a
-- hand-written Llama in PyTorch with the same logits, and PyTorch's loads into models.GPT). Needs python3 with
-- torch (Debian: python3-torch); skipped with a message otherwise. tests/interop/torch_llama.py is PyTorch's side.
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local nio = require "netcl.io"
local tf = require "netcl.transformer"
local models = require "netcl.models"
local H = require "helpers"

local dev = H.device()
local cpu = nc.device("cpu")
local SCRIPT = "tests/interop/torch_llama.py"
local CFG = {dim = 32, n_heads = 4, n_kv_heads = 2, ffn_hidden = 40, eps = 1e-5, theta = 10000, vocab_size = 37,
             n_layers = 2}

local function find_torch_python()
  local candidates = {"python3", "/usr/bin/python3"}
  if os.getenv("NETCL_PYTHON") then table.insert(candidates, 1, os.getenv("NETCL_PYTHON")) end
  for _, py in ipairs(candidates) do
    if os.execute(py .. " " .. SCRIPT .. " probe >/dev/null 2>&1") then return py end
  end
end

local function run(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  assert(p:close(), cmd .. " failed:\n" .. out)
end

local function max_rel(a, b)
  local fa, fb = H.flat(a:to(cpu):to("float64"):tolist()), H.flat(b:to(cpu):to("float64"):tolist())
  assert(#fa == #fb, "sizes differ")
  local worst, scale = 0, 0
  for i = 1, #fb do scale = math.max(scale, math.abs(fb[i])) end
  for i = 1, #fa do worst = math.max(worst, math.abs(fa[i] - fb[i])) end
  return worst / math.max(scale, 1e-30)
end

local PY = find_torch_python()

TestTransformerTorch = {}

function TestTransformerTorch:setUp()
  if not PY then lu.skip("PyTorch is not installed for python3 (Debian: python3-torch): the PyTorch checks did not run") end
  self.dir = H.tmpdir()
  self.cfg = nc._json.encode(CFG)
end

function TestTransformerTorch:tearDown()
  if self.dir then os.execute("rm -rf '" .. self.dir .. "'") end
end

function TestTransformerTorch:test_decoder_block_forward_and_backward()
  local f64 = dev.fp64 and "float64" or "float32"
  nc.manual_seed(3)
  local block = tf.DecoderBlock{dim = CFG.dim, n_heads = CFG.n_heads, n_kv_heads = CFG.n_kv_heads,
                                ffn_hidden = CFG.ffn_hidden, eps = CFG.eps, dtype = f64}
  for _, p in block:named_parameters() do p.value = p.value + nc.randn(p.value.shape, {dtype = f64}) * 0.1 end
  local x, dout = nc.randn({2, 7, CFG.dim}, {dtype = f64}), nc.randn({2, 7, CFG.dim}, {dtype = f64})
  local save = {x = x:to(cpu), dout = dout:to(cpu)}
  for name, t in pairs(block:state_dict()) do save[name] = t:to(cpu) end
  nio.save(save, self.dir .. "/in.safetensors")
  run(string.format("%s %s block %s/in.safetensors %s/out.safetensors '%s'", PY, SCRIPT, self.dir, self.dir, self.cfg))
  local want = nio.load(self.dir .. "/out.safetensors")
  local px = ag.param(x)
  local tape = ag.Tape()
  local y = tape:record(function() return block(px) end)
  tape:backward(tape:record(function() return (y * dout):sum() end))
  local tol = f64 == "float64" and 1e-10 or 1e-4
  lu.assertTrue(max_rel(y.value, want.y) < tol, "output differs: " .. max_rel(y.value, want.y))
  lu.assertTrue(max_rel(px.grad, want["grad.x"]) < tol, "input gradient differs")
  local n = 0
  for name, p in block:named_parameters() do
    local d = max_rel(p.grad, want["grad." .. name])
    lu.assertTrue(d < tol, "gradient of " .. name .. " differs by " .. d)
    n = n + 1
  end
  lu.assertEquals(n, 9)
end

local function gpt()
  return models.GPT{vocab_size = CFG.vocab_size, dim = CFG.dim, n_layers = CFG.n_layers, n_heads = CFG.n_heads,
                    n_kv_heads = CFG.n_kv_heads, max_seq = 16, ffn_hidden = CFG.ffn_hidden, eps = CFG.eps}
end

function TestTransformerTorch:test_gpt_checkpoints_both_ways()
  nc.manual_seed(4)
  local ids = nc.randint(0, CFG.vocab_size, {2, 9}, {dtype = "int64"})
  nio.save({ids = ids}, self.dir .. "/ids.safetensors")
  -- netcl -> PyTorch
  local model = gpt()
  local sd = {}
  for name, t in pairs(model:state_dict()) do sd[name] = t:to(cpu) end
  nio.save(sd, self.dir .. "/ours.safetensors")
  run(string.format("%s %s logits %s/ours.safetensors %s/ids.safetensors %s/l1.safetensors '%s'", PY, SCRIPT,
    self.dir, self.dir, self.dir, self.cfg))
  local ours = ag.no_grad(function() return model(ids:to(dev)).value end)
  local d = max_rel(ours, nio.load(self.dir .. "/l1.safetensors").logits)
  lu.assertTrue(d < 1e-4, "logits in PyTorch differ by " .. d)
  -- PyTorch -> netcl
  run(string.format("%s %s export %s/theirs.safetensors %s/ids.safetensors %s/l2.safetensors '%s'", PY, SCRIPT,
    self.dir, self.dir, self.dir, self.cfg))
  local other = gpt()
  other:load_state_dict(nio.load(self.dir .. "/theirs.safetensors", {device = dev}), {strict = true})
  local got = ag.no_grad(function() return other(ids:to(dev)).value end)
  d = max_rel(got, nio.load(self.dir .. "/l2.safetensors").logits)
  lu.assertTrue(d < 1e-4, "logits of the PyTorch checkpoint differ by " .. d)
end

os.exit(lu.LuaUnit.run())

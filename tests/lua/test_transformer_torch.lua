-- netcl.transformer against PyTorch: one DecoderBlock forward and backward (output, input gradient and every
-- weight's gradient, float64), and models.GPT checkpoints both ways (a netcl state_dict loads strictly into a
-- hand-written Llama in PyTorch with the same logits, and PyTorch's loads into models.GPT). Needs python3 with
-- torch (Debian: python3-torch); skipped with a message otherwise. tests/interop/torch_llama.py is PyTorch's side,
-- run once for every comparison (importing torch takes seconds).
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
local F = dev.fp64 and "float64" or "float32"

local function max_rel(a, b)
  local fa, fb = H.flat(a:to(cpu):to("float64"):tolist()), H.flat(b:to(cpu):to("float64"):tolist())
  assert(#fa == #fb, "sizes differ")
  local worst, scale = 0, 0
  for i = 1, #fb do scale = math.max(scale, math.abs(fb[i])) end
  for i = 1, #fa do worst = math.max(worst, math.abs(fa[i] - fb[i])) end
  return worst / math.max(scale, 1e-30)
end

local function gpt()
  return models.GPT{vocab_size = CFG.vocab_size, dim = CFG.dim, n_layers = CFG.n_layers, n_heads = CFG.n_heads,
                    n_kv_heads = CFG.n_kv_heads, max_seq = 16, ffn_hidden = CFG.ffn_hidden, eps = CFG.eps}
end

-- netcl's side, written before PyTorch runs: a block with its inputs, a GPT's state_dict and token ids.
local dir = H.tmpdir()
nc.manual_seed(3)
local block = tf.DecoderBlock{dim = CFG.dim, n_heads = CFG.n_heads, n_kv_heads = CFG.n_kv_heads,
                              ffn_hidden = CFG.ffn_hidden, eps = CFG.eps, dtype = F}
for _, p in block:named_parameters() do p.value = p.value + nc.randn(p.value.shape, {dtype = F}) * 0.1 end
local x, dout = nc.randn({2, 7, CFG.dim}, {dtype = F}), nc.randn({2, 7, CFG.dim}, {dtype = F})
do
  local save = {x = x:to(cpu), dout = dout:to(cpu)}
  for name, t in pairs(block:state_dict()) do save[name] = t:to(cpu) end
  nio.save(save, dir .. "/block_in.safetensors")
end
nc.manual_seed(4)
local ids = nc.randint(0, CFG.vocab_size, {2, 9}, {dtype = "int64"})
nio.save({ids = ids:to(cpu)}, dir .. "/ids.safetensors")
local model = gpt()
do
  local sd = {}
  for name, t in pairs(model:state_dict()) do sd[name] = t:to(cpu) end
  nio.save(sd, dir .. "/ours.safetensors")
end

-- PyTorch's side: python3, else Debian's /usr/bin/python3 (NETCL_PYTHON first when set).
local ran, log = false, ""
do
  local candidates = {"python3", "/usr/bin/python3"}
  if os.getenv("NETCL_PYTHON") then table.insert(candidates, 1, os.getenv("NETCL_PYTHON")) end
  for _, py in ipairs(candidates) do
    local p = io.popen(string.format("%s %s all %s '%s' 2>&1", py, SCRIPT, dir, nc._json.encode(CFG)))
    log = p:read("a")
    if p:close() then
      ran = true
      break
    end
  end
end

TestTransformerTorch = {}

function TestTransformerTorch:setUp()
  if not ran then
    if log:find("No module named 'torch'", 1, true) or log:find("not found", 1, true) then
      lu.skip("PyTorch is not installed for python3 (Debian: python3-torch): the PyTorch checks did not run")
    end
    lu.fail("tests/interop/torch_llama.py failed:\n" .. log)
  end
end

function TestTransformerTorch:test_decoder_block_forward_and_backward()
  local want = nio.load(dir .. "/block_out.safetensors")
  local px = ag.param(x)
  local tape = ag.Tape()
  local y = tape:record(function() return block(px) end)
  tape:backward(tape:record(function() return (y * dout):sum() end))
  local tol = F == "float64" and 1e-10 or 1e-4
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

function TestTransformerTorch:test_gpt_checkpoints_both_ways()
  -- netcl -> PyTorch
  local ours = ag.no_grad(function() return model(ids).value end)
  local d = max_rel(ours, nio.load(dir .. "/l1.safetensors").logits)
  lu.assertTrue(d < 1e-4, "logits in PyTorch differ by " .. d)
  -- PyTorch -> netcl
  local other = gpt()
  other:load_state_dict(nio.load(dir .. "/theirs.safetensors", {device = dev}), {strict = true})
  local got = ag.no_grad(function() return other(ids).value end)
  d = max_rel(got, nio.load(dir .. "/l2.safetensors").logits)
  lu.assertTrue(d < 1e-4, "logits of the PyTorch checkpoint differ by " .. d)
end

local rc = lu.LuaUnit.run()
os.execute("rm -rf '" .. dir .. "'")
os.exit(rc)

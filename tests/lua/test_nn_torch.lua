-- Checkpoints between netcl and PyTorch: a models.MLP checkpoint written by netcl loads (strictly)
-- into the same torch.nn.Sequential and gives the same logits to 1e-4, and a state_dict written
-- from PyTorch loads into models.MLP with the same result. Needs python3 with torch
-- (Debian: python3-torch); skipped with a message otherwise. tests/interop/torch_mlp.py is
-- PyTorch's side.
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local nio = require "netcl.io"
local models = require "netcl.models"
local H = require "helpers"

local dev = H.device()
local SCRIPT = "tests/interop/torch_mlp.py"
local SIZES = {20, 32, 16, 5}

local function find_torch_python()
  local candidates = {"python3", "/usr/bin/python3"}
  if os.getenv("NETCL_PYTHON") then table.insert(candidates, 1, os.getenv("NETCL_PYTHON")) end
  for _, py in ipairs(candidates) do
    local ok = os.execute(py .. " " .. SCRIPT .. " probe >/dev/null 2>&1")
    if ok then return py end
  end
end

local function run(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  local ok = p:close()
  assert(ok, cmd .. " failed:\n" .. out)
  return out
end

local function max_diff(a, b)
  local fa, fb = H.flat(a), H.flat(b)
  assert(#fa == #fb, "sizes differ: " .. #fa .. " vs " .. #fb)
  local worst = 0
  for i = 1, #fa do worst = math.max(worst, math.abs(fa[i] - fb[i])) end
  return worst
end

local PY = find_torch_python() -- once: importing torch takes seconds

TestTorch = {}

function TestTorch:setUp()
  self.py = PY
  if not self.py then
    lu.skip("PyTorch is not installed for python3 (Debian: python3-torch): the checkpoint interop checks did not run")
  end
  self.dir = H.tmpdir()
  nc.manual_seed(11)
  self.x = nc.randn({6, SIZES[1]}, {device = dev})
  self.inputs = self.dir .. "/inputs.safetensors"
  nio.save({x = self.x}, self.inputs)
end

function TestTorch:tearDown()
  if self.dir then os.execute("rm -rf '" .. self.dir .. "'") end
end

function TestTorch:test_netcl_checkpoint_loads_in_pytorch()
  nc.manual_seed(5)
  local model = models.MLP{sizes = SIZES}
  local ckpt = self.dir .. "/mlp.netcl"
  nio.save_model(model, ckpt)
  local ours = ag.no_grad(function() return model(self.x).value end)
  local out = run(string.format("%s %s logits %s %s %s", self.py, SCRIPT, ckpt, self.inputs, table.concat(SIZES, ",")))
  local theirs = nc._json.decode(out).logits
  lu.assertEquals(#theirs, 6)
  local d = max_diff(ours:tolist(), theirs)
  lu.assertTrue(d <= 1e-4, "logits differ by " .. d)
end

function TestTorch:test_pytorch_state_dict_loads_in_netcl()
  local ckpt = self.dir .. "/from-torch.safetensors"
  local out = run(string.format("%s %s export %s %s %s 3", self.py, SCRIPT, ckpt, self.inputs,
    table.concat(SIZES, ",")))
  local theirs = nc._json.decode(out).logits
  nc.manual_seed(6)
  local model = models.MLP{sizes = SIZES}
  nio.load_model(model, ckpt, {strict = true})
  local ours = ag.no_grad(function() return model(self.x).value end)
  local d = max_diff(ours:tolist(), theirs)
  lu.assertTrue(d <= 1e-4, "logits differ by " .. d)
end

os.exit(lu.LuaUnit.run())

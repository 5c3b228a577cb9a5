-- The activations defined by their op-table rows (nc.elu, nc.softplus, nc.mish, nc.leaky_relu)
-- against their published formulas: computed from existing ops on the device under test, and in
-- Lua's own double arithmetic; against PyTorch's torch.nn.functional when python3 has torch
-- (skipped with a message otherwise). Gradients against the derivatives of the formulas, the
-- Tensor/Node surface, and the errors.
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local H = require "helpers"

local dev = H.device()

-- Both signs, the kinks, both sides of softplus's default threshold (20), large magnitudes.
local XS = {-40, -21, -19, -5, -2.5, -1, -0.3, -1e-3, 0, 1e-3, 0.3, 1, 2.5, 5, 19, 21, 40}

local function x_of(dtype) return nc.tensor(XS, {dtype = dtype}) end

-- The formulas, composed of existing ops (x: a Tensor).
local function elu_ops(x, a) return nc.where(x:gt(0), x, (x:exp() - 1) * a) end
local function softplus_ops(x, b, t) return nc.where((x * b):gt(t), x, (x * b):exp():log1p() / b) end
local function mish_ops(x) return x * softplus_ops(x, 1, 20):tanh() end
local function leaky_ops(x, s) return nc.where(x:gt(0), x, x * s) end

-- The same in Lua (double precision; expm1/log1p written out where the plain form loses digits).
local function expm1(v) return math.abs(v) < 1e-5 and v + v * v / 2 + v * v * v / 6 or math.exp(v) - 1 end
local function log1p(v) return math.abs(v) < 1e-5 and v - v * v / 2 + v * v * v / 3 or math.log(1 + v) end
local function tanh(v) local e = math.exp(-2 * math.abs(v)) local t = (1 - e) / (1 + e) return v < 0 and -t or t end
local REF = {
  elu = function(v, o) return v > 0 and v or (o.alpha or 1) * expm1(v) end,
  softplus = function(v, o)
    local b, t = o.beta or 1, o.threshold or 20
    return v * b > t and v or log1p(math.exp(v * b)) / b
  end,
  mish = function(v) return v * tanh(v > 20 and v or log1p(math.exp(v))) end,
  leaky_relu = function(v, o) return v > 0 and v or (o.negative_slope or 0.01) * v end,
}

-- {op, options} pairs covering each option.
local CALLS = {
  {"elu", {}}, {"elu", {alpha = 0.25}}, {"elu", {alpha = 2}},
  {"softplus", {}}, {"softplus", {beta = 2}}, {"softplus", {beta = 0.5, threshold = 3}},
  {"softplus", {beta = -1, threshold = 4}},
  {"mish", nil},
  {"leaky_relu", {}}, {"leaky_relu", {negative_slope = 0.2}}, {"leaky_relu", {negative_slope = -1.5}},
}

local function map(f, o) local out = {} for i, v in ipairs(XS) do out[i] = f(v, o or {}) end return out end

TestActivations = {}

function TestActivations:test_values_match_lua_formulas()
  for _, dtype in ipairs({"float64", "float32"}) do
    local tol = dtype == "float64" and 1e-13 or 2e-6
    for _, c in ipairs(CALLS) do
      local got = nc[c[1]](x_of(dtype), c[2])
      lu.assertEquals(got.dtype, dtype)
      lu.assertEquals(got.device, dev)
      H.assert_close(got, map(REF[c[1]], c[2]), tol, c[1] .. " " .. dtype)
    end
  end
end

function TestActivations:test_values_match_composed_ops()
  for _, dtype in ipairs({"float64", "float32"}) do
    local tol = dtype == "float64" and 1e-14 or 1e-6
    local x = x_of(dtype)
    H.assert_close(nc.elu(x), elu_ops(x, 1), tol, "elu")
    H.assert_close(nc.elu(x, {alpha = 0.7}), elu_ops(x, 0.7), tol, "elu alpha")
    H.assert_close(nc.softplus(x), softplus_ops(x, 1, 20), tol, "softplus")
    H.assert_close(nc.softplus(x, {beta = 3, threshold = 2}), softplus_ops(x, 3, 2), tol, "softplus beta")
    H.assert_close(nc.mish(x), mish_ops(x), tol, "mish")
    H.assert_close(nc.leaky_relu(x), leaky_ops(x, 0.01), tol, "leaky_relu")
    H.assert_close(nc.leaky_relu(x, {negative_slope = 0.3}), leaky_ops(x, 0.3), tol, "leaky_relu slope")
  end
end

-- Known values, as torch.nn.functional gives them (float64).
function TestActivations:test_published_values()
  local x = nc.tensor({-1, 1}, {dtype = "float64"})
  H.assert_close(nc.elu(x), {-0.63212055882855767, 1}, 1e-15)
  H.assert_close(nc.softplus(x), {0.31326168751822286, 1.3132616875182228}, 1e-15)
  H.assert_close(nc.mish(x), {-0.30340146137410892, 0.86509838826731035}, 1e-15)
  H.assert_close(nc.leaky_relu(x), {-0.01, 1}, 1e-15)
  H.assert_close(nc.softplus(nc.tensor({20.5, 19.5}, {dtype = "float64"})), {20.5, 19.500000003398268}, 1e-15)
end

function TestActivations:test_nan_and_inf()
  local x = nc.tensor({0 / 0, math.huge, -math.huge}, {dtype = "float64"})
  local nan = 0 / 0
  H.assert_close(nc.elu(x, {alpha = 0.5}), {nan, math.huge, -0.5})
  H.assert_close(nc.softplus(x), {nan, math.huge, 0})
  H.assert_close(nc.mish(x), {nan, math.huge, nan}) -- -inf * tanh(0), as torch
  H.assert_close(nc.leaky_relu(x), {nan, math.huge, -math.huge})
end

function TestActivations:test_layouts_and_shapes()
  local base = nc.arange(-12, 12, 1, {dtype = "float64"}):view({4, 6})
  for _, c in ipairs(CALLS) do
    local f = nc[c[1]]
    local t = base:transpose(1, 2)                    -- strided
    H.assert_close(f(t, c[2]), f(t:contiguous(), c[2]), 0, c[1] .. " transposed")
    local n = base:narrow(1, 2, 2)                    -- contiguous at an offset
    H.assert_close(f(n, c[2]), f(n:clone(), c[2]), 0, c[1] .. " narrowed")
    local e = nc.tensor({-2, 3}, {dtype = "float64"}):view({2, 1}):expand({2, 5}) -- stride 0
    H.assert_close(f(e, c[2]), f(e:contiguous(), c[2]), 0, c[1] .. " expanded")
    lu.assertEquals(f(t, c[2]).shape, {6, 4})
    lu.assertEquals(f(nc.zeros({0, 3}), c[2]).shape, {0, 3})
    lu.assertEquals(f(nc.tensor(-2.0), c[2]).shape, {})
  end
  -- many chunks (one OpenCL work-group each), the last one partial
  local big = nc.linspace(-30, 30, 3 * 4096 + 5, {dtype = "float64"})
  H.assert_close(nc.mish(big), mish_ops(big), 1e-14, "mish, many chunks")
  H.assert_close(nc.elu(big), elu_ops(big, 1), 1e-14, "elu, many chunks")
end

-- One function on nc and nc.autograd; Nodes record, and the gradients are the formulas'.
function TestActivations:test_nodes_and_gradients()
  for _, name in ipairs({"elu", "softplus", "mish", "leaky_relu"}) do
    lu.assertIs(nc[name], ag[name])
  end
  local xs = {-3, -0.5, 0.25, 2, 25}
  local x = nc.tensor(xs, {dtype = "float64"})
  local sig = function(v) return 1 / (1 + math.exp(-v)) end
  local derivs = {
    elu = {{alpha = 0.5}, function(v) return v > 0 and 1 or 0.5 * math.exp(v) end},
    softplus = {{beta = 2, threshold = 3}, function(v) return 2 * v > 3 and 1 or sig(2 * v) end},
    mish = {nil, function(v)
      local t = tanh(log1p(math.exp(v)))
      return t + v * sig(v) * (1 - t * t)
    end},
    leaky_relu = {{negative_slope = 0.1}, function(v) return v > 0 and 1 or 0.1 end},
  }
  for name, d in pairs(derivs) do
    local p = ag.param(x:clone())
    local tape = ag.Tape()
    local y
    local loss = tape:record(function()
      y = nc[name](p, d[1])
      return y:sum()
    end)
    lu.assertTrue(ag.is_node(y))
    H.assert_close(y.value, nc[name](x, d[1]), 0, name .. " node value")
    tape:backward(loss)
    local want = {}
    for i, v in ipairs(xs) do want[i] = d[2](v) end
    H.assert_close(p.grad, want, 1e-12, name .. " gradient")
  end
  -- no tape: a Node in, a Node out, nothing recorded
  lu.assertTrue(ag.is_node(nc.elu(ag.tensor(x))))
end

function TestActivations:test_errors()
  local i = nc.tensor({1, 2}, {dtype = "int64"})
  for _, name in ipairs({"elu", "softplus", "mish", "leaky_relu"}) do
    H.assert_error(function() nc[name](i) end, "netcl." .. name, "float32, float64, bfloat16 or float16", "int64")
    H.assert_error(function() nc[name](nc.ones({2}), {bogus = 1}) end, "netcl." .. name, "unknown option 'bogus'")
    H.assert_error(function() nc[name](nc.ones({2}), 3) end, "netcl." .. name, "options must be a table")
    H.assert_error(function() nc[name]() end, "netcl." .. name, "argument 1")
  end
  H.assert_error(function() nc.elu(nc.ones({2}), {alpha = "x"}) end, "netcl.elu", "alpha")
  H.assert_error(function() nc.elu(nc.ones({2}), {alpha = 0 / 0}) end, "netcl.elu: alpha must be a finite number, got nan")
  H.assert_error(function() nc.softplus(nc.ones({2}), {beta = 0}) end, "netcl.softplus: beta must not be 0")
  H.assert_error(function() nc.softplus(nc.ones({2}), {threshold = math.huge}) end, "threshold must be a finite number")
  H.assert_error(function() nc.leaky_relu(nc.ones({2}), {negative_slope = -math.huge}) end, "negative_slope must be")
  H.assert_error(function() nc.mish(nc.ones({2}), {alpha = 1}) end, "netcl.mish", "unknown option 'alpha'")
end

-- PyTorch's torch.nn.functional on the same inputs (float64), when python3 has torch.
local TORCH = [[
import sys, torch
import torch.nn.functional as F
x = torch.tensor([float(v) for v in sys.argv[1].split(',')], dtype=torch.float64)
outs = [F.elu(x), F.elu(x, alpha=0.25), F.softplus(x), F.softplus(x, beta=2, threshold=5), F.mish(x),
        F.leaky_relu(x), F.leaky_relu(x, negative_slope=0.2)]
for o in outs: print(','.join(repr(v) for v in o.tolist()))
]]

local function torch_python() return H.python("torch") end

function TestActivations:test_pytorch()
  local py = torch_python()
  if not py then
    lu.skip("PyTorch is not installed for python3 (Debian: python3-torch): the comparison with torch.nn.functional did not run")
  end
  local args = {}
  for i, v in ipairs(XS) do args[i] = string.format("%.17g", v) end
  local tmp = os.tmpname()
  local f = assert(io.open(tmp, "w"))
  f:write(TORCH)
  f:close()
  local p = io.popen(py .. " " .. tmp .. " " .. table.concat(args, ","))
  local out = p:read("a")
  p:close()
  os.remove(tmp)
  local rows = {}
  for line in out:gmatch("[^\n]+") do
    local r = {}
    for v in line:gmatch("[^,]+") do r[#r + 1] = tonumber(v) end
    rows[#rows + 1] = r
  end
  lu.assertEquals(#rows, 7, "python3 output: " .. out)
  local x = x_of("float64")
  local mine = {nc.elu(x), nc.elu(x, {alpha = 0.25}), nc.softplus(x), nc.softplus(x, {beta = 2, threshold = 5}),
                nc.mish(x), nc.leaky_relu(x), nc.leaky_relu(x, {negative_slope = 0.2})}
  for k, t in ipairs(mine) do H.assert_close(t, rows[k], 1e-14, "torch row " .. k) end
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

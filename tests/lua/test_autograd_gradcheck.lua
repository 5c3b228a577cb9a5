-- Gradient checks: every differentiable op (ag.ops(), generated from the op table's gradient column) against float64
-- central differences. An op without a case here fails its test, so adding an op to the table
-- without a gradient case fails the suite.
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local H = require "helpers"

local dev = H.device()

-- Deterministic inputs: a Lua LCG, so the values do not depend on the generator's state.
local seed = 42
local function rnd()
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed / 2147483648
end

local function numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end

-- float64 Tensor of shape with values from gen(k) (k = 1-based flat position).
local function make(shape, gen)
  local vals = {}
  for k = 1, numel(shape) do vals[k] = gen(k) end
  if #shape == 0 then return nc.tensor(vals[1], {dtype = "float64"}) end
  return nc.tensor(vals, {shape = shape, dtype = "float64"})
end

-- A leaf Node with values uniform in [lo, hi).
local function P(shape, lo, hi)
  lo, hi = lo or -2, hi or 2
  return ag.param(make(shape, function() return lo + (hi - lo) * rnd() end))
end

-- Values at least 0.2 away from 0 (kinks of abs, relu, sign, max ties).
local function away(shape)
  return ag.param(make(shape, function(k) local v = 0.2 + 1.3 * rnd() return k % 2 == 0 and -v or v end))
end

-- Values at least 0.2 away from every integer and half-integer (floor, ceil, round).
local function off_grid(shape)
  return ag.param(make(shape, function(k) return (k % 5) - 2 + 0.2 + 0.1 * rnd() end))
end

-- Distinct values (no ties for max/min): a shuffled ramp.
local function distinct(shape)
  local n = numel(shape)
  return ag.param(make(shape, function(k) return ((k * 7) % n - n / 2) * 0.37 + 0.05 * rnd() end))
end

local function bools(shape, pattern)
  local vals = {}
  for k = 1, numel(shape) do vals[k] = pattern[(k - 1) % #pattern + 1] end
  return nc.tensor(vals, {shape = shape, dtype = "bool"})
end

-- cases[name] = list of {inputs = {...}, fn = function(...) return Node end, opts = {...}}
local cases = {}
local function case(name, inputs, fn, opts)
  cases[name] = cases[name] or {}
  table.insert(cases[name], {inputs = inputs, fn = fn, opts = opts})
end

-- ---- elementwise unary ---------------------------------------------------------------------------
for _, name in ipairs({"neg", "exp", "sin", "cos", "tanh", "sigmoid", "gelu", "gelu_tanh", "silu"}) do
  case(name, function() return {P({2, 3})} end, function(x) return x[name](x) end)
end
for _, name in ipairs({"log", "sqrt", "rsqrt"}) do
  case(name, function() return {P({2, 3}, 0.5, 2)} end, function(x) return x[name](x) end)
end
case("log1p", function() return {P({2, 3}, -0.5, 2)} end, function(x) return x:log1p() end)
for _, name in ipairs({"abs", "relu", "sign"}) do
  case(name, function() return {away({2, 3})} end, function(x) return x[name](x) end)
end
for _, name in ipairs({"floor", "ceil", "round"}) do
  case(name, function() return {off_grid({2, 3})} end, function(x) return x[name](x) * x end)
end
case("gelu", function() return {P({5})} end, function(x) return ag.gelu(x, {approximate = "tanh"}) end)
case("gelu", function() return {ag.param(nc.tensor({0, 1e-3, -30, 30}, {dtype = "float64"}))} end,
     function(x) return x:gelu() end)
case("clamp", function() return {ag.param(make({2, 4}, function(k) return ({-1.2, -0.3, 0.1, 0.7})[(k - 1) % 4 + 1] + 0.01 * k end))} end,
     function(x) return x:clamp(-0.5, 0.5) end)
case("clamp", function() return {away({2, 3})} end, function(x) return x:clamp(nil, 0) end)
case("clamp", function() return {away({2, 3})} end, function(x) return ag.clamp(x, 0) end)

-- ---- elementwise binary, broadcasting -------------------------------------------------------------
for _, name in ipairs({"add", "sub", "mul", "div"}) do
  local pos = name == "div" and 0.5 or -2
  case(name, function() return {P({2, 3}), P({3}, pos, 2)} end, function(a, b) return a[name](a, b) end)
  case(name, function() return {P({2, 1, 3}, pos, 2), P({4, 1}, pos, 2)} end, function(a, b) return ag[name](a, b) end)
  case(name, function() return {P({2, 3}, pos, 2)} end, function(a) return ag[name](a, 1.5) end)
  case(name, function() return {P({2, 3}, pos, 2)} end, function(a) return ag[name](2.5, a) end)
  case(name, function() return {P({}, pos, 2), P({2, 2}, pos, 2)} end, function(a, b) return ag[name](a, b) end)
end
case("add", function() return {P({2, 3}), nc.ones({3}, {dtype = "float64"})} end, function(a, t) return t + a end)
case("mul", function() return {P({3, 3})} end, function(a) return a * a end) -- one node used twice
case("sub", function() return {P({2, 3})} end, function(a) return -a - 1 end)
case("pow", function() return {P({2, 3}, 0.5, 2), P({2, 3}, -1.5, 1.5)} end, function(a, b) return a ^ b end)
case("pow", function() return {P({2, 3}, 0.5, 2), P({3}, -1.5, 1.5)} end, function(a, b) return ag.pow(a, b) end)
case("pow", function() return {P({2, 3})} end, function(a) return a ^ 3 end)
case("pow", function() return {P({2, 3}, 0.5, 2)} end, function(a) return a ^ -1.5 end)
case("pow", function() return {P({2, 3})} end, function(a) return 2 ^ a end)
case("maximum", function() return {distinct({2, 3}), distinct({3})} end, function(a, b) return ag.maximum(a, b) end)
case("maximum", function() return {away({2, 3})} end, function(a) return a:maximum(0.1) end)
case("minimum", function() return {distinct({2, 3}), distinct({2, 1})} end, function(a, b) return a:minimum(b) end)
case("minimum", function() return {away({2, 3})} end, function(a) return ag.minimum(-0.1, a) end)
-- // and %: away from the jumps of a / b (the operands are fixed); floor_divide's gradient is 0,
-- remainder's is 1 for a and -floor(a / b) for b
local function fixed(shape, vals) return ag.param(make(shape, function(k) return vals[(k - 1) % #vals + 1] end)) end
case("floor_divide", function() return {fixed({2, 3}, {5.3, -4.1, 2.2, -0.7, 7.9, 3.3}), fixed({3}, {1.7, -2.3, 0.9})} end,
     function(a, b) return (a // b) * a + b end)
case("floor_divide", function() return {fixed({2, 3}, {5.3, -4.1, 2.2, -0.7, 7.9, 3.3})} end,
     function(a) return ag.floor_divide(a, 1.5) + a end)
case("remainder", function() return {fixed({2, 3}, {5.3, -4.1, 2.2, -0.7, 7.9, 3.3}), fixed({3}, {1.7, -2.3, 0.9})} end,
     function(a, b) return a % b end)
case("remainder", function() return {fixed({2, 3}, {5.3, -4.1, 2.2, -0.7, 7.9, 3.3})} end,
     function(a) return ag.remainder(7.25, a) end)
case("where", function() return {P({2, 3}), P({3})} end,
     function(a, b) return ag.where(bools({2, 3}, {true, false, false, true}), a, b) end)
case("where", function() return {P({2, 3})} end, function(a) return a:where(bools({1, 3}, {true, false, true}), 0.5) end)
case("where", function() return {P({3})} end, -- a Tensor method with a Node argument
     function(a) return nc.ones({2, 3}, {dtype = "float64"}):where(bools({2, 3}, {false, true}), a) end)
case("masked_fill", function() return {P({2, 3})} end,
     function(a) return a:masked_fill(bools({3}, {false, true, false}), -7) * a end)

-- ---- reductions ----------------------------------------------------------------------------------
for _, name in ipairs({"sum", "mean", "logsumexp"}) do
  case(name, function() return {P({2, 3, 4})} end, function(x) return x[name](x) end)
  case(name, function() return {P({2, 3, 4})} end, function(x) return x[name](x, 2) end)
  case(name, function() return {P({2, 3, 4})} end, function(x) return x[name](x, {1, 3}, {keepdim = true}) end)
end
case("prod", function() return {P({2, 3, 4}, 0.5, 1.5)} end, function(x) return x:prod(-1) end)
case("prod", function() return {P({3, 4}, 0.5, 1.5)} end, function(x) return x:prod() end)
case("prod", function() return {ag.param(nc.tensor({{0, 2, 3}, {0, 0, 4}, {1, 2, 3}}, {dtype = "float64"}))} end,
     function(x) return x:prod(2) end)
for _, name in ipairs({"max", "min"}) do
  case(name, function() return {distinct({3, 4})} end, function(x) return x[name](x) end)
  case(name, function() return {distinct({3, 4})} end, function(x) return (x[name](x, 2)) end)
  case(name, function() return {distinct({2, 3, 4})} end, function(x) return x[name](x, {1, 3}, {keepdim = true}) end)
end
case("var", function() return {P({3, 4})} end, function(x) return x:var() end)
case("var", function() return {P({3, 4})} end, function(x) return x:var(2, {correction = 0, keepdim = true}) end)
case("std", function() return {P({3, 4})} end, function(x) return x:std(1) end)
case("std", function() return {P({3, 4})} end, function(x) return x:std({1, 2}, {unbiased = false}) end)
case("norm", function() return {away({3, 4})} end, function(x) return x:norm() end)
case("norm", function() return {away({3, 4})} end, function(x) return x:norm(2, {p = 1}) end)
case("norm", function() return {distinct({3, 4})} end, function(x) return x:norm(1, {p = "inf"}) end)
case("norm", function() return {away({3, 4})} end, function(x) return x:norm(2, {p = 3, keepdim = true}) end)
case("cumsum", function() return {P({3, 4})} end, function(x) return x:cumsum(2) end)
case("cumsum", function() return {P({3, 4})} end, function(x) return x:cumsum(1) end)
case("softmax", function() return {P({3, 4})} end, function(x) return x:softmax(-1) end)
case("softmax", function() return {P({3, 4})} end, function(x) return x:softmax(1) end)
case("log_softmax", function() return {P({3, 4})} end, function(x) return x:log_softmax(2) end)
case("log_softmax", function() return {P({2, 3, 4})} end, function(x) return ag.log_softmax(x, 2) end)

-- ---- views and copies -----------------------------------------------------------------------------
case("view", function() return {P({2, 6})} end, function(x) return x:view({3, -1}) * x:view({3, 4}) end)
case("reshape", function() return {P({3, 4})} end, function(x) return x:transpose(1, 2):reshape({2, 6}) end)
case("transpose", function() return {P({2, 3, 4})} end, function(x) return x:transpose(1, 3) end)
case("permute", function() return {P({2, 3, 4})} end, function(x) return x:permute({3, 1, 2}) * 2 end)
case("narrow", function() return {P({4, 5})} end, function(x) return x:narrow(2, 2, 3) end)
case("narrow", function() return {P({4, 5})} end, function(x) return x:narrow(1, -2, 2) + x:narrow(1, 1, 2) end)
case("select", function() return {P({3, 4})} end, function(x) return (x:select(2, -1) * x:select(2, 1)):sum() + x[2] end)
case("expand", function() return {P({3, 1})} end, function(x) return x:expand({2, 3, 4}) end)
case("squeeze", function() return {P({3, 1, 2})} end, function(x) return x:squeeze() end)
case("squeeze", function() return {P({3, 1, 2})} end, function(x) return x:squeeze(2) end)
case("unsqueeze", function() return {P({3, 2})} end, function(x) return x:unsqueeze(-1) * x:unsqueeze(2) end)
case("flatten", function() return {P({2, 3, 4})} end, function(x) return x:flatten(2, 3) end)
case("flatten", function() return {P({2, 3, 4})} end, function(x) return x:transpose(1, 2):flatten() end)
case("contiguous", function() return {P({3, 4})} end, function(x) return x:transpose(1, 2):contiguous() end)
case("clone", function() return {P({3, 4})} end, function(x) return x:clone() * x end)

-- ---- indexing and joins -------------------------------------------------------------------------------
local function idx(values, shape) return nc.tensor(values, {shape = shape, dtype = "int64"}) end
case("index_select", function() return {P({4, 3})} end, function(x) return x:index_select(1, idx({2, 0, 2}, {3})) end)
case("index_select", function() return {P({4, 3})} end, function(x) return ag.index_select(x, -1, idx({1, 1}, {2})) * x:narrow(2, 1, 2) end)
case("gather", function() return {P({3, 4})} end, function(x) return x:gather(2, idx({0, 3, 1, 1, 2, 2}, {3, 2})) end)
case("gather", function() return {P({3, 4})} end, function(x) return ag.gather(x, 1, idx({2, 0, 1, 2, 0, 0, 0, 0}, {2, 4})) end)
case("scatter_add", function() return {P({3, 4}), P({2, 4})} end,
     function(x, src) return x:scatter_add(1, idx({0, 2, 2, 1, 0, 0, 1, 2}, {2, 4}), src) end)
case("scatter_add", function() return {P({3, 4}), P({3, 4})} end,
     function(x, src) return ag.scatter_add(x, 2, idx({3, 0, 0, 1}, {2, 2}), src) * x end)
case("cat", function() return {P({2, 3}), P({2, 1})} end,
     function(a, b) return ag.cat({a, b, nc.ones({2, 2}, {dtype = "float64"}), a}, 2) end)
case("cat", function() return {P({2, 3}), P({1, 3})} end, function(a, b) return ag.cat({b, a}) * 2 end)
case("stack", function() return {P({2, 3}), P({2, 3})} end, function(a, b) return ag.stack({a, b, a}, 2) end)
case("stack", function() return {P({3}), P({3})} end, function(a, b) return ag.stack({a, b}) end)
case("split", function() return {P({3, 5})} end,
     function(x) local p = x:split(2, 2) return p[1] * p[2] + p[3] end)
case("split", function() return {P({4, 2})} end,
     function(x) local p = ag.split(x, {1, 3}) return p[2]:sum(1) * p[1] end)
case("chunk", function() return {P({6, 2})} end,
     function(x) local p = x:chunk(3) return p[1] * p[2] - p[3] end)

-- ---- matrix products -----------------------------------------------------------------------------------
case("matmul", function() return {P({3, 4}), P({4, 2})} end, function(a, b) return a:matmul(b) end)
case("matmul", function() return {P({2, 3, 4}), P({4, 5})} end, function(a, b) return ag.matmul(a, b) end)
case("matmul", function() return {P({2, 1, 3, 4}), P({3, 4, 2})} end, function(a, b) return a:matmul(b) end)
case("matmul", function() return {P({4}), P({2, 4, 3})} end, function(a, b) return a:matmul(b) end)
case("matmul", function() return {P({2, 3, 4}), P({4})} end, function(a, b) return a:matmul(b) end)
case("matmul", function() return {P({4}), P({4})} end, function(a, b) return a:matmul(b) end)
case("matmul", function() return {P({4, 3})} end, function(a) return a:transpose(1, 2):matmul(a) end)
case("mm", function() return {P({3, 4}), P({4, 2})} end, function(a, b) return a:mm(b) end)
case("bmm", function() return {P({2, 3, 4}), P({2, 4, 2})} end, function(a, b) return ag.bmm(a, b) end)
case("linear", function() return {P({5, 3}), P({4, 3}), P({4})} end, function(x, w, b) return ag.linear(x, w, b) end)
case("linear", function() return {P({2, 5, 3}), P({4, 3})} end, function(x, w) return ag.linear(x, w) end)
case("linear", function() return {P({3}), P({4, 3}), P({4})} end, function(x, w, b) return ag.linear(x, w, b) end)

-- ---- activations defined by their op-table rows: both signs, and each option --------------------------
-- Fixed values, at least 0.2 from every kink and switch point (0; softplus's beta x = threshold).
local function values(list) return function() return {ag.param(nc.tensor(list, {dtype = "float64"}))} end end
local MIXED = {-3.1, -1.7, -0.6, -0.25, 0.3, 0.8, 1.9, 4.2}
case("elu", values(MIXED), function(x) return ag.elu(x) end)
case("elu", values(MIXED), function(x) return ag.elu(x, {alpha = 0.4}) * x end)
case("leaky_relu", values(MIXED), function(x) return ag.leaky_relu(x) end)
case("leaky_relu", values(MIXED), function(x) return ag.leaky_relu(x, {negative_slope = -1.5}) * x end)
case("softplus", values(MIXED), function(x) return ag.softplus(x) end)
-- beta x crosses the threshold: x > 1.25 takes the linear branch
case("softplus", values(MIXED), function(x) return ag.softplus(x, {beta = 2, threshold = 2.5}) end)
case("softplus", values(MIXED), function(x) return ag.softplus(x, {beta = 0.5, threshold = 0.5}) * x end)
case("softplus", values({-25, -21, 21, 25}), function(x) return ag.softplus(x) end) -- far on both sides of 20
case("mish", values(MIXED), function(x) return ag.mish(x) end)
case("mish", function() return {P({3, 4}, -5, 5)} end, function(x) return ag.mish(x) * x end)
case("mish", values({-30, -22, 22, 30}), function(x) return ag.mish(x) end)

-- ---- layers ---------------------------------------------------------------------------------------------
case("conv2d", function() return {P({2, 3, 5, 5}), P({4, 3, 3, 3}), P({4})} end,
     function(x, w, b) return ag.conv2d(x, w, b, {padding = 1}) end)
case("conv2d", function() return {P({1, 4, 6, 5}), P({2, 2, 2, 3})} end,
     function(x, w) return ag.conv2d(x, w, nil, {stride = {2, 1}, dilation = {1, 2}, groups = 2}) end)
case("max_pool2d", function() return {distinct({2, 2, 4, 4})} end, function(x) return ag.max_pool2d(x, 2) end)
case("max_pool2d", function() return {distinct({1, 2, 5, 5})} end,
     function(x) return ag.max_pool2d(x, 3, {stride = 2, padding = 1}) end)
case("avg_pool2d", function() return {P({2, 2, 4, 4})} end, function(x) return ag.avg_pool2d(x, 2) end)
case("avg_pool2d", function() return {P({1, 2, 5, 5})} end,
     function(x) return ag.avg_pool2d(x, 3, {stride = 2, padding = 1, count_include_pad = false}) end)
case("adaptive_avg_pool2d", function() return {P({2, 3, 5, 7})} end, function(x) return ag.adaptive_avg_pool2d(x, {2, 3}) end)
case("batch_norm", function() return {P({4, 3, 2, 2}), P({3}), P({3})} end,
     function(x, w, b) return ag.batch_norm(x, nil, nil, w, b, {training = true}) end)
case("batch_norm", function() return {P({5, 3})} end,
     function(x) return ag.batch_norm(x, nil, nil, nil, nil, {training = true}) end)
case("batch_norm", function() return {P({4, 3}), P({3})} end, function(x, b)
       local rm, rv = nc.tensor({0.1, -0.2, 0.3}, {dtype = "float64"}), nc.tensor({1.5, 0.5, 2}, {dtype = "float64"})
       return ag.batch_norm(x, rm, rv, nil, b, {training = false})
     end)
case("layer_norm", function() return {P({3, 4}), P({4}), P({4})} end, function(x, w, b) return ag.layer_norm(x, 4, w, b) end)
case("layer_norm", function() return {P({2, 3, 4}), P({3, 4})} end,
     function(x, b) return ag.layer_norm(x, {3, 4}, nil, b, {eps = 1e-3}) end)
case("group_norm", function() return {P({2, 6, 3}), P({6}), P({6})} end,
     function(x, w, b) return ag.group_norm(x, 3, w, b) end)
case("group_norm", function() return {P({3, 4, 2, 2}), P({4})} end,
     function(x, b) return ag.group_norm(x, 2, nil, b, {eps = 1e-3}) end)
case("group_norm", function() return {P({2, 4}), P({4})} end, function(x, w) return ag.group_norm(x, 1, w) * x end)
case("rms_norm", function() return {P({3, 4}), P({4})} end, function(x, w) return ag.rms_norm(x, 4, w) end)
case("rms_norm", function() return {P({2, 3, 4})} end, function(x) return ag.rms_norm(x, {3, 4}) end)
case("embedding", function() return {P({5, 3})} end, function(w) return ag.embedding(idx({4, 0, 4, 2}, {2, 2}), w) end)
case("embedding", function() return {P({5, 3})} end, function(w) return ag.embedding(w, idx({1, 3, 1}, {3})) * w:narrow(1, 1, 3) end)
-- the mask is drawn from the generator, so each evaluation reseeds it
case("dropout", function() return {P({4, 5})} end, function(x) nc.manual_seed(11) return ag.dropout(x, 0.4) end)
case("dropout", function() return {P({4, 5})} end, function(x) nc.manual_seed(11) return x:dropout(0.25) * x end)
case("dropout", function() return {P({4, 5})} end, function(x) return ag.dropout(x, 0.5, {training = false}) end)

-- ---- losses and similarities ---------------------------------------------------------------------------
case("cross_entropy", function() return {P({4, 5})} end, function(x) return ag.cross_entropy(x, idx({1, 0, 4, 2}, {4})) end)
case("cross_entropy", function() return {P({3, 4, 2})} end, function(x)
       return ag.cross_entropy(x, idx({1, 3, -100, 0, 2, 2}, {3, 2}), {label_smoothing = 0.1, reduction = "sum"})
     end)
case("cross_entropy", function() return {P({4, 3})} end,
     function(x) return ag.cross_entropy(x, idx({2, 1, 0, 7}, {4}), {ignore_index = 7, reduction = "none"}) end)
case("cross_entropy", function() return {P({3, 4})} end, function(x)
       local p = nc.tensor({{0.1, 0.2, 0.3, 0.4}, {1, 0, 0, 0}, {0.25, 0.25, 0.25, 0.25}}, {dtype = "float64"})
       return ag.cross_entropy(x, p, {label_smoothing = 0.2})
     end)
case("nll_loss", function() return {P({4, 5})} end,
     function(x) return ag.nll_loss(x:log_softmax(2), idx({1, 0, 4, 2}, {4})) end)
case("nll_loss", function() return {P({3, 4, 2})} end,
     function(x) return ag.nll_loss(x, idx({1, 3, -1, 0, 2, -1}, {3, 2}), {ignore_index = -1, reduction = "sum"}) end)
case("nll_loss", function() return {P({3, 4})} end,
     function(x) return ag.nll_loss(x, idx({1, 3, 0}, {3}), {reduction = "none"}) end)
case("mse_loss", function() return {P({3, 4}), P({3, 4})} end, function(a, b) return ag.mse_loss(a, b) end)
case("mse_loss", function() return {P({3, 4})} end,
     function(a) return ag.mse_loss(a, nc.zeros({3, 4}, {dtype = "float64"}), {reduction = "none"}) end)
case("l1_loss", function() return {away({3, 4})} end,
     function(a) return ag.l1_loss(a, nc.zeros({3, 4}, {dtype = "float64"}), {reduction = "sum"}) end)
case("l1_loss", function() return {away({3, 4}), P({3, 4}, 3, 4)} end, function(a, b) return ag.l1_loss(a, b) end)
case("bce_with_logits", function() return {P({3, 4}), P({3, 4}, 0, 1)} end, function(x, y) return ag.bce_with_logits(x, y) end)
case("bce_with_logits", function() return {ag.param(nc.tensor({0, 0, -20, 20, 3}, {dtype = "float64"}))} end,
     function(x) return ag.bce_with_logits(x, nc.tensor({1, 0, 1, 0, 0.5}, {dtype = "float64"}), {reduction = "none"}) end)
case("cosine_similarity", function() return {P({3, 4}), P({3, 4})} end, function(a, b) return ag.cosine_similarity(a, b) end)
case("cosine_similarity", function() return {P({2, 3, 4}), P({3, 4})} end,
     function(a, b) return ag.cosine_similarity(a, b, {dim = -1}) end)
case("cosine_similarity", function() return {P({4, 3}), P({4, 1})} end, function(a, b) return ag.cosine_similarity(a, b, 1) end)

-- rotary embeddings and flash attention (against the central differences of the fused op; test_transformer.lua
-- compares both with their naive formulas)
local function I64(vals) return nc.tensor(vals, {dtype = "int64"}) end
case("rope", function() return {P({2, 3, 4})} end, function(x) return ag.rope(x, I64({0, 5, -2}), {theta = 100}) end)
case("rope", function() return {P({1, 2, 2, 6})} end,
     function(x) return ag.rope(x, I64({3, 1}), {inverse = true}) * x end)
case("flash_attention", function() return {P({1, 2, 5, 4}), P({1, 2, 5, 4}), P({1, 2, 5, 4})} end,
     function(q, k, v) return ag.flash_attention(q, k, v) end)
case("flash_attention", function() return {P({2, 4, 3, 6}), P({2, 2, 7, 6}), P({2, 2, 7, 6})} end,
     function(q, k, v) return ag.flash_attention(q, k, v, {causal = false, scale = 0.4}) end)
case("flash_attention", function() return {P({1, 2, 3, 64}, -0.5, 0.5), P({1, 1, 5, 64}, -0.5, 0.5), P({1, 1, 5, 64})} end,
     function(q, k, v) return ag.flash_attention(q, k, v, {causal = true}) end)
case("flash_attention", function() return {P({1, 2, 2, 128}, -0.3, 0.3), P({1, 2, 3, 128}, -0.3, 0.3), P({1, 2, 3, 128})} end,
     function(q, k, v) return ag.flash_attention(q, k, v, {causal = false}) end)

-- ---- the suite: one test per op of ag.ops() ---------------------------------------------------------
TestGradcheck = {}

function TestGradcheck:test_cases_match_the_op_table()
  local known = {}
  for _, name in ipairs(ag.ops()) do known[name] = true end
  for name in pairs(cases) do
    lu.assertTrue(known[name], "gradcheck case for '" .. name .. "', which is not a differentiable op (ag.ops())")
  end
end

for _, name in ipairs(ag.ops()) do
  TestGradcheck["test_" .. name] = function()
    local list = cases[name]
    lu.assertNotNil(list, "no gradcheck case for differentiable op '" .. name .. "': add one to " ..
                    "tests/lua/test_autograd_gradcheck.lua")
    for i, c in ipairs(list) do
      local ok, err = pcall(ag.gradcheck, c.fn, c.inputs(), c.opts)
      if not ok then lu.fail(string.format("%s, case %d: %s", name, i, tostring(err))) end
    end
  end
end

-- gradcheck itself must catch a wrong gradient.
function TestGradcheck:test_gradcheck_detects_a_wrong_rule()
  local wrong = ag.Function{
    forward = function(ctx, x) ctx.x = x return x * x end,
    backward = function(ctx, g) return g * ctx.x end, -- should be 2 g x
  }
  local err = H.assert_error(function() ag.gradcheck(function(x) return wrong(x) end, {P({2, 2})}) end,
                             "gradcheck", "input 1")
  lu.assertStrContains(err, "analytic gradient")
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

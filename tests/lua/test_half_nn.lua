-- The layer ops on the storage dtypes bfloat16 and float16, as a ResNet-style CNN's training step
-- uses them: conv2d and its two backward ops, batch_norm (training and inference), layer_norm,
-- rms_norm, group_norm, the poolings, the float reductions, softmax/log_softmax and cross_entropy,
-- on the device under test; their gradients; and a few training steps of a small CNN and of
-- models.ResNet18 with bfloat16 activations.
--
-- The rule (docs/tensor.md, "Storage dtypes"): these ops widen their storage operands to float32,
-- run the float32 op and round its result once into the storage dtype (batch_norm's backends read
-- and write the storage dtypes themselves, with the float32 kernels' arithmetic). So each result
-- must be, bit for bit, the same device's float32 op on the widened operands converted with
-- :to(dtype); statistics (batch_norm's mean and invstd, cross_entropy's log-sum-exp) and gradients
-- through the tape are float32, and equal to the float32 op's on the widened operands.
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local nn = require "netcl.nn"
local optim = require "netcl.optim"
local models = require "netcl.models"
local H = require "helpers"

local dev = H.device()
local cpu = nc.device("cpu")
local ops = nc.nn_ops
local DTYPES = {"bfloat16", "float16"}

local u16s = H.u16s

-- got (a storage tensor) must hold the bits of want (a float32 tensor) rounded into got's dtype.
local function assert_rounded(got, want, dt, what)
  lu.assertEquals(got.dtype, dt, what)
  lu.assertEquals(got.shape, want.shape, what)
  local g, w = u16s(got), u16s(want:to(dt))
  for i = 1, #w do
    if g[i] ~= w[i] then
      lu.fail(string.format("%s [%d]: got 0x%04x, want 0x%04x (%s)", what, i, g[i], w[i], dt))
    end
  end
end

-- Equal float32 tensors, element for element (the bytes: -0 and NaN patterns included).
local function assert_same(got, want, what)
  lu.assertEquals(got.dtype, "float32", what)
  lu.assertEquals(got.shape, want.shape, what)
  lu.assertTrue(got:contiguous():bytes() == want:contiguous():bytes(),
    string.format("%s: differs from float32 (max |diff| %g)", what, (got - want):abs():max():item()))
end

-- A random storage tensor on dev (values of dt, so :float() of it is exact).
local function randn(shape, dt, scale)
  return (nc.randn(shape, {device = dev}) * (scale or 1)):to(dt)
end

-- ---- conv2d -----------------------------------------------------------------------------------------
TestConv = {}

local CONV_CASES = {
  {x = {2, 3, 7, 9}, w = {4, 3, 3, 3}, opts = {}},
  {x = {1, 4, 11, 6}, w = {6, 2, 3, 2}, opts = {stride = {2, 1}, padding = {1, 2}, groups = 2}},
  {x = {3, 5, 8, 8}, w = {7, 5, 1, 1}, opts = {stride = 2}},
  {x = {2, 2, 9, 10}, w = {3, 2, 3, 3}, opts = {padding = 2, dilation = 2}},
}

function TestConv.test_forward_and_backward_ops_round_the_float32_op_once()
  for _, dt in ipairs(DTYPES) do
    for i, c in ipairs(CONV_CASES) do
      local what = string.format("conv case %d %s", i, dt)
      local x, w, b = randn(c.x, dt), randn(c.w, dt, 0.5), randn({c.w[1]}, dt)
      local y = nc.conv2d(x, w, b, c.opts)
      local yf = nc.conv2d(x:float(), w:float(), b:float(), c.opts)
      assert_rounded(y, yf, dt, what .. " forward")
      assert_rounded(nc.conv2d(x, w, nil, c.opts), nc.conv2d(x:float(), w:float(), nil, c.opts), dt, what .. " no bias")
      -- a strided (transposed) input: widened as it is
      local xt = randn({c.x[1], c.x[2], c.x[4], c.x[3]}, dt):transpose(3, 4)
      assert_rounded(nc.conv2d(xt, w, b, c.opts), nc.conv2d(xt:float(), w:float(), b:float(), c.opts), dt,
        what .. " strided input")
      local dy = randn(y.shape, dt)
      assert_rounded(ops.conv2d_backward_input(dy, w, c.x, c.opts),
        ops.conv2d_backward_input(dy:float(), w:float(), c.x, c.opts), dt, what .. " backward_input")
      assert_rounded(ops.conv2d_backward_weight(dy, x, c.w, c.opts),
        ops.conv2d_backward_weight(dy:float(), x:float(), c.w, c.opts), dt, what .. " backward_weight")
    end
  end
end

-- PyTorch refuses convolution operands of different dtypes: so does netcl (no promotion).
function TestConv.test_mixed_dtypes_are_refused()
  local msg = "expected operands of one float dtype (float32, float64, bfloat16 or float16)"
  local x, w = randn({1, 2, 5, 5}, "bfloat16"), nc.randn({3, 2, 3, 3}, {device = dev})
  H.assert_error(function() return nc.conv2d(x, w) end, "netcl.conv2d", msg, "got bfloat16 and float32")
  H.assert_error(function() return nc.conv2d(x, w:to("float16")) end, "netcl.conv2d", msg, "bfloat16 and float16")
  H.assert_error(function() return nc.conv2d(x, w:to("bfloat16"), nc.zeros({3}, {device = dev})) end,
    "netcl.conv2d", msg, "bfloat16 and float32")
  H.assert_error(function() return ops.conv2d_backward_input(nc.zeros({1, 3, 3, 3}, {device = dev}),
    w:to("bfloat16"), {1, 2, 5, 5}, {}) end, "conv2d_backward_input", msg, "float32 and bfloat16")
end

-- ---- pooling ----------------------------------------------------------------------------------------
TestPool = {}

function TestPool.test_pools_and_their_backward_ops()
  for _, dt in ipairs(DTYPES) do
    for _, shape in ipairs({{2, 3, 9, 7}, {5, 8, 6}}) do
      local what = dt .. " " .. table.concat(shape, "x")
      local x = randn(shape, dt, 3)
      local xf = x:float()
      for _, o in ipairs({{k = 2, opts = {}}, {k = 3, opts = {stride = 2, padding = 1}},
                          {k = {3, 2}, opts = {stride = {2, 1}, ceil_mode = true, dilation = {1, 2}}}}) do
        local y, idx = ops.max_pool2d(x, o.k, o.opts)
        local yf, idxf = ops.max_pool2d(xf, o.k, o.opts)
        assert_rounded(y, yf, dt, "max_pool2d " .. what)
        lu.assertEquals(idx:to(cpu):tolist(), idxf:to(cpu):tolist(), "max_pool2d indices " .. what)
        local dy = randn(y.shape, dt)
        assert_rounded(ops.max_pool2d_backward(dy, idx, shape, o.k, o.opts),
          ops.max_pool2d_backward(dy:float(), idxf, shape, o.k, o.opts), dt, "max_pool2d_backward " .. what)
        assert_rounded(nc.max_pool2d(x, o.k, o.opts), yf, dt, "nc.max_pool2d " .. what)
      end
      for _, o in ipairs({{k = 2, opts = {}}, {k = 3, opts = {stride = 2, padding = 1, count_include_pad = false}},
                          {k = {3, 2}, opts = {stride = 1, ceil_mode = true}}}) do
        local y = nc.avg_pool2d(x, o.k, o.opts)
        assert_rounded(y, nc.avg_pool2d(xf, o.k, o.opts), dt, "avg_pool2d " .. what)
        local dy = randn(y.shape, dt)
        assert_rounded(ops.avg_pool2d_backward(dy, shape, o.k, o.opts),
          ops.avg_pool2d_backward(dy:float(), shape, o.k, o.opts), dt, "avg_pool2d_backward " .. what)
      end
      for _, size in ipairs({1, {3, 2}, {4, 5}}) do
        local y = nc.adaptive_avg_pool2d(x, size)
        assert_rounded(y, nc.adaptive_avg_pool2d(xf, size), dt, "adaptive_avg_pool2d " .. what)
        local dy = randn(y.shape, dt)
        assert_rounded(ops.adaptive_avg_pool2d_backward(dy, shape), ops.adaptive_avg_pool2d_backward(dy:float(), shape),
          dt, "adaptive_avg_pool2d_backward " .. what)
      end
    end
  end
end

-- ---- normalization ----------------------------------------------------------------------------------
TestNorm = {}

-- batch_norm with float32 affine parameters and running statistics (PyTorch's mixed case) and
-- with all of them in the storage dtype (a module converted with m:to(dtype)).
function TestNorm.test_batch_norm_train_and_eval()
  for _, dt in ipairs(DTYPES) do
    for _, shape in ipairs({{4, 3, 5, 7}, {6, 5}, {3, 2, 9}}) do
      local c = shape[2]
      local x = randn(shape, dt, 2) + 0.5
      local w, b = nc.rand({c}, {device = dev}) + 0.5, nc.randn({c}, {device = dev})
      for _, pdt in ipairs({"float32", dt}) do
        local what = string.format("batch_norm %s %s params %s", dt, table.concat(shape, "x"), pdt)
        local wp, bp = w:to(pdt), b:to(pdt)
        local rm, rv = nc.randn({c}, {device = dev}):to(pdt), (nc.rand({c}, {device = dev}) + 0.5):to(pdt)
        local rmf, rvf = rm:float(), rv:float()
        -- training: batch statistics, running statistics updated
        local y, mean, invstd = ops.batch_norm(x, wp, bp, rm, rv, {training = true, momentum = 0.3})
        local yf, meanf, invstdf = ops.batch_norm(x:float(), wp:float(), bp:float(), rmf, rvf,
          {training = true, momentum = 0.3})
        assert_rounded(y, yf, dt, what .. " train y")
        assert_same(mean, meanf, what .. " saved mean")
        assert_same(invstd, invstdf, what .. " saved invstd")
        lu.assertEquals(rm.dtype, pdt)
        if pdt == "float32" then
          assert_same(rm, rmf, what .. " running_mean")
          assert_same(rv, rvf, what .. " running_var")
        else -- the float32 update, rounded once
          assert_rounded(rm, rmf, dt, what .. " running_mean")
          assert_rounded(rv, rvf, dt, what .. " running_var")
        end
        -- the backward op: dx in x's dtype, the affine gradients in the parameters'
        local dy = randn(shape, dt)
        local dx, dw, db = ops.batch_norm_backward(dy, x, wp, mean, invstd, {training = true})
        local dxf, dwf, dbf = ops.batch_norm_backward(dy:float(), x:float(), wp:float(), meanf, invstdf,
          {training = true})
        assert_rounded(dx, dxf, dt, what .. " backward dx")
        if pdt == "float32" then
          assert_same(dw, dwf, what .. " backward dw")
          assert_same(db, dbf, what .. " backward db")
        else
          assert_rounded(dw, dwf, dt, what .. " backward dw")
          assert_rounded(db, dbf, dt, what .. " backward db")
        end
        -- inference with the running statistics (torch's order)
        assert_rounded(nc.batch_norm(x, rm, rv, wp, bp), nc.batch_norm(x:float(), rm:float(), rv:float(),
          wp:float(), bp:float()), dt, what .. " eval")
        assert_rounded(nc.batch_norm(x, rm, rv), nc.batch_norm(x:float(), rm:float(), rv:float()), dt,
          what .. " eval without affine")
      end
    end
  end
end

-- Batch norm's backends read and write the storage dtypes themselves (no widening copies:
-- ops/norm.c), so every result is checked against an explicit reference: the operands widened
-- with :to("float32"), the float32 op, its results rounded with :to(dtype). Shapes with s = 35
-- (the OpenCL kernels' one-at-a-time pass), s = 36 (four at a time) and s = 1; parameters in the
-- input's dtype and in float32; with and without weight and bias and running statistics;
-- training and inference; an incoming gradient of the input's dtype and of float32; a strided
-- input; an empty batch (the one-work-group kernels on OpenCL); a larger input.
local function widened(t) return t and t:to("float32"):clone() or nil end

-- got (of dtype dt, or float32) against want (a float32 result): rounded once, or equal.
local function assert_result(got, want, dt, what)
  if dt == "float32" then assert_same(got, want, what) else assert_rounded(got, want, dt, what) end
end

local function check_batch_norm(x, w, b, rm, rv, training, gdt, what)
  local dt = x.dtype
  local pdt = (w or b or rm or {}).dtype or "float32"
  local rm0, rv0 = rm and rm:clone(), rv and rv:clone()
  local rmf, rvf = widened(rm), widened(rv)
  local opts = {training = training, momentum = 0.3, eps = 1e-4}
  local y, mean, invstd = ops.batch_norm(x, w, b, rm, rv, opts)
  local yf, meanf, invstdf = ops.batch_norm(widened(x), widened(w), widened(b), rmf, rvf, opts)
  assert_rounded(y, yf, dt, what .. " y")
  assert_same(mean, meanf, what .. " saved mean")
  assert_same(invstd, invstdf, what .. " saved invstd")
  if rm then
    lu.assertEquals(rm.dtype, pdt, what)
    if training then
      assert_result(rm, rmf, pdt, what .. " running_mean")
      assert_result(rv, rvf, pdt, what .. " running_var")
    else
      lu.assertTrue(rm:bytes() == rm0:bytes() and rv:bytes() == rv0:bytes(), what .. ": running stats changed")
    end
  end
  local dy = randn(x.shape, dt):to(gdt)
  local dx, dw, db = ops.batch_norm_backward(dy, x, w, mean, invstd, {training = training})
  local dxf, dwf, dbf = ops.batch_norm_backward(widened(dy), widened(x), widened(w), meanf, invstdf,
    {training = training})
  -- dx: x's dtype, or float32 beside a float32 dy (the tape's gradients)
  assert_result(dx, dxf, gdt == "float32" and "float32" or dt, what .. " dx")
  if w then
    assert_result(dw, dwf, pdt, what .. " dweight")
    assert_result(db, dbf, pdt, what .. " dbias")
  else
    lu.assertNil(dw, what)
  end
end

function TestNorm.test_batch_norm_storage_results_bit_for_bit()
  for _, dt in ipairs(DTYPES) do
    for _, shape in ipairs({{4, 3, 5, 7}, {8, 16, 6, 6}, {5, 4}}) do
      local c = shape[2]
      local x = randn(shape, dt, 2) + 0.5
      for _, pdt in ipairs({"float32", dt}) do
        local w, b = (nc.rand({c}, {device = dev}) + 0.5):to(pdt), nc.randn({c}, {device = dev}):to(pdt)
        local rm, rv = nc.randn({c}, {device = dev}):to(pdt), (nc.rand({c}, {device = dev}) + 0.5):to(pdt)
        for _, affine in ipairs({true, false}) do
          for _, mode in ipairs({"train", "train without running stats", "eval"}) do
            local training, running = mode ~= "eval", mode ~= "train without running stats"
            for _, gdt in ipairs({dt, "float32"}) do
              local what = string.format("batch_norm %s %s params %s%s %s dy %s", dt, table.concat(shape, "x"),
                pdt, affine and "" or " (no affine)", mode, gdt)
              check_batch_norm(x, affine and w or nil, affine and b or nil, running and rm:clone() or nil,
                running and rv:clone() or nil, training, gdt, what)
            end
          end
        end
      end
    end
    -- a strided input (made dense in its own dtype), and an empty batch
    local ones = nc.ones({4}, {device = dev})
    local w, b = nc.rand({4}, {device = dev}):to(dt), nc.randn({4}, {device = dev}):to(dt)
    local xt = (randn({3, 4, 6, 5}, dt, 2) - 1):transpose(3, 4)
    check_batch_norm(xt, w, b, (ones * 0):to(dt), ones:to(dt), true, dt, "batch_norm strided " .. dt)
    local empty = nc.zeros({0, 4, 3, 3}, {device = dev, dtype = dt})
    check_batch_norm(empty, w, b, nc.randn({4}, {device = dev}):to(dt), (ones + 0.5):to(dt), false, dt,
      "batch_norm empty batch " .. dt)
    -- enough elements for the CPU backend's loop over channels to run in parallel
    local wb = nc.rand({8}, {device = dev}) + 0.5
    check_batch_norm(randn({6, 8, 30, 31}, dt, 3), wb, wb - 1, nc.zeros({8}, {device = dev}),
      nc.ones({8}, {device = dev}), true, "float32", "batch_norm large " .. dt)
  end
end

-- PyTorch's rule: the parameters and statistics have the input's dtype or float32, all one.
function TestNorm.test_parameter_dtypes()
  local x = randn({4, 3, 2, 2}, "bfloat16")
  local f, h = nc.ones({3}, {device = dev}), nc.ones({3}, {device = dev, dtype = "bfloat16"})
  H.assert_error(function() return nc.batch_norm(x, nil, nil, f, h, {training = true}) end, "netcl.batch_norm",
    "the parameters mix float32 and bfloat16")
  H.assert_error(function() return nc.batch_norm(x, nil, nil, f:to("float16"), nil, {training = true}) end,
    "netcl.batch_norm", "weight is float16 but the input is bfloat16")
  H.assert_error(function() return nc.batch_norm(x, nil, nil, f:double(), nil, {training = true}) end,
    "netcl.batch_norm", "weight is float64 but the input is bfloat16")
  H.assert_error(function() return nc.batch_norm(x:float(), nil, nil, h, nil, {training = true}) end,
    "netcl.batch_norm", "weight is bfloat16 but the input is float32")
end

function TestNorm.test_layer_rms_and_group_norm()
  for _, dt in ipairs(DTYPES) do
    local x = randn({3, 4, 6, 5}, dt, 2)
    local xf = x:float()
    for _, pdt in ipairs({"float32", dt}) do
      local what = dt .. " params " .. pdt
      local w, b = (nc.rand({6, 5}, {device = dev}) + 0.5):to(pdt), nc.randn({6, 5}, {device = dev}):to(pdt)
      local y, mean, rstd = ops.layer_norm(x, {6, 5}, w, b)
      local yf, meanf, rstdf = ops.layer_norm(xf, {6, 5}, w:float(), b:float())
      assert_rounded(y, yf, dt, "layer_norm " .. what)
      assert_same(mean, meanf, "layer_norm mean " .. what)
      local dy = randn(x.shape, dt)
      local dx, dw, db = ops.layer_norm_backward(dy, x, {6, 5}, w, mean, rstd)
      local dxf, dwf, dbf = ops.layer_norm_backward(dy:float(), xf, {6, 5}, w:float(), meanf, rstdf)
      assert_rounded(dx, dxf, dt, "layer_norm_backward dx " .. what)
      if pdt == "float32" then assert_same(dw, dwf, "layer_norm dw " .. what) else
        assert_rounded(dw, dwf, dt, "layer_norm dw " .. what)
        assert_rounded(db, dbf, dt, "layer_norm db " .. what)
      end
      local r, rs = ops.rms_norm(x, {5}, w:narrow(1, 1, 1):view({5}))
      local rf = ops.rms_norm(xf, {5}, w:narrow(1, 1, 1):view({5}):float())
      assert_rounded(r, rf, dt, "rms_norm " .. what)
      lu.assertEquals(rs.dtype, "float32")
      local gw, gb = w:narrow(2, 1, 4):narrow(1, 1, 1):view({4}):contiguous(), b:narrow(2, 1, 4):narrow(1, 1, 1):view({4}):contiguous()
      assert_rounded(nc.group_norm(x, 2, gw, gb), nc.group_norm(xf, 2, gw:float(), gb:float()), dt, "group_norm " .. what)
    end
  end
end

-- ---- reductions, softmax, cross_entropy ------------------------------------------------------------
TestReduce = {}

function TestReduce.test_reductions_round_the_float32_result_once()
  for _, dt in ipairs(DTYPES) do
    -- float16 sums of many values can pass 65504: scale so that some do, and become infinities
    local x = randn({5, 7, 33}, dt, dt == "float16" and 30 or 100)
    local xf = x:float()
    local cases = {
      {"sum", {}}, {"sum", {3}}, {"sum", {{1, 3}, {keepdim = true}}}, {"mean", {}}, {"mean", {{2, 3}}},
      {"mean", {1, {keepdim = true}}}, {"prod", {2}}, {"max", {}}, {"min", {}}, {"var", {3}}, {"std", {{1, 2}}},
      {"norm", {}}, {"logsumexp", {3}},
    }
    for _, c in ipairs(cases) do
      local name, args = c[1], c[2]
      local what = string.format("%s%s %s", name, #args > 0 and " (dims)" or "", dt)
      local y = x[name](x, table.unpack(args))
      assert_rounded(y, xf[name](xf, table.unpack(args)), dt, what)
      -- a strided view
      local t = x:transpose(1, 3)
      assert_rounded(t[name](t, table.unpack(args)), t:float()[name](t:float(), table.unpack(args)), dt,
        what .. " strided")
    end
    -- positions: those of the float32 op on the same (exactly widened) values
    lu.assertEquals(x:argmax(3):to(cpu):tolist(), xf:argmax(3):to(cpu):tolist(), "argmax " .. dt)
    lu.assertEquals(x:argmin(1):to(cpu):tolist(), xf:argmin(1):to(cpu):tolist(), "argmin " .. dt)
    local v, i = x:max(2)
    local vf, iv = xf:max(2)
    assert_rounded(v, vf, dt, "max with indices " .. dt)
    lu.assertEquals(i:to(cpu):tolist(), iv:to(cpu):tolist(), "max indices " .. dt)
    -- into a destination of the storage dtype
    local out = nc.empty({5, 7}, {dtype = dt, device = dev})
    nc.sum(x, 3, {out = out})
    assert_rounded(out, xf:sum(3), dt, "sum out= " .. dt)
  end
end

function TestReduce.test_softmax_and_cross_entropy()
  for _, dt in ipairs(DTYPES) do
    local x = randn({6, 13}, dt, 4)
    for _, op in ipairs({"softmax", "log_softmax"}) do
      for dim = 1, 2 do
        assert_rounded(x[op](x, dim), x:float()[op](x:float(), dim), dt, op .. " dim " .. dim .. " " .. dt)
      end
    end
    local targets = nc.tensor({0, 12, 5, 3, 7, -100}, {dtype = "int64", device = dev})
    for _, opts in ipairs({{}, {reduction = "sum"}, {reduction = "none"}, {label_smoothing = 0.1}}) do
      local what = "cross_entropy " .. dt .. " " .. (opts.reduction or "mean")
      local loss, lse = ops.cross_entropy(x, targets, opts)
      local lossf, lsef = ops.cross_entropy(x:float(), targets, opts)
      assert_rounded(loss, lossf, dt, what) -- PyTorch: the logits' dtype
      assert_same(lse, lsef, what .. " lse")
      local dl = opts.reduction == "none" and randn(loss.shape, dt) or nc.ones({}, {device = dev, dtype = dt})
      assert_rounded(ops.cross_entropy_backward(dl, x, targets, lse, opts),
        ops.cross_entropy_backward(dl:float(), x:float(), targets, lsef, opts), dt, what .. " backward")
      assert_rounded(nc.cross_entropy(x, targets, opts), lossf, dt, "nc." .. what)
    end
  end
end

-- ---- what still refuses ------------------------------------------------------------------------------
function TestReduce.test_other_ops_still_refuse_storage_dtypes()
  local msg = "is a storage type; convert it with t:float() first"
  for _, dt in ipairs(DTYPES) do
    local t = randn({4, 4}, dt)
    local f = nc.randn({4, 4}, {device = dev})
    local refused = {
      cumsum = function() return t:cumsum(1) end, where = function() return nc.where(f:gt(0), t, t) end,
      sort = function() return t:sort(1) end, any = function() return t:any() end,
      index_select = function() return t:index_select(1, nc.tensor({0}, {dtype = "int64", device = dev})) end,
    }
    for name, fn in pairs(refused) do H.assert_error(fn, "netcl." .. name, "dtype " .. dt .. " " .. msg) end
  end
end

-- ---- gradients through the tape ------------------------------------------------------------------------
TestGrad = {}

-- Runs f on the nodes of `values` (storage) and of their float32 copies, backpropagates
-- (out:float() * R):sum() with one fixed float32 R, and returns the two runs' gradients.
local function grads(f, values)
  local function run(vals, widen)
    local params = {}
    for i, v in ipairs(vals) do params[i] = ag.param(widen and v:float() or v) end
    local tape = ag.Tape()
    local out = tape:record(function()
      local y = f(table.unpack(params))
      nc.manual_seed(5) -- the same R in both runs
      local r = nc.randn(y.shape, {device = dev})
      return (y:float() * r):sum()
    end)
    tape:backward(out)
    local g = {}
    for i, p in ipairs(params) do g[i] = p.grad end
    return g
  end
  return run(values, false), run(values, true)
end

function TestGrad.test_gradients_are_the_float32_ops_gradients()
  for _, dt in ipairs(DTYPES) do
    local x4, w, b = randn({2, 3, 7, 6}, dt), randn({4, 3, 3, 3}, dt, 0.5), randn({4}, dt)
    local xw = randn({3, 5, 4, 6}, dt, 2)
    local bw, bb = (nc.rand({5}, {device = dev}) + 0.5), nc.randn({5}, {device = dev})
    local exact = {
      conv2d = {function(x, ww, bias) return nc.conv2d(x, ww, bias, {stride = 2, padding = 1}) end, {x4, w, b}},
      max_pool2d = {function(x) return nc.max_pool2d(x, 3, {stride = 2, padding = 1}) end, {x4}},
      avg_pool2d = {function(x) return nc.avg_pool2d(x, 2, {stride = 1}) end, {x4}},
      adaptive_avg_pool2d = {function(x) return nc.adaptive_avg_pool2d(x, {2, 4}) end, {x4}},
      batch_norm = {function(x, ww, bias) return nc.batch_norm(x, nil, nil, ww, bias, {training = true}) end,
                    {xw, bw:to(dt), bb:to(dt)}},
      layer_norm = {function(x) return nc.layer_norm(x, {4, 6}) end, {xw}},
      group_norm = {function(x) return nc.group_norm(x, 5) end, {xw}},
      sum = {function(x) return x:sum({2, 4}) end, {xw}},
      mean = {function(x) return x:mean(3, {keepdim = true}) end, {xw}},
      max = {function(x) return x:max(2) end, {xw}},
      cross_entropy = {function(x)
        return nc.cross_entropy(x, nc.tensor({1, 0, 4}, {dtype = "int64", device = dev}), {label_smoothing = 0.05})
      end, {randn({3, 5}, dt, 3)}},
    }
    for name, c in pairs(exact) do
      local g, gf = grads(c[1], c[2])
      for i = 1, #g do assert_same(g[i], gf[i], string.format("%s %s d%d", name, dt, i)) end
    end
    -- batch_norm with float32 parameters and running statistics on a storage input
    local rm, rv, rmf, rvf = nc.zeros({5}, {device = dev}), nc.ones({5}, {device = dev}), nc.zeros({5}, {device = dev}),
      nc.ones({5}, {device = dev})
    local xa, wa, ba = ag.param(xw), ag.param(bw), ag.param(bb)
    local xb, wb, bb2 = ag.param(xw:float()), ag.param(bw:clone()), ag.param(bb:clone())
    local r = nc.randn(xw.shape, {device = dev})
    local t1, t2 = ag.Tape(), ag.Tape()
    t1:backward(t1:record(function()
      return (nc.batch_norm(xa, rm, rv, wa, ba, {training = true}):float() * r):sum() end))
    t2:backward(t2:record(function() return (nc.batch_norm(xb, rmf, rvf, wb, bb2, {training = true}) * r):sum() end))
    assert_same(xa.grad, xb.grad, "batch_norm mixed dx " .. dt)
    assert_same(wa.grad, wb.grad, "batch_norm mixed dw " .. dt)
    assert_same(ba.grad, bb2.grad, "batch_norm mixed db " .. dt)
    assert_same(rm, rmf, "batch_norm mixed running_mean " .. dt)
    assert_same(rv, rvf, "batch_norm mixed running_var " .. dt)
    -- rules that read the op's rounded output (softmax's y, logsumexp's y, std's y): the float32
    -- gradient at the rounded value, within a few units of the storage dtype
    local U = {bfloat16 = 2 ^ -8, float16 = 2 ^ -11}
    local near = {
      softmax = function(x) return x:softmax(2) end, log_softmax = function(x) return x:log_softmax(1) end,
      logsumexp = function(x) return x:logsumexp(2) end, std = function(x) return x:std(2) end,
    }
    for name, f in pairs(near) do
      local g, gf = grads(f, {randn({4, 9}, dt, 2)})
      lu.assertEquals(g[1].dtype, "float32")
      H.assert_close(g[1], gf[1], 8 * U[dt], name .. " " .. dt)
    end
  end
end

-- ---- training --------------------------------------------------------------------------------------------
TestTrain = {}

-- conv -> batch_norm -> relu -> maxpool -> conv -> adaptive avgpool -> linear -> cross_entropy with
-- bfloat16 parameters (float32 master copies in the optimizer), activations and input: the loss
-- goes down over a few SGD steps on one fixed batch.
function TestTrain.test_small_cnn_trains_in_bfloat16()
  nc.manual_seed(11)
  local model = nn.Sequential(nn.Conv2d(3, 8, 3, {padding = 1, device = dev}), nn.BatchNorm2d(8, {device = dev}),
    nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, {stride = 2, device = dev}), nn.AdaptiveAvgPool2d(1),
    nn.Flatten(), nn.Linear(16, 5, {device = dev}))
  model:to("bfloat16")
  local x = nc.randn({8, 3, 12, 12}, {device = dev}):to("bfloat16")
  local y = nc.tensor({0, 1, 2, 3, 4, 0, 1, 2}, {dtype = "int64", device = dev})
  local opt = optim.SGD(model:parameters(), {lr = 0.1, momentum = 0.9})
  local losses = {}
  for step = 1, 8 do
    local tape = ag.Tape()
    local loss = tape:record(function() return nc.cross_entropy(model(x), y) end)
    lu.assertEquals(loss.value.dtype, "bfloat16")
    opt:zero_grad()
    tape:backward(loss)
    for name, p in model:named_parameters() do
      lu.assertEquals(p.value.dtype, "bfloat16", name)
      lu.assertEquals(p.grad.dtype, "float32", name)
    end
    opt:step()
    losses[step] = loss:item()
    lu.assertTrue(losses[step] == losses[step], "loss is NaN at step " .. step)
  end
  lu.assertEquals(model[2].running_mean.dtype, "bfloat16")
  lu.assertTrue(losses[8] < 0.7 * losses[1], string.format("loss %g -> %g", losses[1], losses[8]))
end

-- models.ResNet18 (cifar stem) converted with m:to("bfloat16"), one forward and backward on 2
-- 16x16 images, against the same model in float32 (weights rounded to bfloat16 first, so that both
-- start from the same values). Not 8x8: there layer4 works on 1x1 planes and its batch norms
-- normalize 2 values per channel, (a - b) / sqrt((a - b)^2 / 4 + eps), which amplifies any change
-- of a - b; in float32 alone, noise of 2^-9 relative on the input moves that loss by 0.09 and the
-- classifier's gradient by 40%, so no bfloat16 tolerance would mean anything. At 16x16 (4 values per
-- plane, 8 per channel) the same input noise moves the gradient by under 1%.
-- The bfloat16 run rounds each of the network's ~60 op results (conv, batch norm, relu, add,
-- pools, linear) to 8 significant bits, a relative error of at most 2^-9 each; batch norm
-- renormalizes after every convolution, so these errors do not compound multiplicatively, and as
-- independent roundings they add up to about sqrt(60) * 2^-9 ~ 1.5% of the logits' scale; the loss
-- (about ln 10 = 2.3) is then rounded to bfloat16 itself (2^-9 relative, 0.005). Measured on the CPU
-- backend: 0.013 apart in the loss, 2% in the classifier's gradient. The tolerances (0.05 + 2% of
-- the loss; 10% of the gradient's norm) leave a margin and still catch a wrong op, which moves
-- both by far more.
function TestTrain.test_resnet18_step_in_bfloat16()
  nc.manual_seed(3)
  local m = models.ResNet18{num_classes = 10, stem = "cifar", device = dev}
  for _, p in ipairs(m:parameters()) do p.value:copy_(p.value:to("bfloat16")) end
  local x = nc.randn({2, 3, 16, 16}, {device = dev})
  local y = nc.tensor({3, 8}, {dtype = "int64", device = dev})
  local function step(input)
    local tape = ag.Tape()
    local loss = tape:record(function() return nc.cross_entropy(m(input), y) end)
    for _, p in ipairs(m:parameters()) do p.grad = nil end
    tape:backward(loss)
    return loss
  end
  local lf = step(x:to("bfloat16"):float())
  local gf = m.fc.weight.grad:clone()
  m:to("bfloat16")
  local lb = step(x:to("bfloat16"))
  lu.assertEquals(lb.value.dtype, "bfloat16")
  local vf, vb = lf:item(), lb:item()
  lu.assertTrue(vb == vb and math.abs(vb) < math.huge, "bfloat16 loss " .. vb)
  lu.assertTrue(math.abs(vb - vf) <= 0.05 + 0.02 * math.abs(vf), string.format("loss %g (bf16) vs %g (f32)", vb, vf))
  for name, p in m:named_parameters() do
    lu.assertEquals(p.grad.dtype, "float32", name)
    lu.assertFalse((p.grad:isnan() + p.grad:isinf()):any():item(), name .. ": gradient not finite")
  end
  -- the classifier's gradient, within the same budget relative to its size
  local g = m.fc.weight.grad
  lu.assertTrue((g - gf):norm():item() <= 0.1 * gf:norm():item() + 1e-6,
    string.format("fc.weight grad off by %g (norm %g)", (g - gf):norm():item(), gf:norm():item()))
end

os.exit(lu.LuaUnit.run())

-- Matrix products of bfloat16 and float16 operands (matmul, mm, bmm, linear; gemm's alpha and beta
-- are in tests/c/test_gemm_lowp.c) on the device under test (NETCL_TEST_DEVICE) and on the CPU
-- backend. Each result is checked against float64 sums of the stored (already rounded) inputs:
-- |got - ref| <= u |ref| + 1e-6 sum_k |a_ik b_kj| + tiny, with u = 2^-8 (bfloat16) or 2^-11
-- (float16), the one rounding of a float32 sum into the storage dtype plus float32's summation
-- error, and tiny half the spacing of the dtype's subnormals (2^-25 for float16). Also:
-- the result is rounded once (exact float32 sums of integers, to nearest even), mixed dtypes are
-- refused, gradients through the products are float32, and PyTorch's bfloat16 matmul agrees
-- where python3 has torch.
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local nn = require "netcl.nn"
local H = require "helpers"

local dev = H.device()
local cpu = nc.device("cpu")
local DEVICES = {dev}
if dev.spec ~= cpu.spec then DEVICES[2] = cpu end
local UNIT = {bfloat16 = 2 ^ -8, float16 = 2 ^ -11}
-- half the spacing of the dtype's subnormals: the rounding of a result below its smallest normal
local TINY = {bfloat16 = 2 ^ -134, float16 = 2 ^ -25}
local DTYPES = {"bfloat16", "float16"}

local function f64(t) return t:to(cpu):to("float64") end

-- Random values rounded to dt, on the CPU (the same stored values go to every device).
local function rand(dt, shape, scale)
  local t = nc.randn(shape, {device = cpu})
  if scale then t = t * scale end
  return t:to(dt)
end

-- Asserts got (dtype dt) matches ref (float64, CPU) within the bound, with absum the float64
-- sums of absolute products; what names the case.
local function check(got, ref, absum, dt, what)
  lu.assertEquals(got.dtype, dt, what .. ": dtype")
  lu.assertEquals(got.shape, ref.shape, what .. ": shape")
  if ref:numel() == 0 then return end
  local g = f64(got)
  local excess = (g - ref):abs() - (ref:abs() * UNIT[dt] + absum * 1e-6 + TINY[dt])
  local worst = excess:max():item()
  if not (worst <= 0) then
    local pos = excess:view({-1}):argmax():item() + 1
    lu.fail(string.format("%s: element %d: got %.9g, reference %.9g (bound exceeded by %.3g)", what, pos,
      g:contiguous():view({-1})[pos]:item(), ref:contiguous():view({-1})[pos]:item(), worst))
  end
  -- no NaN slipped through (a NaN fails the comparison above as well)
  lu.assertFalse(g:isnan():any():item(), what .. ": NaN")
end

-- The product fn(a, b) on every device against fn on float64 copies of the stored values.
local function check_product(dt, a, b, fn, what)
  local ref = fn(f64(a), f64(b))
  local absum = fn(f64(a):abs(), f64(b):abs())
  for _, d in ipairs(DEVICES) do
    check(fn(a:to(d), b:to(d)), ref, absum, dt, string.format("%s %s on %s", what, dt, d.spec))
  end
end

-- a [m, k] stored as is or as its transpose [k, m] viewed back (a:t()); likewise b.
local function operand(dt, rows, cols, transposed)
  if transposed then return rand(dt, {cols, rows}):t() end
  return rand(dt, {rows, cols})
end

TestLowpMatmul = {}

function TestLowpMatmul:test_shapes_and_layouts()
  local sizes = {{130, 70, 33}, {1, 1, 1}, {257, 129, 200}, {17, 1, 9}, {3, 40, 1}}
  for _, dt in ipairs(DTYPES) do
    for _, s in ipairs(sizes) do
      local m, n, k = s[1], s[2], s[3]
      for layout = 0, 3 do
        local ta, tb = layout & 1 == 1, layout & 2 == 2
        local a, b = operand(dt, m, k, ta), operand(dt, k, n, tb)
        local what = string.format("%dx%dx%d ta=%s tb=%s", m, n, k, ta, tb)
        check_product(dt, a, b, function(x, y) return x:matmul(y) end, "matmul " .. what)
        if layout == 3 then check_product(dt, a, b, function(x, y) return nc.mm(x, y) end, "mm " .. what) end
      end
    end
  end
end

-- Operands whose rows all start 16-byte aligned (extents and offsets multiples of 8 values): the
-- bfloat16 ones take the tensor-core kernel on NVIDIA devices (kernels/gemm_bf16.cl; under
-- NETCL_MMA_EMULATE=1 on any OpenCL device), with M and N past one 128 x 128 tile and K past its
-- 32-deep steps, in all four layouts, batched, broadcast, with a bias and at an offset (and one
-- tile over a K of 1024, which goes through float32 where the device has more compute units).
function TestLowpMatmul:test_aligned_operands()
  for _, dt in ipairs(DTYPES) do
    for _, s in ipairs({{136, 200, 40}, {264, 72, 520}, {8, 8, 8}, {128, 256, 32}, {120, 64, 1024}}) do
      local m, n, k = s[1], s[2], s[3]
      for layout = 0, 3 do
        local ta, tb = layout & 1 == 1, layout & 2 == 2
        check_product(dt, operand(dt, m, k, ta), operand(dt, k, n, tb), function(x, y) return x:matmul(y) end,
          string.format("aligned %dx%dx%d ta=%s tb=%s", m, n, k, ta, tb))
      end
    end
    check_product(dt, rand(dt, {3, 136, 48}), rand(dt, {3, 48, 144}), function(x, y) return x:bmm(y) end,
      "aligned bmm")
    check_product(dt, rand(dt, {2, 64, 48}), rand(dt, {80, 48}):t(), function(x, y) return x:matmul(y) end,
      "aligned 3-D @ transposed 2-D")
    -- rows 8 values into the storage
    check_product(dt, rand(dt, {9, 64}):narrow(1, 2, 8), rand(dt, {64, 24}), function(x, y) return x:matmul(y) end,
      "aligned at an offset")
    local w, bias, x = rand(dt, {80, 48}), rand(dt, {80}), rand(dt, {2, 64, 48})
    local ref = f64(x):matmul(f64(w):t()) + f64(bias)
    local absum = f64(x):abs():matmul(f64(w):abs():t()) + f64(bias):abs()
    for _, d in ipairs(DEVICES) do
      check(nc.linear(x:to(d), w:to(d), bias:to(d)), ref, absum, dt, "aligned linear with bias " .. dt .. " on " .. d.spec)
    end
  end
end

function TestLowpMatmul:test_batched_and_broadcast()
  for _, dt in ipairs(DTYPES) do
    check_product(dt, rand(dt, {3, 20, 9}), rand(dt, {3, 9, 11}), function(x, y) return x:bmm(y) end, "bmm")
    -- bmm of batch-transposed views: batch strides that do not fold into rows
    check_product(dt, rand(dt, {20, 3, 9}):transpose(1, 2), rand(dt, {3, 11, 9}):transpose(2, 3),
      function(x, y) return nc.bmm(x, y) end, "bmm of views")
    -- 3-D @ 2-D (the right operand broadcast over the batch), 2-D @ 3-D, 4-D broadcast
    check_product(dt, rand(dt, {4, 13, 10}), rand(dt, {10, 7}), function(x, y) return x:matmul(y) end, "3-D @ 2-D")
    check_product(dt, rand(dt, {13, 10}), rand(dt, {4, 10, 7}), function(x, y) return nc.matmul(x, y) end,
      "2-D @ 3-D")
    check_product(dt, rand(dt, {2, 1, 5, 6}), rand(dt, {3, 6, 4}), function(x, y) return x:matmul(y) end,
      "4-D broadcast")
    check_product(dt, rand(dt, {13, 4, 10}):transpose(1, 2), rand(dt, {7, 10}):t(),
      function(x, y) return x:matmul(y) end, "3-D view @ transposed 2-D")
    -- vectors
    check_product(dt, rand(dt, {33}), rand(dt, {33, 5}), function(x, y) return x:matmul(y) end, "1-D @ 2-D")
    check_product(dt, rand(dt, {5, 33}), rand(dt, {33}), function(x, y) return x:matmul(y) end, "2-D @ 1-D")
    check_product(dt, rand(dt, {33}), rand(dt, {33}), function(x, y) return x:matmul(y) end, "1-D @ 1-D")
  end
end

function TestLowpMatmul:test_linear()
  for _, dt in ipairs(DTYPES) do
    local w, bias = rand(dt, {70, 33}), rand(dt, {70})
    for _, x in ipairs({rand(dt, {2, 5, 33}), rand(dt, {130, 33}), rand(dt, {33}), rand(dt, {33, 9}):t()}) do
      for _, with_bias in ipairs({false, true}) do
        local xs = table.concat(x.shape, "x")
        local ref = f64(x):matmul(f64(w):t())
        local absum = f64(x):abs():matmul(f64(w):abs():t())
        if with_bias then
          ref = ref + f64(bias)
          absum = absum + f64(bias):abs()
        end
        for _, d in ipairs(DEVICES) do
          local got = with_bias and nc.linear(x:to(d), w:to(d), bias:to(d)) or nc.linear(x:to(d), w:to(d))
          check(got, ref, absum, dt, string.format("linear %s bias=%s %s on %s", xs, with_bias, dt, d.spec))
        end
      end
    end
    -- the layer: nn.Linear with its parameters converted to dt
    for _, d in ipairs(DEVICES) do
      local layer = nn.Linear(33, 70, {device = d}):to(dt)
      local lw, lb, x = layer.weight.value, layer.bias.value, rand(dt, {4, 33})
      lu.assertEquals(lw.dtype, dt)
      check(layer:forward(x:to(d)).value, f64(x):matmul(f64(lw):t()) + f64(lb),
        f64(x):abs():matmul(f64(lw):abs():t()) + f64(lb):abs(), dt, "nn.Linear " .. dt .. " on " .. d.spec)
    end
  end
end

function TestLowpMatmul:test_k_zero()
  for _, dt in ipairs(DTYPES) do
    for _, d in ipairs(DEVICES) do
      local a, b = nc.zeros({3, 0}, {dtype = dt, device = d}), nc.zeros({0, 4}, {dtype = dt, device = d})
      local r = a:matmul(b)
      lu.assertEquals(r.dtype, dt)
      lu.assertEquals(r:float():tolist(), nc.zeros({3, 4}):tolist())
      local bias = nc.tensor({1.5, -2, 0.25, 3}, {dtype = dt, device = d})
      local y = nc.linear(a, nc.zeros({4, 0}, {dtype = dt, device = d}), bias)
      lu.assertEquals(y.dtype, dt)
      for i = 1, 3 do lu.assertEquals(y:float():tolist()[i], {1.5, -2, 0.25, 3}) end
      local o = {dtype = dt, device = d}
      lu.assertEquals(nc.zeros({0, 5}, o):matmul(nc.zeros({5, 2}, o)).shape, {0, 2})
    end
  end
end

-- The result is the float32 sum rounded once: sums of integers are exact in float32, so the
-- result is exactly the float32 product converted to the storage dtype (ties to even), and a
-- sum accumulated in the storage dtype (or rounded twice) would differ.
function TestLowpMatmul:test_rounded_once()
  local big = {bfloat16 = 256, float16 = 2048} -- above these, the spacing of the dtype is 2
  for _, dt in ipairs(DTYPES) do
    local B = big[dt]
    for _, d in ipairs(DEVICES) do
      local function mm(rows, cols) -- rows of a times the column cols
        local a = nc.tensor(rows, {dtype = dt, device = d})
        local b = nc.tensor(cols, {dtype = dt, device = d})
        return a:matmul(b):float():view({-1}):tolist()
      end
      -- B + 1 + 1 in any order is B + 2: a running sum in dt would stay at B
      lu.assertEquals(mm({{B, 1, 1}, {1, B, 1}, {1, 1, B}}, {{1}, {1}, {1}}), {B + 2, B + 2, B + 2},
        dt .. " on " .. d.spec)
      -- ties go to the even neighbour: B + 1 -> B, B + 3 -> B + 4, B + 5 -> B + 4, -(B + 3) -> -(B + 4)
      lu.assertEquals(mm({{B, 1, 0}, {B, 3, 0}, {B, 1, 4}}, {{1}, {1}, {1}}), {B, B + 4, B + 4}, dt .. " ties")
      lu.assertEquals(mm({{-B, -1, -2}}, {{1}, {1}, {1}}), {-(B + 4)}, dt .. " negative tie")
      -- random small integers: bit for bit the float32 product rounded to dt
      local a = nc.randint(-30, 31, {37, 40}, {device = cpu}):to("float32")
      local b = nc.randint(-30, 31, {40, 29}, {device = cpu}):to("float32")
      local want = a:matmul(b):to(dt)
      local got = a:to(dt):to(d):matmul(b:to(dt):to(d))
      lu.assertEquals(got:to(cpu):bytes(), want:bytes(), dt .. " integer sums on " .. d.spec)
      lu.assertTrue(f64(want):abs():max():item() > B, "the case needs sums beyond the exact range")
      -- and through transposed views and a bias
      local bias = nc.randint(-300, 300, {29}, {device = cpu}):to("float32")
      local lin = nc.linear(a:to(dt):to(d), b:to(dt):t():contiguous():to(d), bias:to(dt):to(d))
      lu.assertEquals(lin:to(cpu):bytes(), (a:matmul(b) + bias:to(dt):float()):to(dt):bytes(), dt .. " linear")
    end
  end
end

function TestLowpMatmul:test_mixed_dtypes_refused()
  local msg = "expected operands of one float dtype"
  for _, d in ipairs(DEVICES) do
    local h = nc.ones({2, 2}, {dtype = "bfloat16", device = d})
    local f = nc.ones({2, 2}, {dtype = "float16", device = d})
    local s = nc.ones({2, 2}, {device = d})
    H.assert_error(function() return h:matmul(f) end, "netcl.matmul", msg, "bfloat16 and float16")
    H.assert_error(function() return h:matmul(s) end, "netcl.matmul", msg, "bfloat16 and float32")
    H.assert_error(function() return nc.mm(s, f) end, "netcl.mm", msg, "float32 and float16")
    H.assert_error(function() return nc.bmm(h:view({1, 2, 2}), s:view({1, 2, 2})) end, "netcl.bmm", msg)
    H.assert_error(function() return nc.linear(s, h) end, "netcl.linear", msg)
    H.assert_error(function() return nc.linear(h, h, nc.ones({2}, {device = d})) end, "netcl.linear", msg,
      "bfloat16 and float32")
    -- and the ops that take no storage dtype (cumsum, sort, where, ...) still refuse them
    H.assert_error(function() return h:cumsum(1) end, "netcl.cumsum", "is a storage type")
  end
end

-- Gradients of storage-dtype values are float32 (the tape's rule): through a bfloat16 or float16
-- product they are the float32 products of the stored values, as the same graph over float32
-- copies gives them.
function TestLowpMatmul:test_gradients_are_float32()
  for _, dt in ipairs(DTYPES) do
    for _, d in ipairs(DEVICES) do
      local xv, wv, bv = rand(dt, {2, 5, 33}):to(d), rand(dt, {7, 33}):to(d), rand(dt, {7}):to(d)
      local mv = rand(dt, {7, 4}):to(d)
      local function run(cast)
        local x, w, b, m = ag.param(cast(xv)), ag.param(cast(wv)), ag.param(cast(bv)), ag.param(cast(mv))
        local tape = ag.Tape()
        local loss = tape:record(function()
          local h = ag.linear(x, w, b) -- [2, 5, 7]
          local y = h:matmul(m) -- [2, 5, 4], m broadcast over the batch
          local z = w:t():matmul(w:matmul(x:view({10, 33}):t())) -- w used twice: gradients accumulate
          return (y:float() * y:float()):sum() + z:float():sum()
        end)
        tape:backward(loss)
        return {x = x.grad, w = w.grad, b = b.grad, m = m.grad}
      end
      local low = run(function(t) return t end)
      local ref = run(function(t) return t:float() end)
      for name, g in pairs(low) do
        lu.assertEquals(g.dtype, "float32", name)
        -- the forward values differ (rounded to dt), so the gradients agree to dt's precision
        local err = (g - ref[name]):abs():max():item() / math.max(1, ref[name]:abs():max():item())
        lu.assertTrue(err <= 8 * UNIT[dt], string.format("%s %s on %s: gradient of %s differs by %g", dt, d.spec,
          name, name, err))
      end
    end
  end
end

function TestLowpMatmul:test_gradient_exact_for_a_single_product()
  -- one product, seeded from the storage-dtype output itself: the gradients are exactly the
  -- float32 products of the stored values (g = 1)
  for _, dt in ipairs(DTYPES) do
    for _, d in ipairs(DEVICES) do
      local a, b = ag.param(rand(dt, {1, 6}):to(d)), ag.param(rand(dt, {6, 1}):to(d))
      local tape = ag.Tape()
      local out = tape:record(function() return a:matmul(b):view({}) end)
      lu.assertEquals(out.dtype, dt)
      tape:backward(out)
      lu.assertEquals(a.grad.dtype, "float32")
      lu.assertEquals(a.grad:tolist(), b.value:float():t():tolist())
      lu.assertEquals(b.grad:tolist(), a.value:float():t():tolist())
    end
  end
end

-- PyTorch's bfloat16 products of the same stored values: a @ w.t() and F.linear(a, w, bias), w
-- stored [n, k]. (PyTorch 1.13's CPU kernels sum in float32 for this layout only; with other
-- layouts they sum in bfloat16, off by about 2^-8 sqrt(K) of the result.)
local TORCH = [[
import sys, torch
import torch.nn.functional as F
vals = [float(v) for v in open(sys.argv[1]).read().split()]
m, k, n = int(vals[0]), int(vals[1]), int(vals[2])
p = 3
def take(count, *shape):
    global p
    t = torch.tensor(vals[p:p + count], dtype=torch.float32).view(*shape).bfloat16()
    p += count
    return t
a, w, bias = take(m * k, m, k), take(n * k, n, k), take(n, n)
for r in (a @ w.t(), F.linear(a, w, bias)):
    print(' '.join(repr(v) for v in r.float().flatten().tolist()))
]]

function TestLowpMatmul:test_against_pytorch()
  local py = H.python("torch")
  if not py then
    lu.skip("PyTorch is not installed for python3 (Debian: python3-torch): "
      .. "the comparison with torch's bfloat16 matmul did not run")
  end
  local m, k, n = 37, 129, 23
  local a, w, bias = rand("bfloat16", {m, k}), rand("bfloat16", {n, k}), rand("bfloat16", {n})
  local parts = {m, k, n}
  for _, t in ipairs({a, w, bias}) do
    for _, v in ipairs(H.flat(t:float():tolist())) do parts[#parts + 1] = string.format("%.9g", v) end
  end
  local data = os.tmpname()
  local f = assert(io.open(data, "w"))
  f:write(table.concat(parts, " "))
  f:close()
  local out = H.python_output(py, TORCH, data)
  os.remove(data)
  local rows = {}
  for line in out:gmatch("[^\n]+") do
    local vals = {}
    for v in line:gmatch("%S+") do vals[#vals + 1] = tonumber(v) end
    rows[#rows + 1] = nc.tensor(vals, {dtype = "float64", device = cpu})
  end
  lu.assertEquals(#rows, 2, "python3 output: " .. out:sub(1, 200))
  local ref = f64(a):matmul(f64(w):t())
  local absum = f64(a):abs():matmul(f64(w):abs():t())
  local refs = {{ref, absum}, {ref + f64(bias), absum + f64(bias):abs()}}
  for i, theirs in ipairs(rows) do
    lu.assertEquals(theirs:numel(), m * n, "python3 output row " .. i)
    theirs = theirs:view({m, n})
    check(theirs:to("bfloat16"), refs[i][1], refs[i][2], "bfloat16", "torch's result " .. i)
    for _, d in ipairs(DEVICES) do
      local mine = i == 1 and a:to(d):matmul(w:to(d):t()) or nc.linear(a:to(d), w:to(d), bias:to(d))
      -- both round a float32 sum once: equal, or (where the float32 sums differ in their last
      -- bit across a rounding boundary) one bfloat16 step apart
      local diff = (f64(mine) - theirs):abs()
      lu.assertTrue((diff - theirs:abs() * 2 ^ -7):max():item() <= 0,
        string.format("netcl and torch differ by more than one step on %s (case %d)", d.spec, i))
      local same = diff:eq(0):to("float64"):mean():item()
      lu.assertTrue(same >= 0.95, string.format("only %.1f%% equal to torch's on %s", 100 * same, d.spec))
    end
  end
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

-- Elementwise ops: values, broadcasting, promotion, in-place and out= forms, errors.
local lu = require "luaunit"
local nc = require "netcl"
local U = require "op_testutil"

TestElementwise = {}
local T = TestElementwise

function T.test_broadcast_and_scalars()
  local a = nc.tensor({{1, 2, 3}, {4, 5, 6}})
  local b = nc.tensor({10, 20, 30})
  U.assert_values(a + b, {{11, 22, 33}, {14, 25, 36}})
  U.assert_values(a:view({2, 3, 1}) + nc.tensor({{1, 2}}), {{{2, 3}, {3, 4}, {4, 5}}, {{5, 6}, {6, 7}, {7, 8}}})
  U.assert_values(a * 2, {{2, 4, 6}, {8, 10, 12}})
  U.assert_values(2 - a, {{1, 0, -1}, {-2, -3, -4}})
  U.assert_values(-a, {{-1, -2, -3}, {-4, -5, -6}})
  U.assert_values(a / b, {{0.1, 0.1, 0.1}, {0.4, 0.25, 0.2}})
  U.assert_values(a ^ 2, {{1, 4, 9}, {16, 25, 36}})
  U.assert_values(2 ^ a, {{2, 4, 8}, {16, 32, 64}})
  U.assert_values(nc.sub(10, b), {0, -10, -20})
  U.assert_values(nc.maximum(a, 3.5), {{3.5, 3.5, 3.5}, {4, 5, 6}})
  U.assert_values(nc.minimum(a, b:narrow(1, 1, 1)), {{1, 2, 3}, {4, 5, 6}})
  U.assert_shape(nc.zeros({0, 3}) + b, {0, 3})
  U.assert_shape(nc.tensor(5) * a, {2, 3})
end

function T.test_promotion()
  local i32 = nc.tensor({1, -2, 3}, {dtype = "int32"})
  local u8 = nc.tensor({1, 2, 250}, {dtype = "uint8"})
  local bl = nc.tensor({true, false, true}, {dtype = "bool"})
  local f64 = nc.tensor({1, 2, 3}, {dtype = "float64"})
  lu.assertEquals((i32 + 1).dtype, "int32")
  lu.assertEquals((i32 * 2.5).dtype, "float32")
  lu.assertEquals((i32 + u8).dtype, "int32")
  lu.assertEquals((i32 / i32).dtype, "float32")
  lu.assertEquals((f64 + nc.ones({3})).dtype, "float64")
  lu.assertEquals((bl + bl).dtype, "bool")
  lu.assertEquals((bl + 1).dtype, "int64")
  lu.assertEquals(i32:exp().dtype, "float32")
  lu.assertEquals(i32:lt(1.5).dtype, "bool")
  lu.assertEquals(u8:neg().dtype, "uint8")
  U.assert_values(i32 * 2.5, {2.5, -5, 7.5})
  U.assert_values(i32:lt(1.5), {true, true, false})
  U.assert_values(u8 + 10, {11, 12, 4}) -- uint8 wraps
  U.assert_values(u8:neg(), {255, 254, 6})
  U.assert_values(bl + bl, {true, false, true})
  U.assert_values(bl * nc.tensor({false, true, true}, {dtype = "bool"}), {false, false, true})
  local big = nc.tensor({2147483647}, {dtype = "int32"})
  U.assert_values(big + 1, {-2147483648}) -- wraps like the hardware, no UB
  local i64 = nc.tensor({3, -3, 2}, {dtype = "int64"})
  U.assert_values(i64 ^ 3, {27, -27, 8})
  U.assert_values(i64 ^ nc.tensor({2, -1, -2}, {dtype = "int64"}), {9, 0, 0})
  U.assert_values(nc.tensor({9007199254740993}, {dtype = "int64"}) + 1, {9007199254740994})
end

function T.test_unary_values()
  local xs = {-2.5, -1, -0.25, 0, 0.5, 1.5, 3}
  local x = nc.tensor(xs)
  local function each(f)
    local r = {}
    for i, v in ipairs(xs) do r[i] = f(v) end
    return r
  end
  local function sig(v) return 1 / (1 + math.exp(-v)) end
  local function erf(v) -- Abramowitz-Stegun 7.1.26 is too coarse; integrate numerically instead
    local n, s = 2000, 0
    for k = 0, n do
      local t = v * k / n
      local w = (k == 0 or k == n) and 1 or (k % 2 == 1 and 4 or 2)
      s = s + w * math.exp(-t * t)
    end
    return s * v / n / 3 * 2 / math.sqrt(math.pi)
  end
  U.assert_values(x:abs(), each(math.abs))
  U.assert_values(x:exp(), each(math.exp), 1e-6)
  U.assert_values(x:sin(), each(math.sin), 1e-6)
  U.assert_values(x:cos(), each(math.cos), 1e-6)
  U.assert_values(x:tanh(), each(function(v) return (math.exp(2 * v) - 1) / (math.exp(2 * v) + 1) end), 1e-6)
  U.assert_values(x:sigmoid(), each(sig), 1e-6)
  U.assert_values(x:relu(), each(function(v) return v > 0 and v or 0 end))
  U.assert_values(x:silu(), each(function(v) return v * sig(v) end), 1e-6)
  U.assert_values(x:gelu(), each(function(v) return 0.5 * v * (1 + erf(v / math.sqrt(2))) end), 1e-5)
  U.assert_values(x:gelu({approximate = "tanh"}),
    each(function(v)
      local u = math.sqrt(2 / math.pi) * (v + 0.044715 * v ^ 3)
      return 0.5 * v * (1 + (math.exp(2 * u) - 1) / (math.exp(2 * u) + 1))
    end), 1e-6)
  U.assert_values(x:floor(), each(math.floor))
  U.assert_values(x:ceil(), each(math.ceil))
  U.assert_values(nc.tensor({-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.6}):round(), {-2, -2, -0, 0, 2, 2, 3})
  U.assert_values(x:sign(), each(function(v) return v > 0 and 1 or v < 0 and -1 or 0 end))
  U.assert_values(x:clamp(-1, 1), each(function(v) return math.max(-1, math.min(1, v)) end))
  U.assert_values(x:clamp(nil, 0), each(function(v) return math.min(0, v) end))
  local p = nc.tensor({0.25, 1, 4, 9})
  U.assert_values(p:sqrt(), {0.5, 1, 2, 3})
  U.assert_values(p:rsqrt(), {2, 1, 0.5, 1 / 3}, 1e-6)
  U.assert_values(p:log(), {math.log(0.25), 0, math.log(4), math.log(9)}, 1e-6)
  U.assert_values(nc.tensor({1e-10, 1}):log1p(), {1e-10, math.log(2)}, 1e-6)
  local i = nc.tensor({-3, 0, 7}, {dtype = "int64"})
  U.assert_values(i:abs(), {3, 0, 7})
  U.assert_values(i:sign(), {-1, 0, 1})
  U.assert_values(i:clamp(-1, 5), {-1, 0, 5})
  U.assert_values(nc.tensor({0, 100, 255}, {dtype = "uint8"}):clamp(-5, 300), {0, 100, 255})
  U.assert_values(i:clamp(0.5), {0.5, 0.5, 7})
end

function T.test_nan_inf()
  local nan, inf = 0 / 0, math.huge
  local x = nc.tensor({nan, inf, -inf, 1})
  U.assert_values(x:relu(), {nan, inf, 0, 1})
  U.assert_values(x:clamp(-1, 1), {nan, 1, -1, 1})
  U.assert_values(nc.maximum(x, 0), {nan, inf, 0, 1})
  U.assert_values(nc.minimum(0, x), {nan, 0, -inf, 0})
  U.assert_values(x:isnan(), {true, false, false, false})
  U.assert_values(x:isinf(), {false, true, true, false})
  U.assert_values(x:eq(x), {false, true, true, true})
  U.assert_values(x:ne(x), {true, false, false, false})
  U.assert_values(nc.tensor({1, 2}, {dtype = "int32"}):isnan(), {false, false})
end

function T.test_comparisons()
  local a = nc.tensor({1, 2, 3})
  local b = nc.tensor({3, 2, 1})
  U.assert_values(a:eq(b), {false, true, false})
  U.assert_values(a:ne(b), {true, false, true})
  U.assert_values(a:lt(b), {true, false, false})
  U.assert_values(a:le(b), {true, true, false})
  U.assert_values(a:gt(2), {false, false, true})
  U.assert_values(nc.ge(2, a), {true, true, false})
end

function T.test_where_masked_fill()
  local a = nc.tensor({{1, 2, 3}, {4, 5, 6}})
  U.assert_values(nc.where(a:gt(3), a, 0), {{0, 0, 0}, {4, 5, 6}})
  U.assert_values(nc.where(a:gt(3), 1, nc.tensor({7, 8, 9})), {{7, 8, 9}, {1, 1, 1}})
  U.assert_values(a:where(a:lt(2), -a), {{1, -2, -3}, {-4, -5, -6}})
  lu.assertEquals(nc.where(a:gt(3), nc.tensor({1}, {dtype = "int32"}), 0.5).dtype, "float32")
  U.assert_values(a:masked_fill(a:lt(3), -1), {{-1, -1, 3}, {4, 5, 6}})
  U.assert_values(a:masked_fill(nc.tensor({true, false, true}, {dtype = "bool"}), 0), {{0, 2, 0}, {0, 5, 0}})
  local c = a:clone()
  c:masked_fill_(c:gt(4), 9)
  U.assert_values(c, {{1, 2, 3}, {4, 9, 9}})
  U.assert_values(nc.tensor({1, 2}, {dtype = "int64"}):masked_fill(nc.tensor({true, false}, {dtype = "bool"}), 7.9), {7, 2})
end

function T.test_in_place_and_out()
  local a = nc.tensor({{1, 2}, {3, 4}})
  a:add_(1):mul_(2)
  U.assert_values(a, {{4, 6}, {8, 10}})
  a:clamp_(5, 9)
  U.assert_values(a, {{5, 6}, {8, 9}})
  -- the input overlaps the destination with another layout: read before written
  local m = nc.tensor({{1, 2}, {3, 4}})
  m:add_(m:transpose(1, 2))
  U.assert_values(m, {{2, 5}, {5, 8}})
  -- in place into a strided view writes only that view
  local base = nc.zeros({3, 4})
  base:narrow(2, 2, 2):add_(nc.tensor({1, 2}))
  U.assert_values(base, {{0, 1, 2, 0}, {0, 1, 2, 0}, {0, 1, 2, 0}})
  local x = nc.tensor({1, 4, 9})
  x:sqrt_()
  U.assert_values(x, {1, 2, 3})
  local out = nc.zeros({2, 3}):transpose(1, 2)
  local r = nc.add(nc.ones({3, 2}), 1, {out = out})
  lu.assertTrue(rawequal(r, out))
  U.assert_values(out, {{2, 2}, {2, 2}, {2, 2}})
  local o64 = nc.zeros({3}, {dtype = "float64"})
  nc.exp(nc.tensor({0, 0, 0}), {out = o64})
  U.assert_values(o64, {1, 1, 1})
  local i = nc.tensor({1, 2}, {dtype = "int32"})
  i:add_(3)
  U.assert_values(i, {4, 5})
end

function T.test_errors()
  local a = nc.zeros({2, 3})
  U.assert_error("netcl.add: shapes [2,3] and [4] cannot be broadcast", function() return a + nc.zeros({4}) end)
  U.assert_error("netcl.mul: shapes [2,3] and [3,2] cannot be broadcast", function() return nc.mul(a, nc.zeros({3, 2})) end)
  U.assert_error("netcl.sub: sub does not take bool tensors", function()
    local b = nc.tensor({true}, {dtype = "bool"})
    return b - b
  end)
  U.assert_error("netcl.neg: neg does not take bool tensors", function() return -nc.tensor({true}, {dtype = "bool"}) end)
  U.assert_error("result type float32 can't be cast to the destination's int32",
    function() return nc.tensor({1}, {dtype = "int32"}):add_(0.5) end)
  U.assert_error("result type float32 can't be cast", function() return nc.tensor({1}, {dtype = "int32"}):exp_() end)
  U.assert_error("integers to negative integer powers are not allowed",
    function() return nc.tensor({2}, {dtype = "int32"}) ^ -1 end)
  U.assert_error("the condition must be a bool tensor, got float32", function() return nc.where(a, a, a) end)
  U.assert_error("the mask must be a bool tensor", function() return a:masked_fill(a, 1) end)
  U.assert_error("a mask of shape [4] cannot be broadcast to the tensor's shape [2,3]",
    function() return a:masked_fill(nc.zeros({4}, {dtype = "bool"}), 1) end)
  U.assert_error("cannot write into an expanded tensor", function() return nc.zeros({1, 3}):expand({2, 3}):add_(1) end)
  U.assert_error("the destination has shape [3] but the result has shape [2,3]",
    function() return nc.add(a, 1, {out = nc.zeros({3})}) end)
  U.assert_error("netcl.add: argument 2: expected a Tensor or a number, got string", function() return nc.add(a, "x") end)
  U.assert_error("needs at least one Tensor operand", function() return nc.add(1, 2) end)
  U.assert_error("approximate must be", function() return a:gelu({approximate = "fast"}) end)
  local devs = nc.devices()
  if #devs > 1 then
    local other = devs[1] == U.device and devs[2] or devs[1]
    U.assert_error("tensors are on different devices", function() return a + nc.zeros({2, 3}, {device = other}) end)
  end
end

function T.test_eight_dims()
  local x = nc.arange(256):view({2, 2, 2, 2, 2, 2, 2, 2}):permute({8, 7, 6, 5, 4, 3, 2, 1})
  local y = x + x:narrow(8, 1, 1) -- strided, rank 8, broadcast along the last dim
  lu.assertFalse(y:is_contiguous() and x:is_contiguous())
  local flat, src = y:contiguous():view({-1}):tolist(), x:contiguous():view({-1}):tolist()
  for i = 1, 256, 2 do
    lu.assertEquals(flat[i], 2 * src[i])
    lu.assertEquals(flat[i + 1], src[i + 1] + src[i])
  end
  U.assert_values(x:sum({1, 3, 5, 7}):sum(), 255 * 128)
  U.assert_values(x:max(), 255)
  U.assert_values(x:argmax(8), x:contiguous():argmax(8):tolist())
end

function T.test_large_parallel()
  -- crosses the CPU backend's parallel threshold and the device's grid-stride loop
  local n = 300001
  local x = nc.arange(n)
  local y = (x * 2 - x):sub(x)
  for i, v in ipairs(y:tolist()) do
    if v ~= 0 then lu.fail("element " .. i .. " is " .. v) end
  end
  local z = nc.arange(n):transpose(1, 1) + nc.ones({1}):expand({n})
  lu.assertEquals(z:narrow(1, n, 1):item(), n)
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

-- Random draws: the Philox stream is the same on every device, ranges and distributions hold.
local lu = require "luaunit"
local nc = require "netcl"
local U = require "op_testutil"

TestRandom = {}
local T = TestRandom

function T.test_pinned_stream()
  -- fixed values for seed 42: a change to the stream or its conversions shows here
  nc.manual_seed(42)
  U.assert_values(nc.randint(0, 10, {8}), {9, 3, 7, 1, 2, 1, 2, 1})
  U.assert_values(nc.randperm(10), {7, 0, 1, 2, 4, 8, 3, 9, 5, 6})
  U.assert_values(nc.bernoulli(nc.full({8}, 0.5)), {0, 1, 1, 1, 0, 1, 1, 0})
end

function T.test_same_numbers_on_every_device()
  local function draws(dev)
    nc.manual_seed(1234)
    local o = {device = dev}
    return {
      nc.rand({1000}, o):tolist(), nc.randn({1000}, o):tolist(), nc.randint(-5, 1000000, {1000}, o):tolist(),
      nc.randperm(777, o):tolist(), nc.bernoulli(0.3, {1000}, o):tolist(),
      nc.bernoulli(nc.rand({1000}, o)):tolist(), nc.randint(3, {5}, {device = dev, dtype = "float32"}):tolist(),
    }
  end
  local here = draws(U.device)
  for _, dev in ipairs(nc.devices()) do
    if dev ~= U.device then
      local there = draws(dev)
      for k = 1, #here do
        if k == 2 then
          U.assert_values(nc.tensor(there[k]), here[k], 1e-5) -- log/cos differ by ulps between libms
        else
          lu.assertEquals(there[k], here[k], "draw " .. k .. " on " .. dev.spec)
        end
      end
    end
  end
end

function T.test_randint_randperm()
  nc.manual_seed(7)
  local r = nc.randint(-3, 4, {100000})
  lu.assertEquals(r.dtype, "int64")
  lu.assertEquals(r:min():item(), -3)
  lu.assertEquals(r:max():item(), 3)
  U.assert_values(r:to("float32"):mean(), 0, 0.02)
  local big = nc.randint(0, 1 << 62, {1000})
  lu.assertTrue(big:max():item() > 1 << 60)
  lu.assertEquals(nc.randint(10, {2, 3}, {dtype = "uint8"}).dtype, "uint8")
  for _, n in ipairs({1, 7, 1000, 65537}) do
    local p = nc.randperm(n)
    U.assert_values(p:sort(), nc.arange(n, {dtype = "int64"}):tolist(), 0)
  end
  U.assert_shape(nc.randperm(0), {0})
  local pf = nc.randperm(5, {dtype = "float32"})
  lu.assertEquals(pf.dtype, "float32")
  lu.assertEquals(pf:sum():item(), 10)
end

function T.test_bernoulli()
  nc.manual_seed(3)
  U.assert_values(nc.bernoulli(0.25, {200000}):mean(), 0.25, 0.01)
  local p = nc.tensor({0, 1, 0, 1, 0.5})
  local b = nc.bernoulli(p:view({1, 5}):expand({1000, 5}):contiguous())
  U.assert_values(b:mean(1), {0, 1, 0, 1, 0.5}, 0.1)
  U.assert_values(nc.bernoulli(nc.tensor({0, 1}, {dtype = "float64"})), {0, 1})
  local t = nc.zeros({4, 6}, {dtype = "bool"})
  t:bernoulli_(1)
  lu.assertTrue(t:all():item())
  local s = nc.zeros({4, 6}):transpose(1, 2)
  s:bernoulli_(nc.ones({6, 4}))
  U.assert_values(s:sum(), 24)
  lu.assertEquals(nc.bernoulli(nc.full({3}, 0.5), {dtype = "int64"}).dtype, "int64")
end

function T.test_errors()
  U.assert_error("netcl.randint: randint needs lo < hi, got [5, 5)", function() return nc.randint(5, 5, {2}) end)
  U.assert_error("randint range [0, 300) does not fit uint8", function() return nc.randint(0, 300, {2}, {dtype = "uint8"}) end)
  U.assert_error("netcl.bernoulli: bernoulli probability 1.5 is outside [0, 1]", function() return nc.bernoulli(1.5, {2}) end)
  U.assert_error("bernoulli probabilities must be float32 or float64, got int64",
    function() return nc.bernoulli(nc.tensor({1}, {dtype = "int64"})) end)
  U.assert_error("netcl.randperm: argument 1: n = -1 is negative", function() return nc.randperm(-1) end)
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

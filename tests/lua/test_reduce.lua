-- Reductions, cumsum and softmax: values, dims, keepdim, nan/inf, empty and large inputs, errors.
local lu = require "luaunit"
local nc = require "netcl"
local U = require "op_testutil"

TestReduce = {}
local T = TestReduce

local a = nc.tensor({{1, 5, 3}, {4, 2, 6}})

function T.test_sum_mean_prod()
  U.assert_values(a:sum(), 21)
  U.assert_shape(a:sum(), {})
  U.assert_values(a:sum(1), {5, 7, 9})
  U.assert_values(a:sum(-1), {9, 12})
  U.assert_values(a:sum(2, {keepdim = true}), {{9}, {12}})
  U.assert_shape(a:sum(2, {keepdim = true}), {2, 1})
  U.assert_values(a:sum({1, 2}), 21)
  U.assert_values(a:sum({keepdim = true}), {{21}})
  U.assert_values(a:mean(), 3.5)
  U.assert_values(a:mean(1), {2.5, 3.5, 4.5})
  U.assert_values(a:prod(2), {15, 48})
  U.assert_values(a:transpose(1, 2):sum(1), {9, 12})
  local c = nc.arange(24):view({2, 3, 4})
  U.assert_values(c:sum({1, 3}), {0 + 1 + 2 + 3 + 12 + 13 + 14 + 15, 4 + 5 + 6 + 7 + 16 + 17 + 18 + 19, 8 + 9 + 10 + 11 + 20 + 21 + 22 + 23})
  U.assert_values(c:permute({3, 1, 2}):sum({2, 3}), {60, 66, 72, 78})
  U.assert_shape(c:sum({3, 1}, {keepdim = true}), {1, 3, 1})
  local i = nc.tensor({{1, 2}, {3, 4}}, {dtype = "int32"})
  lu.assertEquals(i:sum().dtype, "int64")
  lu.assertEquals(i:mean().dtype, "float32")
  lu.assertEquals(nc.tensor({true, true, false}, {dtype = "bool"}):sum():item(), 2)
  U.assert_values(i:prod(), 24)
  local o = nc.zeros({3}, {dtype = "float64"})
  nc.sum(a, 1, {out = o})
  U.assert_values(o, {5, 7, 9})
end

function T.test_max_min_arg()
  U.assert_values(a:max(), 6)
  U.assert_values(a:min(), 1)
  local v, idx = a:max(2)
  U.assert_values(v, {5, 6})
  U.assert_values(idx, {1, 2})
  lu.assertEquals(idx.dtype, "int64")
  v, idx = a:min(1, {keepdim = true})
  U.assert_values(v, {{1, 2, 3}})
  U.assert_values(idx, {{0, 1, 0}})
  U.assert_values(a:argmax(), 5)
  U.assert_values(a:argmin(), 0)
  U.assert_values(a:argmax(1), {1, 0, 1})
  U.assert_values(a:argmax(2, {keepdim = true}), {{1}, {2}})
  U.assert_values(nc.tensor({3, 7, 7, 1, 7}):argmax(), 1) -- the first of equal values
  U.assert_values(nc.tensor({3, 1, 1}):argmin(), 1)
  local i = nc.tensor({{-5, 9}, {7, -8}}, {dtype = "int64"})
  U.assert_values(i:max(1), {7, 9})
  U.assert_values(i:argmin(), 3)
  lu.assertEquals(nc.tensor({1, 2}, {dtype = "uint8"}):max().dtype, "uint8")
end

function T.test_var_std_norm()
  U.assert_values(a:var(), 3.5, 1e-6)
  U.assert_values(a:var(nil, {unbiased = false}), 35 / 12, 1e-6)
  U.assert_values(a:var(2, {correction = 0}), {8 / 3, 8 / 3}, 1e-6)
  U.assert_values(a:std(1), {math.sqrt(4.5), math.sqrt(4.5), math.sqrt(4.5)}, 1e-6)
  U.assert_values(nc.tensor({5}):var(), 0 / 0) -- n - 1 = 0
  U.assert_values(a:norm(), math.sqrt(91), 1e-6)
  U.assert_values(a:norm(nil, {p = 1}), 21)
  U.assert_values(a:norm(2, {p = "inf"}), {5, 6})
  U.assert_values(a:norm(nil, {p = -math.huge}), 1)
  U.assert_values(nc.tensor({0, 2, 0, -3}):norm(nil, {p = 0}), 2)
  U.assert_values(nc.tensor({1, 2, 3}):norm(nil, {p = 3}), 36 ^ (1 / 3), 1e-6)
  -- a large offset: the one-pass (Welford) form keeps its precision
  U.assert_values((nc.tensor({1, 2, 3, 4}, {dtype = "float64"}) + 1e9):var(), 5 / 3, 1e-9)
end

function T.test_logsumexp_any_all()
  U.assert_values(nc.tensor({1000, 1000}):logsumexp(), 1000 + math.log(2), 1e-6)
  U.assert_values(nc.tensor({-1000, -1000}):logsumexp(), -1000 + math.log(2), 1e-6)
  U.assert_values(a:logsumexp(2), {math.log(math.exp(1) + math.exp(5) + math.exp(3)), math.log(math.exp(4) + math.exp(2) + math.exp(6))}, 1e-6)
  U.assert_values(nc.tensor({-math.huge, -math.huge}):logsumexp(), -math.huge)
  U.assert_values(nc.tensor({math.huge, 1, math.huge}):logsumexp(), math.huge)
  U.assert_values(nc.tensor({1, 0 / 0}):logsumexp(), 0 / 0)
  U.assert_values(a:gt(4):any(2), {true, true})
  U.assert_values(a:gt(4):all(1), {false, false, false})
  U.assert_values(nc.tensor({0, 0 / 0}):any(), true)
  U.assert_values(nc.tensor({1, 2}, {dtype = "int32"}):all(), true)
  U.assert_values(nc.zeros({0}):all(), true)
  U.assert_values(nc.zeros({0}):any(), false)
end

function T.test_nan_and_empty()
  local nan = 0 / 0
  local x = nc.tensor({{1, nan, 3}, {4, 5, 6}})
  U.assert_values(x:sum(2), {nan, 15})
  U.assert_values(x:max(2), {nan, 6})
  U.assert_values(x:min(), nan)
  U.assert_values(x:argmax(2), {1, 2})
  U.assert_values(x:argmin(2), {1, 0})
  U.assert_values(nc.zeros({0}):sum(), 0)
  U.assert_values(nc.zeros({0}):prod(), 1)
  U.assert_values(nc.zeros({0}):mean(), nan)
  U.assert_values(nc.zeros({3, 0}):sum(2), {0, 0, 0})
  U.assert_shape(nc.zeros({0, 3}):sum(1), {3})
  U.assert_shape(nc.zeros({0, 3}):max(2), {0})
  U.assert_error("netcl.max: max of an empty dimension has no value", function() return nc.zeros({0}):max() end)
  U.assert_error("argmax of an empty dimension", function() return nc.zeros({2, 0}):argmax(2) end)
  U.assert_values(nc.tensor(7):sum(), 7)
  U.assert_values(nc.tensor(7):sum(1), 7)
end

function T.test_large_and_prime()
  -- more than 2^24 ones: a float32 running sum would stop at 16777216
  local n = 16777218
  lu.assertEquals(nc.ones({n}):sum():item(), n)
  lu.assertEquals(nc.ones({n}):mean():item(), 1)
  for _, m in ipairs({1, 7, 33, 1000, 65537}) do
    local x = nc.arange(m)
    lu.assertEquals(x:sum():item(), m * (m - 1) / 2, "sum of arange " .. m)
    lu.assertEquals(x:argmax():item(), m - 1)
    lu.assertEquals(x:max():item(), m - 1)
    lu.assertEquals((-x):argmin():item(), m - 1)
    lu.assertEquals(x:view({1, m}):expand({3, m}):sum(2):tolist(), {m * (m - 1) / 2, m * (m - 1) / 2, m * (m - 1) / 2})
  end
  local r = nc.randn({1000003})
  local s1, s2 = r:sum():item(), r:sum():item()
  lu.assertEquals(s1, s2) -- deterministic
  local m = nc.randn({123, 4567})
  U.assert_values(m:sum(1):sum(), m:sum():item(), 1e-4)
  U.assert_values(m:transpose(1, 2):sum(2), m:sum(1):tolist(), 1e-4)
end

function T.test_cumsum()
  U.assert_values(nc.tensor({1, 2, 3, 4}):cumsum(), {1, 3, 6, 10})
  U.assert_values(a:cumsum(1), {{1, 5, 3}, {5, 7, 9}})
  U.assert_values(a:cumsum(-1), {{1, 6, 9}, {4, 6, 12}})
  U.assert_values(a:transpose(1, 2):cumsum(2), {{1, 5}, {5, 7}, {3, 9}})
  local i = nc.tensor({1, 2, 3}, {dtype = "uint8"}):cumsum()
  lu.assertEquals(i.dtype, "int64")
  U.assert_values(i, {1, 3, 6})
  local n = 1000
  local c = nc.ones({2, n}):cumsum(2)
  lu.assertEquals(c:select(1, 2):select(1, n):item(), n)
  lu.assertEquals(c:select(1, 1):select(1, 300):item(), 300)
  U.assert_values(nc.arange(65537):cumsum():narrow(1, 65537, 1), {65537 * 65536 / 2})
  U.assert_shape(nc.zeros({0, 4}):cumsum(2), {0, 4})
end

function T.test_softmax()
  local x = nc.tensor({{1, 2, 3}, {1000, 1000, 1000}})
  local e = {math.exp(1), math.exp(2), math.exp(3)}
  local s = e[1] + e[2] + e[3]
  U.assert_values(x:softmax(2), {{e[1] / s, e[2] / s, e[3] / s}, {1 / 3, 1 / 3, 1 / 3}}, 1e-6)
  U.assert_values(x:log_softmax(2), {{1 - 3 - math.log(s / e[3]), 2 - 3 - math.log(s / e[3]), -math.log(s / e[3])},
    {-math.log(3), -math.log(3), -math.log(3)}}, 1e-6)
  U.assert_values(x:softmax(1), {{0, 0, 0}, {1, 1, 1}})
  local r = nc.randn({7, 1000})
  U.assert_values(r:softmax(2):sum(2), {1, 1, 1, 1, 1, 1, 1}, 1e-5)
  U.assert_values(r:transpose(1, 2):softmax(1):sum(1), {1, 1, 1, 1, 1, 1, 1}, 1e-5)
  lu.assertEquals(nc.tensor({1, 2}, {dtype = "int32"}):softmax().dtype, "float32")
  U.assert_values(nc.tensor({-math.huge, 0}):softmax(), {0, 1})
end

-- Masked rows, as attention makes them: a run of -inf before the values (the one-pass kernels'
-- running max starts at -inf), on short rows (one per work-item) and long ones (one per group).
function T.test_softmax_masked_rows()
  for _, n in ipairs({8, 300}) do
    local rows, expect, expect_log = {}, {}, {}
    for r = 1, 3 do
      local masked = r * n // 4
      local row, m, s = {}, -math.huge, 0
      for j = 1, n do row[j] = j <= masked and -math.huge or math.sin(j * r) * 3 end
      for j = masked + 1, n do m = math.max(m, row[j]) end
      for j = masked + 1, n do s = s + math.exp(row[j] - m) end
      local e, l = {}, {}
      for j = 1, n do
        e[j] = j <= masked and 0 or math.exp(row[j] - m) / s
        l[j] = j <= masked and -math.huge or row[j] - m - math.log(s)
      end
      rows[r], expect[r], expect_log[r] = row, e, l
    end
    local x = nc.tensor(rows)
    U.assert_values(x:softmax(2), expect, 1e-5)
    U.assert_values(x:log_softmax(2), expect_log, 1e-4)
    local all = nc.full({2, n}, -math.huge)
    lu.assertTrue(all:softmax(2):isnan():all():item(), "a row of -inf alone has no softmax (nan, as PyTorch)")
  end
end

function T.test_errors()
  U.assert_error("netcl.sum: argument 2: dim 3 out of range for 2 dims", function() return a:sum(3) end)
  U.assert_error("netcl.mean: argument 2: dim -3 out of range", function() return a:mean(-3) end)
  U.assert_error("netcl.sum: dim 1 appears twice", function() return a:sum({1, -2}) end)
  U.assert_error("netcl.softmax: argument 2: needs a dim for a tensor with 2 dims", function() return a:softmax() end)
  U.assert_error("netcl.cumsum: argument 2: dim 5 out of range", function() return a:cumsum(5) end)
  U.assert_error("netcl.argmax: argument 2: takes one dim or none", function() return a:argmax({1, 2}) end)
  U.assert_error("result type float32 can't be cast to the destination's int64",
    function() return nc.mean(a, nil, {out = nc.zeros({}, {dtype = "int64"})}) end)
  U.assert_error("opts.p must be", function() return a:norm(nil, {p = "two"}) end)
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

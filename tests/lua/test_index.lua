-- Indexing and shape ops: index_select, gather, scatter_add, one_hot, cat, stack, split, chunk,
-- sort, topk; their errors.
local lu = require "luaunit"
local nc = require "netcl"
local U = require "op_testutil"

TestIndex = {}
local T = TestIndex

local function long(v) return nc.tensor(v, {dtype = "int64"}) end
local a = nc.tensor({{1, 5, 3}, {4, 2, 6}})

function T.test_index_select()
  U.assert_values(a:index_select(2, long({2, 0, 2})), {{3, 1, 3}, {6, 4, 6}})
  U.assert_values(a:index_select(1, nc.tensor({1}, {dtype = "int32"})), {{4, 2, 6}})
  U.assert_values(a:index_select(-1, long({1})), {{5}, {2}})
  U.assert_values(a:transpose(1, 2):index_select(1, long({2, 1})), {{3, 6}, {5, 2}})
  U.assert_shape(a:index_select(2, nc.zeros({0}, {dtype = "int64"})), {2, 0})
  U.assert_values(nc.index_select(nc.arange(10, {dtype = "int64"}), 1, long({9, 0})), {9, 0})
  local out = nc.zeros({3, 2}):transpose(1, 2)
  a:index_select(2, long({0, 1, 2}), {out = out})
  U.assert_values(out, {{1, 5, 3}, {4, 2, 6}})
end

function T.test_gather()
  U.assert_values(a:gather(2, long({{0, 0}, {2, 1}})), {{1, 1}, {6, 2}})
  U.assert_values(a:gather(1, long({{1, 0, 1}})), {{4, 5, 6}})
  U.assert_values(a:gather(2, long({{2}, {0}})), {{3}, {4}})
  local x3 = nc.arange(24):view({2, 3, 4})
  U.assert_values(x3:gather(3, long({{{3}, {0}, {1}}, {{0}, {0}, {2}}})), {{{3}, {4}, {9}}, {{12}, {16}, {22}}})
  local b = nc.tensor({{true, false}, {false, true}}, {dtype = "bool"})
  U.assert_values(b:gather(2, long({{1, 1}, {1, 0}})), {{false, false}, {true, false}})
  U.assert_values(nc.tensor({{1, 2}}, {dtype = "float64"}):gather(2, long({{1, 0, 1}})), {{2, 1, 2}})
end

function T.test_scatter_add()
  local idx = long({{0, 0, 2}, {1, 1, 1}})
  U.assert_values(nc.zeros({2, 3}):scatter_add(2, idx, a), {{6, 0, 3}, {0, 12, 0}})
  U.assert_values(nc.ones({2, 3}):scatter_add(1, long({{1, 0, 1}}), nc.tensor({{10, 20, 30}})), {{1, 21, 1}, {11, 1, 31}})
  local z = nc.zeros({3}, {dtype = "int64"})
  z:scatter_add_(1, long({0, 2, 0, 0}), long({1, 2, 3, 4}))
  U.assert_values(z, {8, 0, 2})
  -- idx smaller than src: only idx's part of src is used
  U.assert_values(nc.zeros({2, 2}):scatter_add(2, long({{1}}), a), {{0, 1}, {0, 0}})
  local b = nc.zeros({3}, {dtype = "bool"}):scatter_add(1, long({2, 2}), nc.tensor({true, false}, {dtype = "bool"}))
  U.assert_values(b, {false, false, true})
end

function T.test_one_hot()
  local oh = nc.one_hot(long({0, 2, 1}), 4)
  lu.assertEquals(oh.dtype, "int64")
  U.assert_values(oh, {{1, 0, 0, 0}, {0, 0, 1, 0}, {0, 1, 0, 0}})
  U.assert_shape(nc.one_hot(long({{1, 3}})), {1, 2, 4})
  U.assert_values(nc.one_hot(nc.tensor({1}, {dtype = "uint8"}), 2), {{0, 1}})
end

function T.test_cat_stack()
  U.assert_values(nc.cat({a, nc.tensor({{7, 8, 9}})}), {{1, 5, 3}, {4, 2, 6}, {7, 8, 9}})
  U.assert_values(nc.cat({a, a:narrow(2, 1, 1)}, 2), {{1, 5, 3, 1}, {4, 2, 6, 4}})
  U.assert_values(nc.cat({a, nc.zeros({0})}, -1), {{1, 5, 3}, {4, 2, 6}})
  local c = nc.cat({nc.tensor({1}, {dtype = "int32"}), nc.tensor({2.5})})
  lu.assertEquals(c.dtype, "float32")
  U.assert_values(c, {1, 2.5})
  U.assert_values(nc.stack({nc.tensor({1, 2}), nc.tensor({3, 4})}), {{1, 2}, {3, 4}})
  U.assert_values(nc.stack({nc.tensor({1, 2}), nc.tensor({3, 4})}, 2), {{1, 3}, {2, 4}})
  U.assert_shape(nc.stack({a, a, a}, -1), {2, 3, 3})
  U.assert_values(nc.stack({nc.tensor(1), nc.tensor(2)}), {1, 2})
end

function T.test_split_chunk()
  local x = nc.arange(7)
  local parts = x:split(3)
  lu.assertEquals(#parts, 3)
  U.assert_values(parts[1], {0, 1, 2})
  U.assert_values(parts[3], {6})
  parts = a:split({1, 2}, 2)
  U.assert_values(parts[2], {{5, 3}, {2, 6}})
  local b = a:clone() -- views share storage
  b:split({1, 2}, 2)[2]:fill_(0)
  U.assert_values(b, {{1, 0, 0}, {4, 0, 0}})
  local ch = x:chunk(3)
  lu.assertEquals(#ch, 3)
  U.assert_values(ch[1], {0, 1, 2})
  U.assert_values(ch[3], {6})
  lu.assertEquals(#nc.arange(4):chunk(3), 2) -- as PyTorch: pieces of ceil(4/3) = 2
end

function T.test_sort_topk()
  local v, i = a:sort(2)
  U.assert_values(v, {{1, 3, 5}, {2, 4, 6}})
  U.assert_values(i, {{0, 2, 1}, {1, 0, 2}})
  v, i = a:sort(1, {descending = true})
  U.assert_values(v, {{4, 5, 6}, {1, 2, 3}})
  U.assert_values(i, {{1, 0, 1}, {0, 1, 0}})
  local nan, inf = 0 / 0, math.huge
  v, i = nc.tensor({3, nan, 1, 3, -inf}):sort()
  U.assert_values(v, {-inf, 1, 3, 3, nan})
  U.assert_values(i, {4, 2, 0, 3, 1}) -- equal values keep their order
  v, i = nc.tensor({3, nan, 1, 3, -inf}):sort(1, {descending = true})
  U.assert_values(v, {nan, 3, 3, 1, -inf})
  U.assert_values(i, {1, 0, 3, 2, 4})
  v, i = nc.tensor({5, -2, 9}, {dtype = "int32"}):sort()
  lu.assertEquals(v.dtype, "int32")
  U.assert_values(v, {-2, 5, 9})
  v, i = a:topk(2)
  U.assert_values(v, {{5, 3}, {6, 4}})
  U.assert_values(i, {{1, 2}, {2, 0}})
  v, i = a:topk(1, 1, {largest = false})
  U.assert_values(v, {{1, 2, 3}})
  U.assert_values(i, {{0, 1, 0}})
  U.assert_shape(a:topk(0), {2, 0})
  v, i = nc.tensor(4):sort()
  U.assert_shape(v, {})
  U.assert_values(i, 0)
  for _, n in ipairs({1, 7, 33, 1000, 65537}) do
    local x = nc.randn({n})
    local s, p = x:sort()
    U.assert_values(x:gather(1, p), s:tolist(), 0)
    local d = s:narrow(1, 2, n - 1) - s:narrow(1, 1, n - 1)
    if n > 1 then lu.assertTrue(d:min():item() >= 0, "sorted " .. n) end
    local k = math.min(5, n)
    local tv, ti = x:topk(k)
    local sd, pd = x:sort(1, {descending = true})
    U.assert_values(tv, sd:narrow(1, 1, k):tolist(), 0)
    U.assert_values(ti, pd:narrow(1, 1, k):tolist(), 0)
  end
end

function T.test_errors()
  U.assert_error("netcl.index_select: the index tensor must be int64 (or int32), got float32",
    function() return a:index_select(2, nc.tensor({1})) end)
  U.assert_error("netcl.gather: the index tensor must be int64 (or int32), got float32",
    function() return a:gather(2, nc.tensor({{1}, {0}})) end)
  U.assert_error("netcl.index_select: index 3 is out of range for dim 2 of size 3",
    function() return a:index_select(2, long({0, 3})) end)
  U.assert_error("netcl.index_select: index -1 is out of range for dim 1 of size 2",
    function() return a:index_select(1, long({-1})) end)
  U.assert_error("netcl.gather: index 5 is out of range for dim 2 of size 3",
    function() return a:gather(2, long({{5}, {0}})) end)
  U.assert_error("netcl.gather: index -2 is out of range", function() return a:gather(1, long({{-2, 0, 0}})) end)
  U.assert_error("netcl.scatter_add: index 7 is out of range for dim 1 of size 2",
    function() return a:scatter_add(1, long({{7, 0, 0}}), a) end)
  U.assert_error("netcl.gather: argument 2: dim 3 out of range for 2 dims", function() return a:gather(3, long({{0}})) end)
  U.assert_error("the index tensor has 1 dims but the input has 2", function() return a:gather(1, long({0})) end)
  U.assert_error("is larger than the input's [2,3] at dim 1", function() return a:gather(2, long({{0}, {0}, {0}})) end)
  U.assert_error("the index tensor must have 1 dim", function() return a:index_select(1, long({{0}})) end)
  U.assert_error("netcl.one_hot: class index 4 is out of range for 3 classes", function() return nc.one_hot(long({4}), 3) end)
  U.assert_error("one_hot takes integer class indices, got float32", function() return nc.one_hot(nc.tensor({1}), 3) end)
  U.assert_error("netcl.cat: tensor 2 has shape [2,2], which does not match [2,3] outside dim 1",
    function() return nc.cat({a, nc.zeros({2, 2})}) end)
  U.assert_error("netcl.stack: stack needs tensors of one shape", function() return nc.stack({a, a:narrow(2, 1, 2)}) end)
  U.assert_error("split sizes add up to 2 but dim 2 has size 3", function() return a:split({1, 1}, 2) end)
  U.assert_error("netcl.topk: k = 4 is larger than dim 2 of size 3", function() return a:topk(4) end)
  U.assert_error("netcl.cat: argument 1: expected a table of Tensors", function() return nc.cat(a) end)
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

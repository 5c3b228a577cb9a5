-- One binding per op: the reductions, indexing and joins, views and copies, and dropout are one
-- function reachable as nc.<op>, nc.autograd.<op> and the Tensor and Node method; a Node operand
-- records the differentiable op (a Node out, with its gradient), Tensors run the pure op; options
-- tables are checked (unknown keys and non-tables are errors listing the accepted keys).
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local H = require "helpers"

H.device()

local function f64(data) return nc.tensor(data, {dtype = "float64"}) end
local function long(data) return nc.tensor(data, {dtype = "int64"}) end

local TM = getmetatable(nc.zeros({1})).methods
local NM = getmetatable(ag.tensor(nc.zeros({1}))).methods

-- name -> whether it is also a Tensor and Node method
local OPS = {
  sum = true, mean = true, prod = true, max = true, min = true, var = true, std = true, norm = true,
  logsumexp = true, argmax = true, argmin = true, any = true, all = true, cumsum = true, softmax = true,
  log_softmax = true,
  index_select = true, gather = true, scatter_add = true, cat = false, stack = false, split = true,
  chunk = true, one_hot = false, sort = true, topk = true,
  view = true, reshape = true, transpose = true, permute = true, narrow = true, select = true,
  expand = true, squeeze = true, unsqueeze = true, flatten = true, contiguous = true, clone = true,
  dropout = true,
}

-- The gradient of sum(fn(x) * weights) with respect to x (a float64 leaf of data).
local function grad(data, fn, weights)
  local x = ag.param(f64(data))
  local tape = ag.Tape()
  local y = tape:record(function()
    local out = fn(x)
    lu.assertTrue(ag.is_node(out), "a Node operand gives a Node")
    lu.assertTrue(out.requires_grad)
    if weights then out = out * weights end
    return out:sum()
  end)
  tape:backward(y)
  return x.grad
end

TestOneBinding = {}

function TestOneBinding:test_one_function_on_every_surface()
  for name, method in pairs(OPS) do
    local f = nc[name]
    lu.assertEquals(type(f), "function", name)
    lu.assertTrue(rawequal(nc.autograd[name], f), "nc.autograd." .. name)
    lu.assertTrue(rawequal(ag[name], f), "ag." .. name)
    if method then
      lu.assertTrue(rawequal(TM[name], f), "Tensor method " .. name)
      lu.assertTrue(rawequal(NM[name], f), "Node method " .. name)
    else
      lu.assertNil(TM[name], "no Tensor method " .. name)
    end
  end
  lu.assertNotNil(TM.scatter_add_, "in-place variants stay Tensor methods")
  lu.assertNil(nc.autograd.scatter_add_)
end

function TestOneBinding:test_every_differentiable_op_is_bound()
  for _, name in ipairs(ag.ops()) do
    lu.assertEquals(type(nc.autograd[name]), "function", name)
    lu.assertTrue(rawequal(nc[name], nc.autograd[name]), "nc." .. name)
    if TM[name] and NM[name] then lu.assertTrue(rawequal(TM[name], NM[name]), "methods " .. name) end
  end
end

TestNodes = {}

function TestNodes:test_reductions_record_and_return_nodes()
  H.assert_close(grad({{1, 2}, {3, 4}}, function(x) return x:sum(2) end, f64({1, 10})), {{1, 1}, {10, 10}}, 0)
  H.assert_close(grad({{1, 2}, {3, 4}}, function(x) return nc.mean(x, {1, 2}, {keepdim = true}) end),
    {{0.25, 0.25}, {0.25, 0.25}}, 1e-12)
  H.assert_close(grad({1, 2, 3}, function(x) return x:var(nil, {correction = 0}) end), {-2 / 3, 0, 2 / 3}, 1e-12)
  H.assert_close(grad({3, -4}, function(x) return x:norm(1, {p = 1}) end), {1, -1}, 0)
  H.assert_close(grad({1, 2, 3}, function(x) return x:cumsum() end), {3, 2, 1}, 0)
  local v, i
  local g = grad({{1, 5, 2}, {7, 0, 3}}, function(x)
    v, i = nc.max(x, 2)
    return v
  end)
  lu.assertEquals(i:tolist(), {1, 0})
  lu.assertFalse(ag.is_node(i), "positions are a Tensor")
  H.assert_close(g, {{0, 1, 0}, {1, 0, 0}}, 0)
  -- softmax rows sum to 1 whatever the input: the gradient of the sum is zero
  H.assert_close(grad({{1, 2, 3}}, function(x) return nc.softmax(x, 2) end), {{0, 0, 0}}, 1e-12)
end

function TestNodes:test_non_differentiable_ops_take_the_value()
  local n = ag.param(f64({{1, 5, 2}, {7, 0, 3}}))
  for _, r in ipairs({n:argmax(2), n:argmin(), nc.any(n), n:all(1), (n:sort(2)), (n:topk(1)),
                      nc.one_hot(ag.tensor(long({0, 2})))}) do
    lu.assertTrue(nc.is_tensor(r))
  end
  lu.assertEquals(n:argmax(2):tolist(), {1, 0})
  local _, pos = n:sort(2, {descending = true})
  lu.assertEquals(pos:tolist(), {{1, 2, 0}, {0, 2, 1}})
end

function TestNodes:test_indexing_and_joins()
  local idx = long({2, 0, 2})
  H.assert_close(grad({1, 2, 3}, function(x) return x:index_select(1, idx) end), {1, 0, 2}, 0)
  H.assert_close(grad({{1, 2}, {3, 4}}, function(x) return nc.gather(x, 2, long({{1}, {1}})) end), {{0, 1}, {0, 1}}, 0)
  -- scatter_add with a Tensor x and a Node src records the op, x a constant
  H.assert_close(grad({5, 6}, function(src) return nc.zeros({3}, {dtype = "float64"}):scatter_add(1, long({2, 2}), src) end,
    f64({1, 2, 3})), {3, 3}, 0)
  -- a list mixing Tensors and Nodes: the Tensors are constants
  local c = f64({{9, 9}})
  H.assert_close(grad({{1, 2}}, function(x) return nc.cat({c, x, c, x}) end, f64({{1, 1}, {1, 2}, {1, 1}, {3, 4}})),
    {{4, 6}}, 0)
  H.assert_close(grad({1, 2}, function(x) return nc.stack({x, f64({0, 0})}, 2) end, f64({{1, 5}, {2, 5}})), {1, 2}, 0)
  lu.assertTrue(nc.is_tensor(nc.cat({c, c})), "Tensors only: the pure op")
  H.assert_close(grad({1, 2, 3, 4}, function(x)
    local p = x:split({1, 3})
    lu.assertTrue(ag.is_node(p[1]) and ag.is_node(p[2]))
    return p[2] * 2
  end), {0, 2, 2, 2}, 0)
  H.assert_close(grad({1, 2, 3, 4}, function(x) return nc.chunk(x, 2)[1] end), {1, 1, 0, 0}, 0)
end

function TestNodes:test_views_and_indexing()
  H.assert_close(grad({{1, 2, 3}, {4, 5, 6}}, function(x) return x:transpose(1, 2):narrow(1, 2, 2) end,
    f64({{1, 2}, {3, 4}})), {{0, 1, 3}, {0, 2, 4}}, 0)
  H.assert_close(grad({{1, 2}, {3, 4}}, function(x) return x[2] end), {{0, 0}, {1, 1}}, 0)
  H.assert_close(grad({{1, 2}, {3, 4}}, function(x) return nc.select(x, 2, -1) end), {{0, 1}, {0, 1}}, 0)
  H.assert_close(grad({1, 2}, function(x) return x:view({2, 1}):expand({2, 3}):flatten() end), {3, 3}, 0)
  H.assert_close(grad({{1, 2}}, function(x) return x:unsqueeze(1):squeeze():clone():contiguous() end), {{1, 1}}, 0)
  local t = nc.tensor({{1, 2}, {3, 4}})
  lu.assertTrue(nc.is_tensor(t:transpose(1, 2)) and nc.is_tensor(t[1]) and nc.is_tensor(nc.view(t, {4})))
  H.assert_error(function() return ag.tensor(nc.tensor(1))[1] end, "netcl.index: cannot index a 0-dim tensor")
  H.assert_error(function() return nc.tensor(1)[1] end, "netcl.index: cannot index a 0-dim tensor")
end

function TestNodes:test_dropout_on_tensors_and_nodes_draws_the_same_mask()
  local x = nc.ones({200}, {dtype = "float64"})
  nc.manual_seed(5)
  local t = x:dropout(0.5)
  lu.assertTrue(nc.is_tensor(t), "a Tensor in, a Tensor out: nothing recorded")
  nc.manual_seed(5)
  local n = ag.dropout(ag.param(x), 0.5)
  lu.assertTrue(ag.is_node(n))
  lu.assertEquals(t:tolist(), n.value:tolist())
  lu.assertEquals(nc.dropout(x, 0.5, {training = false}):tolist(), x:tolist())
  lu.assertEquals(nc.dropout(x, 0.5, false):tolist(), x:tolist())
end

function TestNodes:test_error_names_are_the_ops()
  local n = ag.param(f64({{1, 2}}))
  H.assert_error(function() return n:sum(3) end, "netcl.sum: argument 2: dim 3 out of range")
  H.assert_error(function() return n:transpose(1, 5) end, "netcl.transpose:")
  H.assert_error(function() return nc.cat({n, 3}) end, "netcl.cat: element 2 of the list is a number")
  H.assert_error(function() return n:sum(1, {out = nc.zeros({2})}) end, "netcl.sum: out= is for Tensors")
  H.assert_error(function() return n:index_select(1, long({0}), {out = nc.zeros({1, 2})}) end, "out= is for Tensors")
end

TestOptions = {}

-- Each call must fail naming the offending key and listing the accepted ones.
local function assert_unknown(fn, key, accepted)
  H.assert_error(fn, "unknown option '" .. key .. "'", accepted)
end

function TestOptions:test_unknown_keys_list_the_accepted_ones()
  local t = nc.tensor({{1, 2}, {3, 4}})
  local n = ag.param(f64({{1, 2}, {3, 4}}))
  for _, x in ipairs({t, n}) do
    assert_unknown(function() return x:sum(1, {keepdims = true}) end, "keepdims", "keepdim=")
    assert_unknown(function() return x:sum({keepdims = true}) end, "keepdims", "keepdim=")
    assert_unknown(function() return x:mean(1, {p = 2}) end, "p", "{keepdim=, out=}")
    assert_unknown(function() return x:var(1, {p = 2}) end, "p", "{keepdim=, correction=, unbiased=, out=}")
    assert_unknown(function() return x:norm(nil, {correction = 1}) end, "correction", "{keepdim=, p=, out=}")
    assert_unknown(function() return x:argmax(1, {keep = true}) end, "keep", "keepdim=")
    assert_unknown(function() return x:cumsum(1, {keepdim = true}) end, "keepdim", "{out=}")
    assert_unknown(function() return x:softmax({dim = 1}) end, "dim", "{out=}")
    assert_unknown(function() return x:index_select(1, long({0}), {into = t}) end, "into", "{out=}")
    assert_unknown(function() return x:gather(1, long({{0, 1}}), {into = t}) end, "into", "{out=}")
    assert_unknown(function() return x:scatter_add(1, long({{0, 1}}), x, {into = t}) end, "into", "{out=}")
    assert_unknown(function() return x:sort(1, {descend = true}) end, "descend", "{descending=}")
    assert_unknown(function() return x:topk(1, nil, {smallest = true}) end, "smallest", "{largest=}")
    assert_unknown(function() return nc.dropout(x, 0.5, {train = false}) end, "train", "{training=}")
  end
  assert_unknown(function() return t:to({dtyp = "float64"}) end, "dtyp", "{device=, dtype=, non_blocking=}")
  assert_unknown(function() return nc.randint(0, 3, {2}, {dtyp = "int32"}) end, "dtyp", "{dtype=, device=}")
  assert_unknown(function() return nc.randint(3, {2}, {devise = "cpu"}) end, "devise", "{dtype=, device=}")
  assert_unknown(function() return nc.randperm(3, {dtyp = "int32"}) end, "dtyp", "{dtype=, device=}")
  assert_unknown(function() return nc.bernoulli(0.5, {2}, {dtyp = "float64"}) end, "dtyp", "{dtype=, device=}")
  assert_unknown(function() return nc.bernoulli(nc.full({2}, 0.5), {device = "cpu"}) end, "device", "{dtype=}")
end

function TestOptions:test_non_table_options_raise()
  local t = nc.tensor({{1, 2}, {3, 4}})
  local n = ag.param(f64({{1, 2}, {3, 4}}))
  for _, x in ipairs({t, n}) do
    H.assert_error(function() return x:sum(1, 5) end, "netcl.sum: argument 3: options must be a table {keepdim=, out=}")
    H.assert_error(function() return x:softmax(1, "out") end, "netcl.softmax", "options must be a table")
    H.assert_error(function() return x:index_select(1, long({0}), true) end, "options must be a table")
    H.assert_error(function() return x:sort(1, true) end, "netcl.sort", "options must be a table {descending=}")
    H.assert_error(function() return nc.dropout(x, 0.5, 1) end, "netcl.dropout", "options must be a table")
  end
  H.assert_error(function() return nc.randperm(3, "int32") end, "netcl.randperm", "options must be a table")
end

function TestOptions:test_documented_options_still_work()
  local t = nc.tensor({{1, 5, 3}, {4, 2, 6}})
  H.assert_close(t:var(2, {unbiased = false, keepdim = true}), {{8 / 3}, {8 / 3}}, 1e-6)
  H.assert_close(t:norm(nil, {p = "inf"}), 6, 0)
  local o = nc.zeros({2})
  local v, i = t:max(2, {out = o})
  lu.assertTrue(rawequal(v, o), "max with one dim fills out and returns it")
  H.assert_close(o, {5, 6}, 0)
  lu.assertEquals(i:tolist(), {1, 2})
  local s = nc.zeros({2, 3})
  lu.assertTrue(rawequal(t:softmax(2, {out = s}), s))
  local c = nc.zeros({3})
  lu.assertTrue(rawequal(nc.tensor({1, 2, 3}):cumsum({out = c}), c), "options in the dim's place")
  H.assert_close(c, {1, 3, 6}, 0)
  lu.assertEquals(t:to({dtype = "float64"}).dtype, "float64")
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

-- One binding per product, layer and loss op: nc.<op> and nc.autograd.<op> are the same function,
-- which runs the pure op on Tensors (one result, a Tensor) and the differentiable op when an
-- operand is a Node (a Node, recorded on the active tape), with the same values. Options tables
-- are strict on both surfaces and on nc.nn_ops.
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local H = require "helpers"

local dev = H.device()
local ops = nc.nn_ops

local function randn(shape) return nc.randn(shape, {device = dev}) end
local function ints(values) return nc.tensor(values, {dtype = "int64", device = dev}) end
local function probs(shape) return randn(shape):softmax(#shape) end

local FUNCTIONS = {"matmul", "mm", "bmm", "linear", "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
                   "batch_norm", "layer_norm", "rms_norm", "embedding", "cross_entropy", "nll_loss", "mse_loss",
                   "l1_loss", "bce_with_logits", "cosine_similarity"}

TestSurfaces = {}
function TestSurfaces:test_one_function_per_op()
  for _, name in ipairs(FUNCTIONS) do
    lu.assertEquals(type(nc[name]), "function", name)
    lu.assertIs(nc.autograd[name], nc[name], name)
    lu.assertIs(ag[name], nc[name], name)
  end
  local tensor_methods = getmetatable(nc.zeros({0})).methods
  local node_methods = require("netcl.core").autograd.node_methods
  for _, name in ipairs({"matmul", "mm", "bmm"}) do
    lu.assertIs(rawget(node_methods, name), nc[name], name)
    lu.assertIs(rawget(tensor_methods, name), nc[name], name)
  end
  lu.assertIs(ops.linear, nc.linear)
end

-- Each case: the op, a function making its arguments (Tensors), and the positions of the
-- arguments that may be Nodes. The op on Tensors must give a Tensor equal to the value of the op
-- on the same arguments with each of those positions wrapped in a Node, which must be a Node.
local CASES = {
  {"matmul", function() return {randn({2, 4, 3}), randn({3, 5})} end, {1, 2}},
  {"mm", function() return {randn({4, 3}), randn({3, 5})} end, {1, 2}},
  {"bmm", function() return {randn({2, 4, 3}), randn({2, 3, 5})} end, {1, 2}},
  {"linear", function() return {randn({2, 5, 3}), randn({4, 3}), randn({4})} end, {1, 2, 3}},
  {"conv2d", function()
     return {randn({2, 4, 7, 6}), randn({6, 2, 3, 2}), randn({6}), {stride = {2, 1}, padding = 1, groups = 2}}
   end, {1, 2, 3}},
  {"max_pool2d", function() return {randn({2, 3, 7, 6}), 3, {stride = 2, padding = 1, dilation = 1}} end, {1}},
  {"avg_pool2d", function() return {randn({2, 3, 7, 6}), {2, 3}, {ceil_mode = true, count_include_pad = false}} end,
   {1}},
  {"adaptive_avg_pool2d", function() return {randn({2, 3, 7, 6}), {3, 2}} end, {1}},
  {"batch_norm", function()
     return {randn({4, 3, 2, 2}), nc.zeros({3}, {device = dev}), nc.ones({3}, {device = dev}), randn({3}), randn({3}),
             {training = false, eps = 1e-3}}
   end, {1, 4, 5}},
  {"batch_norm", function() return {randn({5, 3}), nil, nil, randn({3}), nil, {training = true}} end, {1, 4}},
  {"layer_norm", function() return {randn({3, 4, 5}), {4, 5}, randn({4, 5}), randn({4, 5}), {eps = 1e-3}} end, {1, 3, 4}},
  {"rms_norm", function() return {randn({3, 4, 5}), 5, randn({5}), {eps = 1e-4}} end, {1, 3}},
  {"embedding", function() return {ints({{0, 4, 2}, {1, 1, 3}}), randn({5, 3}), {padding_idx = 1}} end, {2}},
  {"embedding", function() return {randn({5, 3}), ints({4, 0})} end, {1}},
  {"cross_entropy", function() return {randn({6, 4}), ints({0, 3, 1, 2, -100, 1}), {label_smoothing = 0.1}} end, {1}},
  {"cross_entropy", function() return {randn({3, 4, 2}), ints({{1, 3}, {2, 0}, {0, 0}}), {reduction = "sum"}} end,
   {1}},
  {"cross_entropy", function() return {randn({3, 4}), probs({3, 4}), {reduction = "none"}} end, {1}},
  {"nll_loss", function() return {randn({4, 5}):log_softmax(2), ints({1, 0, 4, 7}), {ignore_index = 7}} end, {1}},
  {"mse_loss", function() return {randn({3, 4}), randn({3, 4})} end, {1, 2}},
  {"l1_loss", function() return {randn({3, 4}), randn({3, 4}), {reduction = "sum"}} end, {1, 2}},
  {"bce_with_logits", function() return {randn({3, 4}), nc.rand({3, 4}, {device = dev}), {reduction = "none"}} end,
   {1, 2}},
  {"cosine_similarity", function() return {randn({3, 4}), randn({3, 4})} end, {1, 2}},
  {"cosine_similarity", function() return {randn({2, 3, 4}), randn({3, 4}), {dim = -1, eps = 1e-6}} end, {1, 2}},
  {"cosine_similarity", function() return {randn({4, 3}), randn({4, 1}), 1} end, {1}},
}

local function unpack_args(args) return table.unpack(args, 1, 6) end

function TestSurfaces:test_tensors_and_nodes_give_the_same_values()
  for i, c in ipairs(CASES) do
    local name, make, node_positions = c[1], c[2], c[3]
    nc.manual_seed(i)
    local args = make()
    local y = nc[name](unpack_args(args))
    lu.assertTrue(nc.is_tensor(y), name .. ": a Tensor for Tensor arguments")
    for _, p in ipairs(node_positions) do
      local wrapped = {}
      for k = 1, 6 do wrapped[k] = args[k] end
      wrapped[p] = ag.tensor(args[p])
      local n = ag[name](unpack_args(wrapped))
      lu.assertTrue(ag.is_node(n), name .. ": a Node when argument " .. p .. " is one")
      H.assert_close(n.value, y, 1e-6, string.format("%s (case %d, Node at %d)", name, i, p))
    end
  end
end

function TestSurfaces:test_products_as_methods_mix_tensors_and_nodes()
  local a, b = randn({3, 4}), randn({4, 2})
  local w = ag.param(b:clone())
  local tape = ag.Tape()
  local out = tape:record(function() return a:matmul(w):sum() end)
  lu.assertTrue(ag.is_node(out))
  tape:backward(out)
  H.assert_close(w.grad, a:sum(1, {keepdim = true}):transpose(1, 2):expand({4, 2}), 1e-5, "grad of a @ w")
  H.assert_close(a:mm(b), ag.tensor(a):mm(b).value, 0, "mm")
end

function TestSurfaces:test_tensor_calls_record_nothing_and_node_calls_record()
  local x, w = randn({2, 3, 5, 5}), randn({4, 3, 3, 3})
  local p = ag.param(w:clone())
  local tape = ag.Tape()
  local y = tape:record(function()
    lu.assertTrue(nc.is_tensor(nc.conv2d(x, w, nil, {padding = 1})))
    return nc.conv2d(x, p, nil, {padding = 1})
  end)
  lu.assertEquals(#tape, 1)
  tape:backward(y, nc.ones(y.shape, {device = dev}))
  lu.assertEquals(p.grad.shape, {4, 3, 3, 3})
end

function TestSurfaces:test_full_outputs_agree_with_nn_ops()
  local x, w, b = randn({2, 4, 7, 6}), randn({6, 2, 3, 2}), randn({6})
  local o = {stride = {2, 1}, padding = 1, groups = 2}
  H.assert_close(nc.conv2d(x, w, b, o), ops.conv2d(x, w, b, o), 0, "conv2d")
  H.assert_close(nc.max_pool2d(x, 3, {stride = 2}), (ops.max_pool2d(x, 3, {stride = 2})), 0, "max_pool2d")
  H.assert_close(nc.avg_pool2d(x, 2), ops.avg_pool2d(x, 2), 0, "avg_pool2d")
  H.assert_close(nc.adaptive_avg_pool2d(x, 3), ops.adaptive_avg_pool2d(x, 3), 0, "adaptive_avg_pool2d")
  -- batch_norm: nc's order is torch's (x, running_mean, running_var, w, b), nn_ops' is (x, w, b, rm, rv);
  -- the running statistics are updated in place the same way by both
  local bx, bw, bb = randn({4, 3, 5}), randn({3}), randn({3})
  local rm1, rv1 = nc.zeros({3}, {device = dev}), nc.ones({3}, {device = dev})
  local rm2, rv2 = rm1:clone(), rv1:clone()
  local bo = {training = true, momentum = 0.3, eps = 1e-4}
  H.assert_close(nc.batch_norm(bx, rm1, rv1, bw, bb, bo), (ops.batch_norm(bx, bw, bb, rm2, rv2, bo)), 0, "batch_norm")
  H.assert_close(rm1, rm2, 0, "running_mean")
  H.assert_close(rv1, rv2, 0, "running_var")
  local lx, lw = randn({3, 4, 5}), randn({5})
  H.assert_close(nc.layer_norm(lx, 5, lw, nil), (ops.layer_norm(lx, 5, lw, nil)), 0, "layer_norm")
  H.assert_close(nc.rms_norm(lx, {4, 5}), (ops.rms_norm(lx, {4, 5})), 0, "rms_norm")
  local ew, idx = randn({6, 2}), ints({5, 0, 2})
  H.assert_close(nc.embedding(idx, ew), ops.embedding(ew, idx), 0, "embedding")
  local logits, t = randn({5, 3}), ints({0, 2, 1, 1, 0})
  H.assert_close(nc.cross_entropy(logits, t), (ops.cross_entropy(logits, t)), 0, "cross_entropy")
end

function TestSurfaces:test_defaults()
  -- batch_norm defaults to inference on nc (torch.nn.functional's), to training on nn_ops (docs/linalg.md)
  local x, rm, rv = randn({4, 3}), nc.tensor({0.5, -1, 2}, {device = dev}), nc.tensor({4, 1, 0.25}, {device = dev})
  H.assert_close(nc.batch_norm(x, rm, rv), (x - rm) / (rv + 1e-5):sqrt(), 1e-5, "inference by default")
  H.assert_close(nc.batch_norm(x, nil, nil, nil, nil, {training = true}), (ops.batch_norm(x)), 0, "training")
  -- probability targets: -sum(p * log_softmax(x)) averaged over the batch
  local logits, p = randn({4, 5}), probs({4, 5})
  H.assert_close(nc.cross_entropy(logits, p), -(p * logits:log_softmax(2)):sum() / 4, 1e-5, "soft targets")
  local a, b = randn({3, 4}), randn({3, 4})
  H.assert_close(nc.mse_loss(a, b), ((a - b) ^ 2):mean(), 1e-5, "mse_loss")
  H.assert_close(nc.cosine_similarity(a, b), nc.cosine_similarity(a, b, 2), 0, "cosine dim 2 by default")
end

-- Every options table is checked: unknown keys name the key and the accepted ones, on Tensors, on
-- Nodes and on nn_ops; a non-table options argument is an error.
function TestSurfaces:test_unknown_options_are_errors()
  local x4, w4 = randn({1, 2, 6, 6}), randn({3, 2, 3, 3})
  local x2, t = randn({4, 3}), ints({0, 1, 2, 1})
  local rm, rv = nc.zeros({3}, {device = dev}), nc.ones({3}, {device = dev})
  local checks = {
    {"netcl.conv2d", "{stride=, padding=, dilation=, groups=}", function(o) return nc.conv2d(x4, w4, nil, o) end},
    {"netcl.conv2d", "{stride=, padding=, dilation=, groups=}",
     function(o) return ag.conv2d(ag.tensor(x4), w4, nil, o) end},
    {"netcl.max_pool2d", "{stride=, padding=, dilation=, ceil_mode=}", function(o) return nc.max_pool2d(x4, 2, o) end},
    {"netcl.avg_pool2d", "{stride=, padding=, ceil_mode=, count_include_pad=}",
     function(o) return ag.avg_pool2d(ag.tensor(x4), 2, o) end},
    {"netcl.batch_norm", "{training=, momentum=, eps=}", function(o) return nc.batch_norm(x2, rm, rv, nil, nil, o) end},
    {"netcl.layer_norm", "{eps=}", function(o) return nc.layer_norm(x2, 3, nil, nil, o) end},
    {"netcl.rms_norm", "{eps=}", function(o) return ag.rms_norm(ag.tensor(x2), 3, nil, o) end},
    {"netcl.embedding", "{padding_idx=}", function(o) return nc.embedding(t, x2, o) end},
    {"netcl.cross_entropy", "{label_smoothing=, ignore_index=, reduction=}",
     function(o) return nc.cross_entropy(x2, t, o) end},
    {"netcl.nll_loss", "{ignore_index=, reduction=}", function(o) return nc.nll_loss(x2, t, o) end},
    {"netcl.mse_loss", "{reduction=}", function(o) return nc.mse_loss(x2, x2, o) end},
    {"netcl.l1_loss", "{reduction=}", function(o) return ag.l1_loss(ag.tensor(x2), x2, o) end},
    {"netcl.bce_with_logits", "{reduction=}", function(o) return nc.bce_with_logits(x2, x2, o) end},
    {"netcl.cosine_similarity", "{dim=, eps=}", function(o) return nc.cosine_similarity(x2, x2, o) end},
    {"netcl.cosine_similarity", "{eps=}", function(o) return nc.cosine_similarity(x2, x2, 1, o) end},
    {"netcl.nn_ops.conv2d", "{stride=, padding=, dilation=, groups=}", function(o) return ops.conv2d(x4, w4, nil, o) end},
    {"netcl.nn_ops.conv2d_backward_input", "{stride=, padding=, dilation=, groups=}",
     function(o) return ops.conv2d_backward_input(randn({1, 3, 4, 4}), w4, x4.shape, o) end},
    {"netcl.nn_ops.max_pool2d_backward", "{stride=, padding=, dilation=, ceil_mode=}",
     function(o)
       local y, idx = ops.max_pool2d(x4, 2)
       return ops.max_pool2d_backward(y, idx, x4.shape, 2, o)
     end},
    {"netcl.nn_ops.avg_pool2d", "{stride=, padding=, ceil_mode=, count_include_pad=}",
     function(o) return ops.avg_pool2d(x4, 2, o) end},
    {"netcl.nn_ops.batch_norm", "{training=, momentum=, eps=}", function(o) return ops.batch_norm(x2, nil, nil, nil, nil, o) end},
    {"netcl.nn_ops.layer_norm", "{eps=}", function(o) return ops.layer_norm(x2, 3, nil, nil, o) end},
    {"netcl.nn_ops.embedding_backward", "{padding_idx=}", function(o) return ops.embedding_backward(x2, t, 5, o) end},
    {"netcl.nn_ops.cross_entropy", "{label_smoothing=, ignore_index=, reduction=}",
     function(o) return ops.cross_entropy(x2, t, o) end},
  }
  for _, c in ipairs(checks) do
    local fname, accepted, call = c[1], c[2], c[3]
    H.assert_error(function() return call({bogus = 1}) end, fname .. ": argument ", "unknown option 'bogus'",
                   "(accepted: " .. accepted .. ")")
    H.assert_error(function() return call("fast") end, fname .. ": argument ", "options must be a table " .. accepted,
                   "got string")
    call({}) -- an empty table is fine
  end
  -- dilation is a max-pooling option only
  H.assert_error(function() return nc.avg_pool2d(x4, 2, {dilation = 2}) end, "unknown option 'dilation'")
end

function TestSurfaces:test_errors_name_the_op_for_tensors_and_nodes()
  local a, b = randn({2, 3}), randn({4, 5})
  H.assert_error(function() return nc.linear(a, b) end, "netcl.linear: ")
  H.assert_error(function() return ag.linear(ag.tensor(a), b) end, "netcl.linear: ")
  H.assert_error(function() return ag.tensor(a):matmul(b) end, "netcl.matmul: inner dimensions 3 and 4 do not match")
  H.assert_error(function() return nc.conv2d(a, 3) end, "netcl.conv2d: argument 2: expected Node or Tensor, got number")
  H.assert_error(function() return nc.layer_norm(ag.tensor(a), 4) end, "netcl.layer_norm: normalized_shape does not match")
  H.assert_error(function() return nc.cross_entropy(a, ints({0, 1}), {reduction = "avg"}) end,
                 "netcl.cross_entropy: reduction must be \"mean\", \"sum\" or \"none\", got avg")
end

os.exit(lu.LuaUnit.run())

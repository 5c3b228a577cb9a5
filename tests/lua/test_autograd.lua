-- The autograd engine through Lua: tapes, accumulation, retain,
-- no_grad, detach, views, Function, misuse errors, saved-tensor release, and a small MLP trained
-- with hand-written gradient steps.
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local H = require "helpers"

local dev = H.device()

local function f64(data) return nc.tensor(data, {dtype = "float64"}) end

TestTape = {}

function TestTape:test_record_and_accumulation_over_reuse()
  local x = ag.param(f64({1, 2, 3}))
  local tape = ag.Tape()
  local y, extra = tape:record(function() return (x * x + x * 3):sum(), 42 end)
  lu.assertEquals(extra, 42, "record returns what fn returns")
  lu.assertEquals(y.op, "sum")
  lu.assertFalse(y.is_leaf)
  lu.assertTrue(#tape >= 4)
  tape:backward(y)
  H.assert_close(x.grad, {5, 7, 9}, 1e-12) -- 2x + 3: x is used three times
  lu.assertEquals(#tape, 0, "backward frees the entries")
end

function TestTape:test_scope_is_a_to_be_closed_block()
  local w = ag.param(f64({2}))
  local tape = ag.Tape()
  local y
  do
    local _ <close> = tape:scope()
    lu.assertTrue(ag.recording())
    y = (w * w):sum()
  end
  lu.assertFalse(ag.recording())
  lu.assertFalse((w * w).requires_grad, "nothing records after the scope closed")
  tape:backward(y)
  H.assert_close(w.grad, {4}, 1e-12)
end

function TestTape:test_retain_allows_a_second_backward_that_accumulates()
  local x = ag.param(f64({1, -2}))
  local tape = ag.Tape()
  local y = tape:record(function() return (x:exp() * 2):sum() end)
  tape:backward(y, nil, {retain = true})
  H.assert_close(x.grad, {2 * math.exp(1), 2 * math.exp(-2)}, 1e-12)
  tape:backward(y)
  H.assert_close(x.grad, {4 * math.exp(1), 4 * math.exp(-2)}, 1e-12)
  x.grad = nil
  lu.assertNil(x.grad)
end

function TestTape:test_explicit_gradient_for_a_non_scalar_output()
  local x = ag.param(f64({{1, 2}, {3, 4}}))
  local tape = ag.Tape()
  local y = tape:record(function() return x * x end)
  tape:backward(y, f64({{1, 0}, {0.5, 2}}))
  H.assert_close(x.grad, {{2, 0}, {3, 16}}, 1e-12)
end

-- relu passes g where its output is not <= 0 and 0 elsewhere, whatever g holds there (as
-- PyTorch's threshold_backward: an infinite or NaN g at a negative input gives 0, not NaN; a NaN
-- input, whose output is NaN, passes g), in float64 and on bfloat16 values (whose gradients are
-- float32) on the device under test.
function TestTape:test_relu_gradient_is_g_where_positive()
  local x = ag.param(f64({-2, -0.5, 0, 0.25, 3, 0 / 0}))
  local tape = ag.Tape()
  local y = tape:record(function() return x:relu() end)
  tape:backward(y, f64({math.huge, 0 / 0, 5, 7, -1, 4}))
  local g = x.grad:tolist()
  lu.assertEquals({g[1], g[2], g[3], g[4], g[5], g[6]}, {0, 0, 0, 7, -1, 4})
  local xb = ag.param(nc.tensor({-1.5, 2.5, 0.75, -3}, {device = dev}):to("bfloat16"))
  tape = ag.Tape()
  y = tape:record(function() return (xb:relu() * 2):sum() end)
  tape:backward(y)
  lu.assertEquals(xb.grad.dtype, "float32")
  lu.assertEquals(xb.grad:to(nc.device("cpu")):tolist(), {0, 2, 2, 0})
end

function TestTape:test_no_grad_and_no_tape_record_nothing()
  local x = ag.param(f64({1, 2}))
  local free = x * 2
  lu.assertFalse(free.requires_grad, "no active tape: nothing recorded")
  lu.assertNil(free.op)
  local tape = ag.Tape()
  local inside = tape:record(function() return ag.no_grad(function() return x:exp() end) end)
  lu.assertFalse(inside.requires_grad)
  lu.assertEquals(#tape, 0)
  local c = tape:record(function() return ag.tensor(f64({1})) * 3 end)
  lu.assertFalse(c.requires_grad, "inputs that need no gradient record nothing")
  lu.assertEquals(#tape, 0)
end

function TestTape:test_detach_stops_the_gradient_and_shares_the_value()
  local x = ag.param(f64({3}))
  local tape = ag.Tape()
  local y = tape:record(function()
    local d = x:detach()
    lu.assertFalse(d.requires_grad)
    lu.assertEquals(d.value:tolist(), x.value:tolist())
    return (x * d):sum()
  end)
  tape:backward(y)
  H.assert_close(x.grad, {3}, 1e-12) -- d counts as a constant
end

function TestTape:test_broadcast_gradients_take_the_input_shape()
  local b = ag.param(f64({1, 2, 3}))
  local s = ag.param(f64(2))
  local x = f64({{1, 1, 1}, {2, 2, 2}})
  local tape = ag.Tape()
  local y = tape:record(function() return ((x + b) * s):sum() end)
  tape:backward(y)
  lu.assertEquals(b.grad.shape, {3})
  H.assert_close(b.grad, {4, 4, 4}, 1e-12)
  lu.assertEquals(s.grad.shape, {})
  H.assert_close(s.grad:item(), (3 + 6) + 2 * (1 + 2 + 3), 1e-12)
end

function TestTape:test_tensor_operands_on_either_side()
  local w = ag.param(f64({1, 2}))
  local t = f64({10, 20})
  local tape = ag.Tape()
  local y = tape:record(function() return (t * w + (t - w) / 2 + 1 - w):sum() end)
  lu.assertTrue(y.requires_grad)
  tape:backward(y)
  H.assert_close(w.grad, {10 - 0.5 - 1, 20 - 0.5 - 1}, 1e-12)
end

function TestTape:test_views_carry_gradients_back()
  local w = ag.param(f64({{1, 2, 3}, {4, 5, 6}}))
  local tape = ag.Tape()
  local y = tape:record(function()
    local v = w:view({3, 2}):transpose(1, 2) -- [[1,3,5],[2,4,6]]
    return (v:narrow(2, 2, 2) * 10 + v[1]:narrow(1, 1, 2)):sum()
  end)
  tape:backward(y)
  -- the narrow holds w's elements 3, 5, 4, 6 (x10); v[1]'s first two are elements 1 and 3,
  -- broadcast over two rows (x2)
  H.assert_close(w.grad, {{2, 0, 12}, {10, 10, 10}}, 1e-12)
end

function TestTape:test_leaf_gradients_are_independent_tensors()
  local a, b = ag.param(f64({1, 2})), ag.param(f64({3, 4}))
  local tape = ag.Tape()
  tape:backward(tape:record(function() return (a + b):sum() end))
  a.grad:mul_(5)
  H.assert_close(b.grad, {1, 1}, 0, "a rule gives both inputs one tensor; each .grad is its own copy")
end

function TestTape:test_a_leaf_value_can_be_replaced()
  local w = ag.param(f64({1, 2}))
  w.value = f64({3, 4}):to(nc.device("cpu"))
  lu.assertEquals(w.device.kind, "cpu")
  lu.assertEquals(w.value:tolist(), {3, 4})
  local tape = ag.Tape()
  local y = tape:record(function() return w * 2 end)
  H.assert_error(function() y.value = f64({0, 0}) end, "only a leaf", "mul")
end

function TestTape:test_max_with_a_dim_returns_positions()
  local x = ag.param(f64({{1, 5, 2}, {7, 0, 3}}))
  local tape = ag.Tape()
  local v, i
  local y = tape:record(function()
    v, i = x:max(2)
    return v:sum()
  end)
  lu.assertEquals(i:tolist(), {1, 0})
  tape:backward(y)
  H.assert_close(x.grad, {{0, 1, 0}, {1, 0, 0}}, 0)
end

function TestTape:test_embedding_padding_rows_get_no_gradient()
  local w = ag.param(f64({{1, 1}, {2, 2}, {3, 3}}))
  local tape = ag.Tape()
  local ids = nc.tensor({0, 1, 1, 2}, {dtype = "int64"})
  tape:backward(tape:record(function() return ag.embedding(ids, w, {padding_idx = 1}):sum() end))
  H.assert_close(w.grad, {{1, 1}, {0, 0}, {1, 1}}, 0)
end

function TestTape:test_dropout_masks_scale_and_repeat_with_the_seed()
  local x = ag.param(nc.ones({1000}, {dtype = "float64"}))
  nc.manual_seed(3)
  local a = ag.dropout(x, 0.25).value:tolist()
  nc.manual_seed(3)
  local b = ag.dropout(x, 0.25).value:tolist()
  local kept = 0
  for k = 1, #a do
    lu.assertEquals(a[k], b[k])
    lu.assertTrue(a[k] == 0 or math.abs(a[k] - 1 / 0.75) < 1e-12)
    if a[k] ~= 0 then kept = kept + 1 end
  end
  lu.assertTrue(kept > 680 and kept < 820, "kept " .. kept .. " of 1000 at p = 0.25")
  -- the same Philox stream on the CPU backend
  nc.manual_seed(3)
  local cpu = ag.dropout(ag.tensor(nc.ones({1000}, {dtype = "float64", device = nc.device("cpu")})), 0.25).value:tolist()
  lu.assertEquals(cpu, a)
  lu.assertEquals(ag.dropout(x, 0.25, {training = false}).value:tolist(), x.value:tolist())
  H.assert_close(ag.dropout(x, 1).value:sum():item(), 0, 0)
end

TestFunction = {}

function TestFunction:test_custom_op_with_a_lua_backward()
  local cube = ag.Function{
    forward = function(ctx, x, k)
      ctx.x, ctx.k = x, k
      return x ^ 3 * k
    end,
    backward = function(ctx, g) return g * ctx.x ^ 2 * (3 * ctx.k), nil end,
  }
  local x = ag.param(f64({1, 2}))
  local tape = ag.Tape()
  local y = tape:record(function() return (cube(x, 2) + x):sum() end)
  tape:backward(y)
  H.assert_close(x.grad, {7, 25}, 1e-12)
  lu.assertTrue(ag.gradcheck(function(v) return cube(v, 0.5) end, {ag.param(f64({0.3, -1.2}))}))
end

TestMisuse = {}

function TestMisuse:test_backward_of_a_non_scalar_needs_a_gradient()
  local x = ag.param(f64({1, 2}))
  local tape = ag.Tape()
  local y = tape:record(function() return x * 2 end)
  H.assert_error(function() tape:backward(y) end, "netcl.autograd.backward", "non-scalar", "gradient")
  H.assert_error(function() tape:backward(y, f64({1, 2, 3})) end, "shape")
end

function TestMisuse:test_second_backward_after_the_tape_was_freed()
  local x = ag.param(f64({1, 2}))
  local tape = ag.Tape()
  local y = tape:record(function() return (x * x):sum() end)
  tape:backward(y)
  H.assert_error(function() tape:backward(y) end, "backward called twice", "retain")
  H.assert_error(function() tape:record(function() return (x * x):sum() end) end, "freed by backward")
end

function TestMisuse:test_in_place_change_of_a_saved_input_is_detected()
  local w = ag.param(f64({1, 2}))
  local x = ag.tensor(f64({3, 4}))
  local tape = ag.Tape()
  local y = tape:record(function() return (w * x):sum() end)
  x.value:mul_(2) -- mul saved x for w's gradient
  H.assert_error(function() tape:backward(y) end, "backward of mul", "modified in place")
end

function TestMisuse:test_fill_on_a_saved_output_is_detected()
  local w = ag.param(f64({0.5, 1}))
  local tape = ag.Tape()
  local e
  local y = tape:record(function()
    e = w:exp() -- exp saves its output
    return e:sum()
  end)
  e.value:fill_(0)
  H.assert_error(function() tape:backward(y) end, "backward of exp", "modified in place")
end

function TestMisuse:test_in_place_ops_on_nodes_that_require_grad_while_recording()
  local w = ag.param(f64({1, 2}))
  local tape = ag.Tape()
  H.assert_error(function() tape:record(function() w:mul_(2) end) end, "in-place", "requires grad")
  H.assert_error(function() tape:record(function() (w * 2):add_(1) end) end, "in-place")
  ag.no_grad(function() w:add_(1) end) -- an update step
  w:mul_(2)                              -- no tape: fine
  lu.assertEquals(w.value:tolist(), {4, 6})
end

function TestMisuse:test_backward_of_something_not_recorded()
  local x = ag.param(f64({1}))
  local tape = ag.Tape()
  local y = ag.tensor(f64({1}))
  H.assert_error(function() tape:backward(y) end, "does not require a gradient")
  local other = ag.Tape()
  local z = other:record(function() return x * 2 end)
  H.assert_error(function() tape:backward(z, f64({1})) end, "another tape")
end

TestTraining = {}

-- XOR-like data: four noisy clusters, label = (x > 0) xor (y > 0).
function TestTraining:test_two_layer_mlp_learns_xor()
  nc.manual_seed(1)
  local n = 64
  local pts, labels = {}, {}
  for i = 1, n do
    local cx, cy = (i % 2 == 0) and 1 or -1, (i % 4 < 2) and 1 or -1
    pts[#pts + 1] = {cx + 0.2 * (((i * 37) % 11) / 11 - 0.5), cy + 0.2 * (((i * 53) % 13) / 13 - 0.5)}
    labels[#labels + 1] = {(cx > 0) ~= (cy > 0) and 1 or 0}
  end
  local x, y = nc.tensor(pts), nc.tensor(labels)
  local w1 = ag.param(nc.randn({2, 16}) * 0.7)
  local b1 = ag.param(nc.zeros({16}))
  local w2 = ag.param(nc.randn({16, 1}) * 0.3)
  local b2 = ag.param(nc.zeros({1}))
  local params = {w1, b1, w2, b2}
  local lr, loss = 0.5, math.huge
  for step = 1, 600 do
    local tape = ag.Tape()
    local l = tape:record(function()
      local h = (x:matmul(w1) + b1):tanh()
      return ag.bce_with_logits(h:matmul(w2) + b2, y)
    end)
    tape:backward(l)
    loss = l.value:item()
    if loss < 0.01 then break end
    ag.no_grad(function()
      for _, p in ipairs(params) do
        p.value:sub_(p.grad * lr)
        p.grad = nil
      end
    end)
  end
  lu.assertTrue(loss < 0.01, "loss after training: " .. loss)
end

-- After backward of a long graph, only the parameters and their gradients stay allocated: the
-- tape released every saved tensor and intermediate gradient.
function TestTraining:test_memory_after_backward_of_a_100_op_graph()
  local x = nc.randn({4, 16})
  collectgarbage("collect")
  collectgarbage("collect")
  local base = nc.memory_stats(dev).in_use
  -- sizes on pool size classes (multiples of 256 bytes), so bytes in use are exact
  local w = ag.param(nc.randn({16, 16}) * 0.2) -- 1024 bytes
  local b = ag.param(nc.randn({4, 16}) * 0.1)  -- 256 bytes
  local s = ag.param(nc.ones({64}))            -- 256 bytes
  local param_bytes = 1024 + 256 + 256
  local ops = 0
  do
    local tape = ag.Tape()
    local loss = tape:record(function()
      local h = x
      for _ = 1, 24 do
        h = (h:matmul(w) + b):tanh() * s:view({4, 16}) -- 5 ops
        ops = ops + 5
      end
      ops = ops + 1
      return h:sum()
    end)
    lu.assertTrue(#tape >= 97 and ops >= 97, "the graph has " .. #tape .. " recorded ops")
    tape:backward(loss)
  end
  collectgarbage("collect")
  collectgarbage("collect")
  local in_use = nc.memory_stats(dev).in_use - base
  lu.assertEquals(in_use, 2 * param_bytes, "bytes in use beyond the parameters and their gradients")
  lu.assertEquals(w.grad.shape, {16, 16})
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

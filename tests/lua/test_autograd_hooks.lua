-- tape:backward's on_grad hook: each leaf that gets a gradient is hooked exactly once, with its
-- final gradient (checked against a backward without the hook and against closed-form
-- gradients), in reverse order of first use; errors in the hook become the backward's error and
-- leave the tape usable (retain) or freed as after any failed backward; what a hook may not do.
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local H = require "helpers"

local dev = H.device()
local dtype = dev.fp64 and "float64" or "float32"
local tol = dtype == "float64" and 1e-12 or 1e-5

local function t(data) return nc.tensor(data, {dtype = dtype, device = dev}) end

-- A two-layer network in which w1 is used first and again last (a penalty), and s only at the end.
local function params()
  return {
    w1 = ag.param(t({{0.5, -1, 0.25}, {1.5, 0.5, -0.75}})),
    b1 = ag.param(t({0.1, -0.2, 0.3})),
    w2 = ag.param(t({{1}, {-2}, {0.5}})),
    b2 = ag.param(t({0.05})),
    s = ag.param(t({2})),
    unused = ag.param(t({7})),
  }
end

local x = t({{1, 2}, {-1, 0.5}, {0.25, -3}, {2, 1}})

local function forward(p)
  local h = ag.matmul(ag.tensor(x), p.w1) + p.b1
  local y = ag.matmul(h:tanh(), p.w2) + p.b2
  return (y * y):mean() * p.s + (p.w1 * p.w1):sum() * 0.01
end

local function name_of(p, leaf)
  for k, v in pairs(p) do if v.id == leaf.id then return k end end
  return nil
end

TestGradHooks = {}

function TestGradHooks:test_each_leaf_once_final_gradient_reverse_order()
  local p = params()
  local tape = ag.Tape()
  local loss = tape:record(function() return forward(p) end)
  local seen, order, at_hook = {}, {}, {}
  tape:backward(loss, nil, {on_grad = function(leaf)
    local k = name_of(p, leaf)
    lu.assertNotNil(k, "the hook gets the leaves themselves")
    lu.assertTrue(leaf.is_leaf)
    seen[k] = (seen[k] or 0) + 1
    order[#order + 1] = k
    at_hook[k] = leaf.grad:clone()
  end})
  -- reverse order of first use: s (used last), b2, w2, b1, then w1 (used first, and again last)
  lu.assertEquals(order, {"s", "b2", "w2", "b1", "w1"})
  for k, n in pairs(seen) do lu.assertEquals(n, 1, k .. " hooked once") end
  lu.assertNil(seen.unused, "a leaf without a gradient is not hooked")
  -- the gradient at hook time is the final one, and the one a plain backward gives
  local q = params()
  local tape2 = ag.Tape()
  tape2:backward(tape2:record(function() return forward(q) end))
  for k, g in pairs(at_hook) do
    H.assert_close(g, p[k].grad, 0, k .. ": at hook time vs after backward")
    H.assert_close(g, q[k].grad, tol, k .. ": hooked vs plain backward")
  end
end

function TestGradHooks:test_closed_form_and_accumulation()
  -- loss = sum(a * c) + sum(a * d) + sum(b * a): a used three times; gradients c + d + b and a
  local a, b = ag.param(t({1, 2, 3})), ag.param(t({-1, 0.5, 4}))
  local c, d = t({0.5, 0.25, 2}), t({3, -1, 1})
  local tape = ag.Tape()
  local loss = tape:record(function() return (a * c):sum() + (a * d):sum() + (b * a):sum() end)
  local got = {}
  tape:backward(loss, nil, {on_grad = function(leaf)
    got[#got + 1] = {leaf.id, leaf.grad:clone()}
  end})
  lu.assertEquals(#got, 2)
  lu.assertEquals(got[1][1], b.id, "b's only use is the last op: hooked first")
  lu.assertEquals(got[2][1], a.id)
  H.assert_close(got[1][2], {1, 2, 3}, tol)
  H.assert_close(got[2][2], {0.5 + 3 - 1, 0.25 - 1 + 0.5, 2 + 1 + 4}, tol)
end

function TestGradHooks:test_leaf_output_and_other_forms()
  -- backward of a leaf: its seed is its gradient, hooked once
  local w = ag.param(t({3}))
  local n = 0
  ag.Tape():backward(w, t({2}), {on_grad = function(leaf)
    n = n + 1
    H.assert_close(leaf.grad, {2}, tol)
  end})
  lu.assertEquals(n, 1)
  -- backward(out, opts) without a gradient argument, with retain
  local p = params()
  local tape = ag.Tape()
  local loss = tape:record(function() return forward(p) end)
  local count = 0
  tape:backward(loss, {retain = true, on_grad = function() count = count + 1 end})
  lu.assertEquals(count, 5)
  lu.assertTrue(#tape > 0, "retain keeps the entries")
  tape:backward(loss, {on_grad = function() count = count + 1 end})
  lu.assertEquals(count, 10, "a second pass hooks every leaf again")
end

function TestGradHooks:test_hook_error_is_a_lua_error_and_the_tape_stays_usable()
  local p = params()
  local tape = ag.Tape()
  local loss = tape:record(function() return forward(p) end)
  local calls = 0
  H.assert_error(function()
    tape:backward(loss, nil, {retain = true, on_grad = function(leaf)
      calls = calls + 1
      if calls == 2 then error("boom at " .. name_of(p, leaf)) end
    end})
  end, "netcl.autograd.backward: the on_grad hook failed:", "boom at b2")
  lu.assertEquals(calls, 2, "the pass stopped at the failing hook")
  -- retained: a second backward runs in full and gives the plain gradients
  for _, v in pairs(p) do v:zero_grad() end
  tape:backward(loss)
  local q = params()
  local tape2 = ag.Tape()
  tape2:backward(tape2:record(function() return forward(q) end))
  for _, k in ipairs({"w1", "b1", "w2", "b2", "s"}) do H.assert_close(p[k].grad, q[k].grad, tol, k) end
  -- without retain the failed pass frees the tape like any failed backward; new tapes work
  local tape3 = ag.Tape()
  local l3 = tape3:record(function() return forward(q) end)
  H.assert_error(function() tape3:backward(l3, nil, {on_grad = function() error({code = 1}) end}) end,
    "the on_grad hook failed: table")
  H.assert_error(function() tape3:backward(l3) end, "backward called twice")
  local tape4 = ag.Tape()
  tape4:backward(tape4:record(function() return forward(q) end))
end

function TestGradHooks:test_what_a_hook_may_not_do()
  local p = params()
  local tape = ag.Tape()
  local loss = tape:record(function() return forward(p) end)
  local errs = {}
  tape:backward(loss, nil, {retain = true, on_grad = function(leaf)
    if #errs > 0 then return end
    errs[1] = select(2, pcall(tape.backward, tape, loss))
    errs[2] = select(2, pcall(tape.record, tape, function() return leaf * 2 end))
    errs[3] = select(2, pcall(tape.free, tape))
    -- plain ops (no tape) are fine
    errs[4] = leaf.grad * 2
  end})
  lu.assertStrContains(tostring(errs[1]), "from inside a gradient hook")
  lu.assertStrContains(tostring(errs[2]), "while its backward pass runs")
  lu.assertStrContains(tostring(errs[3]), "backward pass is running")
  lu.assertTrue(nc.is_tensor(errs[4]))
  -- the tape survived all that
  for _, v in pairs(p) do v:zero_grad() end
  tape:backward(loss)
  lu.assertNotNil(p.w1.grad)
  H.assert_error(function() ag.Tape():backward(p.s, t({1}), {on_grad = 3}) end, "on_grad must be a function")
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

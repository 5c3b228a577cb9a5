-- netcl.optim: ten steps of every optimizer and variant against the
-- update formulas as PyTorch's documentation states them, computed here in plain Lua; backends
-- against each other; schedulers against their closed forms; clip_grad_norm against a hand
-- computation; state_dict round trips; bad input. With python3-torch installed, trajectories
-- are also compared with torch.optim.
local lu = require "luaunit"
local nc = require "netcl"
local optim = require "netcl.optim"
local U = require "op_testutil"
local H = require "helpers"

local dev = U.device
local DTYPES = dev.fp64 and {"float64", "float32"} or {"float32"}
-- float64: rounding only; float32: ten steps of single-precision rounding against the exact
-- (double) reference, relative above 1 and absolute below.
local TOL = {float64 = 1e-12, float32 = 2e-5}

-- ---- fixed problem: two parameters of different shapes, a third that never has a gradient ----

local P0 = {
  {0.5, -1.25, 2.0, 0.0, -0.3, 1.7, -2.2},
  {{0.9, -0.4, 0.05}, {-1.5, 3.0, 0.25}},
  {1.0, 2.0},
}

local flat = H.flat

-- Gradient of parameter j at step k (1-based), element i of its flat order: varied signs and
-- magnitudes, different every step.
local function grad_value(j, k, i) return math.sin(1.3 * i + 0.7 * k + j) * (1 + 0.25 * i) + 0.05 * (k % 3 - 1) end

local function shaped(values, like)
  if type(like[1]) ~= "table" then return values end
  local out, at = {}, 0
  for r, row in ipairs(like) do
    out[r] = {}
    for c = 1, #row do
      at = at + 1
      out[r][c] = values[at]
    end
  end
  return out
end

local function grad_table(j, k)
  local n = #flat(P0[j])
  local g = {}
  for i = 1, n do g[i] = grad_value(j, k, i) end
  return shaped(g, P0[j])
end

local function make_params(dtype, device)
  local ps = {}
  for j = 1, 3 do ps[j] = {value = nc.tensor(P0[j], {dtype = dtype, device = device})} end
  return ps
end

local function set_grads(ps, k, dtype, device)
  for j = 1, 2 do ps[j].grad = nc.tensor(grad_table(j, k), {dtype = dtype, device = device}) end
  ps[3].grad = nil
end

-- ---- references: the formulas of torch.optim's documentation, on flat Lua arrays ----------

local function ref_run(steps, update)
  local ps, state = {}, {{}, {}}
  for j = 1, 2 do ps[j] = flat(P0[j]) end
  for k = 1, steps do
    for j = 1, 2 do
      local g = flat(grad_table(j, k))
      for i = 1, #ps[j] do
        state[j][i] = state[j][i] or {}
        ps[j][i] = update(ps[j][i], g[i], state[j][i], k)
      end
    end
  end
  return ps
end

local function ref_sgd(o)
  local lr, mom, damp, wd = o.lr, o.momentum or 0, o.dampening or 0, o.weight_decay or 0
  return function(p, g, s, k)
    if wd ~= 0 then g = g + wd * p end
    if mom ~= 0 then
      if k == 1 then s.b = g else s.b = mom * s.b + (1 - damp) * g end
      if o.nesterov then g = g + mom * s.b else g = s.b end
    end
    return p - lr * g
  end
end

local function ref_rmsprop(o)
  local lr, alpha, eps, wd, mom = o.lr, o.alpha or 0.99, o.eps or 1e-8, o.weight_decay or 0, o.momentum or 0
  return function(p, g, s)
    if wd ~= 0 then g = g + wd * p end
    s.v = alpha * (s.v or 0) + (1 - alpha) * g * g
    local avg
    if o.centered then
      s.ga = alpha * (s.ga or 0) + (1 - alpha) * g
      avg = math.sqrt(s.v - s.ga * s.ga) + eps
    else
      avg = math.sqrt(s.v) + eps
    end
    if mom > 0 then
      s.b = mom * (s.b or 0) + g / avg
      return p - lr * s.b
    end
    return p - lr * g / avg
  end
end

local function ref_adam(o, decoupled)
  local lr, eps = o.lr, o.eps or 1e-8
  local b1, b2 = (o.betas or {0.9, 0.999})[1], (o.betas or {0.9, 0.999})[2]
  local wd = o.weight_decay or (decoupled and 0.01 or 0)
  return function(p, g, s, k)
    if decoupled then p = p * (1 - lr * wd) elseif wd ~= 0 then g = g + wd * p end
    s.m = b1 * (s.m or 0) + (1 - b1) * g
    s.v = b2 * (s.v or 0) + (1 - b2) * g * g
    local v = s.v
    if o.amsgrad then
      s.vmax = math.max(s.vmax or 0, s.v)
      v = s.vmax
    end
    local mhat, vhat = s.m / (1 - b1 ^ k), v / (1 - b2 ^ k)
    return p - lr * mhat / (math.sqrt(vhat) + eps)
  end
end

local CASES = {
  {"SGD", {lr = 0.1}, ref_sgd},
  {"SGD", {lr = 0.1, momentum = 0.9}, ref_sgd},
  {"SGD", {lr = 0.05, momentum = 0.9, dampening = 0.3}, ref_sgd},
  {"SGD", {lr = 0.1, momentum = 0.8, nesterov = true}, ref_sgd},
  {"SGD", {lr = 0.1, weight_decay = 0.05}, ref_sgd},
  {"SGD", {lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 0.01}, ref_sgd},
  {"RMSprop", {lr = 0.01}, ref_rmsprop},
  {"RMSprop", {lr = 0.01, alpha = 0.9, eps = 1e-6, momentum = 0.5}, ref_rmsprop},
  {"RMSprop", {lr = 0.01, centered = true}, ref_rmsprop},
  {"RMSprop", {lr = 0.02, centered = true, momentum = 0.7, weight_decay = 0.1}, ref_rmsprop},
  {"Adam", {lr = 0.05}, ref_adam},
  {"Adam", {lr = 0.05, weight_decay = 0.1}, ref_adam},
  {"Adam", {lr = 0.05, betas = {0.8, 0.99}, eps = 1e-6}, ref_adam},
  {"Adam", {lr = 0.05, amsgrad = true}, ref_adam},
  {"AdamW", {lr = 0.05}, ref_adam},
  {"AdamW", {lr = 0.05, weight_decay = 0.2, amsgrad = true, betas = {0.5, 0.9}}, ref_adam},
}

local function describe(name, o)
  local keys = {}
  for k in pairs(o) do keys[#keys + 1] = k end
  table.sort(keys)
  local kv = {}
  for _, k in ipairs(keys) do
    local v = o[k]
    kv[#kv + 1] = k .. "=" .. (type(v) == "table" and "{" .. table.concat(v, ",") .. "}" or tostring(v))
  end
  return name .. "{" .. table.concat(kv, " ") .. "}"
end

local function run(name, o, steps, dtype, device)
  local ps = make_params(dtype, device)
  local opt = optim[name](ps, o)
  for k = 1, steps do
    set_grads(ps, k, dtype, device)
    opt:step()
  end
  return ps, opt
end

-- ---- the update rules ----------------------------------------------------------------------------------

TestRules = {}

function TestRules:test_ten_steps_match_the_formulas()
  for _, dtype in ipairs(DTYPES) do
    for _, c in ipairs(CASES) do
      local name, o, ref = c[1], c[2], c[3]
      local what = describe(name, o) .. " " .. dtype
      local ps = run(name, o, 10, dtype, dev)
      local want = ref_run(10, ref(o, name == "AdamW"))
      for j = 1, 2 do
        lu.assertEquals(ps[j].value.dtype, dtype, what)
        local got = flat(ps[j].value:tolist())
        for i = 1, #got do
          local d = math.abs(got[i] - want[j][i]) / math.max(1, math.abs(want[j][i]))
          if not (d <= TOL[dtype]) then
            lu.fail(string.format("%s: param %d element %d: got %.17g, expected %.17g", what, j, i, got[i], want[j][i]))
          end
        end
        -- the trajectory moved: a rule that did nothing could not pass by accident
        lu.assertTrue(math.abs(got[1] - flat(P0[j])[1]) > 1e-3, what .. ": parameter did not move")
      end
      U.assert_values(ps[3].value, P0[3], 0) -- no gradient: untouched
    end
  end
end

function TestRules:test_a_parameter_without_gradient_keeps_no_state_and_skipping_does_not_count_steps()
  local ps = make_params("float32", dev)
  local opt = optim.Adam(ps, {lr = 0.1})
  set_grads(ps, 1, "float32", dev)
  opt:step()
  ps[1].grad = nil -- parameter 1 skips step 2
  opt:step()
  local sd = opt:state_dict()
  lu.assertEquals(sd.state[1].step, 1)
  lu.assertEquals(sd.state[2].step, 2)
  lu.assertNil(sd.state[3])
end

function TestRules:test_updates_are_in_place()
  -- A view taken before the step shares the parameter's storage, so it sees the update.
  local ps = make_params("float32", dev)
  local view = ps[2].value:view({6})
  local opt = optim.AdamW(ps, {lr = 0.1, amsgrad = true})
  set_grads(ps, 1, "float32", dev)
  opt:step()
  U.assert_values(view, flat(ps[2].value:tolist()), 0)
  lu.assertNotEquals(view:tolist()[1], P0[2][1][1])
end

function TestRules:test_strided_and_aliased_gradients()
  -- A transposed gradient, and a gradient that is the parameter itself (same storage): the
  -- update reads the values before writing.
  local dtype = "float32"
  local p = {value = nc.tensor({{1, 2, 3}, {4, 5, 6}}, {dtype = dtype})}
  p.grad = nc.tensor({{1, 4}, {2, 5}, {3, 6}}, {dtype = dtype}):transpose(1, 2)
  lu.assertFalse(p.grad:is_contiguous())
  optim.SGD({p}, {lr = 0.5}):step()
  U.assert_values(p.value, {{0.5, 1, 1.5}, {2, 2.5, 3}}, 0)
  p.grad = p.value
  optim.SGD({p}, {lr = 0.5}):step()
  U.assert_values(p.value, {{0.25, 0.5, 0.75}, {1, 1.25, 1.5}}, 0)
end

function TestRules:test_large_parameter_matches_the_formula()
  -- Big enough for several threads / work-groups: every element follows its own trajectory.
  local n = 100003
  local p = {value = nc.arange(n, {dtype = "float32"}) / n - 0.5}
  local opt = optim.Adam({p}, {lr = 0.01, weight_decay = 0.1})
  local p0 = p.value:tolist()
  for k = 1, 3 do
    p.grad = (p.value * 2 + k):contiguous()
    opt:step()
  end
  local got = p.value:tolist()
  for _, i in ipairs({1, 2, 777, 50000, 65536, 65537, n}) do
    local x, m, v = p0[i], 0, 0
    for k = 1, 3 do
      local g = 2 * x + k + 0.1 * x
      m = 0.9 * m + 0.1 * g
      v = 0.999 * v + 0.001 * g * g
      x = x - 0.01 * (m / (1 - 0.9 ^ k)) / (math.sqrt(v / (1 - 0.999 ^ k)) + 1e-8)
    end
    lu.assertTrue(math.abs(got[i] - x) <= 2e-5, string.format("element %d: %.9g vs %.9g", i, got[i], x))
  end
end

-- ---- backends agree -------------------------------------------------------------------------------------------

TestBackends = {}

function TestBackends:test_every_device_gives_the_cpu_trajectory()
  local cpu = nc.device("cpu")
  local others = {}
  for _, d in ipairs(nc.devices()) do
    if d.spec ~= "cpu" then others[#others + 1] = d end
  end
  if #others == 0 then
    print("  (only the CPU backend here: nothing to compare)")
    return
  end
  for _, other in ipairs(others) do
    local dtypes = other.fp64 and {"float32", "float64"} or {"float32"}
    for _, dtype in ipairs(dtypes) do
      for _, c in ipairs(CASES) do
        local what = describe(c[1], c[2]) .. " " .. dtype .. " on " .. other.spec
        local a, oa = run(c[1], c[2], 10, dtype, cpu)
        local b, ob = run(c[1], c[2], 10, dtype, other)
        for j = 1, 2 do U.assert_values(b[j].value, a[j].value:tolist(), dtype == "float32" and 1e-6 or 1e-13) end
        local sa, sb = oa:state_dict().state, ob:state_dict().state
        for idx, st in pairs(sa) do
          for k, v in pairs(st) do
            if type(v) == "number" then lu.assertEquals(sb[idx][k], v, what .. " " .. k)
            else U.assert_values(sb[idx][k], v:tolist(), dtype == "float32" and 1e-6 or 1e-13) end
          end
        end
      end
    end
  end
end

-- ---- schedulers -------------------------------------------------------------------------------------------------

TestSchedulers = {}

local function one_param() return {{value = nc.tensor({1.0})}} end

local function assert_lrs(opt, sched, steps, f, what)
  for t = 0, steps do
    if t > 0 then sched:step() end
    local want = f(t)
    lu.assertTrue(math.abs(opt.lr - want) <= 1e-15, string.format("%s at t=%d: lr %.17g, expected %.17g", what, t,
      opt.lr, want))
    lu.assertEquals(sched:get_last_lr()[1], opt.lr)
  end
end

function TestSchedulers:test_cosine_annealing_closed_form()
  local opt = optim.SGD(one_param(), {lr = 0.1})
  local s = optim.CosineAnnealingLR(opt, {T_max = 10, eta_min = 0.001})
  assert_lrs(opt, s, 25, function(t) return 0.001 + (0.1 - 0.001) * (1 + math.cos(math.pi * t / 10)) / 2 end, "cosine")
  -- fixed points
  local o2 = optim.SGD(one_param(), {lr = 1})
  local s2 = optim.CosineAnnealingLR(o2, {T_max = 4})
  local want = {1, 0.85355339059327373, 0.5, 0.14644660940672624, 0}
  for t = 0, 4 do
    if t > 0 then s2:step() end
    lu.assertAlmostEquals(o2.lr, want[t + 1], 1e-15)
  end
end

function TestSchedulers:test_warmup_cosine()
  local opt = optim.AdamW(one_param(), {lr = 0.1})
  local s = optim.WarmupCosine(opt, {warmup = 3, total = 10, min_lr = 0.01})
  -- by hand: warm-up 0.1 * {1,2,3}/4, then the cosine from 0.1 at t=3 to 0.01 at t=10, then flat
  local want = {0.025, 0.05, 0.075, 0.1}
  for t = 4, 9 do want[t + 1] = 0.01 + 0.09 * (1 + math.cos(math.pi * (t - 3) / 7)) / 2 end
  for t = 10, 14 do want[t + 1] = 0.01 end
  assert_lrs(opt, s, 14, function(t) return want[t + 1] end, "warmup-cosine")
  lu.assertAlmostEquals(want[7], 0.01 + 0.09 * (1 + math.cos(3 * math.pi / 7)) / 2, 0) -- t=6
  -- no warm-up: a plain cosine to min_lr
  local o2 = optim.SGD(one_param(), {lr = 2})
  local s2 = optim.WarmupCosine(o2, {warmup = 0, total = 2})
  assert_lrs(o2, s2, 3, function(t) return ({2, 1, 0, 0})[t + 1] end, "no warm-up")
end

function TestSchedulers:test_schedulers_drive_every_group()
  local a, b = one_param(), one_param()
  local opt = optim.SGD({{params = a}, {params = b, lr = 1}}, {lr = 0.5})
  local s = optim.CosineAnnealingLR(opt, {T_max = 2})
  s:step()
  lu.assertAlmostEquals(opt.param_groups[1].lr, 0.25, 1e-15)
  lu.assertAlmostEquals(opt.param_groups[2].lr, 0.5, 1e-15)
  lu.assertEquals(s:get_last_lr(), {opt.param_groups[1].lr, opt.param_groups[2].lr})
  local sd = s:state_dict()
  lu.assertEquals(sd, {last_epoch = 1, base_lrs = {0.5, 1}})
  local s2 = optim.CosineAnnealingLR(optim.SGD({{params = one_param()}, {params = one_param()}}, {lr = 9}), {T_max = 2})
  s2:load_state_dict(sd)
  s2:step()
  lu.assertAlmostEquals(s2.optimizer.param_groups[1].lr, 0, 1e-15)
  lu.assertAlmostEquals(s2.optimizer.param_groups[2].lr, 0, 1e-15)
end

function TestSchedulers:test_reduce_on_plateau_min_rel()
  local opt = optim.SGD(one_param(), {lr = 1})
  local s = optim.ReduceLROnPlateau(opt, {factor = 0.5, patience = 2, threshold = 0.1, cooldown = 1, min_lr = 0.2})
  -- worked by hand from PyTorch's algorithm (see docs/optim.md)
  local metrics = {10, 9.5, 8, 8, 7.5, 7.3, 9, 9, 9, 9, 1, 2, 2, 2, 2, 2, 2, 2}
  local lrs = {1, 1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25, 0.2, 0.2, 0.2, 0.2, 0.2}
  for i, m in ipairs(metrics) do
    s:step(m)
    lu.assertEquals(opt.lr, lrs[i], "after metric " .. i)
  end
  lu.assertEquals(s.best, 1)
end

function TestSchedulers:test_reduce_on_plateau_max_abs_and_tensor_metrics()
  local opt = optim.SGD(one_param(), {lr = 1})
  local s = optim.ReduceLROnPlateau(opt, {mode = "max", threshold_mode = "abs", threshold = 1, patience = 0})
  local metrics = {5, 5.5, 7, 7.5}
  local lrs = {1, 0.1, 0.1, 0.01}
  for i, m in ipairs(metrics) do
    s:step(nc.tensor({m}, {dtype = "float64"}))
    lu.assertAlmostEquals(opt.lr, lrs[i], 1e-15)
  end
  local sd = s:state_dict()
  lu.assertEquals(sd, {last_epoch = 4, num_bad_epochs = 0, cooldown_counter = 0, best = 7})
  local s2 = optim.ReduceLROnPlateau(optim.SGD(one_param(), {lr = 1}), {mode = "max"})
  lu.assertNil(s2:state_dict().best, "an infinite best is left out (JSON has no infinity)")
  s2:load_state_dict(sd)
  lu.assertEquals(s2.best, 7)
end

-- ---- clip_grad_norm ----------------------------------------------------------------------------------------------

TestClip = {}

function TestClip:test_against_a_hand_computation()
  for _, dtype in ipairs(DTYPES) do
    local tol = dtype == "float64" and 1e-12 or 1e-6
    local function mk(v, g) return {value = nc.tensor(v, {dtype = dtype}), grad = g and nc.tensor(g, {dtype = dtype})} end
    -- |(3, 4)|^2 + |12|^2 + 0 = 169: total 13
    local ps = {mk({0, 0}, {3, 4}), mk({1}, {12}), mk({5}), mk({{0}}, {{0}})}
    local total = optim.clip_grad_norm(ps, 6.5)
    lu.assertAlmostEquals(total, 13, tol)
    local c = 6.5 / (13 + 1e-6)
    U.assert_values(ps[1].grad, {3 * c, 4 * c}, tol)
    U.assert_values(ps[2].grad, {12 * c}, tol)
    lu.assertNil(ps[3].grad)
    -- under the limit: returned, nothing scaled
    local qs = {mk({0, 0}, {3, 4})}
    lu.assertAlmostEquals(optim.clip_grad_norm(qs, 100), 5, tol)
    U.assert_values(qs[1].grad, {3, 4}, 0)
    -- max_norm = inf measures only
    lu.assertAlmostEquals(optim.clip_grad_norm(qs, math.huge), 5, tol)
  end
end

function TestClip:test_large_strided_and_empty_gradients()
  -- arange(n): sum of i^2 for i < n = (n-1) n (2n-1) / 6, exact in float64 here
  local n = 100001
  local g1 = nc.arange(n, {dtype = "float32"})
  local g2 = nc.tensor({{1, 2}, {3, 4}, {5, 6}}):transpose(1, 2) -- strided: 91
  local ps = {{value = nc.zeros({n}), grad = g1}, {value = nc.zeros({2, 3}), grad = g2},
              {value = nc.zeros({0}), grad = nc.zeros({0})}, {value = nc.zeros({3}), grad = nc.full({3}, 2)}}
  local sumsq = (n - 1) * n * (2 * n - 1) / 6 + 91 + 12
  local total = optim.clip_grad_norm(ps, 1)
  -- float64 partial sums are exact here; a device without float64 sums in float32
  local tol = dev.fp64 and 1e-12 or 1e-5
  lu.assertTrue(math.abs(total - math.sqrt(sumsq)) <= tol * math.sqrt(sumsq), string.format("%.17g vs %.17g", total,
    math.sqrt(sumsq)))
  local c = 1 / (math.sqrt(sumsq) + 1e-6)
  U.assert_values(g2, {{c, 3 * c, 5 * c}, {2 * c, 4 * c, 6 * c}}, 1e-6)
  U.assert_values(ps[4].grad, {2 * c, 2 * c, 2 * c}, 1e-6)
  U.assert_values(g1:narrow(1, n - 1, 2), {(n - 2) * c, (n - 1) * c}, 1e-6)
  -- after clipping, the norm is max_norm (up to the 1e-6 guard)
  lu.assertAlmostEquals(optim.clip_grad_norm(ps, 1e9), 1, 1e-5)
  -- nothing to clip
  lu.assertEquals(optim.clip_grad_norm({{value = nc.zeros({2})}}, 1), 0)
end

function TestClip:test_nonfinite_spreads_as_in_pytorch()
  local p = {value = nc.zeros({2}), grad = nc.tensor({math.huge, 1})}
  lu.assertEquals(optim.clip_grad_norm({p}, 1), math.huge)
  local g = p.grad:tolist()
  lu.assertTrue(g[1] ~= g[1] and g[2] == 0, "inf * 0 = nan, 1 * 0 = 0")
end

-- ---- state ------------------------------------------------------------------------------------------------------------

TestState = {}

-- The tensors of a state_dict out into a flat name -> Tensor map (as netcl.io stores them) and
-- the rest, which must be plain JSON: strings, finite numbers, booleans and tables.
local function split(v, path, tensors)
  if type(v) == "userdata" then
    tensors[path] = v
    return {["$tensor"] = path}
  end
  if type(v) == "number" then lu.assertTrue(v == v and math.abs(v) ~= math.huge, path .. " is not finite") end
  lu.assertTrue(type(v) ~= "function", path .. " is a function")
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do
    lu.assertTrue(type(k) == "string" or math.type(k) == "integer", path .. ": key " .. tostring(k))
    out[k] = split(x, path .. "." .. tostring(k), tensors)
  end
  return out
end

local function join(v, tensors)
  if type(v) ~= "table" then return v end
  if v["$tensor"] then return tensors[v["$tensor"]] end
  local out = {}
  for k, x in pairs(v) do out[k] = join(x, tensors) end
  return out
end

local function trajectory(ps, opt, from, count, dtype)
  local out = {}
  for k = from, from + count - 1 do
    set_grads(ps, k, dtype, dev)
    opt:step()
    out[#out + 1] = {ps[1].value:tolist(), ps[2].value:tolist()}
  end
  return out
end

function TestState:test_round_trip_resumes_exactly()
  local dtype = DTYPES[1]
  for _, c in ipairs({{"SGD", {lr = 0.1, momentum = 0.9, nesterov = true}},
                      {"RMSprop", {lr = 0.01, centered = true, momentum = 0.3}},
                      {"Adam", {lr = 0.05, amsgrad = true}}, {"AdamW", {lr = 0.05}}}) do
    local ps = make_params(dtype, dev)
    local opt = optim[c[1]](ps, c[2])
    trajectory(ps, opt, 1, 3, dtype)
    local sd = opt:state_dict()
    local saved = {ps[1].value:clone(), ps[2].value:clone()}
    local first = trajectory(ps, opt, 4, 5, dtype)

    -- through a flat tensor map and a JSON-able table, into a fresh optimizer
    local tensors = {}
    local tree = split(sd, "optim", tensors)
    lu.assertTrue(next(tensors) ~= nil)
    ps[1].value:copy_(saved[1])
    ps[2].value:copy_(saved[2])
    local fresh = optim[c[1]](ps, {lr = 123})
    fresh:load_state_dict(join(tree, tensors))
    lu.assertEquals(fresh.lr, c[2].lr)
    local again = trajectory(ps, fresh, 4, 5, dtype)
    lu.assertEquals(again, first, c[1] .. ": the resumed steps differ")

    -- the state_dict was a snapshot: the same optimizer reloads it and repeats the steps
    ps[1].value:copy_(saved[1])
    ps[2].value:copy_(saved[2])
    opt:load_state_dict(sd)
    lu.assertEquals(trajectory(ps, opt, 4, 5, dtype), first, c[1] .. ": reloading into the same optimizer")
  end
end

function TestState:test_resume_from_a_checkpoint_file()
  -- Through netcl.io: tensors as safetensors entries, the rest as JSON metadata, read back on the
  -- device under test.
  local nio = require "netcl.io"
  local dtype = DTYPES[1]
  local ps = make_params(dtype, dev)
  local model = {
    state_dict = function() return {a = ps[1].value, b = ps[2].value} end,
    load_state_dict = function(_, sd)
      ps[1].value:copy_(sd.a)
      ps[2].value:copy_(sd.b)
    end,
  }
  local opt = optim.AdamW(ps, {lr = 0.05, amsgrad = true})
  local sched = optim.CosineAnnealingLR(opt, {T_max = 20})
  for k = 1, 3 do
    set_grads(ps, k, dtype, dev)
    opt:step()
    sched:step()
  end
  local stem = os.tmpname() -- creates the file stem; the checkpoint goes beside it
  local path = stem .. ".netcl"
  nio.save_model(model, path, {optimizer = opt, extra = {scheduler = sched:state_dict()}})
  local first = {}
  for k = 4, 8 do
    set_grads(ps, k, dtype, dev)
    opt:step()
    sched:step()
    first[#first + 1] = {ps[1].value:tolist(), ps[2].value:tolist(), opt.lr}
  end

  local ps2 = make_params(dtype, dev)
  ps = ps2
  local opt2 = optim.AdamW(ps2, {lr = 1})
  local sched2 = optim.CosineAnnealingLR(opt2, {T_max = 20})
  local extra = nio.load_model(model, path, {optimizer = opt2})
  sched2:load_state_dict(extra.scheduler)
  local again = {}
  for k = 4, 8 do
    set_grads(ps2, k, dtype, dev)
    opt2:step()
    sched2:step()
    again[#again + 1] = {ps2[1].value:tolist(), ps2[2].value:tolist(), opt2.lr}
  end
  os.remove(path)
  os.remove(stem)
  lu.assertEquals(again, first)
end

function TestState:test_layout()
  local ps = make_params("float32", dev)
  local opt = optim.Adam(ps, {lr = 0.01, amsgrad = true})
  set_grads(ps, 1, "float32", dev)
  opt:step()
  local sd = opt:state_dict()
  lu.assertEquals(sd.optimizer, "Adam")
  lu.assertEquals(sd.param_groups, {{lr = 0.01, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, amsgrad = true,
                                     params = {1, 2, 3}}})
  lu.assertEquals(sd.state[1].step, 1)
  U.assert_shape(sd.state[2].exp_avg, {2, 3})
  U.assert_shape(sd.state[2].max_exp_avg_sq, {2, 3})
  lu.assertNil(sd.state[3])
  -- SGD keeps no step count, and no buffer without momentum
  local s = optim.SGD(ps, {lr = 0.1})
  s:step()
  lu.assertEquals(s:state_dict().state[1], {})
end

function TestState:test_loads_onto_the_parameters_device_and_dtype()
  local ps = make_params("float32", dev)
  local opt = optim.Adam(ps, {lr = 0.01})
  set_grads(ps, 1, "float32", dev)
  opt:step()
  local sd = opt:state_dict()
  sd.state[1].exp_avg = sd.state[1].exp_avg:to("cpu")
  if dev.fp64 then sd.state[2].exp_avg_sq = sd.state[2].exp_avg_sq:to("float64") end
  opt:load_state_dict(sd)
  local back = opt:state_dict()
  lu.assertEquals(back.state[1].exp_avg.device.spec, dev.spec)
  lu.assertEquals(back.state[2].exp_avg_sq.dtype, "float32")
end

-- ---- groups, lr, zero_grad ---------------------------------------------------------------------------------------

TestApi = {}

function TestApi:test_lr_property_and_groups()
  local a, b = one_param(), one_param()
  local opt = optim.SGD({{params = a, momentum = 0.9}, {params = b}}, {lr = 0.1})
  lu.assertEquals(opt.lr, 0.1)
  lu.assertEquals(opt.param_groups[1].momentum, 0.9)
  lu.assertEquals(opt.param_groups[2].momentum, 0)
  opt.lr = 0.01
  lu.assertEquals(opt.param_groups[2].lr, 0.01)
  a[1].grad, b[1].grad = nc.tensor({1.0}), nc.tensor({1.0})
  opt:step()
  opt:step()
  -- group 1: momentum (buffer 1, then 1.9); group 2: plain
  U.assert_values(a[1].value, {1 - 0.01 - 0.019}, 1e-6)
  U.assert_values(b[1].value, {1 - 0.02}, 1e-6)
  lu.assertStrContains(tostring(opt), "SGD(")
end

function TestApi:test_zero_grad()
  local ps = make_params("float32", dev)
  local opt = optim.SGD(ps, {lr = 0.1})
  set_grads(ps, 1, "float32", dev)
  local g = ps[1].grad
  opt:zero_grad({set_to_none = false})
  lu.assertTrue(rawequal(g, ps[1].grad))
  U.assert_values(g, {0, 0, 0, 0, 0, 0, 0}, 0)
  opt:zero_grad()
  lu.assertNil(ps[1].grad)
  lu.assertNil(ps[2].grad)
end

function TestApi:test_step_closure()
  local ps = one_param()
  local opt = optim.SGD(ps, {lr = 0.5})
  local loss = opt:step(function()
    ps[1].grad = nc.tensor({2.0})
    return 42
  end)
  lu.assertEquals(loss, 42)
  U.assert_values(ps[1].value, {0}, 0)
end

function TestApi:test_autograd_parameters()
  local ag = require "netcl.autograd"
  -- minimize sum((w - target)^2) with real Nodes and tape gradients
  local target = nc.tensor({1, -2, 3}, {dtype = "float32"})
  local w = ag.param(nc.zeros({3}))
  local opt = optim.Adam({w}, {lr = 0.1})
  for _ = 1, 300 do
    opt:zero_grad()
    local tape = ag.Tape()
    local loss = tape:record(function() return ((w - target) * (w - target)):sum() end)
    tape:backward(loss)
    opt:step()
  end
  U.assert_values(w.value, {1, -2, 3}, 1e-2)
  -- the same first step as the formula
  local v = ag.param(nc.tensor({0.5}))
  local o2 = optim.SGD({v}, {lr = 0.1, momentum = 0.9})
  v.grad = nc.tensor({2.0})
  o2:step()
  U.assert_values(v.value, {0.3}, 1e-7)
  -- after moving a parameter (a new value on another dtype), reloading the state moves it too
  if dev.fp64 then
    local sd = o2:state_dict()
    v.value = v.value:to("float64")
    v.grad = nc.tensor({2.0}, {dtype = "float64"})
    lu.assertStrContains(U.error_of(function() o2:step() end), "momentum_buffer is float32 but the parameter is float64")
    o2:load_state_dict(sd)
    o2:step()
    U.assert_values(v.value, {0.3 - 0.1 * (0.9 * 2 + 2)}, 1e-7)
  end
end

-- ---- bad input ---------------------------------------------------------------------------------------------------------

TestErrors = {}

function TestErrors:test_options()
  local ps = one_param()
  U.assert_error("netcl.optim.SGD: option 'lr' is required", function() return optim.SGD(ps) end)
  U.assert_error("netcl.optim.Adam: option 'lr' is required", function() return optim.Adam(ps, {eps = 1e-3}) end)
  U.assert_error("netcl.optim.SGD: invalid learning rate: -0.1", function() return optim.SGD(ps, {lr = -0.1}) end)
  lu.assertStrContains(U.error_of(function() return optim.RMSprop(ps, {lr = 0 / 0}) end),
    "netcl.optim.RMSprop: invalid learning rate: ") -- nan prints as nan or -nan
  U.assert_error("netcl.optim.SGD: unknown option 'momentun'", function() return optim.SGD(ps, {lr = 1, momentun = 0.9}) end)
  U.assert_error("option 'momentum' must be a number, got string", function() return optim.SGD(ps, {lr = 1, momentum = "x"}) end)
  U.assert_error("nesterov momentum requires momentum > 0 and zero dampening",
    function() return optim.SGD(ps, {lr = 1, nesterov = true}) end)
  U.assert_error("invalid momentum: -1", function() return optim.SGD(ps, {lr = 1, momentum = -1}) end)
  U.assert_error("invalid beta parameter at index 2: 1", function() return optim.Adam(ps, {lr = 1, betas = {0.9, 1}}) end)
  U.assert_error("betas must be a table of two numbers", function() return optim.AdamW(ps, {lr = 1, betas = {0.9}}) end)
  U.assert_error("invalid eps: -1", function() return optim.RMSprop(ps, {lr = 1, eps = -1}) end)
  local opt = optim.SGD(ps, {lr = 1})
  U.assert_error("netcl.optim.SGD: invalid learning rate: -1", function() opt.lr = -1 end)
  U.assert_error("invalid learning rate: x", function() opt.lr = "x" end)
  lu.assertEquals(opt.lr, 1)
end

function TestErrors:test_parameters()
  U.assert_error("netcl.optim.SGD: got an empty parameter list", function() return optim.SGD({}, {lr = 1}) end)
  U.assert_error("parameter 2 is not a parameter", function() return optim.SGD({one_param()[1], 5}, {lr = 1}) end)
  U.assert_error("parameter 1 is not a parameter", function() return optim.SGD({nc.zeros({2})}, {lr = 1}) end)
  local p = one_param()[1]
  U.assert_error("parameter 2 appears more than once", function() return optim.SGD({p, p}, {lr = 1}) end)
  U.assert_error("parameter 1 is int64; parameters must be float32, float64, bfloat16 or float16",
    function() return optim.Adam({{value = nc.zeros({2}, {dtype = "int64"})}}, {lr = 1}) end)
end

function TestErrors:test_gradients()
  local p = {value = nc.zeros({3})}
  local opt = optim.Adam({one_param()[1], p}, {lr = 1})
  p.grad = nc.zeros({2})
  U.assert_error("netcl.optim.Adam:step: parameter 2: adam: grad has shape [2] but the parameter has shape [3]",
    function() opt:step() end)
  if dev.fp64 then
    p.grad = nc.zeros({3}, {dtype = "float64"})
    U.assert_error("adam: grad is float64 but the parameter is float32", function() opt:step() end)
  end
  -- a failed update does not count a step
  lu.assertEquals(opt:state_dict().state[2].step, 0)
  U.assert_error("netcl.optim.clip_grad_norm: max_norm must be >= 0, got -1",
    function() return optim.clip_grad_norm({p}, -1) end)
  U.assert_error("netcl.optim.clip_grad_norm: the gradient of parameter 2 is int64; gradients must be float32 or float64",
    function()
      return optim.clip_grad_norm({p, {value = nc.zeros({2}), grad = nc.zeros({2}, {dtype = "int64"})}}, 1)
    end)
  local others = {}
  for _, d in ipairs(nc.devices()) do
    if d.spec ~= dev.spec then others[#others + 1] = d end
  end
  if others[1] then
    U.assert_error("netcl.optim.clip_grad_norm: gradient 2: tensors are on different devices",
      function()
        return optim.clip_grad_norm({{value = nc.zeros({2}), grad = nc.zeros({2})},
                                     {value = nc.zeros({2}), grad = nc.zeros({2}, {device = others[1]})}}, 1)
      end)
  end
  U.assert_error("clip_grad_norm: argument 2: max_norm must be a number",
    function() return optim.clip_grad_norm({p}, nil) end)
end

function TestErrors:test_fused_entry_points()
  -- The C op checks what the Lua layer cannot get wrong by construction.
  local C = nc._optim
  local p, g = nc.zeros({4}), nc.ones({4})
  local o = {lr = 0.1, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, amsgrad = false}
  U.assert_error("adam: exp_avg has shape [3] but the parameter has shape [4]",
    function() C.adam_step(p, g, nc.zeros({3}), nc.zeros({4}), nil, 1, false, o) end)
  U.assert_error("adam: max_exp_avg_sq was given but amsgrad is false",
    function() C.adam_step(p, g, nc.zeros({4}), nc.zeros({4}), nc.zeros({4}), 1, false, o) end)
  U.assert_error("adam: step must be >= 1, got 0",
    function() C.adam_step(p, g, nc.zeros({4}), nc.zeros({4}), nil, 0, false, o) end)
  local s = nc.zeros({4})
  U.assert_error("adam: exp_avg and exp_avg_sq share memory", function() C.adam_step(p, g, s, s, nil, 1, false, o) end)
  U.assert_error("adam: param must be contiguous",
    function() C.adam_step(nc.zeros({4, 2}):transpose(1, 2), nc.zeros({2, 4}), nc.zeros({2, 4}), nc.zeros({2, 4}), nil,
      1, false, o) end)
  U.assert_error("sgd: momentum_buffer is required",
    function() C.sgd_step(p, g, nil, true, {lr = 1, momentum = 0.9, dampening = 0, weight_decay = 0}) end)
  U.assert_error("rmsprop: grad_avg is required",
    function() C.rmsprop_step(p, g, nc.zeros({4}), nil, nil, {lr = 1, alpha = 0.9, eps = 0, weight_decay = 0,
      momentum = 0, centered = true}) end)
end

function TestErrors:test_state_dict_and_schedulers()
  local ps = make_params("float32", dev)
  local opt = optim.Adam(ps, {lr = 0.1})
  set_grads(ps, 1, "float32", dev)
  opt:step()
  local sd = opt:state_dict()
  U.assert_error("the state_dict is of a Adam optimizer, not SGD",
    function() optim.SGD(ps, {lr = 1}):load_state_dict(sd) end)
  sd.state[1].exp_avg = nc.zeros({3})
  U.assert_error("state 1: 'exp_avg' has shape [3] but the parameter has shape [7]", function() opt:load_state_dict(sd) end)
  sd = opt:state_dict()
  sd.state[1].exp_avg = nil
  U.assert_error("state 1 lacks 'exp_avg'", function() opt:load_state_dict(sd) end)
  sd = opt:state_dict()
  sd.state[9] = {step = 1}
  U.assert_error("state entry 9 is not a parameter number (1..3)", function() opt:load_state_dict(sd) end)
  sd = opt:state_dict()
  sd.param_groups[1].params = {1}
  U.assert_error("group 1 of the state_dict has 1 parameters, the optimizer's 3", function() opt:load_state_dict(sd) end)
  sd = opt:state_dict()
  sd.param_groups[1].lr = -1
  U.assert_error("invalid learning rate: -1", function() opt:load_state_dict(sd) end)
  lu.assertEquals(opt.lr, 0.1, "a rejected state_dict changes nothing")

  U.assert_error("netcl.optim.CosineAnnealingLR: option 'T_max' is required", function() optim.CosineAnnealingLR(opt) end)
  U.assert_error("T_max must be a positive integer, got 0", function() optim.CosineAnnealingLR(opt, {T_max = 0}) end)
  U.assert_error("total must be an integer >= max(warmup, 1)",
    function() optim.WarmupCosine(opt, {warmup = 5, total = 3}) end)
  U.assert_error("netcl.optim.WarmupCosine: unknown option 'min_lrr'",
    function() optim.WarmupCosine(opt, {warmup = 1, total = 3, min_lrr = 0}) end)
  U.assert_error("expected an optimizer", function() optim.CosineAnnealingLR({}, {T_max = 3}) end)
  local plateau = optim.ReduceLROnPlateau(opt)
  U.assert_error("ReduceLROnPlateau:step: needs the metric", function() plateau:step() end)
  U.assert_error("factor must be in [0, 1), got 2", function() optim.ReduceLROnPlateau(opt, {factor = 2}) end)
  U.assert_error("mode must be \"min\" or \"max\"", function() optim.ReduceLROnPlateau(opt, {mode = "up"}) end)
end

-- ---- PyTorch, when installed --------------------------------------------------------------------------------------------

TestTorch = {}

local function torch_python() return H.python("torch") end

-- Reads the cases as JSON; prints "case param v1 v2 ..." per parameter after ten steps.
local TORCH_SCRIPT = [==[
import json, sys, torch
for ci, c in enumerate(json.load(open(sys.argv[1])), 1):
    ps = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in c["p0"]]
    o = dict(c["opts"])
    if "betas" in o: o["betas"] = tuple(o["betas"])
    opt = getattr(torch.optim, c["name"])(ps, **o)
    for gs in c["grads"]:
        for p, g in zip(ps, gs): p.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
    for j, p in enumerate(ps, 1):
        print(ci, j, " ".join(repr(x) for x in p.detach().flatten().tolist()))
]==]

local function json(v)
  if type(v) == "table" then
    if #v > 0 or next(v) == nil then
      local parts = {}
      for i, x in ipairs(v) do parts[i] = json(x) end
      return "[" .. table.concat(parts, ",") .. "]"
    end
    local parts = {}
    for k, x in pairs(v) do parts[#parts + 1] = string.format("%q:%s", k, json(x)) end
    return "{" .. table.concat(parts, ",") .. "}"
  end
  if type(v) == "number" then return string.format("%.17g", v) end
  if type(v) == "string" then return string.format("%q", v) end
  return tostring(v)
end

function TestTorch:test_trajectories_match_torch_optim()
  local py = torch_python()
  if not py then
    print("  (skipped: no python3 with torch (Debian: python3-torch); the formula checks above still ran)")
    return
  end
  local dtype = dev.fp64 and "float64" or "float32"
  local cases = {}
  for _, c in ipairs(CASES) do
    local grads = {}
    for k = 1, 10 do grads[k] = {grad_table(1, k), grad_table(2, k)} end
    cases[#cases + 1] = {name = c[1], opts = c[2], p0 = {P0[1], P0[2]}, grads = grads}
  end
  local dir = os.tmpname()
  local f = assert(io.open(dir, "w"))
  f:write(json(cases))
  f:close()
  local script = dir .. ".py"
  f = assert(io.open(script, "w"))
  f:write(TORCH_SCRIPT)
  f:close()
  local pipe = assert(io.popen(py .. " " .. script .. " " .. dir .. " 2>&1"))
  local text = pipe:read("a")
  pipe:close()
  os.remove(dir)
  os.remove(script)
  local results, lines = {}, 0
  for line in text:gmatch("[^\n]+") do
    local nums = {}
    for w in line:gmatch("%S+") do nums[#nums + 1] = tonumber(w) end
    results[nums[1]] = results[nums[1]] or {}
    results[nums[1]][nums[2]] = {table.unpack(nums, 3)}
    lines = lines + 1
  end
  lu.assertEquals(lines, 2 * #CASES, "torch output: " .. text)
  for ci, c in ipairs(CASES) do
    local ps = run(c[1], c[2], 10, dtype, dev)
    for j = 1, 2 do
      local got, want = flat(ps[j].value:tolist()), results[ci][j]
      lu.assertEquals(#got, #want)
      for i = 1, #got do
        lu.assertTrue(math.abs(got[i] - want[i]) <= TOL[dtype] * math.max(1, math.abs(want[i])),
          string.format("%s: param %d element %d: netcl %.17g, torch %.17g", describe(c[1], c[2]), j, i, got[i],
            want[i]))
      end
    end
  end
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

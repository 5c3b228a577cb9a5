-- netcl.evo: each optimizer's update against its formula in plain Lua on a tiny case, the
-- issue's budgets and targets (SepCMAES on 30-D Rosenbrock is in test_evo_slow.lua), the same
-- populations on the CPU and the device under test, bad arguments, save/load, the population
-- forward against P separate forwards, and the architecture search (weight inheritance bit for
-- bit, history, resume equal to an uninterrupted run).
local lu = require "luaunit"
local nc = require "netcl"
local nn = require "netcl.nn"
local models = require "netcl.models"
local evo = require "netcl.evo"
local H = require "helpers"

local dev = H.device()
local CPU = nc.device("cpu")
local F = evo.functions

local function rows(t) return t:to(CPU):to("float64"):tolist() end
local function vec(t) return H.flat(t:to(CPU):to("float64"):tolist()) end
local function close(a, b, tol, msg)
  lu.assertTrue(math.abs(a - b) <= tol * math.max(1, math.abs(b)),
    string.format("%s: %.9g vs %.9g", msg or "", a, b))
end

-- plain-Lua test functions, for an independent check of evo.functions
local function sphere(x) local s = 0 for _, v in ipairs(x) do s = s + v * v end return s end
local function rastrigin(x)
  local s = 10 * #x
  for _, v in ipairs(x) do s = s + v * v - 10 * math.cos(2 * math.pi * v) end
  return s
end
local function rosenbrock(x)
  local s = 0
  for i = 1, #x - 1 do s = s + 100 * (x[i + 1] - x[i] ^ 2) ^ 2 + (1 - x[i]) ^ 2 end
  return s
end

-- 1-based ascending order of a Lua array (ties by position)
local function order_of(f)
  local idx = {}
  for i = 1, #f do idx[i] = i end
  table.sort(idx, function(a, b) if f[a] ~= f[b] then return f[a] < f[b] end return a < b end)
  return idx
end

TestFunctions = {}
function TestFunctions:test_against_lua()
  nc.manual_seed(1)
  local X = nc.randn({5, 4}, {dtype = "float64"}) * 2
  local xs = rows(X)
  for name, ref in pairs({sphere = sphere, rastrigin = rastrigin, rosenbrock = rosenbrock}) do
    local got = vec(F[name](X))
    for i = 1, 5 do close(got[i], ref(xs[i]), 1e-9, name) end
  end
end

-- ---- formulas on tiny cases ----------------------------------------------------------------

TestFormulas = {}

function TestFormulas:test_sepcmaes_update()
  nc.manual_seed(7)
  local n, lam = 4, 6
  local es = evo.SepCMAES{dim = n, popsize = lam, sigma = 0.3, mean = {1, -1, 0.5, 2}, dtype = "float64"}
  -- the paper's constants, computed here independently
  local mu = lam // 2
  local w, sw = {}, 0
  for i = 1, mu do w[i] = math.log((lam + 1) / 2) - math.log(i); sw = sw + w[i] end
  local mueff_den = 0
  for i = 1, mu do w[i] = w[i] / sw; mueff_den = mueff_den + w[i] ^ 2 end
  local mueff = 1 / mueff_den
  local cs = (mueff + 2) / (n + mueff + 3)
  local ds = 1 + 2 * math.max(0, math.sqrt((mueff - 1) / (n + 1)) - 1) + cs
  local cc = 4 / (n + 4)
  local ccov = 1 / mueff * 2 / (n + 1.41421356237) ^ 2 + (1 - 1 / mueff) * math.min(1, (2 * mueff - 1) /
    ((n + 2) ^ 2 + mueff))
  ccov = ccov * (n + 2) / 3
  local chin = math.sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n * n))
  local m, C, sigma, ps, pc = vec(es.mean), vec(es.C), es.sigma, vec(es.ps), vec(es.pc)
  for gen = 1, 3 do
    local X = es:ask()
    local xs = rows(X)
    local f = {}
    for i = 1, lam do f[i] = rosenbrock(xs[i]) end
    es:tell(nc.tensor(f, {dtype = "float64"}))
    local ord = order_of(f)
    local zw, yw, rank = {}, {}, {}
    for j = 1, n do
      zw[j], rank[j] = 0, 0
      for k = 1, mu do
        local y = (xs[ord[k]][j] - m[j]) / sigma
        zw[j] = zw[j] + w[k] * y / math.sqrt(C[j])
        rank[j] = rank[j] + w[k] * y * y
      end
      yw[j] = zw[j] * math.sqrt(C[j])
    end
    local nps = 0
    for j = 1, n do
      m[j] = m[j] + sigma * yw[j]
      ps[j] = (1 - cs) * ps[j] + math.sqrt(cs * (2 - cs) * mueff) * zw[j]
      nps = nps + ps[j] ^ 2
    end
    nps = math.sqrt(nps)
    local hsig = (nps / math.sqrt(1 - (1 - cs) ^ (2 * gen)) < (1.4 + 2 / (n + 1)) * chin) and 1 or 0
    for j = 1, n do
      pc[j] = (1 - cc) * pc[j] + hsig * math.sqrt(cc * (2 - cc) * mueff) * yw[j]
      C[j] = (1 - ccov) * C[j] + ccov / mueff * (pc[j] ^ 2 + (1 - hsig) * cc * (2 - cc) * C[j])
        + ccov * (1 - 1 / mueff) * rank[j]
    end
    sigma = sigma * math.exp(cs / ds * (nps / chin - 1))
    local gm, gC, gps, gpc = vec(es.mean), vec(es.C), vec(es.ps), vec(es.pc)
    for j = 1, n do
      close(gm[j], m[j], 1e-9, "mean")
      close(gC[j], C[j], 1e-9, "C")
      close(gps[j], ps[j], 1e-9, "p_sigma")
      close(gpc[j], pc[j], 1e-9, "p_c")
    end
    close(es.sigma, sigma, 1e-9, "sigma")
  end
end

function TestFormulas:test_openaies_update()
  nc.manual_seed(3)
  local D, P, lr, sigma = 3, 6, 0.05, 0.2
  local es = evo.OpenAIES{dim = D, popsize = P, sigma = sigma, lr = lr, mean = {0.5, -0.25, 1}, dtype = "float64",
                          sigma_decay = 0.9, lr_decay = 0.8}
  local theta = vec(es.mean)
  local m1, m2 = {0, 0, 0}, {0, 0, 0}
  for step = 1, 3 do
    local xs = rows(es:ask())
    local f = {3, 1, 4, 1.5, 9, 2.6} -- ranks 3 0 4 1 5 2
    f[step] = f[step] + 10 * step
    es:tell(f)
    local ord = order_of(f)
    local u = {}
    for r, i in ipairs(ord) do u[i] = (r - 1) / (P - 1) - 0.5 end
    for j = 1, D do
      local g = 0
      for i = 1, P // 2 do
        local eps = (xs[i][j] - theta[j]) / sigma
        g = g + (u[i] - u[i + P // 2]) * eps
      end
      g = g / (P * sigma)
      m1[j] = 0.9 * m1[j] + 0.1 * g
      m2[j] = 0.999 * m2[j] + 0.001 * g * g
      local mhat, vhat = m1[j] / (1 - 0.9 ^ step), m2[j] / (1 - 0.999 ^ step)
      theta[j] = theta[j] - lr * mhat / (math.sqrt(vhat) + 1e-8)
    end
    local got = vec(es.mean)
    for j = 1, D do close(got[j], theta[j], 1e-9, "mean") end
    sigma, lr = sigma * 0.9, lr * 0.8
    close(es.sigma, sigma, 1e-12, "sigma")
    close(es.lr, lr, 1e-12, "lr")
  end
  -- antithetic: the second half mirrors the first around the mean
  local m = vec(es.mean)
  local xs = rows(es:ask())
  for i = 1, P // 2 do
    for j = 1, D do close(xs[i][j] + xs[i + P // 2][j], 2 * m[j], 1e-9, "antithetic") end
  end
end

function TestFormulas:test_de_update()
  nc.manual_seed(5)
  local P, D, Fw, CR = 6, 3, 0.7, 0.5
  local es = evo.DE{dim = D, popsize = P, F = Fw, CR = CR, dtype = "float64"}
  local X0 = es:ask()
  es:tell(F.sphere(X0))
  for _ = 1, 3 do
    local X, fX = rows(es.X), vec(es.fitness)
    local U = es:ask()
    local us = rows(U)
    local r, cross = rows(es._last.r), es._last.cross:to(CPU):tolist()
    for i = 1, P do
      local a, b, c = r[i][1] + 1, r[i][2] + 1, r[i][3] + 1
      lu.assertTrue(a ~= b and b ~= c and a ~= c and a ~= i and b ~= i and c ~= i, "r1, r2, r3 distinct, not i")
      local any = false
      for j = 1, D do
        local want = cross[i][j] and X[a][j] + Fw * (X[b][j] - X[c][j]) or X[i][j]
        any = any or cross[i][j]
        close(us[i][j], want, 1e-12, "trial")
      end
      lu.assertTrue(any, "binomial crossover takes at least one gene of the mutant")
    end
    local fU = vec(F.sphere(U))
    es:tell(F.sphere(U))
    local X2, f2 = rows(es.X), vec(es.fitness)
    for i = 1, P do
      local keep = fU[i] <= fX[i]
      for j = 1, D do lu.assertEquals(X2[i][j], keep and us[i][j] or X[i][j]) end
      lu.assertEquals(f2[i], keep and fU[i] or fX[i])
    end
  end
end

function TestFormulas:test_ga_update()
  nc.manual_seed(11)
  local P, D, E, k = 8, 3, 2, 3
  local es = evo.GA{dim = D, popsize = P, elite = E, tournament = k, mutation_sigma = 0.2, sigma_decay = 0.5,
                    crossover = 0.7, dtype = "float64"}
  for gen = 1, 3 do
    local X = rows(es:ask())
    local fit = vec(F.rastrigin(es.X))
    es:tell(F.rastrigin(es.X))
    local child = rows(es:ask())
    local L = es._last
    close(L.sigma, 0.2 * 0.5 ^ (gen - 1), 1e-12, "mutation sigma decays")
    local ord = order_of(fit)
    for e = 1, E do lu.assertEquals(child[e], X[ord[e]], "elite rows are the best rows, unchanged") end
    local p1, p2, c1, c2 = vec(L.p1), vec(L.p2), rows(L.cand1), rows(L.cand2)
    local cross, noise = L.cross:to(CPU):tolist(), rows(L.noise)
    for i = 1, P - E do
      for _, t in ipairs({{p1[i], c1[i]}, {p2[i], c2[i]}}) do
        local best = t[2][1]
        for _, c in ipairs(t[2]) do if fit[c + 1] < fit[best + 1] then best = c end end
        lu.assertEquals(t[1], best, "tournament winner")
      end
      for j = 1, D do
        local parent = cross[i][j] and X[p2[i] + 1][j] or X[p1[i] + 1][j]
        close(child[E + i][j], parent + L.sigma * noise[i][j], 1e-12, "child")
      end
    end
  end
end

function TestFormulas:test_es_update()
  for _, plus in ipairs({false, true}) do
    nc.manual_seed(13)
    local P, D, mu = 8, 3, 3
    local es = evo.ES{dim = D, popsize = P, mu = mu, sigma = 0.5, plus = plus, dtype = "float64", mean = 1}
    local tau = 1 / math.sqrt(2 * D)
    for _ = 1, 3 do
      local par, ps, pf = rows(es.parents), vec(es.parent_sigma), vec(es.parent_f)
      local X = rows(es:ask())
      local L = es._last
      local idx, n, z, s = vec(L.parent), vec(L.n), rows(L.z), vec(es.offspring_sigma)
      for i = 1, P do
        local a = idx[i] + 1
        close(s[i], ps[a] * math.exp(tau * n[i]), 1e-12, "self-adapted sigma")
        for j = 1, D do close(X[i][j], par[a][j] + s[i] * z[i][j], 1e-12, "offspring") end
      end
      local f = {}
      for i = 1, P do f[i] = sphere(X[i]) end
      es:tell(f)
      local poolX, poolS, poolF = {}, {}, {}
      if plus then
        for i = 1, mu do poolX[i], poolS[i], poolF[i] = par[i], ps[i], pf[i] end
      end
      for i = 1, P do
        local k = #poolX + 1
        poolX[k], poolS[k], poolF[k] = X[i], s[i], f[i]
      end
      local ord = order_of(poolF)
      local gp, gs = rows(es.parents), vec(es.parent_sigma)
      for i = 1, mu do
        for j = 1, D do close(gp[i][j], poolX[ord[i]][j], 1e-12, "selected parent") end
        close(gs[i], poolS[ord[i]], 1e-12, "selected sigma")
      end
    end
  end
end

-- ---- budgets and targets -------------------------------------------------------------------
-- Fixed seeds; each row: the optimizer, the function, the evaluation budget and the target.
local CASES = {
  {"SepCMAES", "sphere", 30, 1e-10, 500000, {sigma = 0.5, mean = 1}},
  {"OpenAIES", "sphere", 30, 1e-4, 100000, {popsize = 100, sigma = 0.5, lr = 0.1, mean = 1, sigma_decay = 0.99,
                                            lr_decay = 0.99}},
  {"DE", "rastrigin", 10, 1, 200000, {popsize = 50, F = 0.5, CR = 0.1, bounds = {-5.12, 5.12}}},
  {"DE", "sphere", 30, 1e-6, 200000, {popsize = 50, F = 0.5, bounds = {-5, 5}}},
  {"ES", "sphere", 10, 1e-3, 100000, {popsize = 40, sigma = 1, mean = 3}},
  {"ES", "sphere", 10, 1e-3, 100000, {popsize = 40, sigma = 1, mean = 3, plus = true}},
  {"ES", "rastrigin", 10, 10, 100000, {popsize = 100, sigma = 1, bounds = {-5.12, 5.12}}},
  {"GA", "sphere", 10, 1e-3, 100000, {popsize = 100, mutation_sigma = 0.5, sigma_decay = 0.98, bounds = {-5, 5}}},
  {"GA", "rastrigin", 10, 10, 100000, {popsize = 100, mutation_sigma = 0.5, sigma_decay = 0.98,
                                       bounds = {-5.12, 5.12}}},
}

TestTargets = {}
function TestTargets:test_budgets()
  print(string.format("\n%-9s %-10s %3s %8s %10s %13s", "optimizer", "function", "D", "budget", "evals", "best f"))
  for _, c in ipairs(CASES) do
    local name, fn, D, target, budget, cfg = table.unpack(c)
    nc.manual_seed(1)
    local o = {dim = D}
    for k, v in pairs(cfg) do o[k] = v end
    local es = evo[name](o)
    local _, best = es:run(F[fn], {max_evals = budget, target = target})
    print(string.format("%-9s %-10s %3d %8d %10d %13.4g%s", name, fn, D, budget, es.evals, best,
      cfg.plus and " (mu+lambda)" or ""))
    lu.assertTrue(best < target, string.format("%s on %d-D %s: f = %g after %d evaluations, target %g", name, D,
      fn, best, es.evals, target))
    lu.assertTrue(es.evals <= budget)
    -- best_x is a point the optimizer evaluated, and best_f its value
    close(F[fn](es.best_x:view({1, D})):item(), best, 1e-5, "best_x gives best_f")
  end
end

-- ---- the same populations on the CPU and the device under test -----------------------------
TestDevices = {}
function TestDevices:test_cpu_and_device_agree()
  if dev.kind == "cpu" then return end
  local cfgs = {
    GA = {popsize = 16, elite = 2}, ES = {popsize = 16, mu = 4}, OpenAIES = {popsize = 16, sigma = 0.3, lr = 0.1},
    DE = {popsize = 16}, SepCMAES = {popsize = 16, sigma = 0.5},
  }
  for name, cfg in pairs(cfgs) do
    local results = {}
    for k, d in ipairs({CPU, dev}) do
      nc.manual_seed(21)
      local o = {dim = 5, device = d, mean = 0.5}
      for kk, v in pairs(cfg) do o[kk] = v end
      local es = evo[name](o)
      local X
      for _ = 1, 6 do
        X = es:ask()
        es:tell(F.rastrigin(X))
      end
      results[k] = {rows(es:ask()), es.best_f}
    end
    H.assert_close(results[2][1], results[1][1], 1e-5, name .. ": population on " .. dev.name)
    close(results[2][2], results[1][2], 1e-5, name .. ": best_f")
  end
end

-- ---- errors --------------------------------------------------------------------------------
TestErrors = {}
function TestErrors:test_bad_arguments()
  for _, name in ipairs({"GA", "ES", "OpenAIES", "DE", "SepCMAES"}) do
    H.assert_error(function() evo[name]{dim = 3, popsize = 1} end, "evo." .. name, "popsize must be at least 2")
    H.assert_error(function() evo[name]{dim = 3, popsize = 8, bogus = 1} end, "unknown option 'bogus'")
    local es = evo[name]{dim = 3, popsize = 8}
    H.assert_error(function() es:tell(nc.zeros({8})) end, "call ask() first")
    local X = es:ask()
    H.assert_error(function() es:tell(nc.zeros({7})) end, "fitness must have shape [8]", "got [7]")
    H.assert_error(function() es:tell(nc.zeros({8, 1})) end, "fitness must have shape [8]")
    H.assert_error(function() es:tell("x") end, "fitness must be a Tensor [8]")
    local f = F.sphere(X):to(CPU)
    local bad = f:tolist()
    bad[3] = 0 / 0
    H.assert_error(function() es:tell(nc.tensor(bad)) end, "fitness contains NaN (individual 3")
    es:tell(f) -- still usable after a refused tell
  end
  H.assert_error(function() evo.DE{dim = 3, popsize = 3} end, "needs popsize >= 4")
  H.assert_error(function() evo.OpenAIES{dim = 3, popsize = 7} end, "popsize must be even")
  H.assert_error(function() evo.ES{dim = 3, popsize = 4, mu = 4} end, "needs mu < popsize")
  H.assert_error(function() evo.GA{dim = 3, popsize = 4, elite = 4} end, "elite (4) must be less than popsize")
  H.assert_error(function() evo.SepCMAES{dim = 3, popsize = 4, mean = {1, 2}} end, "mean must have 3 numbers")
  H.assert_error(function() evo.SepCMAES{dim = 0} end, "dim must be >= 1")
  H.assert_error(function() evo.ES{dim = 2}:run(F.sphere) end, "give generations=")
end

-- ---- save / load ---------------------------------------------------------------------------
TestSave = {}
function TestSave:test_resume_equals_uninterrupted()
  local dir = H.tmpdir()
  for _, name in ipairs({"GA", "ES", "OpenAIES", "DE", "SepCMAES"}) do
    local function make() return evo[name]{dim = 4, popsize = 10, mean = 0.3} end
    nc.manual_seed(31)
    local a = make()
    a:run(F.rastrigin, {generations = 6})
    local want = rows(a:ask())
    nc.manual_seed(31)
    local b = make()
    b:run(F.rastrigin, {generations = 3})
    b:save(dir .. "/" .. name .. ".st")
    nc.manual_seed(999) -- load puts the generator back
    local c = make()
    c:load(dir .. "/" .. name .. ".st")
    lu.assertEquals(c.generation, 3)
    c:run(F.rastrigin, {generations = 3})
    lu.assertEquals(rows(c:ask()), want, name .. ": resumed population")
    lu.assertEquals(c.best_f, a.best_f)
    lu.assertEquals(c.evals, a.evals)
  end
  H.assert_error(function() evo.DE{dim = 4, popsize = 10}:load(dir .. "/GA.st") end, "holds the state of evo.GA")
end

function TestSave:test_rng_state()
  nc.manual_seed(5)
  nc.rand({3})
  local st = nc.get_rng_state()
  lu.assertEquals(st.seed, 5)
  lu.assertEquals(st.offset, 3)
  local a = nc.randn({4}):tolist()
  nc.set_rng_state(st)
  lu.assertEquals(nc.randn({4}):tolist(), a)
  H.assert_error(function() nc.set_rng_state(3) end, "netcl.set_rng_state", "{seed=, offset=}")
  H.assert_error(function() nc.set_rng_state({seed = 1}) end, "field 'offset' must be an integer")
end

-- ---- neuroevolution ------------------------------------------------------------------------
TestNeuro = {}
function TestNeuro:test_flatten_unflatten()
  nc.manual_seed(2)
  local a = models.MLP{sizes = {3, 4, 2}}
  local b = models.MLP{sizes = {3, 4, 2}}
  local row = evo.flatten(a)
  lu.assertEquals(row.shape, {evo.num_params(a)})
  lu.assertEquals(evo.num_params(a), 3 * 4 + 4 + 4 * 2 + 2)
  lu.assertEquals(vec(row:narrow(1, 1, 12)), vec(a[1].weight.value))
  evo.unflatten(b, row)
  for name, t in pairs(a:state_dict()) do lu.assertEquals(b:state_dict()[name]:bytes(), t:bytes(), name) end
  H.assert_error(function() evo.unflatten(b, nc.zeros({5})) end, "the module has 26 parameters, the row 5")
end

function TestNeuro:test_population_forward_equals_separate_forwards()
  nc.manual_seed(4)
  local P = 5
  local model = models.MLP{sizes = {6, 8, 7, 3}, activation = "tanh"}
  local D = evo.num_params(model)
  local pop = nc.randn({P, D}) * 0.5
  local x = nc.randn({4, 6})
  local xs = nc.randn({P, 4, 6})
  local out = evo.population_forward(model, pop, x)
  local out2 = evo.population_forward(model, pop, xs)
  lu.assertEquals(out.shape, {P, 4, 3})
  for i = 1, P do
    evo.unflatten(model, pop[i])
    local y = model(x)
    y = nc.is_node(y) and y.value or y
    H.assert_close(out[i], y, 1e-5, "shared batch, member " .. i)
    local y2 = model(xs[i])
    y2 = nc.is_node(y2) and y2.value or y2
    H.assert_close(out2[i], y2, 1e-5, "own batch, member " .. i)
  end
  H.assert_error(function() evo.population_forward(model, nc.zeros({P, D + 1}), x) end, "the model has")
  H.assert_error(function() evo.population_forward(nn.Sequential(nn.Conv2d(1, 1, 3)), nc.zeros({2, 10}), x) end,
    "supports Sequential models")
end

-- ---- architecture search -------------------------------------------------------------------
local XS, YS
local function task()
  if not XS then
    nc.manual_seed(100)
    XS = nc.randn({32, 4})
    YS = (XS:narrow(2, 1, 1) * XS:narrow(2, 2, 1)):tanh()
  end
  return XS, YS
end

local ACT = {relu = nn.ReLU, tanh = nn.Tanh}
local function build(arch)
  local layers, w = {}, 4
  for _, l in ipairs(arch.layers) do
    layers[#layers + 1] = nn.Linear(w, l.width)
    layers[#layers + 1] = ACT[l.activation]()
    w = l.width
  end
  layers[#layers + 1] = nn.Linear(w, 1)
  return nn.Sequential(table.unpack(layers))
end

local function loss_of(model)
  local x, y = task()
  local out = model(x)
  out = nc.is_node(out) and out.value or out
  local d = out - y
  return (d * d):mean():item()
end

-- a few steps of random search on the weights: training that draws from the generator
local function train(model)
  for _ = 1, 3 do
    local row = evo.flatten(model)
    local before = loss_of(model)
    evo.unflatten(model, row + nc.randn(row.shape) * 0.05)
    if loss_of(model) > before then evo.unflatten(model, row) end
  end
end

local SPACE = {depth = {1, 3}, widths = {4, 8, 16}, activations = {"relu", "tanh"}}

TestNAS = {}
function TestNAS:test_space()
  nc.manual_seed(8)
  local space = evo.ArchSpace(SPACE)
  for _ = 1, 20 do
    local a = space:sample()
    lu.assertTrue(a.depth >= 1 and a.depth <= 3 and #a.layers == a.depth)
    local b = space:mutate(a)
    lu.assertTrue(#b.layers == b.depth)
    lu.assertNotEquals(space:key(b), space:key(a), "a mutation changes one choice")
  end
  lu.assertEquals(space:key({depth = 2, layers = {{width = 8, activation = "relu"}, {width = 4, activation = "tanh"}}}),
    "8/relu-4/tanh")
  H.assert_error(function() evo.ArchSpace{depth = {3, 1}} end, "depth must be")
  H.assert_error(function() evo.ArchSpace{widths = {}} end, "widths must be a non-empty list")
  H.assert_error(function() evo.ArchSpace{wdiths = {4}} end, "unknown option 'wdiths'")
end

function TestNAS:test_inheritance_is_bit_exact()
  nc.manual_seed(9)
  local checked, copied = 0, 0
  local s = evo.ArchitectureSearch{
    space = evo.ArchSpace(SPACE), build = build, population = 4, generations = 2, progress = false,
    train = function(model, arch, info)
      if info.parent then
        local psd, csd = info.parent:state_dict(), model:state_dict()
        local inherited = {}
        for _, name in ipairs(info.inherited) do
          inherited[name] = true
          lu.assertEquals(csd[name]:bytes(), psd[name]:bytes(), name .. " copied from the parent")
          copied = copied + 1
        end
        for name, t in pairs(csd) do
          local p = psd[name]
          local match = p ~= nil and table.concat(p.shape, ",") == table.concat(t.shape, ",")
          lu.assertEquals(inherited[name] or false, match, name .. ": inherited exactly when name and shape match")
        end
        checked = checked + 1
      end
      train(model)
    end,
    evaluate = function(model) return -loss_of(model) end,
  }
  local best, history = s:run()
  lu.assertEquals(checked, 8)
  lu.assertTrue(copied > 0)
  lu.assertEquals(#history, 12)
  lu.assertEquals(history[1].generation, 0)
  lu.assertEquals(history[12].generation, 2)
  local top = -math.huge
  for _, h in ipairs(history) do
    lu.assertEquals(h.params, build(h.arch):num_parameters())
    if h.generation > 0 then lu.assertNotNil(h.parent) end
    top = math.max(top, h.score)
  end
  lu.assertEquals(s.best.score, top)
  lu.assertEquals(best, s.best.arch)
  local curve = s:best_by_generation()
  lu.assertEquals(#curve, 3)
  lu.assertTrue(curve[1] <= curve[2] and curve[2] <= curve[3])
end

function TestNAS:test_resume_equals_uninterrupted()
  local dir = H.tmpdir()
  local function search(gens, path, resume)
    return evo.ArchitectureSearch{space = evo.ArchSpace(SPACE), build = build, train = train, population = 3,
      generations = gens, progress = false, checkpoint = path, resume = resume,
      evaluate = function(model) return -loss_of(model) end}
  end
  nc.manual_seed(12)
  local _, full = search(3, dir .. "/full.st"):run()
  nc.manual_seed(12)
  search(1, dir .. "/part.st"):run()
  nc.manual_seed(77)
  local s = search(3, dir .. "/part.st", true)
  local _, resumed = s:run()
  lu.assertEquals(#resumed, #full)
  for i, h in ipairs(full) do
    lu.assertEquals(resumed[i].key, h.key, "history " .. i)
    lu.assertEquals(resumed[i].score, h.score, "history " .. i)
    lu.assertEquals(resumed[i].parent, h.parent, "history " .. i)
  end
  H.assert_error(function()
    evo.ArchitectureSearch{space = evo.ArchSpace(SPACE), build = build, train = train, evaluate = loss_of,
      resume = true}
  end, "resume=true needs checkpoint=")
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

-- evo.GA: a real-coded genetic algorithm. Each generation keeps the `elite` best rows, and
-- makes the others by tournament selection of two parents, uniform crossover (with probability
-- `crossover` per child) and Gaussian mutation (each gene with probability `mutation_rate`).
local nc = require "netcl"
local class = require "netcl.class"
local B = require "netcl.evo.base"

local GA = class("evo.GA", B.Base)

local OPTIONS = {dim = true, popsize = true, mutation_sigma = true, mutation_rate = true, crossover = true,
                 elite = true, tournament = true, sigma_decay = true, sigma_min = true, mean = true,
                 init_sigma = true, bounds = true, device = true, dtype = true}

--- evo.GA{dim=, popsize=, mutation_sigma=0.1, mutation_rate=1, crossover=0.9, elite=1,
-- tournament=3, sigma_decay=1, sigma_min=0, mean=0, init_sigma=1, bounds=, device=, dtype=}
function GA:init(cfg)
  local fname = "evo.GA"
  B.options(fname, cfg, OPTIONS)
  self:_common(fname, cfg, 2, 50)
  self.mutation_sigma = B.number(fname, "mutation_sigma", cfg.mutation_sigma or 0.1, 0)
  self.mutation_rate = B.number(fname, "mutation_rate", cfg.mutation_rate or 1, 0, 1)
  self.crossover = B.number(fname, "crossover", cfg.crossover or 0.9, 0, 1)
  self.elite = B.int(fname, "elite", cfg.elite or 1, 0)
  if self.elite >= self.popsize then
    error(string.format("%s: elite (%d) must be less than popsize (%d)", fname, self.elite, self.popsize), 3)
  end
  self.tournament = B.int(fname, "tournament", cfg.tournament or 3, 1)
  self.sigma_decay = B.number(fname, "sigma_decay", cfg.sigma_decay or 1, 0, 1)
  self.sigma_min = B.number(fname, "sigma_min", cfg.sigma_min or 0, 0)
  self.bounds = self:_bounds(cfg.bounds)
  local mean = self:_vector("mean", cfg.mean)
  self.X = self:_initial(self.popsize, mean, B.number(fname, "init_sigma", cfg.init_sigma or 1, 0), self.bounds)
  self._state_tensors = {"X", "fitness"}
  self._state_scalars = {"mutation_sigma"}
end

-- tournament(fitness, n) -> int64 [n], the candidates [n, k]: for each of n slots, the best of `tournament` rows
-- drawn uniformly with replacement.
function GA:_tournament(fit, n)
  local P, k = self.popsize, self.tournament
  local cand = nc.randint(0, P, {n, k}, {device = self.device})
  local cf = fit:index_select(1, cand:view({n * k})):view({n, k})
  local _, w = cf:min(2)
  return cand:gather(2, w:view({n, 1})):view({n}), cand
end

function GA:_ask()
  if not self.fitness then return self.X end
  local P, D, E = self.popsize, self.dim, self.elite
  local C = P - E
  local fit, X = self.fitness, self.X
  local p1, cand1 = self:_tournament(fit, C)
  local p2, cand2 = self:_tournament(fit, C)
  local cross = nc.rand({C, D}, self._topts):lt(0.5) * nc.rand({C, 1}, self._topts):lt(self.crossover)
  local noise = nc.randn({C, D}, self._topts)
  if self.mutation_rate < 1 then
    noise = nc.where(nc.rand({C, D}, self._topts):lt(self.mutation_rate), noise, 0)
  end
  local child = nc.where(cross, X:index_select(1, p2), X:index_select(1, p1)) + noise * self.mutation_sigma
  child = self:_clamp(child, self.bounds)
  self._last = {p1 = p1, p2 = p2, cand1 = cand1, cand2 = cand2, cross = cross, noise = noise,
                sigma = self.mutation_sigma}
  if E > 0 then
    local _, order = fit:sort()
    local elite = order:narrow(1, 1, E)
    self._last.elite = elite
    child = nc.cat({X:index_select(1, elite), child}, 1)
  end
  self.mutation_sigma = math.max(self.mutation_sigma * self.sigma_decay, self.sigma_min)
  self.X, self.fitness = child, nil
  return child
end

function GA:_tell(_, f)
  self.fitness = f
end

return GA

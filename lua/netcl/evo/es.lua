-- evo.ES: the (mu, lambda) and (mu + lambda) evolution strategies with self-adaptive step
-- sizes (Beyer & Schwefel 2002, "Evolution strategies: a comprehensive introduction"). Each
-- parent carries its own sigma; an offspring picks a parent uniformly, mutates the parent's
-- sigma log-normally (sigma' = sigma exp(tau N(0, 1)), tau = 1/sqrt(2 dim)) and then the point
-- (x' = x + sigma' N(0, I)). The mu best offspring (comma) or the mu best of parents and
-- offspring (plus) become the parents.
local nc = require "netcl"
local class = require "netcl.class"
local B = require "netcl.evo.base"

local ES = class("evo.ES", B.Base)

local OPTIONS = {dim = true, popsize = true, mu = true, sigma = true, plus = true, tau = true, mean = true,
                 bounds = true, device = true, dtype = true}

--- evo.ES{dim=, popsize= (lambda), mu=popsize // 4, sigma=1, plus=false, tau=1/sqrt(2 dim),
-- mean=0, bounds=, device=, dtype=}
function ES:init(cfg)
  local fname = "evo.ES"
  B.options(fname, cfg, OPTIONS)
  self:_common(fname, cfg, 2, 4 * (4 + math.floor(3 * math.log(cfg.dim or 1))))
  self.plus = cfg.plus and true or false
  self.mu = B.int(fname, "mu", cfg.mu or math.max(1, self.popsize // 4), 1)
  if not self.plus and self.mu >= self.popsize then
    error(string.format("%s: a (mu, lambda) strategy needs mu < popsize, got mu=%d, popsize=%d", fname, self.mu,
      self.popsize), 3)
  end
  local sigma = B.number(fname, "sigma", cfg.sigma or 1, 0)
  self.tau = B.number(fname, "tau", cfg.tau or 1 / math.sqrt(2 * self.dim), 0)
  self.bounds = self:_bounds(cfg.bounds)
  local mean = self:_vector("mean", cfg.mean)
  -- the first parents: mu copies of mean (or uniform points in bounds), all with step sigma
  if self.bounds then
    self.parents = self:_initial(self.mu, mean, 0, self.bounds)
  else
    self.parents = mean:view({1, self.dim}):expand({self.mu, self.dim}):contiguous()
  end
  self.parent_sigma = nc.full({self.mu}, sigma, self._topts)
  self.parent_f = nc.full({self.mu}, math.huge, self._topts)
  self._state_tensors = {"parents", "parent_sigma", "parent_f", "offspring_sigma"}
end

function ES:_ask()
  local P, D = self.popsize, self.dim
  local idx = nc.randint(0, self.mu, {P}, {device = self.device})
  local n = nc.randn({P}, self._topts)
  local s = self.parent_sigma:index_select(1, idx) * (n * self.tau):exp()
  local z = nc.randn({P, D}, self._topts)
  local X = self.parents:index_select(1, idx) + z * s:view({P, 1})
  X = self:_clamp(X, self.bounds)
  self.offspring_sigma = s
  self._last = {parent = idx, n = n, z = z}
  return X
end

function ES:_tell(X, f)
  local s = self.offspring_sigma
  if self.plus then
    X = nc.cat({self.parents, X}, 1)
    s = nc.cat({self.parent_sigma, s}, 1)
    f = nc.cat({self.parent_f, f}, 1)
  end
  local _, order = f:sort()
  local best = order:narrow(1, 1, self.mu)
  self.parents = X:index_select(1, best)
  self.parent_sigma = s:index_select(1, best)
  self.parent_f = f:index_select(1, best)
end

return ES

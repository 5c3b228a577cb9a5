-- evo.DE: differential evolution, DE/rand/1/bin (Storn & Price 1997). For each row i, three
-- distinct rows r1, r2, r3 other than i give the mutant v = x_r1 + F (x_r2 - x_r3); binomial
-- crossover takes each gene of v with probability CR (and always one gene, at a uniform
-- position), else x_i's; the trial replaces x_i when its fitness is not worse.
local nc = require "netcl"
local class = require "netcl.class"
local B = require "netcl.evo.base"

local DE = class("evo.DE", B.Base)

local OPTIONS = {dim = true, popsize = true, F = true, CR = true, mean = true, init_sigma = true, bounds = true,
                 device = true, dtype = true}

--- evo.DE{dim=, popsize=10 dim (>= 4), F=0.8, CR=0.9, mean=0, init_sigma=1, bounds=, device=, dtype=}
function DE:init(cfg)
  local fname = "evo.DE"
  B.options(fname, cfg, OPTIONS)
  if type(cfg.popsize) == "number" and cfg.popsize >= 2 and cfg.popsize < 4 then
    error(string.format("%s: DE/rand/1 needs popsize >= 4 (a row and three others), got %s", fname,
      tostring(cfg.popsize)), 3)
  end
  self:_common(fname, cfg, 2, 10 * (cfg.dim or 1))
  self.F = B.number(fname, "F", cfg.F or 0.8, 0, 2)
  self.CR = B.number(fname, "CR", cfg.CR or 0.9, 0, 1)
  self.bounds = self:_bounds(cfg.bounds)
  local mean = self:_vector("mean", cfg.mean)
  self.X = self:_initial(self.popsize, mean, B.number(fname, "init_sigma", cfg.init_sigma or 1, 0), self.bounds)
  self._state_tensors = {"X", "fitness"}
end

function DE:_ask()
  if not self.fitness then return self.X end
  local P, D, X = self.popsize, self.dim, self.X
  -- three distinct partners per row, none the row itself: the three smallest of P uniform keys
  -- with the row's own key pushed above every other
  local keys = nc.rand({P, P}, {device = self.device}) + nc.eye(P, {device = self.device}) * 2
  local _, pos = keys:sort(2)
  local r = pos:narrow(2, 1, 3):contiguous()
  local x1 = X:index_select(1, r:select(2, 1))
  local x2 = X:index_select(1, r:select(2, 2))
  local x3 = X:index_select(1, r:select(2, 3))
  local v = x1 + (x2 - x3) * self.F
  local jrand = nc.randint(0, D, {P}, {device = self.device})
  local cross = nc.rand({P, D}, self._topts):lt(self.CR) + nc.one_hot(jrand, D):eq(1)
  local U = self:_clamp(nc.where(cross, v, X), self.bounds)
  self._last = {r = r, cross = cross}
  return U
end

function DE:_tell(U, f)
  if not self.fitness then
    self.fitness = f
    return
  end
  local better = f:le(self.fitness)
  self.X = nc.where(better:view({self.popsize, 1}), U, self.X)
  self.fitness = nc.where(better, f, self.fitness)
end

return DE

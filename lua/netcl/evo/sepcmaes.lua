-- evo.SepCMAES: CMA-ES with a diagonal covariance matrix (Ros & Hansen 2008, "A simple
-- modification in CMA-ES achieving linear time and space complexity"): cumulative step-size
-- adaptation (path p_sigma, damping d_sigma), rank-one and rank-mu updates of the diagonal C,
-- with the learning rates of the full CMA-ES scaled by (n + 2) / 3 as the paper prescribes.
local nc = require "netcl"
local class = require "netcl.class"
local B = require "netcl.evo.base"

local SepCMAES = class("evo.SepCMAES", B.Base)

local OPTIONS = {dim = true, popsize = true, sigma = true, mean = true, mu = true, device = true, dtype = true}

--- The strategy parameters for dimension n, population lambda and mu parents: a table
-- {weights (array of mu), mueff, cs, ds, cc, c1, cmu, chin}.
function SepCMAES.parameters(n, lambda, mu)
  local w, sw = {}, 0
  for i = 1, mu do
    w[i] = math.log(mu + 0.5) - math.log(i)
    sw = sw + w[i]
  end
  local sw2 = 0
  for i = 1, mu do
    w[i] = w[i] / sw
    sw2 = sw2 + w[i] * w[i]
  end
  local mueff = 1 / sw2
  local cs = (mueff + 2) / (n + mueff + 3)
  local ds = 1 + 2 * math.max(0, math.sqrt((mueff - 1) / (n + 1)) - 1) + cs
  local cc = 4 / (n + 4)
  local mucov = mueff
  local ccov = (1 / mucov) * 2 / (n + math.sqrt(2)) ^ 2
    + (1 - 1 / mucov) * math.min(1, (2 * mueff - 1) / ((n + 2) ^ 2 + mueff))
  ccov = math.min(1, ccov * (n + 2) / 3) -- the separable variant's faster learning
  local c1 = ccov / mucov
  local cmu = ccov * (1 - 1 / mucov)
  local chin = math.sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n * n))
  return {weights = w, mueff = mueff, cs = cs, ds = ds, cc = cc, c1 = c1, cmu = cmu, chin = chin}
end

--- evo.SepCMAES{dim=, popsize=4 + floor(3 ln dim), mu=popsize // 2, sigma=0.5, mean=0, device=, dtype=}
function SepCMAES:init(cfg)
  local fname = "evo.SepCMAES"
  B.options(fname, cfg, OPTIONS)
  self:_common(fname, cfg, 2, 4 + math.floor(3 * math.log(cfg.dim or 1)))
  self.mu = B.int(fname, "mu", cfg.mu or self.popsize // 2, 1)
  if self.mu > self.popsize then
    error(string.format("%s: mu (%d) must not exceed popsize (%d)", fname, self.mu, self.popsize), 3)
  end
  self.sigma = B.number(fname, "sigma", cfg.sigma or 0.5, 0)
  if self.sigma <= 0 then error(fname .. ": sigma must be positive", 3) end
  local p = SepCMAES.parameters(self.dim, self.popsize, self.mu)
  self.params = p
  self.weights = nc.tensor(p.weights, self._topts):view({1, self.mu})
  self.mean = self:_vector("mean", cfg.mean)
  self.C = nc.ones({self.dim}, self._topts)
  self.ps = nc.zeros({self.dim}, self._topts)
  self.pc = nc.zeros({self.dim}, self._topts)
  self._state_tensors = {"mean", "C", "ps", "pc", "z"}
  self._state_scalars = {"sigma"}
end

function SepCMAES:_ask()
  local P, D = self.popsize, self.dim
  local z = nc.randn({P, D}, self._topts)
  self.z = z
  return self.mean:view({1, D}) + z * (self.C:sqrt() * self.sigma):view({1, D})
end

function SepCMAES:_tell(_, f)
  local p, D, mu = self.params, self.dim, self.mu
  local _, order = f:sort()
  local zs = self.z:index_select(1, order:narrow(1, 1, mu))
  local sqrtC = self.C:sqrt()
  local zw = self.weights:matmul(zs):view({D})
  local yw = zw * sqrtC
  self.mean = self.mean + yw * self.sigma
  self.ps = self.ps * (1 - p.cs) + zw * math.sqrt(p.cs * (2 - p.cs) * p.mueff)
  local norm_ps = self.ps:norm():item()
  local g = self.generation + 1
  local hsig = norm_ps / math.sqrt(1 - (1 - p.cs) ^ (2 * g)) / p.chin < 1.4 + 2 / (D + 1) and 1 or 0
  self.pc = self.pc * (1 - p.cc) + yw * (hsig * math.sqrt(p.cc * (2 - p.cc) * p.mueff))
  local ys = zs * sqrtC:view({1, D})
  local rank_mu = self.weights:matmul(ys * ys):view({D})
  self.C = self.C * (1 - p.c1 - p.cmu + p.c1 * (1 - hsig) * p.cc * (2 - p.cc)) + self.pc * self.pc * p.c1
    + rank_mu * p.cmu
  self.sigma = self.sigma * math.exp((p.cs / p.ds) * (norm_ps / p.chin - 1))
  self.hsig = hsig
end

return SepCMAES

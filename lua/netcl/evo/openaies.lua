-- evo.OpenAIES: the natural evolution strategy of Salimans et al. 2017 ("Evolution strategies
-- as a scalable alternative to reinforcement learning"): antithetic pairs mean +- sigma eps,
-- fitness shaped into centered ranks u in [-0.5, 0.5], the gradient estimate
-- g = sum_i u_i eps_i / (P sigma) (eps_i of a minus point counted as -eps), and an Adam step
-- on the mean along -g (the same fused kernel as optim.Adam). sigma and lr may decay each
-- generation (sigma_decay / lr_decay, down to sigma_min / lr_min), as in estool's OpenES.
local nc = require "netcl"
local class = require "netcl.class"
local B = require "netcl.evo.base"

local OpenAIES = class("evo.OpenAIES", B.Base)

local OPTIONS = {dim = true, popsize = true, sigma = true, lr = true, mean = true, sigma_decay = true,
                 sigma_min = true, lr_decay = true, lr_min = true, betas = true, eps = true, weight_decay = true,
                 device = true, dtype = true}

--- evo.OpenAIES{dim=, popsize=50 (even), sigma=0.1, lr=0.01, mean=0, sigma_decay=1, sigma_min=0,
-- lr_decay=1, lr_min=0, betas={0.9, 0.999}, eps=1e-8, weight_decay=0, device=, dtype=}
function OpenAIES:init(cfg)
  local fname = "evo.OpenAIES"
  B.options(fname, cfg, OPTIONS)
  self:_common(fname, cfg, 2, 50)
  if self.popsize % 2 ~= 0 then
    error(string.format("%s: popsize must be even (antithetic pairs), got %d", fname, self.popsize), 3)
  end
  self.sigma = B.number(fname, "sigma", cfg.sigma or 0.1, 0)
  self.lr = B.number(fname, "lr", cfg.lr or 0.01, 0)
  self.sigma_decay = B.number(fname, "sigma_decay", cfg.sigma_decay or 1, 0, 1)
  self.sigma_min = B.number(fname, "sigma_min", cfg.sigma_min or 0, 0)
  self.lr_decay = B.number(fname, "lr_decay", cfg.lr_decay or 1, 0, 1)
  self.lr_min = B.number(fname, "lr_min", cfg.lr_min or 0, 0)
  local betas = cfg.betas or {0.9, 0.999}
  if type(betas) ~= "table" or #betas ~= 2 then error(fname .. ": betas must be a pair {b1, b2}", 3) end
  self.betas = {B.number(fname, "betas[1]", betas[1], 0, 1), B.number(fname, "betas[2]", betas[2], 0, 1)}
  self.eps = B.number(fname, "eps", cfg.eps or 1e-8, 0)
  self.weight_decay = B.number(fname, "weight_decay", cfg.weight_decay or 0, 0)
  self.mean = self:_vector("mean", cfg.mean)
  self.exp_avg = nc.zeros({self.dim}, self._topts)
  self.exp_avg_sq = nc.zeros({self.dim}, self._topts)
  self.step = 0
  self._state_tensors = {"mean", "exp_avg", "exp_avg_sq", "noise"}
  self._state_scalars = {"sigma", "lr", "step"}
end

function OpenAIES:_ask()
  local H, D = self.popsize // 2, self.dim
  local noise = nc.randn({H, D}, self._topts)
  self.noise = noise
  local m = self.mean:view({1, D})
  local d = noise * self.sigma
  return nc.cat({m + d, m - d}, 1)
end

--- centered_ranks(f) -> Tensor: rank(f_i) / (P - 1) - 0.5, ranks 0-based ascending (ties by
-- position).
function OpenAIES.centered_ranks(f)
  local P = f.shape[1]
  local _, order = f:sort()
  local _, ranks = order:sort()
  return ranks:to(f.dtype) * (1 / (P - 1)) - 0.5
end

function OpenAIES:_tell(_, f)
  local H, D = self.popsize // 2, self.dim
  local u = OpenAIES.centered_ranks(f)
  local du = u:narrow(1, 1, H) - u:narrow(1, H + 1, H)
  local g = du:view({1, H}):matmul(self.noise):view({D}) * (1 / (self.popsize * self.sigma))
  self.grad = g
  self.step = self.step + 1
  nc._optim.adam_step(self.mean, g, self.exp_avg, self.exp_avg_sq, nil, self.step, false,
    {lr = self.lr, betas = self.betas, eps = self.eps, weight_decay = self.weight_decay, amsgrad = false})
  self.sigma = math.max(self.sigma * self.sigma_decay, self.sigma_min)
  self.lr = math.max(self.lr * self.lr_decay, self.lr_min)
end

return OpenAIES

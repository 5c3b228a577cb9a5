-- optim.CosineAnnealingLR(opt, {T_max=, eta_min=0}): PyTorch's closed form,
--   lr(t) = eta_min + (base_lr - eta_min) * (1 + cos(pi * t / T_max)) / 2
-- for t = the number of sched:step() calls (past T_max it rises again, as PyTorch's does).
local S = require "netcl.optim.scheduler"

return S.class {
  name = "CosineAnnealingLR",
  defaults = {T_max = S.REQUIRED, eta_min = 0},
  check = function(o, fail)
    if math.tointeger(o.T_max) == nil or o.T_max < 1 then fail("T_max must be a positive integer, got %s", o.T_max) end
    if not (o.eta_min >= 0) then fail("eta_min must be >= 0, got %s", o.eta_min) end
  end,
  lr = function(o, base, t)
    return o.eta_min + (base - o.eta_min) * (1 + math.cos(math.pi * t / o.T_max)) / 2
  end,
}

-- optim.WarmupCosine(opt, {warmup=, total=, min_lr=0}): a linear warm-up into a cosine decay
-- (the schedule of nanoGPT and most LLM recipes), for t = the number of sched:step() calls:
--   t < warmup:           lr = base_lr * (t + 1) / (warmup + 1)
--   warmup <= t < total:  lr = min_lr + (base_lr - min_lr) * (1 + cos(pi * (t - warmup) / (total - warmup))) / 2
--   t >= total:           lr = min_lr
-- The first step trains at base_lr / (warmup + 1) rather than 0, and the peak base_lr comes
-- once, at t = warmup.
local S = require "netcl.optim.scheduler"

return S.class {
  name = "WarmupCosine",
  defaults = {warmup = S.REQUIRED, total = S.REQUIRED, min_lr = 0},
  check = function(o, fail)
    if math.tointeger(o.warmup) == nil or o.warmup < 0 then
      fail("warmup must be a non-negative integer, got %s", o.warmup)
    end
    if math.tointeger(o.total) == nil or o.total < o.warmup or o.total < 1 then
      fail("total must be an integer >= max(warmup, 1), got %s (warmup %s)", o.total, o.warmup)
    end
    if not (o.min_lr >= 0) then fail("min_lr must be >= 0, got %s", o.min_lr) end
  end,
  lr = function(o, base, t)
    if t < o.warmup then return base * (t + 1) / (o.warmup + 1) end
    if t >= o.total then return o.min_lr end
    return o.min_lr + (base - o.min_lr) * (1 + math.cos(math.pi * (t - o.warmup) / (o.total - o.warmup))) / 2
  end,
}

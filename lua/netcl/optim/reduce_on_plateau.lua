-- optim.ReduceLROnPlateau(opt, {mode="min", factor=0.1, patience=10, threshold=1e-4,
-- threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8}): PyTorch's algorithm. sched:step(metric)
-- counts the epochs since the metric last improved on the best by more than the threshold
-- ("rel": below best * (1 - threshold) in min mode, above best * (1 + threshold) in max mode;
-- "abs": best -/+ threshold); once that count exceeds patience, every group's lr becomes
-- max(lr * factor, min_lr) (a change smaller than eps is skipped), and the next `cooldown`
-- epochs are not counted. min_lr may be one number or one per group.
local nc = require "netcl"
local class = require "netcl.class"
local S = require "netcl.optim.scheduler"

local NAME = "netcl.optim.ReduceLROnPlateau"

-- get_last_lr comes from the base class.
local ReduceLROnPlateau = class(NAME, S.Scheduler)

local function worst(mode) return mode == "min" and math.huge or -math.huge end

local function is_better(o, a, best)
  if o.mode == "min" and o.threshold_mode == "rel" then return a < best * (1 - o.threshold) end
  if o.mode == "min" then return a < best - o.threshold end
  if o.threshold_mode == "rel" then return a > best * (o.threshold + 1) end
  return a > best + o.threshold
end

--- sched:step(metric): metric is a number, or a Tensor/Node of one element.
function ReduceLROnPlateau:step(metric)
  local current = metric
  if (nc.is_tensor(metric) or nc.is_node(metric)) and metric:numel() == 1 then current = metric:item() end
  if type(current) ~= "number" then
    error(string.format("%s:step: needs the metric (a number or a one-element Tensor), got %s", NAME, type(metric)), 2)
  end
  local o = self.options
  self.last_epoch = self.last_epoch + 1
  if is_better(o, current, self.best) then
    self.best = current
    self.num_bad_epochs = 0
  else
    self.num_bad_epochs = self.num_bad_epochs + 1
  end
  if self.cooldown_counter > 0 then
    self.cooldown_counter = self.cooldown_counter - 1
    self.num_bad_epochs = 0
  end
  if self.num_bad_epochs > o.patience then
    for i, g in ipairs(self.optimizer.param_groups) do
      local new = math.max(g.lr * o.factor, self.min_lrs[i])
      if g.lr - new > o.eps then g.lr = new end
    end
    self.cooldown_counter = o.cooldown
    self.num_bad_epochs = 0
  end
  self._last_lr = S.lrs_of(self.optimizer)
end

--- sched:state_dict() -> {last_epoch=, num_bad_epochs=, cooldown_counter=, best=} (JSON-able: best is
--- left out while it is not finite).
function ReduceLROnPlateau:state_dict()
  local best = self.best
  if best ~= best or best == math.huge or best == -math.huge then best = nil end
  return {last_epoch = self.last_epoch, num_bad_epochs = self.num_bad_epochs, cooldown_counter = self.cooldown_counter,
          best = best}
end

function ReduceLROnPlateau:load_state_dict(sd)
  local fname = NAME .. ":load_state_dict"
  if type(sd) ~= "table" then error(fname .. ": expected a table, got " .. type(sd), 2) end
  for _, k in ipairs({"last_epoch", "num_bad_epochs", "cooldown_counter"}) do
    if math.tointeger(sd[k]) == nil then error(string.format("%s: '%s' must be an integer", fname, k), 2) end
  end
  if sd.best ~= nil and type(sd.best) ~= "number" then error(fname .. ": 'best' must be a number", 2) end
  self.last_epoch = math.tointeger(sd.last_epoch)
  self.num_bad_epochs = math.tointeger(sd.num_bad_epochs)
  self.cooldown_counter = math.tointeger(sd.cooldown_counter)
  self.best = sd.best or worst(self.options.mode)
end

function ReduceLROnPlateau:__tostring()
  return string.format("ReduceLROnPlateau(best=%s, num_bad_epochs=%d)", tostring(self.best), self.num_bad_epochs)
end

-- Errors at level 4 from fail are the caller's line (fail -> init -> the class call).
function ReduceLROnPlateau:init(opt, opts)
  S.check_optimizer(NAME, opt)
  local o = S.options(NAME, opts, {mode = "min", factor = 0.1, patience = 10, threshold = 1e-4,
                                   threshold_mode = "rel", cooldown = 0, min_lr = 0, eps = 1e-8}, {min_lr = true})
  local function fail(fmt, ...) error(string.format("%s: " .. fmt, NAME, ...), 4) end
  if o.mode ~= "min" and o.mode ~= "max" then fail("mode must be \"min\" or \"max\", got %q", o.mode) end
  if o.threshold_mode ~= "rel" and o.threshold_mode ~= "abs" then
    fail("threshold_mode must be \"rel\" or \"abs\", got %q", o.threshold_mode)
  end
  if not (o.factor < 1 and o.factor >= 0) then fail("factor must be in [0, 1), got %s", o.factor) end
  for _, k in ipairs({"patience", "cooldown"}) do
    if math.tointeger(o[k]) == nil or o[k] < 0 then fail("%s must be a non-negative integer, got %s", k, o[k]) end
  end
  if not (o.threshold >= 0) then fail("threshold must be >= 0, got %s", o.threshold) end
  if not (o.eps >= 0) then fail("eps must be >= 0, got %s", o.eps) end
  local groups = #opt.param_groups
  local min_lrs = {}
  if type(o.min_lr) == "table" then
    if #o.min_lr ~= groups then fail("min_lr has %d entries for %d parameter groups", #o.min_lr, groups) end
    for i = 1, groups do min_lrs[i] = o.min_lr[i] end
  elseif type(o.min_lr) == "number" then
    for i = 1, groups do min_lrs[i] = o.min_lr end
  else
    fail("min_lr must be a number or a list of numbers, got %s", type(o.min_lr))
  end
  for i = 1, groups do
    if type(min_lrs[i]) ~= "number" or not (min_lrs[i] >= 0) then fail("min_lr %d must be a number >= 0", i) end
  end
  self.optimizer, self.options, self.min_lrs, self.best = opt, o, min_lrs, worst(o.mode)
  self.num_bad_epochs, self.cooldown_counter, self.last_epoch, self._last_lr = 0, 0, 0, S.lrs_of(opt)
end

return ReduceLROnPlateau

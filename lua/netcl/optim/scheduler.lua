-- The base class of the learning-rate schedulers (M.Scheduler), and the schedulers that have a
-- closed form (CosineAnnealingLR, WarmupCosine, made by M.class): every group's lr is
-- f(base_lr, epoch), where base_lr is the group's lr when the scheduler was made and epoch
-- counts sched:step() calls. As in PyTorch, making a scheduler applies epoch 0 at once.
-- ReduceLROnPlateau (reduce_on_plateau.lua) subclasses M.Scheduler with its own rule.
local class = require "netcl.class"

local M = {}

M.REQUIRED = setmetatable({}, {__tostring = function() return "<required>" end})

-- Both checks below run in a scheduler's init, which netcl.class runs from the user's line:
-- level 4 from them is that line.
local LEVEL = 4

-- Checks a scheduler's optimizer argument: anything with a list of param_groups holding lr.
function M.check_optimizer(fname, opt)
  if type(opt) ~= "table" or type(opt.param_groups) ~= "table" or #opt.param_groups == 0 then
    error(string.format("%s: argument 1: expected an optimizer (from netcl.optim), got %s", fname, type(opt)), LEVEL)
  end
end

-- opts completed from defaults (REQUIRED: a number without default) with types checked against
-- them, except for the names in `loose` (the class checks those); unknown names are errors.
function M.options(fname, opts, defaults, loose)
  if opts ~= nil and type(opts) ~= "table" then
    error(string.format("%s: argument 2: options must be a table, got %s", fname, type(opts)), LEVEL)
  end
  opts = opts or {}
  local out = {}
  for k, v in pairs(opts) do
    if defaults[k] == nil then error(string.format("%s: unknown option '%s'", fname, tostring(k)), LEVEL) end
    out[k] = v
  end
  for k, d in pairs(defaults) do
    if out[k] == nil then
      if d == M.REQUIRED then error(string.format("%s: option '%s' is required", fname, k), LEVEL) end
      out[k] = d
    end
    local want = d == M.REQUIRED and "number" or type(d)
    if type(out[k]) ~= want and not (loose and loose[k]) then
      error(string.format("%s: option '%s' must be a %s, got %s", fname, k, want, type(out[k])), LEVEL)
    end
  end
  return out
end

local function lrs_of(opt)
  local out = {}
  for i, g in ipairs(opt.param_groups) do out[i] = g.lr end
  return out
end
M.lrs_of = lrs_of

-- The base class: every scheduler has an optimizer, its options, a last_epoch count and the lrs
-- it last set (_last_lr).
local Scheduler = class("netcl.optim.LRScheduler")
M.Scheduler = Scheduler

local function apply(self)
  local lr_at = getmetatable(self).lr_at
  for i, g in ipairs(self.optimizer.param_groups) do g.lr = lr_at(self.options, self.base_lrs[i], self.last_epoch) end
  self._last_lr = lrs_of(self.optimizer)
end

--- sched(opt, opts) for a closed-form scheduler: checks the options and applies epoch 0.
function Scheduler:init(opt, opts)
  local cls = getmetatable(self)
  local fname = cls.__name
  M.check_optimizer(fname, opt)
  local o = M.options(fname, opts, cls.defaults)
  -- fail -> check -> init -> the class call -> the user's line
  cls.check(o, function(fmt, ...) error(string.format("%s: " .. fmt, fname, ...), LEVEL + 1) end)
  self.optimizer, self.options, self.base_lrs, self.last_epoch = opt, o, lrs_of(opt), 0
  apply(self)
end

--- sched:step(): the next epoch's learning rates (a metric argument, if any, is ignored).
function Scheduler:step()
  self.last_epoch = self.last_epoch + 1
  apply(self)
end

--- sched:get_last_lr() -> {lr of group 1, ...} as last set.
function Scheduler:get_last_lr()
  local out = {}
  for i, v in ipairs(self._last_lr) do out[i] = v end
  return out
end

--- sched:state_dict() -> {last_epoch =, base_lrs = {...}} (JSON-able).
function Scheduler:state_dict()
  return {last_epoch = self.last_epoch, base_lrs = {table.unpack(self.base_lrs)}}
end

--- sched:load_state_dict(sd): resumes the schedule at sd.last_epoch (the optimizer's own
--- state_dict restores its current lr).
function Scheduler:load_state_dict(sd)
  local fname = getmetatable(self).__name .. ":load_state_dict"
  if type(sd) ~= "table" or math.tointeger(sd.last_epoch) == nil or type(sd.base_lrs) ~= "table" then
    error(fname .. ": expected {last_epoch = integer, base_lrs = {...}}", 2)
  end
  if #sd.base_lrs ~= #self.optimizer.param_groups then
    error(string.format("%s: %d base_lrs for %d parameter groups", fname, #sd.base_lrs, #self.optimizer.param_groups), 2)
  end
  self.last_epoch = math.tointeger(sd.last_epoch)
  self.base_lrs = {table.unpack(sd.base_lrs)}
  self._last_lr = lrs_of(self.optimizer)
end

function Scheduler:__tostring()
  return string.format("%s(last_epoch=%d)", getmetatable(self).name, self.last_epoch)
end

-- A closed-form scheduler class ("netcl.optim.<name>"): spec = {name, defaults,
-- check(options, fail), lr(options, base_lr, epoch)}.
function M.class(spec)
  local cls = class("netcl.optim." .. spec.name, Scheduler)
  cls.name, cls.defaults, cls.check, cls.lr_at = spec.name, spec.defaults, spec.check, spec.lr
  return cls
end

return M

-- The base of the learning-rate schedulers that have a closed form (CosineAnnealingLR,
-- WarmupCosine): every group's lr is f(base_lr, epoch), where base_lr is the group's lr when the
-- scheduler was made and epoch counts sched:step() calls. As in PyTorch, making a scheduler
-- applies epoch 0 at once.
local M = {}

M.REQUIRED = setmetatable({}, {__tostring = function() return "<required>" end})

-- Checks a scheduler's optimizer argument: anything with a list of param_groups holding lr.
function M.check_optimizer(fname, opt)
  if type(opt) ~= "table" or type(opt.param_groups) ~= "table" or #opt.param_groups == 0 then
    error(string.format("%s: argument 1: expected an optimizer (from netcl.optim), got %s", fname, type(opt)), 3)
  end
end

-- opts completed from defaults (REQUIRED: a number without default) with types checked against
-- them, except for the names in `loose` (the class checks those); unknown names are errors.
function M.options(fname, opts, defaults, loose)
  if opts ~= nil and type(opts) ~= "table" then
    error(string.format("%s: argument 2: options must be a table, got %s", fname, type(opts)), 3)
  end
  opts = opts or {}
  local out = {}
  for k, v in pairs(opts) do
    if defaults[k] == nil then error(string.format("%s: unknown option '%s'", fname, tostring(k)), 3) end
    out[k] = v
  end
  for k, d in pairs(defaults) do
    if out[k] == nil then
      if d == M.REQUIRED then error(string.format("%s: option '%s' is required", fname, k), 3) end
      out[k] = d
    end
    local want = d == M.REQUIRED and "number" or type(d)
    if type(out[k]) ~= want and not (loose and loose[k]) then
      error(string.format("%s: option '%s' must be a %s, got %s", fname, k, want, type(out[k])), 3)
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

local methods = {}

local function apply(self)
  for i, g in ipairs(self.optimizer.param_groups) do g.lr = self._lr(self.options, self.base_lrs[i], self.last_epoch) end
  self._last_lr = lrs_of(self.optimizer)
end

--- sched:step(): the next epoch's learning rates (a metric argument, if any, is ignored).
function methods:step()
  self.last_epoch = self.last_epoch + 1
  apply(self)
end

--- sched:get_last_lr() -> {lr of group 1, ...} as last set.
function methods:get_last_lr()
  local out = {}
  for i, v in ipairs(self._last_lr) do out[i] = v end
  return out
end

--- sched:state_dict() -> {last_epoch =, base_lrs = {...}} (JSON-able).
function methods:state_dict()
  return {last_epoch = self.last_epoch, base_lrs = {table.unpack(self.base_lrs)}}
end

--- sched:load_state_dict(sd): resumes the schedule at sd.last_epoch (the optimizer's own
--- state_dict restores its current lr).
function methods:load_state_dict(sd)
  local fname = self._name .. ":load_state_dict"
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

-- A scheduler class: name, defaults, check(options, fail), lr(options, base_lr, epoch).
function M.class(spec)
  local fname = "netcl.optim." .. spec.name
  local mt = {__index = methods, __name = fname}
  mt.__tostring = function(self) return string.format("%s(last_epoch=%d)", spec.name, self.last_epoch) end
  return function(opt, opts)
    M.check_optimizer(fname, opt)
    local o = M.options(fname, opts, spec.defaults)
    spec.check(o, function(fmt, ...) error(string.format("%s: " .. fmt, fname, ...), 4) end)
    local self = setmetatable({optimizer = opt, options = o, base_lrs = lrs_of(opt), last_epoch = 0, _lr = spec.lr,
                               _name = fname}, mt)
    apply(self)
    return self
  end
end

return M

-- The optimizer base of netcl.optim: parameter groups, options checking, the `lr` property,
-- step (one fused kernel launch per parameter, in C), zero_grad, and state_dict /
-- load_state_dict. Each optimizer (sgd.lua, rmsprop.lua, adam.lua) is a subclass of
-- M.Optimizer made from a spec by M.class. docs/optim.md describes the behaviour and the
-- state_dict layout.
local nc = require "netcl"
local class = require "netcl.class"

local M = {}

-- Marks an option without a default (PyTorch's `required`).
M.REQUIRED = setmetatable({}, {__tostring = function() return "<required>" end})

local is_tensor = nc.is_tensor

-- Parameter dtypes; the storage ones (bfloat16, float16) are stepped through a float32 master
-- copy, state entry "master", made from the parameter at its first step (or restored by
-- load_state_dict): the update runs on the master (with the gradient in float32; all state is
-- float32) and the parameter receives the master rounded to its dtype. The master is the
-- truth from then on: a value written into such a parameter by other means is replaced at the
-- next step (load the optimizer's state too, or make a new optimizer).
local PARAM_DTYPES = {float32 = true, float64 = true, bfloat16 = true, float16 = true}
local STORAGE_DTYPES = {bfloat16 = true, float16 = true}

-- The value Tensor of a parameter (a Node from ag.param, or any table or userdata other than a
-- Tensor with a Tensor `value`), or nil when v is not one.
local function param_value(v)
  if is_tensor(v) then return nil end
  local value = class.field(v, "value")
  if is_tensor(value) then return value end
  return nil
end
M.param_value = param_value

-- The parameters of `params`: a sequence of parameters, or a single one. Errors are raised at
-- `level` as seen from here.
function M.param_list(fname, params, argn, level)
  if param_value(params) then return {params} end
  if type(params) ~= "table" then
    error(string.format("%s: argument %d: expected a list of parameters, got %s", fname, argn, type(params)), level)
  end
  return params
end

local function shape_str(s) return "[" .. table.concat(s, ",") .. "]" end

local function copy_value(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = copy_value(x) end
  return out
end

-- ---- options -------------------------------------------------------------------------------------

-- A group's options: the group's own, else the constructor's, else the defaults; unknown names
-- and wrong types are errors (a misspelt option must not be ignored). Raises without a position:
-- callers run it under pcall and re-raise at their caller's level.
local function merge_options(cls, fname, group, opts)
  local function fail(fmt, ...) error(string.format("%s: " .. fmt, fname, ...), 0) end
  local out = {}
  for k, v in pairs(group) do
    if k ~= "params" then
      if cls.defaults[k] == nil then fail("unknown option '%s'", tostring(k)) end
      out[k] = v
    end
  end
  for k, v in pairs(cls.defaults) do
    if out[k] == nil then
      if opts[k] ~= nil then out[k] = opts[k]
      elseif v == M.REQUIRED then fail("option '%s' is required", k)
      else out[k] = copy_value(v) end
    end
  end
  for k, v in pairs(out) do
    local want = cls.defaults[k] == M.REQUIRED and "number" or type(cls.defaults[k])
    if type(v) ~= want then fail("option '%s' must be a %s, got %s", k, want, type(v)) end
  end
  if not (out.lr >= 0) then fail("invalid learning rate: %s (lr must be >= 0)", tostring(out.lr)) end
  cls.check(out, fail)
  return out
end

-- Checks that an option is a number >= 0 (fail: the error reporter check functions get).
function M.nonneg(o, name, fail)
  if not (o[name] >= 0) then fail("invalid %s: %s (must be >= 0)", name, tostring(o[name])) end
end

-- ---- the class ---------------------------------------------------------------------------------------

local Optimizer = class("netcl.optim.Optimizer")
M.Optimizer = Optimizer

-- Reading opt.lr gives the first group's learning rate; writing sets every group's (schedulers
-- work per group).
function Optimizer.__index(self, k)
  if k == "lr" then return rawget(self, "param_groups")[1].lr end
  return getmetatable(self)[k]
end

function Optimizer.__newindex(self, k, v)
  if k == "lr" then
    local cls = getmetatable(self)
    if type(v) ~= "number" or not (v >= 0) then
      error(string.format("netcl.optim.%s: invalid learning rate: %s (lr must be a number >= 0)", cls.name,
        tostring(v)), 2)
    end
    for _, g in ipairs(rawget(self, "param_groups")) do g.lr = v end
    return
  end
  rawset(self, k, v)
end

function Optimizer.__tostring(self)
  local cls = getmetatable(self)
  local parts = {}
  for gi, g in ipairs(self.param_groups) do
    local keys = {}
    for k in pairs(g) do if k ~= "params" then keys[#keys + 1] = k end end
    table.sort(keys)
    local kv = {}
    for _, k in ipairs(keys) do
      local v = g[k]
      kv[#kv + 1] = k .. "=" .. (type(v) == "table" and "{" .. table.concat(v, ", ") .. "}" or tostring(v))
    end
    parts[#parts + 1] = string.format("  group %d (%d params): %s", gi, #g.params, table.concat(kv, " "))
  end
  return cls.name .. "(\n" .. table.concat(parts, "\n") .. "\n)"
end

-- Builds an optimizer class (a subclass of M.Optimizer named "netcl.optim.<name>") from spec:
--   name      "SGD"
--   defaults  option -> default (M.REQUIRED for none)
--   check     function(options, fail): extra checks (fail(fmt, ...) raises)
--   state     function(group) -> names of the state tensors every updated parameter has under
--             the group's options (checked by load_state_dict)
--   all_state names of every state tensor the optimizer may keep
--   update    function(value, grad, st, group, rounded): one fused update; st is the parameter's
--             state table ({step = 0} or {} at first), which update fills. For a storage-dtype
--             parameter value is its float32 master and rounded the parameter itself: an update
--             that writes the new master rounded into it (the fused kernels' rounded argument)
--             returns true; otherwise the master is copied into it afterwards
--   counts_steps  whether the state has a step count (all but SGD)
function M.class(spec)
  local cls = class("netcl.optim." .. spec.name, Optimizer)
  cls.name, cls.defaults, cls.check, cls.state_names = spec.name, spec.defaults, spec.check, spec.state
  cls.update, cls.counts_steps = spec.update, spec.counts_steps
  cls.known_state = {step = cls.counts_steps or nil, master = true}
  for _, n in ipairs(spec.all_state) do cls.known_state[n] = true end
  return cls
end

-- Class(params, opts): params is a list of parameters or a list of groups ({params = {...},
-- option = value, ...}). Errors at level 3 are the caller's line (netcl.class calls init).
function Optimizer:init(params, opts)
  local cls = getmetatable(self)
  local fname = cls.__name
  if opts ~= nil and type(opts) ~= "table" then
    error(string.format("%s: argument 2: options must be a table, got %s", fname, type(opts)), 3)
  end
  opts = opts or {}
  for k in pairs(opts) do
    if cls.defaults[k] == nil then error(string.format("%s: unknown option '%s'", fname, tostring(k)), 3) end
  end
  params = M.param_list(fname, params, 1, 4)
  local groups = {}
  if type(params[1]) == "table" and params[1].params ~= nil and not param_value(params[1]) then
    for i, g in ipairs(params) do
      if type(g) ~= "table" or g.params == nil then
        error(string.format("%s: group %d: a parameter group is a table with a 'params' list", fname, i), 3)
      end
      groups[i] = g
    end
  else
    groups[1] = {params = params}
  end
  self.param_groups, self.state = {}, {}
  local seen = {}
  for gi, g in ipairs(groups) do
    local ok, group = pcall(merge_options, cls, fname, g, opts)
    if not ok then error(group, 3) end
    local list = M.param_list(fname, g.params, 1, 4)
    if #list == 0 and next(list) ~= nil then
      error(string.format("%s: a parameter list must be a sequence (1..n)", fname), 3)
    end
    group.params = {}
    for i, p in ipairs(list) do
      local where = #groups > 1 and string.format("group %d, parameter %d", gi, i) or "parameter " .. i
      local value = param_value(p)
      if not value then
        error(string.format("%s: %s is not a parameter (a Node from autograd.param, or a table with a " ..
          "Tensor 'value'), got %s", fname, where, type(p)), 3)
      end
      if not PARAM_DTYPES[value.dtype] then
        error(string.format("%s: %s is %s; parameters must be float32, float64, bfloat16 or float16", fname, where,
          value.dtype), 3)
      end
      if seen[p] then error(string.format("%s: %s appears more than once", fname, where), 3) end
      seen[p] = true
      group.params[i] = p
    end
    self.param_groups[gi] = group
  end
  if next(seen) == nil then error(string.format("%s: got an empty parameter list", fname), 3) end
end

-- ---- methods ---------------------------------------------------------------------------------------

local function run_updates(self, at)
  local cls, state, n = getmetatable(self), rawget(self, "state"), 0
  for gi, group in ipairs(rawget(self, "param_groups")) do
    for i, p in ipairs(group.params) do
      n = n + 1
      local grad = p.grad
      if grad ~= nil then
        at[1], at[2] = gi, i
        local st = state[n]
        if st == nil then
          st = cls.counts_steps and {step = 0} or {}
          state[n] = st
        end
        local value = p.value
        if STORAGE_DTYPES[value.dtype] then
          if st.master == nil then
            st.master = nc._optim.state_new(value)
            st.master:copy_(value)
          end
          if grad.dtype ~= "float32" then grad = grad:float() end
          -- an update that takes the parameter as its fifth argument writes the rounded master
          -- in its own pass (and says so); others leave the copy to us
          if not cls.update(st.master, grad, st, group, value) then value:copy_(st.master) end
        else
          cls.update(value, grad, st, group)
        end
      end
    end
  end
end

--- opt:step(closure?) -> closure's result: updates every parameter that has a gradient
--- (parameters whose .grad is nil are skipped, and their state is left as it is).
function Optimizer:step(closure)
  local loss
  if closure ~= nil then loss = closure() end
  local at = {0, 0}
  local ok, err = pcall(run_updates, self, at)
  if not ok then
    local cls = getmetatable(self)
    local where = #self.param_groups > 1 and string.format("group %d, parameter %d", at[1], at[2])
      or "parameter " .. at[2]
    err = tostring(err):gsub("^[^\n]-netcl%.optim: ", "", 1)
    error(string.format("netcl.optim.%s:step: %s: %s", cls.name, where, err), 2)
  end
  return loss
end

--- opt:zero_grad({set_to_none = true}): drops every gradient (p.grad = nil, as PyTorch's
--- default); with set_to_none = false, fills existing gradients with zeros instead.
function Optimizer:zero_grad(opts)
  local to_none = true
  if opts ~= nil then
    if type(opts) ~= "table" then
      error("netcl.optim:zero_grad: options must be a table ({set_to_none = false}), got " .. type(opts), 2)
    end
    for k in pairs(opts) do
      if k ~= "set_to_none" then error("netcl.optim:zero_grad: unknown option '" .. tostring(k) .. "'", 2) end
    end
    to_none = opts.set_to_none ~= false
  end
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do
      if to_none then
        p.grad = nil
      else
        local g = p.grad
        if g ~= nil then g:zero_() end
      end
    end
  end
end

--- opt:state_dict() -> {optimizer = name, state = {[n] = {step =, <name> = Tensor, ...}},
---                      param_groups = {{<options>, params = {n, ...}}, ...}}
--- Parameters are numbered 1.. across groups in order; state holds only parameters updated so
--- far. The tensors are copies, so the result is a snapshot that later steps do not change.
function Optimizer:state_dict()
  local state, groups, n = {}, {}, 0
  for gi, group in ipairs(self.param_groups) do
    local g = {}
    for k, v in pairs(group) do
      if k ~= "params" then g[k] = copy_value(v) end
    end
    g.params = {}
    for i = 1, #group.params do
      n = n + 1
      g.params[i] = n
    end
    groups[gi] = g
  end
  for idx, st in pairs(rawget(self, "state")) do
    local out = {}
    for k, v in pairs(st) do out[k] = is_tensor(v) and v:clone() or v end
    state[idx] = out
  end
  return {optimizer = getmetatable(self).name, state = state, param_groups = groups}
end

--- opt:load_state_dict(sd): restores what state_dict gave (possibly through netcl.io): the
--- options of each group and every parameter's state, copied onto the parameter's device and
--- dtype. The groups must have the same sizes as this optimizer's.
function Optimizer:load_state_dict(sd)
  local cls = getmetatable(self)
  local fname = "netcl.optim." .. cls.name .. ":load_state_dict"
  local function fail(fmt, ...) error(string.format("%s: " .. fmt, fname, ...), 3) end
  if type(sd) ~= "table" then fail("expected a state_dict table, got %s", type(sd)) end
  if sd.optimizer ~= nil and sd.optimizer ~= cls.name then
    fail("the state_dict is of a %s optimizer, not %s", tostring(sd.optimizer), cls.name)
  end
  if type(sd.param_groups) ~= "table" or type(sd.state) ~= "table" then
    fail("a state_dict has 'state' and 'param_groups' tables")
  end
  if #sd.param_groups ~= #self.param_groups then
    fail("the state_dict has %d parameter groups, the optimizer %d", #sd.param_groups, #self.param_groups)
  end
  -- Check everything before changing anything.
  local groups, values = {}, {}
  for gi, g in ipairs(sd.param_groups) do
    local mine = self.param_groups[gi]
    if type(g) ~= "table" or type(g.params) ~= "table" or #g.params ~= #mine.params then
      fail("group %d of the state_dict has %s parameters, the optimizer's %d", gi,
        type(g) == "table" and type(g.params) == "table" and tostring(#g.params) or "no", #mine.params)
    end
    local ok, opts = pcall(merge_options, cls, fname, g, {})
    if not ok then error(opts, 2) end
    groups[gi] = opts
    for _, p in ipairs(mine.params) do values[#values + 1] = p.value end
  end
  local state = {}
  for idx, st in pairs(sd.state) do
    local n = math.tointeger(idx)
    if not n or n < 1 or n > #values then fail("state entry %s is not a parameter number (1..%d)", tostring(idx), #values) end
    if type(st) ~= "table" then fail("state %d is a %s, not a table", n, type(st)) end
    local value, out = values[n], {}
    for k, v in pairs(st) do
      if not cls.known_state[k] then fail("state %d has an unknown entry '%s'", n, tostring(k)) end
      if k == "step" then
        local s = math.tointeger(v)
        if not s or s < 0 then fail("state %d: step must be a non-negative integer, got %s", n, tostring(v)) end
        out.step = s
      else
        if not is_tensor(v) then fail("state %d: '%s' must be a Tensor, got %s", n, k, type(v)) end
        local a, b = v.shape, value.shape
        if shape_str(a) ~= shape_str(b) then
          fail("state %d: '%s' has shape %s but the parameter has shape %s", n, k, shape_str(a), shape_str(b))
        end
        out[k] = v
      end
    end
    if cls.counts_steps and out.step == nil then fail("state %d lacks its step count", n) end
    state[n] = out
  end
  -- State a parameter needs under its group's options must be there.
  local n = 0
  for gi, g in ipairs(groups) do
    for _ = 1, #self.param_groups[gi].params do
      n = n + 1
      if state[n] then
        for _, name in ipairs(cls.state_names(g)) do
          if state[n][name] == nil then fail("state %d lacks '%s'", n, name) end
        end
      end
    end
  end
  for gi, g in ipairs(groups) do
    g.params = self.param_groups[gi].params
    self.param_groups[gi] = g
  end
  local live = {}
  for idx, st in pairs(state) do
    local out = {}
    for k, v in pairs(st) do
      if is_tensor(v) then
        local t = nc._optim.state_new(values[idx])
        t:copy_(v)
        out[k] = t
      else
        out[k] = v
      end
    end
    live[idx] = out
  end
  rawset(self, "state", live)
end

return M

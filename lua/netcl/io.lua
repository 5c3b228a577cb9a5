-- netcl.io: checkpoints (safetensors files), npy arrays, and saving and restoring models and
-- optimizers. docs/io.md describes the formats and the checkpoint convention.
local nc = require "netcl"
local class = require "netcl.class"

local M = {}

-- Checkpoint convention: optimizer tensors are entries named "optim.<path in the optimizer's
-- state_dict>"; the rest of that state_dict is JSON in the metadata under OPTIM_KEY, with each
-- tensor replaced by {["$tensor"] = "<entry name>"}. The caller's `extra` table is JSON under
-- EXTRA_KEY.
local OPTIM_PREFIX = "optim."
local OPTIM_KEY = "netcl.optimizer"
local SCHED_KEY = "netcl.scheduler"
local EXTRA_KEY = "netcl.extra"
local TENSOR_REF = "$tensor"

M.OPTIM_PREFIX, M.OPTIM_KEY, M.SCHED_KEY, M.EXTRA_KEY = OPTIM_PREFIX, OPTIM_KEY, SCHED_KEY, EXTRA_KEY

local is_tensor = nc.is_tensor

local function check_path(fname, path, argn)
  if type(path) ~= "string" then
    error(string.format("%s: argument %d: expected a path string, got %s", fname, argn, type(path)), 3)
  end
end

-- opts must be nil or a table whose keys are all in `allowed` (catches misspelt options).
local function check_opts(fname, opts, allowed)
  if opts == nil then return {} end
  if type(opts) ~= "table" then error(string.format("%s: options must be a table, got %s", fname, type(opts)), 3) end
  for k in pairs(opts) do
    if not allowed[k] then
      local names = {}
      for a in pairs(allowed) do names[#names + 1] = a .. "=" end
      table.sort(names)
      error(string.format("%s: unknown option '%s' (accepted: {%s})", fname, tostring(k), table.concat(names, ", ")), 3)
    end
  end
  return opts
end

-- A copy of the user's metadata with numbers and booleans turned into strings (the format
-- stores strings only).
local function string_metadata(fname, md)
  local out = {}
  if md == nil then return out end
  if type(md) ~= "table" then error(string.format("%s: metadata must be a table, got %s", fname, type(md)), 3) end
  for k, v in pairs(md) do
    if type(k) ~= "string" then error(string.format("%s: metadata keys must be strings, got a %s", fname, type(k)), 3) end
    local tv = type(v)
    if tv ~= "string" and tv ~= "number" and tv ~= "boolean" then
      error(string.format("%s: metadata '%s' is a %s; values must be strings, numbers or booleans", fname, k, tv), 3)
    end
    out[k] = tostring(v)
  end
  return out
end

local function method(fname, obj, name, argn)
  local fn = class.field(obj, name)
  if type(fn) ~= "function" and not (getmetatable(fn) or {}).__call then
    error(string.format("%s: argument %d has no %s method", fname, argn, name), 3)
  end
  return fn
end

-- Re-raises a core function's error from the caller of the API function (`level` is the API
-- function's level as seen from here), so the position shown is in the user's script.
local function relay(level, ok, ...)
  if ok then return ... end
  local msg = tostring((...)):gsub("^%[netcl%][^:]*:%d+: ", "")
  error(msg, level + 1)
end

local function json_encode(fname, what, v)
  local ok, s = pcall(nc._json.encode, v)
  if not ok then error(string.format("%s: %s: %s", fname, what, tostring(s)), 3) end
  return s
end

local function json_decode(fname, what, s)
  local ok, v = pcall(nc._json.decode, s)
  if not ok then error(string.format("%s: %s: %s", fname, what, tostring(v)), 3) end
  return v
end

--- nio.save(tensors, path, {metadata=}): writes a {name = Tensor} table as a safetensors file,
-- atomically. Metadata values may be strings, numbers or booleans (stored as strings).
function M.save(tensors, path, opts)
  local fname = "netcl.io.save"
  check_path(fname, path, 2)
  opts = check_opts(fname, opts, {metadata = true})
  relay(2, pcall(nc._io.save_safetensors, path, tensors, string_metadata(fname, opts.metadata), fname))
end

--- nio.load(path, {device=}) -> {name = Tensor}, {key = string}: tensors go to opts.device (a
-- Device or spec; default: the default device).
function M.load(path, opts)
  local fname = "netcl.io.load"
  check_path(fname, path, 1)
  opts = check_opts(fname, opts, {device = true})
  local tensors, meta = relay(2, pcall(nc._io.load_safetensors, path, opts.device, fname))
  return tensors, meta
end

--- nio.save_npy(t, path): a numpy .npy file, C order, little-endian.
function M.save_npy(t, path)
  check_path("netcl.io.save_npy", path, 2)
  relay(2, pcall(nc._io.save_npy, path, t, "netcl.io.save_npy"))
end

--- nio.load_npy(path, {device=}) -> Tensor
function M.load_npy(path, opts)
  local fname = "netcl.io.load_npy"
  check_path(fname, path, 1)
  opts = check_opts(fname, opts, {device = true})
  local t = relay(2, pcall(nc._io.load_npy, path, opts.device, fname))
  return t
end

-- Moves every tensor of an optimizer state_dict into `tensors` under "optim.<path>" and
-- returns the rest of the tree, with references in place of the tensors.
local function split_state(fname, value, path, tensors)
  if is_tensor(value) then
    if tensors[path] then
      error(string.format("%s: optimizer state: two tensors map to the entry name '%s'", fname, path), 4)
    end
    tensors[path] = value
    return {[TENSOR_REF] = path}
  end
  if type(value) ~= "table" then return value end
  local out = {}
  for k, v in pairs(value) do
    if type(k) ~= "string" and math.type(k) ~= "integer" then
      error(string.format("%s: optimizer state: key %s under '%s' is not a string or an integer", fname,
        tostring(k), path), 4)
    end
    out[k] = split_state(fname, v, path .. "." .. tostring(k), tensors)
  end
  return out
end

local function join_state(fname, value, tensors)
  if type(value) ~= "table" then return value end
  local ref = value[TENSOR_REF]
  if type(ref) == "string" and next(value, next(value)) == nil then
    local t = tensors[ref]
    if not t then
      error(string.format("%s: the optimizer state refers to tensor '%s', which the file lacks", fname, ref), 4)
    end
    return t
  end
  local out = {}
  for k, v in pairs(value) do out[k] = join_state(fname, v, tensors) end
  return out
end

--- nio.save_model(model, path, {optimizer=, scheduler=, extra=, metadata=}): model:state_dict()
-- (names to Tensors) as a safetensors checkpoint; with `optimizer`, its state_dict too, with
-- `scheduler` (a learning-rate scheduler), its state_dict, and `extra` (any JSON-able table:
-- epoch, best score, ...) so that training can resume.
function M.save_model(model, path, opts)
  local fname = "netcl.io.save_model"
  check_path(fname, path, 2)
  opts = check_opts(fname, opts, {optimizer = true, scheduler = true, extra = true, metadata = true})
  local sd = method(fname, model, "state_dict", 1)(model)
  if type(sd) ~= "table" then error(string.format("%s: state_dict() returned a %s, expected a table", fname, type(sd)), 2) end
  local tensors = {}
  for k, v in pairs(sd) do
    if type(k) ~= "string" then error(string.format("%s: state_dict has a %s key; names are strings", fname, type(k)), 2) end
    if not is_tensor(v) then
      error(string.format("%s: state_dict entry '%s' is a %s, expected a Tensor", fname, k, type(v)), 2)
    end
    if k:sub(1, #OPTIM_PREFIX) == OPTIM_PREFIX then
      error(string.format("%s: state_dict name '%s' starts with '%s', which checkpoints reserve for optimizer state",
        fname, k, OPTIM_PREFIX), 2)
    end
    tensors[k] = v
  end
  local meta = string_metadata(fname, opts.metadata)
  -- "pt": the names and layouts are PyTorch's, which is what this value tells loaders such
  -- as transformers.
  meta.format = meta.format or "pt"
  meta["netcl.version"] = nc.version
  if opts.optimizer ~= nil then
    local osd = method(fname, opts.optimizer, "state_dict", 3)(opts.optimizer)
    local tree = split_state(fname, osd, OPTIM_PREFIX:sub(1, -2), tensors)
    meta[OPTIM_KEY] = json_encode(fname, "optimizer state", tree)
  end
  if opts.scheduler ~= nil then
    local ssd = method(fname, opts.scheduler, "state_dict", 3)(opts.scheduler)
    meta[SCHED_KEY] = json_encode(fname, "scheduler state", ssd)
  end
  if opts.extra ~= nil then meta[EXTRA_KEY] = json_encode(fname, "extra", opts.extra) end
  relay(2, pcall(nc._io.save_safetensors, path, tensors, meta, fname))
end

-- The message of an error caught from a load_state_dict, without the position in front.
local function unplaced(err) return (tostring(err):gsub("^[^%s:]+:%d+: ", "", 1)) end

--- nio.load_model(model, path, {strict=true, optimizer=, scheduler=, device=}) -> extra, metadata:
-- gives the checkpoint's model entries to model:load_state_dict(sd, {strict=}); with
-- `optimizer`, restores it with optimizer:load_state_dict, with `scheduler`, restores the
-- scheduler. Tensors are read onto opts.device (default: the default device) before the
-- load_state_dict calls copy them into place. All or nothing: the file is read and decoded
-- whole first, then optimizer, scheduler and model are loaded in that order, and when one of
-- them refuses its part (an SGD state for an Adam optimizer, a shape that differs) those
-- already loaded are put back as they were, so that the error leaves every object unchanged.
function M.load_model(model, path, opts)
  local fname = "netcl.io.load_model"
  check_path(fname, path, 2)
  opts = check_opts(fname, opts, {strict = true, optimizer = true, scheduler = true, device = true})
  local load_sd = method(fname, model, "load_state_dict", 1)
  local opt_load = opts.optimizer ~= nil and method(fname, opts.optimizer, "load_state_dict", 3)
  local opt_save = opts.optimizer ~= nil and method(fname, opts.optimizer, "state_dict", 3)
  local sched_load = opts.scheduler ~= nil and method(fname, opts.scheduler, "load_state_dict", 3)
  local sched_save = opts.scheduler ~= nil and method(fname, opts.scheduler, "state_dict", 3)
  local tensors, meta = relay(2, pcall(nc._io.load_safetensors, path, opts.device, fname))
  local sd, optim = {}, {}
  for k, v in pairs(tensors) do
    if k:sub(1, #OPTIM_PREFIX) == OPTIM_PREFIX then optim[k] = v else sd[k] = v end
  end
  -- every part is read and decoded before anything is loaded
  local parts = {}
  if opt_load then
    if not meta[OPTIM_KEY] then
      error(string.format("%s: %s holds no optimizer state (it was saved without {optimizer=})", fname, path), 2)
    end
    local tree = json_decode(fname, path .. ": optimizer state", meta[OPTIM_KEY])
    parts[#parts + 1] = {what = "optimizer", obj = opts.optimizer, load = opt_load, save = opt_save,
                         sd = join_state(fname, tree, optim)}
  end
  if sched_load then
    if not meta[SCHED_KEY] then
      error(string.format("%s: %s holds no scheduler state (it was saved without {scheduler=})", fname, path), 2)
    end
    parts[#parts + 1] = {what = "scheduler", obj = opts.scheduler, load = sched_load, save = sched_save,
                         sd = json_decode(fname, path .. ": scheduler state", meta[SCHED_KEY])}
  end
  local extra = meta[EXTRA_KEY] and json_decode(fname, path .. ": extra", meta[EXTRA_KEY])
  -- the model last: its load_state_dict checks every entry before it copies any, so only the
  -- optimizer and the scheduler, loaded before it, may need putting back
  parts[#parts + 1] = {what = "model", obj = model, load = function(m, s) return load_sd(m, s, {strict = opts.strict ~= false}) end,
                       sd = sd}
  for i, p in ipairs(parts) do
    if p.save then p.before = p.save(p.obj) end
    local ok, err = pcall(p.load, p.obj, p.sd)
    if not ok then
      local undo = {}
      for j = i - 1, 1, -1 do
        local ok2, err2 = pcall(parts[j].load, parts[j].obj, parts[j].before)
        if not ok2 then undo[#undo + 1] = string.format("; putting the %s back failed too: %s", parts[j].what, unplaced(err2)) end
      end
      error(string.format("%s: %s: the %s state does not fit, so nothing was loaded: %s%s", fname, path, p.what,
        unplaced(err), table.concat(undo)), 2)
    end
  end
  return extra, meta
end

return M

-- netcl.distributed.DeviceGroup: the devices of one process and their collectives (all_reduce,
-- broadcast, scatter, gather) (docs/distributed.md).
local nc = require "netcl"
local class = require "netcl.class"
local common = require "netcl.distributed.common"

local C, device_of, check_opts, split_sizes = common.C, common.device_of, common.check_opts, common.split_sizes

local M = {}

-- ---- DeviceGroup -------------------------------------------------------------------------------
local DeviceGroup = class("DeviceGroup")
M.DeviceGroup = DeviceGroup

--- DeviceGroup(devices): devices is an array of Devices or specs ("cpu", "opencl:0:1", ...),
-- each once. g.devices, #g (the number of devices), g:index(dev) (position or nil).
function DeviceGroup:init(devices)
  local fname = "netcl.distributed.DeviceGroup"
  if type(devices) ~= "table" or #devices == 0 then
    error(fname .. ": expected a non-empty array of Devices or device specs", 3)
  end
  self.devices = {}
  for i, v in ipairs(devices) do
    local d = device_of(v, fname, "device " .. i)
    for j, e in ipairs(self.devices) do
      if e == d then error(string.format("%s: device %s is given twice (positions %d and %d)", fname, d.spec, j, i), 3) end
    end
    self.devices[i] = d
  end
end

function DeviceGroup:__len() return #self.devices end

function DeviceGroup:__tostring()
  local specs = {}
  for i, d in ipairs(self.devices) do specs[i] = d.spec end
  return "DeviceGroup{" .. table.concat(specs, ", ") .. "}"
end

function DeviceGroup:index(dev)
  for i, d in ipairs(self.devices) do if d == dev then return i end end
  return nil
end

-- tensors: one per device, tensor i on device i (a clear error otherwise).
local function check_per_device(g, tensors, fname, level)
  if type(tensors) ~= "table" or nc.is_tensor(tensors) then
    error(string.format("%s: expected an array of Tensors, one per device of the group", fname), level + 1)
  end
  if #tensors ~= #g.devices then
    error(string.format("%s: %d tensors for a group of %d devices (one per device)", fname, #tensors, #g.devices),
      level + 1)
  end
  for i, t in ipairs(tensors) do
    if not nc.is_tensor(t) then error(string.format("%s: element %d is not a Tensor", fname, i), level + 1) end
    if t.device ~= g.devices[i] then
      local at = g:index(t.device)
      error(string.format("%s: tensor %d is on %s, %s", fname, i, t.device.spec,
        at and string.format("device %d of the group; tensor i must be on device i (%s)", at, g.devices[i].spec)
          or "a device missing from the group " .. tostring(g)), level + 1)
    end
  end
end

--- g:all_reduce(tensors, op="sum"): in place, every tensor becomes the sum (mean, max) of all.
-- Returns tensors.
function DeviceGroup:all_reduce(tensors, op)
  check_per_device(self, tensors, "netcl.distributed.DeviceGroup:all_reduce", 2)
  C.group_all_reduce(tensors, op or "sum")
  return tensors
end

--- g:broadcast(tensors, root=1): in place, every tensor becomes a copy of tensors[root].
function DeviceGroup:broadcast(tensors, root)
  check_per_device(self, tensors, "netcl.distributed.DeviceGroup:broadcast", 2)
  C.group_broadcast(tensors, root or 1)
  return tensors
end

--- g:scatter(t, dim=1) -> array of #g tensors: t split along dim into near-equal parts
-- (split_sizes), part i on device i.
function DeviceGroup:scatter(t, dim)
  local fname = "netcl.distributed.DeviceGroup:scatter"
  if not nc.is_tensor(t) then error(fname .. ": argument 1: expected a Tensor", 2) end
  dim = dim or 1
  if math.type(dim) ~= "integer" then error(fname .. ": argument 2: dim must be an integer", 2) end
  if dim < 0 then dim = t.ndim + 1 + dim end
  if dim < 1 or dim > t.ndim then
    error(string.format("%s: dim %d is out of range for a tensor of %d dims", fname, dim, t.ndim), 2)
  end
  local n, k = t.shape[dim], #self.devices
  if n < k then
    error(string.format("%s: cannot split %d along dim %d over %d devices (each needs at least one)", fname, n, dim, k), 2)
  end
  local out, start = {}, 1
  for i, len in ipairs(split_sizes(n, k)) do
    local part = t:narrow(dim, start, len)
    out[i] = part.device == self.devices[i] and part:contiguous() or part:to(self.devices[i])
    start = start + len
  end
  return out
end

--- g:gather(tensors, dim=1, {device=}) -> one tensor: the tensors (one per device) joined along
-- dim, on opts.device (default: the group's first device).
function DeviceGroup:gather(tensors, dim, opts)
  local fname = "netcl.distributed.DeviceGroup:gather"
  check_per_device(self, tensors, fname, 2)
  opts = check_opts(fname, opts, {device = true}, 2)
  local dev = opts.device and device_of(opts.device, fname, "device") or self.devices[1]
  local parts = {}
  for i, t in ipairs(tensors) do parts[i] = t.device == dev and t or t:to(dev) end
  return nc.cat(parts, dim or 1)
end

return M

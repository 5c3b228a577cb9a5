-- netcl.distributed: data-parallel training over the devices of one process (DeviceGroup) and
-- over processes started by mpirun (init{backend="mpi"}). docs/distributed.md describes it.
--
--   local dist = require "netcl.distributed"
--   local g = dist.DeviceGroup{"opencl:0:0", "opencl:0:1"}
--   g:all_reduce(tensors, "sum"|"mean"|"max")  g:broadcast(tensors, root)  g:scatter(t, d)  g:gather(ts, d)
--   local replicas = dist.replicate(build_model, g)
--   dist.data_parallel_step{group=g, replicas=replicas, batch={x, y}, loss_fn=f, optimizer=opt}
--   dist.init{backend="mpi"}  dist.rank()  dist.world_size()  dist.all_reduce(t, op)
--   dist.broadcast(t, root)  dist.barrier()  dist.gather(t, root?)
--
-- The collectives themselves are in C (runtime/dist/, bound as netcl.core._dist); this module
-- checks arguments, plans gradient buckets and runs the training step.
local nc = require "netcl"
local ag = require "netcl.autograd"
local class = require "netcl.class"

local M = {}

-- The C collectives, raising their errors at the level of this module's caller's caller (the
-- user's line), without this file's position.
local C = setmetatable({}, {__index = function(t, k)
  local f = nc._dist[k]
  local function call(...)
    local res = table.pack(pcall(f, ...))
    if not res[1] then error((tostring(res[2]):gsub("^%[netcl%][^:]*:%d+: ", "")), 3) end
    return table.unpack(res, 2, res.n)
  end
  rawset(t, k, call)
  return call
end})

local function device_of(v, fname, what)
  if type(v) == "string" then
    local ok, d = pcall(nc.device, v)
    if not ok then error(string.format("%s: %s: %s", fname, what, tostring(d):gsub("^.-netcl%.device: ", "")), 3) end
    return d
  end
  if (getmetatable(v) or {}).__name ~= "netcl.Device" then
    error(string.format("%s: %s: expected a Device or a device spec, got %s", fname, what, type(v)), 3)
  end
  return v
end

local function shape_str(s) return "[" .. table.concat(s, ",") .. "]" end

local function check_opts(fname, opts, accepted, level)
  if opts == nil then return {} end
  if type(opts) ~= "table" then error(string.format("%s: options must be a table, got %s", fname, type(opts)), level + 1) end
  for k in pairs(opts) do
    if not accepted[k] then
      local names = {}
      for name in pairs(accepted) do names[#names + 1] = name .. "=" end
      table.sort(names)
      error(string.format("%s: unknown option '%s' (accepted: {%s})", fname, tostring(k), table.concat(names, ", ")),
        level + 1)
    end
  end
  return opts
end

--- dist.split_sizes(n, k) -> array of k sizes summing to n, the first n % k one larger.
function M.split_sizes(n, k)
  local out, base, extra = {}, n // k, n % k
  for i = 1, k do out[i] = base + (i <= extra and 1 or 0) end
  return out
end

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
  for i, len in ipairs(M.split_sizes(n, k)) do
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

-- ---- replicas ------------------------------------------------------------------------------------
local function float_buffers(model)
  local out = {}
  for _, b in model:named_buffers() do
    if b.dtype == "float32" or b.dtype == "float64" then out[#out + 1] = b end
  end
  return out
end

local function all_buffers(model)
  local out = {}
  for _, b in model:named_buffers() do out[#out + 1] = b end
  return out
end

--- dist.replicate(build, group) -> array of models, model i on device i: build() is called once
-- per device; the parameters and buffers of the first are copied to the others, so the replicas
-- start identical whatever build() draws.
function M.replicate(build, group)
  local fname = "netcl.distributed.replicate"
  if type(build) ~= "function" then error(fname .. ": argument 1: expected a function that builds the model", 2) end
  if not class.is_instance(group, DeviceGroup) then error(fname .. ": argument 2: expected a DeviceGroup", 2) end
  local replicas = {}
  for i, d in ipairs(group.devices) do replicas[i] = build():to(d) end
  M.sync_replicas(group, replicas)
  return replicas
end

local function check_replicas(fname, group, replicas, level)
  if type(replicas) ~= "table" or #replicas ~= #group.devices then
    error(string.format("%s: replicas must be an array of %d models, one per device of the group", fname,
      #group.devices), level + 1)
  end
  for i, m in ipairs(replicas) do
    if type(m) ~= "table" or type(m.parameters) ~= "function" then
      error(string.format("%s: replica %d is not a module (nn.Module), got %s", fname, i, type(m)), level + 1)
    end
  end
  local first = replicas[1]:parameters()
  local np = #first
  for i, m in ipairs(replicas) do
    local ps = m:parameters()
    if #ps ~= np then
      error(string.format("%s: replica %d has %d parameters, replica 1 has %d", fname, i, #ps, np), level + 1)
    end
    for j, p in ipairs(ps) do
      if p.value.device ~= group.devices[i] then
        local at = group:index(p.value.device)
        error(string.format("%s: parameter %d of replica %d is on %s, %s", fname, j, i, p.value.device.spec,
          at and "but replica i must be on device i (" .. group.devices[i].spec .. ")"
            or "a device missing from the group " .. tostring(group)), level + 1)
      end
      local s1 = first[j].value.shape
      if shape_str(p.value.shape) ~= shape_str(s1) then
        error(string.format("%s: parameter %d is %s on replica %d and %s on replica 1", fname, j,
          shape_str(p.value.shape), i, shape_str(s1)), level + 1)
      end
    end
  end
end

--- dist.sync_replicas(group, replicas): copies replica 1's parameters and buffers to the others.
function M.sync_replicas(group, replicas)
  check_replicas("netcl.distributed.sync_replicas", group, replicas, 2)
  local params, buffers = {}, {}
  for i, m in ipairs(replicas) do
    params[i], buffers[i] = m:parameters(), all_buffers(m)
  end
  for j = 1, #params[1] do
    local ts = {}
    for i = 1, #replicas do ts[i] = params[i][j].value end
    C.group_broadcast(ts, 1)
  end
  for j = 1, #buffers[1] do
    local ts = {}
    for i = 1, #replicas do ts[i] = buffers[i][j] end
    if ts[1].dtype ~= "bool" and ts[1].dtype ~= "uint8" then C.group_broadcast(ts, 1) end
  end
end

-- ---- MPI -------------------------------------------------------------------------------------------
local world -- {rank=, size=, local_rank=, local_size=, device=} once init has run

--- dist.init{backend="mpi", timeout=300, devices=} -> rank, world_size. Starts MPI (the process
-- runs under mpirun) and picks this process's device from its rank on its host: devices (an
-- array of Devices or specs, or "opencl" / "gpu" for every such device) indexed by the local
-- rank, by default the OpenCL GPUs when there are any, else the default device. The device
-- becomes the default device. timeout: seconds a collective waits for the other ranks before it
-- fails (a rank that died or stopped), then the job is aborted.
function M.init(opts)
  local fname = "netcl.distributed.init"
  opts = check_opts(fname, opts, {backend = true, timeout = true, devices = true}, 2)
  local backend = opts.backend or "mpi"
  if backend ~= "mpi" then error(string.format("%s: unknown backend '%s' (accepted: \"mpi\")", fname, tostring(backend)), 2) end
  if not C.mpi_available() then
    error(fname .. ": this libnetcl was built without MPI (install libopenmpi-dev and openmpi-bin, then rebuild)", 2)
  end
  local timeout = opts.timeout or tonumber(os.getenv("NETCL_DIST_TIMEOUT")) or 300
  if type(timeout) ~= "number" or not (timeout > 0) then
    error(fname .. ": timeout must be a number of seconds > 0, got " .. tostring(timeout), 2)
  end
  local rank, size, lrank, lsize = C.mpi_init(timeout)
  local candidates = {}
  local devs = opts.devices
  if devs == "opencl" or devs == "gpu" then
    for _, d in ipairs(nc.devices()) do
      if d.kind == "opencl" and (devs == "opencl" or d.is_gpu) then candidates[#candidates + 1] = d end
    end
    if #candidates == 0 then error(string.format("%s: devices=%q: no such device on this host", fname, devs), 2) end
  elseif type(devs) == "table" then
    for i, v in ipairs(devs) do candidates[i] = device_of(v, fname, "devices[" .. i .. "]") end
  elseif devs ~= nil then
    error(fname .. ": devices must be an array of Devices or specs, \"opencl\" or \"gpu\"", 2)
  else
    for _, d in ipairs(nc.devices()) do
      if d.kind == "opencl" and d.is_gpu then candidates[#candidates + 1] = d end
    end
    if #candidates == 0 then candidates[1] = nc.default_device() end
  end
  local dev = candidates[lrank % #candidates + 1]
  nc.set_default_device(dev)
  world = {rank = rank, size = size, local_rank = lrank, local_size = lsize, device = dev}
  return rank, size
end

local function need_world(fname)
  if not world then error(fname .. ": call dist.init{backend=\"mpi\"} first", 3) end
end

--- dist.rank() -> this process's rank (0-based, as mpirun numbers them); 0 before init.
function M.rank() return world and world.rank or 0 end
--- dist.world_size() -> the number of processes; 1 before init.
function M.world_size() return world and world.size or 1 end
--- dist.local_rank() -> the rank among the processes of this host; 0 before init.
function M.local_rank() return world and world.local_rank or 0 end
--- dist.device() -> the device init picked (the default device before init).
function M.device() return world and world.device or nc.default_device() end
function M.is_initialized() return world ~= nil end
function M.mpi_available() return C.mpi_available() end

--- dist.all_reduce(t, op="sum") -> t: in place over every rank.
function M.all_reduce(t, op)
  need_world("netcl.distributed.all_reduce")
  return (C.all_reduce(t, op)) -- not a tail call: errors name the caller's line
end

--- dist.broadcast(t, root=0) -> t: in place, every rank gets root's values.
function M.broadcast(t, root)
  need_world("netcl.distributed.broadcast")
  return (C.broadcast(t, root))
end

--- dist.barrier(): returns when every rank has called it.
function M.barrier()
  need_world("netcl.distributed.barrier")
  C.barrier()
end

--- dist.gather(t, root?) -> Tensor [world_size, t's shape...] with rank r's tensor at r + 1: on
-- root only (nil elsewhere), or on every rank when root is nil.
function M.gather(t, root)
  need_world("netcl.distributed.gather")
  return (C.gather(t, root))
end

--- dist.finalize(): ends MPI (also done at exit).
function M.finalize()
  C.finalize()
  world = nil
end

-- ---- the data-parallel step -------------------------------------------------------------------------
-- Gradient buckets: consecutive parameters of one dtype, up to `limit` bytes each (a larger
-- parameter is a bucket of its own). Small tensors are reduced together: one host round trip
-- per bucket instead of one per tensor.
local DTYPE_BYTES = {float32 = 4, float64 = 8}

local function plan_buckets(params, limit)
  local buckets, cur, bytes, dtype = {}, nil, 0, nil
  for j, p in ipairs(params) do
    local v = p.value
    local nb = v:numel() * (DTYPE_BYTES[v.dtype] or 8)
    if not cur or v.dtype ~= dtype or bytes + nb > limit then
      cur = {}
      buckets[#buckets + 1] = cur
      bytes, dtype = 0, v.dtype
    end
    cur[#cur + 1] = j
    bytes = bytes + nb
  end
  return buckets
end

-- Reduces the gradients of every replica's params (params[r][j]) by bucket, with reduce(list)
-- combining one tensor per replica in place (a sum). Gradients become views of the bucket.
local function reduce_gradients(params, limit, reduce)
  local R = #params
  for _, bucket in ipairs(plan_buckets(params[1], limit)) do
    local any = false
    for _, j in ipairs(bucket) do
      for r = 1, R do if params[r][j].grad then any = true end end
    end
    if any then
      local flats = {}
      for r = 1, R do
        local parts = {}
        for k, j in ipairs(bucket) do
          local p = params[r][j]
          local g = p.grad or nc.zeros(p.value.shape, {dtype = p.value.dtype, device = p.value.device})
          parts[k] = #bucket == 1 and g or g:reshape({-1})
        end
        flats[r] = #bucket == 1 and parts[1]:contiguous() or nc.cat(parts, 1)
      end
      reduce(flats)
      for r = 1, R do
        local off = 1
        for _, j in ipairs(bucket) do
          local p = params[r][j]
          local n = p.value:numel()
          p.grad = #bucket == 1 and flats[r] or flats[r]:narrow(1, off, n):view(p.value.shape)
          off = off + n
        end
      end
    end
  end
end

local function as_list(batch, fname)
  if nc.is_tensor(batch) then return {batch} end
  if type(batch) ~= "table" or #batch == 0 then
    error(fname .. ": batch must be a Tensor or an array of Tensors (split along dim 1)", 3)
  end
  local n
  for i, t in ipairs(batch) do
    if not nc.is_tensor(t) then error(string.format("%s: batch[%d] is not a Tensor", fname, i), 3) end
    if t.ndim == 0 then error(string.format("%s: batch[%d] is a scalar; cannot split it", fname, i), 3) end
    if n and t.shape[1] ~= n then
      error(string.format("%s: batch tensors differ in dim 1: %d and %d (batch[%d])", fname, n, t.shape[1], i), 3)
    end
    n = t.shape[1]
  end
  return batch
end

local function shard_of(batch, start, len, dev)
  local out = {}
  for i, t in ipairs(batch) do
    local part = t:narrow(1, start, len)
    out[i] = part.device == dev and part or part:to(dev)
  end
  return out
end

-- Forward and backward of one replica on its shard; its loss is weighted by its share of the
-- batch (losses are means over their shard), so summed gradients are the full batch's.
local function forward_backward(model, shard, loss_fn, weight, fname)
  for _, p in ipairs(model:parameters()) do p.grad = nil end
  local tape = ag.Tape()
  local loss = tape:record(function()
    local l = loss_fn(model, table.unpack(shard))
    if type(l) ~= "table" and type(l) ~= "userdata" then
      error(fname .. ": loss_fn must return the loss (a Node), got " .. type(l), 0)
    end
    return l * weight
  end)
  if not loss or not loss.value then error(fname .. ": loss_fn must return the loss (a Node)", 3) end
  if loss.value:numel() ~= 1 then
    error(string.format("%s: loss_fn must return a scalar loss, got shape %s", fname, shape_str(loss.value.shape)), 3)
  end
  tape:backward(loss)
  return loss.value
end

-- Errors from inside the step, raised at the caller's line without this file's position.
local function rethrow(ok, ...)
  if ok then return ... end
  error((tostring((...)):gsub("^%[netcl%][^:]*:%d+: ", "")), 3)
end

local STEP_KEYS = {group = true, replicas = true, batch = true, loss_fn = true, optimizer = true, bucket_mb = true,
                   model = true, local_batch = true}

--- dist.data_parallel_step{group=, replicas=, batch=, loss_fn=, optimizer=, bucket_mb=25} -> loss
-- One process, several devices: batch (a Tensor or an array of Tensors, split along dim 1 with
-- split_sizes) is split over the replicas (replica i on device i); each runs
-- loss_fn(replica, shard...) and backward; gradients are summed across replicas, weighted by
-- shard size (the full batch's gradient when loss_fn returns a mean); then optimizer steps.
-- optimizer: one per replica (an array), or one over replica 1's parameters, whose updated
-- parameters are then copied to the others. Float buffers (batch norm's running statistics)
-- are averaged across replicas. Returns the full batch's loss (a number).
--
-- dist.data_parallel_step{model=, batch= or local_batch=, loss_fn=, optimizer=} after
-- dist.init: the same across processes: batch (the same on every rank) is split by rank, or
-- local_batch is this rank's part.
function M.data_parallel_step(o)
  local fname = "netcl.distributed.data_parallel_step"
  o = check_opts(fname, o, STEP_KEYS, 2)
  if type(o.loss_fn) ~= "function" then error(fname .. ": loss_fn= must be a function(model, shard...)", 2) end
  local limit = (o.bucket_mb or 25) * 1024 * 1024
  if type(limit) ~= "number" or limit <= 0 then error(fname .. ": bucket_mb must be a number > 0", 2) end
  if o.group then
    if not class.is_instance(o.group, DeviceGroup) then error(fname .. ": group= must be a DeviceGroup", 2) end
    if o.model or o.local_batch then error(fname .. ": model= and local_batch= are for MPI; with group= pass replicas= and batch=", 2) end
    return (rethrow(pcall(M._group_step, o, limit, fname))) -- not a tail call: level 3 is the caller
  end
  if not world then error(fname .. ": pass group= (one process, several devices), or call dist.init first (MPI)", 2) end
  return (rethrow(pcall(M._mpi_step, o, limit, fname)))
end

local function check_optimizer(fname, opt, R)
  if type(opt) ~= "table" then error(fname .. ": optimizer= must be an optimizer or an array of one per replica", 4) end
  if opt.step then return false end
  if #opt ~= R then error(string.format("%s: %d optimizers for %d replicas", fname, #opt, R), 4) end
  return true
end

function M._group_step(o, limit, fname)
  local g, replicas = o.group, o.replicas
  check_replicas(fname, g, replicas, 3)
  local batch = as_list(o.batch, fname)
  local R, N = #replicas, batch[1].shape[1]
  if N < R then error(string.format("%s: a batch of %d cannot be split over %d devices", fname, N, R), 2) end
  local per_replica = check_optimizer(fname, o.optimizer, R)
  local sizes, start, losses = M.split_sizes(N, R), 1, {}
  for r, m in ipairs(replicas) do
    local shard = shard_of(batch, start, sizes[r], g.devices[r])
    losses[r] = forward_backward(m, shard, o.loss_fn, sizes[r] / N, fname)
    start = start + sizes[r]
  end
  local params = {}
  for r, m in ipairs(replicas) do params[r] = m:parameters() end
  reduce_gradients(params, limit, function(flats) C.group_all_reduce(flats, "sum") end)
  if per_replica then
    for r = 1, R do o.optimizer[r]:step() end
  else
    o.optimizer:step()
    for j = 1, #params[1] do
      local ts = {}
      for r = 1, R do ts[r] = params[r][j].value end
      C.group_broadcast(ts, 1)
    end
  end
  local bufs = {}
  for r, m in ipairs(replicas) do bufs[r] = float_buffers(m) end
  for j = 1, #bufs[1] do
    local ts = {}
    for r = 1, R do ts[r] = bufs[r][j] end
    C.group_all_reduce(ts, "mean")
  end
  local total = 0
  for r = 1, R do total = total + losses[r]:item() end
  return total
end

function M._mpi_step(o, limit, fname)
  local model = o.model
  if not model or not model.parameters then error(fname .. ": model= (this process's replica) is required with MPI", 3) end
  if o.replicas then error(fname .. ": replicas= is for group=; with MPI pass model=", 3) end
  check_optimizer(fname, o.optimizer, 1)
  local shard, weight
  if o.local_batch then
    if o.batch then error(fname .. ": pass batch= or local_batch=, not both", 3) end
    shard = as_list(o.local_batch, fname)
    local counts = nc.tensor({shard[1].shape[1]}, {dtype = "int64"})
    C.all_reduce(counts, "sum")
    weight = shard[1].shape[1] / counts[1]:item()
  else
    local batch = as_list(o.batch, fname)
    local N = batch[1].shape[1]
    if N < world.size then error(string.format("%s: a batch of %d cannot be split over %d ranks", fname, N, world.size), 3) end
    local sizes, start = M.split_sizes(N, world.size), 1
    for r = 1, world.rank do start = start + sizes[r] end
    shard = shard_of(batch, start, sizes[world.rank + 1], world.device)
    weight = sizes[world.rank + 1] / N
  end
  local loss = forward_backward(model, shard, o.loss_fn, weight, fname)
  reduce_gradients({model:parameters()}, limit, function(flats) C.all_reduce(flats[1], "sum") end)
  o.optimizer:step()
  for _, b in ipairs(float_buffers(model)) do C.all_reduce(b, "mean") end
  local l = loss:to(nc.device("cpu")):reshape({1})
  C.all_reduce(l, "sum")
  return l[1]:item()
end

return M

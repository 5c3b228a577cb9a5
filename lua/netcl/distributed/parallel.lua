-- netcl.distributed's data parallelism: replicate and sync_replicas, and data_parallel_step over a
-- DeviceGroup (one process) or over MPI ranks, with gradient buckets (docs/distributed.md).
local nc = require "netcl"
local ag = require "netcl.autograd"
local class = require "netcl.class"
local common = require "netcl.distributed.common"
local mpi = require "netcl.distributed.mpi"
local DeviceGroup = require("netcl.distributed.group").DeviceGroup

local C, shape_str, check_opts, split_sizes = common.C, common.shape_str, common.check_opts, common.split_sizes

local M = {}

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

-- ---- the data-parallel step -------------------------------------------------------------------------
-- Gradient buckets: parameters of one dtype taken in reverse order (the order in which backward
-- finishes their gradients), up to `first` bytes for the first bucket (small, so that its
-- reduction starts early) and `limit` bytes for the others; a larger parameter is a bucket of its
-- own. Small tensors are reduced together: one host round trip per bucket instead of one per
-- tensor.
local DTYPE_BYTES = {float32 = 4, float64 = 8}
local FIRST_BUCKET = 1024 * 1024

local function plan_buckets(params, first, limit)
  local buckets, cur, bytes, dtype = {}, nil, 0, nil
  for j = #params, 1, -1 do
    local v = params[j].value
    local nb = v:numel() * (DTYPE_BYTES[v.dtype] or 8)
    if not cur or v.dtype ~= dtype or bytes + nb > (#buckets == 1 and first or limit) then
      cur = {}
      buckets[#buckets + 1] = cur
      bytes, dtype = 0, v.dtype
    end
    cur[#cur + 1] = j
    bytes = bytes + nb
  end
  return buckets
end

-- One replica's bucket as one contiguous tensor (a parameter without a gradient counts as zeros).
local function flatten(ps, bucket)
  local parts = {}
  for k, j in ipairs(bucket) do
    local p = ps[j]
    local g = p.grad or nc.zeros(p.value.shape, {dtype = p.value.dtype, device = p.value.device})
    parts[k] = #bucket == 1 and g or g:reshape({-1})
  end
  return #bucket == 1 and parts[1]:contiguous() or nc.cat(parts, 1)
end

local function any_grad(params, bucket)
  for r = 1, #params do
    for _, j in ipairs(bucket) do if params[r][j].grad then return true end end
  end
  return false
end

-- After the reduction: every replica's gradients become views of its reduced bucket.
local function unflatten(ps, bucket, flat)
  local off = 1
  for _, j in ipairs(bucket) do
    local p = ps[j]
    local n = p.value:numel()
    p.grad = #bucket == 1 and flat or flat:narrow(1, off, n):view(p.value.shape)
    off = off + n
  end
end

-- Reduces the gradients of every replica's params (params[r][j]) by bucket once backward is
-- over, with reduce(list) combining one tensor per replica in place (a sum).
local function reduce_gradients(params, plan, reduce)
  for _, bucket in ipairs(plan) do
    if any_grad(params, bucket) then
      local flats = {}
      for r = 1, #params do flats[r] = flatten(params[r], bucket) end
      reduce(flats)
      for r = 1, #params do unflatten(params[r], bucket, flats[r]) end
    end
  end
end

-- The overlapped reduction: on_grad(r) is the gradient hook of replica r's backward; when the
-- last gradient of a bucket is final on replica r, that replica's part of the bucket is handed
-- to add(b, r, flat), which starts its reduction without waiting, while backward goes on with
-- the next layers. finish() then hands over what no hook did (buckets with parameters that got no
-- gradient), in bucket order, and completes every reduction, in the order add started them.
-- Results are the same bits as reduce_gradients': the same buckets, combined the same way.
local function overlapped(params, plan, add, complete)
  local bucket_of, ids, ready, flats, order = {}, {}, {}, {}, {}
  for b, bucket in ipairs(plan) do
    for _, j in ipairs(bucket) do bucket_of[j] = b end
    flats[b] = {}
  end
  for r, ps in ipairs(params) do
    ids[r], ready[r] = {}, {}
    for j, p in ipairs(ps) do ids[r][p.id] = j end
    for b = 1, #plan do ready[r][b] = 0 end
  end
  local function hand(b, r)
    if not next(flats[b]) then order[#order + 1] = b end
    flats[b][r] = flatten(params[r], plan[b])
    add(b, r, flats[b][r])
  end
  local R = {}
  function R.on_grad(r)
    return function(leaf)
      local j = ids[r][leaf.id]
      if not j then return end
      local b = bucket_of[j]
      ready[r][b] = ready[r][b] + 1
      if ready[r][b] == #plan[b] then hand(b, r) end
    end
  end
  function R.finish()
    for b, bucket in ipairs(plan) do
      if next(flats[b]) or any_grad(params, bucket) then
        for r = 1, #params do
          if not flats[b][r] then hand(b, r) end
        end
      end
    end
    for _, b in ipairs(order) do
      complete(b)
      for r = 1, #params do unflatten(params[r], plan[b], flats[b][r]) end
    end
  end
  return R
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
local function forward_backward(model, shard, loss_fn, weight, fname, on_grad)
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
  local ok, err = pcall(tape.backward, tape, loss, nil, {on_grad = on_grad})
  if not ok then
    -- a collective that failed in the gradient hook: its own message
    local msg = tostring(err):gsub("^.-netcl%.autograd%.backward: the on_grad hook failed: ", "", 1)
    error((msg:gsub("^%[netcl%][^:]*:%d+: ", "")), 0)
  end
  return loss.value
end

-- Errors from inside the step, raised at the caller's line without this file's position.
local function rethrow(ok, ...)
  if ok then return ... end
  error((tostring((...)):gsub("^%[netcl%][^:]*:%d+: ", "")), 3)
end

local STEP_KEYS = {group = true, replicas = true, batch = true, loss_fn = true, optimizer = true, bucket_mb = true,
                   model = true, local_batch = true, overlap = true}

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
  local mb = o.bucket_mb or 25
  if type(mb) ~= "number" or not (mb > 0) then error(fname .. ": bucket_mb must be a number > 0", 2) end
  if o.overlap ~= nil and type(o.overlap) ~= "boolean" then error(fname .. ": overlap must be a boolean", 2) end
  local limit = mb * 1024 * 1024
  if o.group then
    if not class.is_instance(o.group, DeviceGroup) then error(fname .. ": group= must be a DeviceGroup", 2) end
    if o.model or o.local_batch then error(fname .. ": model= and local_batch= are for MPI; with group= pass replicas= and batch=", 2) end
    return (rethrow(pcall(M._group_step, o, limit, fname))) -- not a tail call: level 3 is the caller
  end
  if not mpi.world() then error(fname .. ": pass group= (one process, several devices), or call dist.init first (MPI)", 2) end
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
  local params = {}
  for r, m in ipairs(replicas) do params[r] = m:parameters() end
  local plan = plan_buckets(params[1], math.min(FIRST_BUCKET, limit), limit)
  local red
  if o.overlap ~= false then
    local handles = {}
    red = overlapped(params, plan, function(b, r, flat)
      handles[b] = handles[b] or C.group_reduce_begin(R, "sum")
      C.group_reduce_add(handles[b], r, flat)
    end, function(b) C.group_reduce_finish(handles[b]) end)
  end
  local sizes, start, losses = split_sizes(N, R), 1, {}
  for r, m in ipairs(replicas) do
    local shard = shard_of(batch, start, sizes[r], g.devices[r])
    losses[r] = forward_backward(m, shard, o.loss_fn, sizes[r] / N, fname, red and red.on_grad(r))
    start = start + sizes[r]
  end
  if red then red.finish()
  else reduce_gradients(params, plan, function(flats) C.group_all_reduce(flats, "sum") end) end
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
  local world = mpi.world()
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
    local sizes, start = split_sizes(N, world.size), 1
    for r = 1, world.rank do start = start + sizes[r] end
    shard = shard_of(batch, start, sizes[world.rank + 1], world.device)
    weight = sizes[world.rank + 1] / N
  end
  local params = {model:parameters()}
  local plan = plan_buckets(params[1], math.min(FIRST_BUCKET, limit), limit)
  local red
  if o.overlap ~= false then
    local handles = {}
    red = overlapped(params, plan, function(b, _, flat) handles[b] = C.all_reduce_start(flat, "sum") end,
      function(b) C.all_reduce_finish(handles[b]) end)
  end
  local loss = forward_backward(model, shard, o.loss_fn, weight, fname, red and red.on_grad(1))
  if red then red.finish()
  else reduce_gradients(params, plan, function(flats) C.all_reduce(flats[1], "sum") end) end
  o.optimizer:step()
  for _, b in ipairs(float_buffers(model)) do C.all_reduce(b, "mean") end
  local l = loss:to(nc.device("cpu")):reshape({1})
  C.all_reduce(l, "sum")
  return l[1]:item()
end

return M

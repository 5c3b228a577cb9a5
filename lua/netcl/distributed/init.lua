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
--
-- One file per concept: common.lua (the C collectives, checks, split_sizes), group.lua
-- (DeviceGroup), parallel.lua (replicas, the data-parallel step), mpi.lua (across processes).
local common = require "netcl.distributed.common"
local group = require "netcl.distributed.group"
local parallel = require "netcl.distributed.parallel"
local mpi = require "netcl.distributed.mpi"

local M = {}

M.split_sizes = common.split_sizes
M.DeviceGroup = group.DeviceGroup

M.replicate = parallel.replicate
M.sync_replicas = parallel.sync_replicas
M.data_parallel_step = parallel.data_parallel_step
M._group_step = parallel._group_step
M._mpi_step = parallel._mpi_step

M.init = mpi.init
M.rank = mpi.rank
M.world_size = mpi.world_size
M.local_rank = mpi.local_rank
M.device = mpi.device
M.is_initialized = mpi.is_initialized
M.mpi_available = mpi.mpi_available
M.all_reduce = mpi.all_reduce
M.broadcast = mpi.broadcast
M.barrier = mpi.barrier
M.gather = mpi.gather
M.finalize = mpi.finalize

return M

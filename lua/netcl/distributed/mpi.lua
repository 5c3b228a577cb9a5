-- netcl.distributed over processes started by mpirun: init{backend="mpi"}, rank, world_size, the
-- collectives across ranks, finalize (docs/distributed.md).
local nc = require "netcl"
local common = require "netcl.distributed.common"

local C, device_of, check_opts = common.C, common.device_of, common.check_opts

local M = {}

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

-- The state init set ({rank=, size=, local_rank=, local_size=, device=}), or nil: for the
-- data-parallel step (netcl/distributed/parallel.lua); not part of the public table.
function M.world() return world end

--- dist.finalize(): ends MPI (also done at exit).
function M.finalize()
  C.finalize()
  world = nil
end

return M

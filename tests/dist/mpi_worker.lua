-- One rank of the MPI tests (tests/dist/test_mpi.lua starts it under mpirun):
--   netcl-lua mpi_worker.lua collectives | train | mismatch | die
-- Prints "OK <mode>" from rank 0 when every check passed; raises otherwise.
local nc = require "netcl"
local ag = require "netcl.autograd"
local nn = require "netcl.nn"
local optim = require "netcl.optim"
local dist = require "netcl.distributed"

local mode = arg[1]
local opencl = {}
for _, d in ipairs(nc.devices()) do if d.kind == "opencl" then opencl[#opencl + 1] = d end end
local rank, size = dist.init{backend = "mpi", timeout = tonumber(arg[2]) or 20,
  devices = #opencl > 0 and "opencl" or nil}
local dev = dist.device()
local cpu = nc.device("cpu")

local function check(cond, msg, ...)
  if not cond then error(string.format("rank %d: " .. msg, rank, ...), 2) end
end

local function close(a, b, tol, what)
  local x, y = a:to(cpu):reshape({-1}):tolist(), b:to(cpu):reshape({-1}):tolist()
  check(#x == #y, "%s: %d vs %d elements", what, #x, #y)
  for i = 1, #x do
    local ok = tol and math.abs(x[i] - y[i]) <= tol * math.max(1, math.abs(y[i])) or x[i] == y[i]
    check(ok, "%s: element %d: %s vs %s", what, i, tostring(x[i]), tostring(y[i]))
  end
end

local function values(n, r)
  local out = {}
  for i = 1, n do out[i] = math.floor(math.sin(i * 1.3 + r) * 1000) / 8 end
  return out
end

if mode == "collectives" then
  check(dist.rank() == rank and dist.world_size() == size and size == 2, "rank/world_size")
  check(#opencl == 0 or dev == opencl[dist.local_rank() % #opencl + 1], "device from the local rank")
  for _, dtype in ipairs({"float32", "float64", "int32", "int64"}) do
    for _, n in ipairs({1, 7, 4099}) do
      for _, op in ipairs({"sum", "mean", "max"}) do
        if not (op == "mean" and dtype:match("^int")) and not (dtype == "float64" and not dev.fp64) then
          local mine = values(n, rank)
          if dtype:match("^int") then for i = 1, n do mine[i] = math.floor(mine[i]) end end
          local want = {}
          local a, b = values(n, 0), values(n, 1)
          for i = 1, n do
            if dtype:match("^int") then a[i], b[i] = math.floor(a[i]), math.floor(b[i]) end
            want[i] = op == "sum" and a[i] + b[i] or op == "mean" and (a[i] + b[i]) / 2 or math.max(a[i], b[i])
          end
          local t = nc.tensor(mine, {dtype = dtype})
          check(dist.all_reduce(t, op) == t, "all_reduce returns its tensor")
          close(t, nc.tensor(want, {dtype = dtype}), 1e-6, string.format("%s %s n=%d", dtype, op, n))
        end
      end
    end
  end
  -- broadcast from rank 1 into a non-contiguous view
  local m = nc.tensor({{1, 2}, {3, 4}, {5, 6}}):mul_(rank + 1)
  dist.broadcast(m:transpose(1, 2), 1)
  close(m, nc.tensor({{2, 4}, {6, 8}, {10, 12}}), nil, "broadcast")
  dist.barrier()
  local row = nc.tensor(values(5, rank))
  local all = dist.gather(row)
  check(all and all.shape[1] == 2 and all.shape[2] == 5, "gather to every rank")
  close(all, nc.tensor({values(5, 0), values(5, 1)}), 1e-6, "gather")
  -- the split all-reduce: three started, finished out of order, a blocking one in between
  local D = nc._dist
  local ts, hs = {}, {}
  for k = 1, 3 do
    ts[k] = nc.tensor(values(1000 + k, rank + k))
    hs[k] = D.all_reduce_start(ts[k], k == 2 and "max" or "sum")
  end
  local mid = nc.full({3}, rank + 1)
  dist.all_reduce(mid)
  close(mid, nc.full({3}, 3), nil, "blocking all_reduce among started ones")
  for _, k in ipairs({3, 1, 2}) do D.all_reduce_finish(hs[k]) end
  for k = 1, 3 do
    local a, b, want = values(1000 + k, k), values(1000 + k, 1 + k), {}
    for i = 1, #a do want[i] = k == 2 and math.max(a[i], b[i]) or a[i] + b[i] end
    close(ts[k], nc.tensor(want), 1e-6, "started all_reduce " .. k)
  end
  local root = dist.gather(row, 1)
  check((rank == 1) == (root ~= nil), "gather to root 1 only")
  if root then close(root, all, nil, "gather to root") end
elseif mode == "train" then
  -- the same data and initial model on every rank (same seed); rank 0 also trains a copy on the
  -- full batch alone
  local function build() return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3)) end
  local function loss_fn(model, x, y) return ag.cross_entropy(model(x), y) end
  nc.manual_seed(11)
  local model = build():to(dev)
  local ref = build():to(dev)
  ref:load_state_dict(model:state_dict())
  local opt = optim.SGD(model:parameters(), {lr = 0.1, momentum = 0.9})
  local ref_opt = optim.SGD(ref:parameters(), {lr = 0.1, momentum = 0.9})
  local x, y = nc.randn({13, 6}), nc.randint(0, 3, {13})
  -- the same training without overlapping the reduction with backward, and with small buckets
  local plain, small = build():to(dev), build():to(dev)
  plain:load_state_dict(model:state_dict())
  small:load_state_dict(model:state_dict())
  local plain_opt = optim.SGD(plain:parameters(), {lr = 0.1, momentum = 0.9})
  local small_opt = optim.SGD(small:parameters(), {lr = 0.1, momentum = 0.9})
  for step = 1, 5 do
    local l = dist.data_parallel_step{model = model, batch = {x, y}, loss_fn = loss_fn, optimizer = opt}
    local pl = dist.data_parallel_step{model = plain, batch = {x, y}, loss_fn = loss_fn, optimizer = plain_opt,
      overlap = false}
    local sl = dist.data_parallel_step{model = small, batch = {x, y}, loss_fn = loss_fn, optimizer = small_opt,
      bucket_mb = 0.0005}
    check(math.abs(l - pl) <= 1e-6 and math.abs(l - sl) <= 1e-6, "overlap: loss at step %d: %g, %g, %g", step, l,
      pl, sl)
    local tape = ag.Tape()
    local rl = tape:record(function() return loss_fn(ref, x:to(dev), y:to(dev)) end)
    ref:zero_grad()
    tape:backward(rl)
    ref_opt:step()
    check(math.abs(l - rl.value:item()) <= 1e-5 * math.max(1, math.abs(l)), "loss at step %d: %g vs %g", step, l,
      rl.value:item())
  end
  local sd, rsd = model:state_dict(), ref:state_dict()
  local psd, ssd = plain:state_dict(), small:state_dict()
  for _, k in ipairs(model:state_dict_keys()) do -- the same order on every rank
    local v = sd[k]
    close(v, psd[k], 1e-6, "overlap vs not: " .. k)
    close(v, ssd[k], 1e-6, "small buckets: " .. k)
    close(v, rsd[k], 1e-5, "parameter " .. k)
    local both = dist.gather(v)
    close(both[1], both[2], nil, "replicas identical: " .. k)
  end
  -- batch norm: per-rank statistics, averaged running statistics identical on every rank;
  -- local_batch: each rank brings its own rows
  local bn = nn.Sequential(nn.Linear(4, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Linear(5, 2)):to(dev)
  for _, p in ipairs(bn:parameters()) do dist.broadcast(p.value, 0) end
  local bopt = optim.Adam(bn:parameters(), {lr = 0.01})
  nc.manual_seed(100 + rank)
  for _ = 1, 2 do
    dist.data_parallel_step{model = bn, local_batch = {nc.randn({5 + rank, 4}), nc.randint(0, 2, {5 + rank})},
      loss_fn = loss_fn, optimizer = bopt}
  end
  for name, b in bn:named_buffers() do
    local both = dist.gather(b)
    close(both[1], both[2], nil, "buffer " .. name)
  end
  for name, p in bn:named_parameters() do
    local both = dist.gather(p.value)
    close(both[1], both[2], nil, "parameter " .. name)
  end
elseif mode == "mismatch" then
  local ok, err = pcall(dist.all_reduce, nc.zeros({3, 2 + rank}))
  check(not ok and tostring(err):find("ranks disagree: rank 0 calls all_reduce of float32 [3,2], rank 1 calls " ..
    "all_reduce of float32 [3,3]", 1, true), "shape mismatch error, got %s", tostring(err))
  ok, err = pcall(function() if rank == 0 then dist.broadcast(nc.zeros({2})) else dist.barrier() end end)
  check(not ok and tostring(err):find("rank 1 calls barrier", 1, true), "collective mismatch error, got %s",
    tostring(err))
  ok, err = pcall(nc._dist.all_reduce_start, nc.zeros({2 + rank}))
  check(not ok and tostring(err):find("ranks disagree", 1, true), "started all_reduce mismatch error, got %s",
    tostring(err))
  -- still in step afterwards
  local t = nc.ones({4})
  dist.all_reduce(t)
  close(t, nc.full({4}, 2), nil, "all_reduce after the errors")
elseif mode == "die" then
  -- rank 1 dies in the middle of the training step (after its forward and backward, before the
  -- gradient all-reduce); rank 0 must not wait forever
  local model = nn.Linear(4, 2):to(dev)
  local opt = optim.SGD(model:parameters(), {lr = 0.1})
  local function loss_fn(m, x, y)
    local l = ag.cross_entropy(m(x), y)
    if rank == 1 then
      io.stderr:write("rank 1: exiting mid-step\n")
      os.exit(3)
    end
    return l
  end
  dist.data_parallel_step{model = model, batch = {nc.randn({4, 4}), nc.randint(0, 2, {4})}, loss_fn = loss_fn,
    optimizer = opt}
  error("rank 0: the step returned although rank 1 died")
else
  error("unknown mode " .. tostring(mode))
end
if rank == 0 then print("OK " .. mode) end

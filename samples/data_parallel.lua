-- Data-parallel training of the Fashion-MNIST CNN (samples/fashion_mnist.lua's model and data)
-- on every device given, in one process, or across processes under mpirun (docs/distributed.md).
--
--   netcl-lua samples/data_parallel.lua [--devices opencl:0:0,opencl:0:1] [--epochs 1]
--            [--batch-size 128] [--lr 0.002] [--steps N] [--data DIR] [--seed N] [--no-eval]
--   mpirun -np 2 netcl-lua samples/data_parallel.lua --mpi [--devices LIST] ...
--
-- Each step splits the batch over the devices (or ranks), runs forward and backward on each,
-- sums the gradients and steps Adam; batch norm keeps per-device batch statistics and averages
-- its running statistics after each step. Prints the loss, the step time and samples per
-- second, then the test accuracy.
local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path

local args = dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or ".") .. "/args.lua")
local nc = require "netcl"
local nn = require "netcl.nn"
local optim = require "netcl.optim"
local data = require "netcl.data"
local progress = require "netcl.progress"
local dist = require "netcl.distributed"
local fm = require "fashion_mnist"

local USAGE = [[
usage: netcl-lua samples/data_parallel.lua [options]
       mpirun -np N netcl-lua samples/data_parallel.lua --mpi [options]
  --devices LIST     comma-separated device specs (default: every OpenCL device, else cpu);
                     with --mpi, the devices of each host, picked by local rank
  --mpi              one process per rank (start under mpirun)
  --epochs N         epochs (default 1)
  --batch-size N     global batch size, split over the devices (default 128)
  --lr X             Adam's learning rate (default 0.002)
  --steps N          stop each epoch after N steps (timing runs)
  --data DIR         the Fashion-MNIST idx files (default: Debian's dataset-fashion-mnist)
  --seed N           seed (default 1)
  --no-eval          skip the test-set evaluation (timing runs)
  --help             this text]]

local function fail(msg) args.fail("data_parallel", msg) end

local function parse_args(argv)
  local o = args.parse(argv, {name = "data_parallel", usage = USAGE,
    defaults = {epochs = 1, batch_size = 128, lr = 0.002, seed = 1},
    integers = {["--epochs"] = "epochs", ["--batch-size"] = "batch_size", ["--seed"] = "seed", ["--steps"] = "steps"},
    numbers = {["--lr"] = "lr"},
    strings = {["--devices"] = "devices", ["--data"] = "data"},
    flags = {["--mpi"] = "mpi", ["--no-eval"] = "no_eval"}})
  return o
end

local function device_list(spec)
  local out = {}
  if spec then
    for s in spec:gmatch("[^,]+") do
      local ok, d = pcall(nc.device, s)
      if not ok then fail(tostring(d)) end
      out[#out + 1] = d
    end
  else
    for _, d in ipairs(nc.devices()) do if d.kind == "opencl" then out[#out + 1] = d end end
    if #out == 0 then out[1] = nc.device("cpu") end
  end
  return out
end

local function main(argv)
  local o = parse_args(argv)
  local devices = device_list(o.devices)
  local rank, world = 0, 1
  if o.mpi then
    local ok, r, w = pcall(dist.init, {backend = "mpi", devices = devices})
    if not ok then fail(tostring(r)) end
    rank, world = r, w
  end
  local function say(...) if rank == 0 then print(string.format(...)) end end
  local dir = o.data or data.fashion_mnist_dir()
  if not dir then fail("Fashion-MNIST not found: install Debian's dataset-fashion-mnist or pass --data DIR") end
  local ok, xtr, ytr = pcall(data.mnist, dir, "train")
  if not ok then fail(tostring(xtr)) end
  local xte, yte
  ok, xte, yte = pcall(data.mnist, dir, "test")
  if not ok then fail(tostring(xte)) end

  -- every rank (and every replica) starts from the same weights: same seed, then replica 1's
  -- weights are copied to the others
  nc.manual_seed(o.seed)
  local group, replicas, model, opt
  if o.mpi then
    model = fm.build_model():to(dist.device())
    for _, p in ipairs(model:parameters()) do dist.broadcast(p.value, 0) end
    opt = optim.Adam(model:parameters(), {lr = o.lr})
    say("%d processes; rank 0 on %s", world, dist.device().spec)
  else
    group = dist.DeviceGroup(devices)
    replicas = dist.replicate(fm.build_model, group)
    model = replicas[1]
    opt = optim.Adam(replicas[1]:parameters(), {lr = o.lr}) -- its updates are copied to the others
    say("%s", tostring(group))
  end
  local cpu = nc.device("cpu")
  -- batches are assembled on the host and split from there, one shard per device
  local train = data.DataLoader(data.TensorDataset(xtr, ytr), {batch_size = o.batch_size, shuffle = true,
    drop_last = true, seed = o.seed, device = cpu, transform = fm.normalize})
  local test = data.DataLoader(data.TensorDataset(xte, yte), {batch_size = 1000, device = model:parameters()[1].value.device,
    transform = fm.normalize})
  local criterion = nn.CrossEntropyLoss()
  local function loss_fn(m, x, y) return criterion(m(x), y) end
  say("%d parameters; global batch %d, Adam lr %g", model:num_parameters(), o.batch_size, o.lr)

  for epoch = 1, o.epochs do
    local steps = math.min(train:len(), o.steps or train:len())
    local bar <close> = rank == 0 and progress.bar{total = steps, desc = string.format("epoch %d/%d", epoch, o.epochs)}
      or nil
    local n, sum, t_first = 0, 0, nil
    for x, y in train:iter() do
      if n >= steps then break end
      local loss
      if o.mpi then
        loss = dist.data_parallel_step{model = model, batch = {x, y}, loss_fn = loss_fn, optimizer = opt}
      else
        loss = dist.data_parallel_step{group = group, replicas = replicas, batch = {x, y}, loss_fn = loss_fn,
          optimizer = opt}
      end
      n, sum = n + 1, sum + loss
      if n == 1 then t_first = nc.clock() end -- the first step builds kernels: not timed
      if bar then bar:update(1, {loss = string.format("%.4f", loss)}) end
    end
    if bar then bar:close() end
    local secs = nc.clock() - t_first
    local timed = n - 1
    say("epoch %d: train loss %.4f over %d steps; %.1f ms/step, %.0f samples/s (steps 2..%d)", epoch, sum / n, n,
      timed > 0 and 1000 * secs / timed or 0 / 0, timed > 0 and timed * o.batch_size / secs or 0 / 0, n)
    if rank == 0 and not o.no_eval then say("test accuracy %.2f%%", 100 * fm.evaluate(model, test)) end
  end
end

main(arg or {...})

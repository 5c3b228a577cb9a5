-- netcl.distributed on this host: (1) DeviceGroup all_reduce of 1M floats over the first two
-- devices (every OpenCL device, else the CPU backend beside one), against the reference of the
-- same run: the bare traffic it needs, each tensor read to the host and written back
-- (t:to(cpu), copy_), with no arithmetic; ratio = all_reduce time / copies time; and host_ratio
-- against the reduction staged through host memory by hand (both reads non-blocking, the sum on
-- the CPU, both written back), which is what the group does when its devices are not peers
-- ("peers": whether they copy device to device); the same for a 1024-float all_reduce. (2) One data-parallel step of an MLP
-- (784-256-256-10, batch 256, SGD) on the two devices against the same step on the first device
-- alone; ratio = two-device time / one-device time (below 1: a speed-up). (3) The two-device
-- step of that MLP and of a CNN (conv 1-16-32, batch 64, SGD) with the gradient reduction
-- overlapped with backward (overlap=true, the default) against the same step without
-- (overlap=false); ratio = on / off (below 1: overlap is faster); rounds alternate between the
-- two. Best of 5 (7 for the overlap pairs) after a warm-up. Skipped with a message when there is
-- one device.
local nc = require "netcl"
local ag = require "netcl.autograd"
local nn = require "netcl.nn"
local optim = require "netcl.optim"
local dist = require "netcl.distributed"

local devices = {}
for _, d in ipairs(nc.devices()) do if d.kind == "opencl" then devices[#devices + 1] = d end end
if #devices == 1 then devices[2] = nc.device("cpu") end
if #devices < 2 then
  io.stderr:write("bench_distributed: needs two devices (POCL_DEVICES=\"pthread pthread\"); skipped\n")
  return
end
devices = {devices[1], devices[2]}
local cpu = nc.device("cpu")
local clock = nc.clock

local function best(fn, rounds)
  fn()
  for _, d in ipairs(devices) do d:sync() end
  local b = math.huge
  for _ = 1, rounds or 5 do
    local t0 = clock()
    fn()
    for _, d in ipairs(devices) do d:sync() end
    b = math.min(b, clock() - t0)
  end
  return b
end

local g = dist.DeviceGroup(devices)
local N = 1 << 20
local ts = {nc.rand({N}, {device = devices[1]}), nc.rand({N}, {device = devices[2]})}
local t_ar = best(function() g:all_reduce(ts, "sum") end)
local t_cp = best(function()
  for _, t in ipairs(ts) do
    local h = t:to(cpu)
    t:copy_(h)
  end
end)
-- the same reduction staged through host memory by hand, as a group whose devices are not
-- peers does it: both reads queued without waiting, the sum on the CPU, both written back
local function host_staged(pair)
  local h1, h2 = pair[1]:to(cpu, {non_blocking = true}), pair[2]:to(cpu, {non_blocking = true})
  local s = h1 + h2
  for _, t in ipairs(pair) do t:copy_(s) end
end
local t_host = best(function() host_staged(ts) end)
print(string.format('{"bench":"distributed","case":"all_reduce","n":%d,"devices":"%s,%s","peers":%s,"ms":%.3f,"copies_ms":%.3f,"ratio":%.3f,"host_staged_ms":%.3f,"host_ratio":%.3f}',
  N, devices[1].spec, devices[2].spec, tostring(devices[1]:peers(devices[2])), t_ar * 1e3, t_cp * 1e3, t_ar / t_cp,
  t_host * 1e3, t_ar / t_host))
local small = {nc.rand({1024}, {device = devices[1]}), nc.rand({1024}, {device = devices[2]})}
local function many(fn) return function() for _ = 1, 20 do fn() end end end
local s_ar = best(many(function() g:all_reduce(small, "sum") end)) / 20
local s_cp = best(many(function() for _, t in ipairs(small) do t:copy_(t:to(cpu)) end end)) / 20
local s_host = best(many(function() host_staged(small) end)) / 20
print(string.format('{"bench":"distributed","case":"all_reduce_latency","n":1024,"devices":"%s,%s","ms":%.3f,"copies_ms":%.3f,"ratio":%.3f,"host_staged_ms":%.3f,"host_ratio":%.3f}',
  devices[1].spec, devices[2].spec, s_ar * 1e3, s_cp * 1e3, s_ar / s_cp, s_host * 1e3, s_ar / s_host))

local function build() return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
  nn.Linear(256, 10)) end
local function loss_fn(m, x, y) return ag.cross_entropy(m(x), y) end
local x, y = nc.randn({256, 784}, {device = cpu}), nc.randint(0, 10, {256}, {device = cpu})
local function step_time(group)
  local replicas = dist.replicate(build, group)
  local opt = optim.SGD(replicas[1]:parameters(), {lr = 0.01})
  return best(function()
    dist.data_parallel_step{group = group, replicas = replicas, batch = {x, y}, loss_fn = loss_fn, optimizer = opt,
      overlap = false}
  end)
end
local t2 = step_time(g)
local t1 = step_time(dist.DeviceGroup{devices[1]})
print(string.format('{"bench":"distributed","case":"mlp_step","batch":256,"devices":"%s,%s","ms":%.2f,"one_device_ms":%.2f,"ratio":%.3f}',
  devices[1].spec, devices[2].spec, t2 * 1e3, t1 * 1e3, t2 / t1))

-- (3) overlap on against off, rounds alternating (the machine's load drifts)
local function cnn() return nn.Sequential(nn.Conv2d(1, 16, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2),
  nn.Conv2d(16, 32, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 7 * 7, 10)) end
local cx, cy = nc.randn({64, 1, 28, 28}, {device = cpu}), nc.randint(0, 10, {64}, {device = cpu})
local function overlap_pair(name, builder, bx, by)
  local replicas = dist.replicate(builder, g)
  local opt = optim.SGD(replicas[1]:parameters(), {lr = 0.01})
  local function step(on)
    dist.data_parallel_step{group = g, replicas = replicas, batch = {bx, by}, loss_fn = loss_fn, optimizer = opt,
      overlap = on}
    for _, d in ipairs(devices) do d:sync() end
  end
  step(true)
  step(false)
  local b = {[true] = math.huge, [false] = math.huge}
  for _ = 1, 7 do
    for _, on in ipairs({true, false}) do
      local t0 = clock()
      step(on)
      b[on] = math.min(b[on], clock() - t0)
    end
  end
  print(string.format('{"bench":"distributed","case":"%s_overlap","devices":"%s,%s","on_ms":%.2f,"off_ms":%.2f,"ratio":%.3f}',
    name, devices[1].spec, devices[2].spec, b[true] * 1e3, b[false] * 1e3, b[true] / b[false]))
end
overlap_pair("mlp_step", build, x, y)
overlap_pair("cnn_step", cnn, cx, cy)

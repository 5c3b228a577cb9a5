-- netcl.distributed on this host: (1) DeviceGroup all_reduce of 1M floats over the first two
-- devices (every OpenCL device, else the CPU backend beside one), against the reference of the
-- same run: the bare traffic it needs, each tensor read to the host and written back
-- (t:to(cpu), copy_), with no arithmetic; ratio = all_reduce time / copies time. (2) One
-- data-parallel step of an MLP (784-256-256-10, batch 256, SGD) on the two devices against the
-- same step on the first device alone; ratio = two-device time / one-device time (below 1: a
-- speed-up). Best of 5 after a warm-up. Skipped with a message when there is one device.
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
print(string.format('{"bench":"distributed","case":"all_reduce","n":%d,"devices":"%s,%s","ms":%.3f,"copies_ms":%.3f,"ratio":%.3f}',
  N, devices[1].spec, devices[2].spec, t_ar * 1e3, t_cp * 1e3, t_ar / t_cp))

local function build() return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
  nn.Linear(256, 10)) end
local function loss_fn(m, x, y) return ag.cross_entropy(m(x), y) end
local x, y = nc.randn({256, 784}, {device = cpu}), nc.randint(0, 10, {256}, {device = cpu})
local function step_time(group)
  local replicas = dist.replicate(build, group)
  local opt = optim.SGD(replicas[1]:parameters(), {lr = 0.01})
  return best(function()
    dist.data_parallel_step{group = group, replicas = replicas, batch = {x, y}, loss_fn = loss_fn, optimizer = opt}
  end)
end
local t2 = step_time(g)
local t1 = step_time(dist.DeviceGroup{devices[1]})
print(string.format('{"bench":"distributed","case":"mlp_step","batch":256,"devices":"%s,%s","ms":%.2f,"one_device_ms":%.2f,"ratio":%.3f}',
  devices[1].spec, devices[2].spec, t2 * 1e3, t1 * 1e3, t2 / t1))

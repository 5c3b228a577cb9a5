-- netcl.distributed on one host: the collectives of a DeviceGroup against values computed here
-- in plain Lua (odd sizes, every op, non-contiguous views), data-parallel training against
-- single-device training on the full batch (an MLP and a small CNN, 5 steps, 1e-5), batch-norm
-- running statistics against the per-shard formula, and the errors. The group is every OpenCL
-- device (CI sets POCL_DEVICES="pthread pthread": two), with the CPU backend added when there
-- is only one; skipped with a message when this host has a single device.
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local nn = require "netcl.nn"
local optim = require "netcl.optim"
local dist = require "netcl.distributed"
local H = require "helpers"

local dev = H.device()
local devices = {}
for _, d in ipairs(nc.devices()) do
  if d.kind == (dev.kind == "cpu" and "opencl" or dev.kind) then devices[#devices + 1] = d end
end
if dev.kind == "cpu" then
  -- the CPU backend beside one OpenCL device
  devices = {dev, devices[1]}
elseif #devices == 1 then
  devices[2] = nc.device("cpu")
end
if #devices < 2 then
  io.stderr:write("SKIP: netcl.distributed needs two devices (set POCL_DEVICES=\"pthread pthread\")\n")
  os.exit(77)
end
while #devices > 2 do table.remove(devices) end
local g = dist.DeviceGroup(devices)

local function values(n, seed)
  local out = {}
  for i = 1, n do out[i] = math.floor(math.sin(i * 1.7 + seed) * 1000) / 8 end
  return out
end

TestCollectives = {}

function TestCollectives:test_all_reduce_every_op_odd_sizes()
  for _, dtype in ipairs({"float32", "int32", "int64"}) do
    for _, n in ipairs({1, 7, 4099}) do
      for _, op in ipairs({"sum", "mean", "max"}) do
        if not (op == "mean" and dtype:match("^int")) then
          local a, b = values(n, 1), values(n, 2)
          if dtype:match("^int") then
            for i = 1, n do a[i], b[i] = math.floor(a[i]), math.floor(b[i]) end
          end
          local ts = {nc.tensor(a, {dtype = dtype, device = devices[1]}), nc.tensor(b, {dtype = dtype, device = devices[2]})}
          g:all_reduce(ts, op)
          local want = {}
          for i = 1, n do
            want[i] = op == "sum" and a[i] + b[i] or op == "mean" and (a[i] + b[i]) / 2 or math.max(a[i], b[i])
          end
          for k = 1, 2 do
            lu.assertEquals(ts[k].device, devices[k])
            H.assert_close(ts[k], want, 1e-6, string.format("%s %s n=%d device %d", dtype, op, n, k))
          end
        end
      end
    end
  end
end

function TestCollectives:test_all_reduce_large()
  -- past 1 MiB the devices are read on one thread each: 262147 floats, against the CPU backend's add
  local n, cpu = 262147, nc.device("cpu")
  local a, b = nc.arange(0, n, 1, {device = cpu}), nc.arange(0, n, 1, {device = cpu}) * -0.5 + 3
  local ts = {a:to(devices[1]):clone(), b:to(devices[2]):clone()} -- to() on its own device is the same tensor
  g:all_reduce(ts, "sum")
  local want = a + b
  for k = 1, 2 do lu.assertEquals((ts[k]:to(cpu) - want):abs():max():item(), 0) end
  g:all_reduce(ts, "max")
  lu.assertEquals((ts[2]:to(cpu) - want):abs():max():item(), 0)
end

function TestCollectives:test_all_reduce_views_and_nan()
  -- a transposed (non-contiguous) view is reduced in place through its layout
  local a = nc.tensor({{1, 2, 3}, {4, 5, 6}}, {device = devices[1]})
  local b = nc.tensor({{10, 20}, {30, 40}, {50, 60}}, {device = devices[2]})
  g:all_reduce({a:transpose(1, 2), b}, "sum")
  H.assert_close(b, {{11, 24}, {32, 45}, {53, 66}})
  H.assert_close(a, {{11, 32, 53}, {24, 45, 66}})
  -- max propagates NaN, as torch.maximum does
  local x, y = nc.tensor({0 / 0, 1}, {device = devices[1]}), nc.tensor({2, 0 / 0}, {device = devices[2]})
  g:all_reduce({x, y}, "max")
  local v = x:tolist()
  lu.assertTrue(v[1] ~= v[1] and v[2] ~= v[2])
end

function TestCollectives:test_broadcast_scatter_gather()
  local a = nc.tensor(values(5, 3), {device = devices[1]})
  local b = nc.tensor(values(5, 4), {device = devices[2]})
  g:broadcast({a, b}, 2)
  H.assert_close(a, values(5, 4))
  H.assert_close(b, values(5, 4))
  -- 7 rows over 2 devices: 4 and 3, in order
  local t = nc.arange(0, 21, 1, {device = devices[1]}):reshape({7, 3})
  local parts = g:scatter(t, 1)
  lu.assertEquals(parts[1].shape, {4, 3})
  lu.assertEquals(parts[2].shape, {3, 3})
  lu.assertEquals(parts[2].device, devices[2])
  H.assert_close(parts[2], {{12, 13, 14}, {15, 16, 17}, {18, 19, 20}})
  local back = g:gather(parts, 1)
  lu.assertEquals(back.device, devices[1])
  H.assert_close(back, t)
  local cols = g:scatter(t, -1)
  lu.assertEquals(cols[1].shape, {7, 2})
  H.assert_close(g:gather(cols, 2, {device = devices[2]}), t)
  lu.assertEquals(dist.split_sizes(7, 3), {3, 2, 2})
end

function TestCollectives:test_errors()
  local a = nc.zeros({3}, {device = devices[1]})
  -- a device missing from the group
  local other
  for _, d in ipairs(nc.devices()) do if not g:index(d) then other = d end end
  if other then
    H.assert_error(function() g:all_reduce({a, nc.zeros({3}, {device = other})}) end, "missing from the group")
  end
  H.assert_error(function() g:all_reduce({nc.zeros({3}, {device = devices[2]}), a}) end, "tensor 1 is on",
    "tensor i must be on device i")
  H.assert_error(function() g:all_reduce({a}) end, "1 tensors for a group of 2")
  H.assert_error(function() g:all_reduce({a, nc.zeros({4}, {device = devices[2]})}) end,
    "tensors differ between devices: [3] float32 on device 1, [4] float32 on device 2")
  H.assert_error(function() g:all_reduce({a, nc.zeros({3}, {device = devices[2]})}, "prod") end,
    "unknown reduction 'prod'")
  H.assert_error(function()
    g:all_reduce({nc.zeros({3}, {dtype = "int32", device = devices[1]}),
      nc.zeros({3}, {dtype = "int32", device = devices[2]})}, "mean")
  end, "mean of int32")
  H.assert_error(function() g:broadcast({a, nc.zeros({3}, {device = devices[2]})}, 3) end, "root 3")
  H.assert_error(function() dist.DeviceGroup({devices[1], devices[1]}) end, "given twice")
  H.assert_error(function() dist.DeviceGroup({"opencl:9:9"}) end, "device 1")
  H.assert_error(function() g:scatter(nc.zeros({1, 2}), 1) end, "cannot split 1")
  H.assert_error(function() g:gather({a, nc.zeros({3}, {device = devices[2]})}, 1, {devic = devices[1]}) end, "unknown option 'devic'")
end

-- The split all-reduce behind the overlapped step: positions added in any order, each read
-- queued at once; finish combines in position order.
function TestCollectives:test_split_all_reduce()
  local D = nc._dist
  for _, op in ipairs({"sum", "mean", "max"}) do
    local a, b = values(1031, 5), values(1031, 6)
    local ta, tb = nc.tensor(a, {device = devices[1]}), nc.tensor(b, {device = devices[2]})
    local h = D.group_reduce_begin(2, op)
    D.group_reduce_add(h, 2, tb)
    lu.assertEquals(D.group_reduce_added(h), 1)
    D.group_reduce_add(h, 1, ta:view({1031, 1}):view({1031})) -- a view of the same storage
    D.group_reduce_finish(h)
    local want = {}
    for i = 1, #a do want[i] = op == "sum" and a[i] + b[i] or op == "mean" and (a[i] + b[i]) / 2 or math.max(a[i], b[i]) end
    H.assert_close(ta, want, 1e-6, op)
    H.assert_close(tb, want, 1e-6, op)
  end
  -- a transposed (non-contiguous) tensor is read through a copy and written back through its layout
  local a = nc.tensor({{1, 2, 3}, {4, 5, 6}}, {device = devices[1]})
  local b = nc.tensor({{10, 20}, {30, 40}, {50, 60}}, {device = devices[2]})
  local h = D.group_reduce_begin(2, "sum")
  D.group_reduce_add(h, 1, a:transpose(1, 2))
  D.group_reduce_add(h, 2, b)
  D.group_reduce_finish(h)
  H.assert_close(a, {{11, 32, 53}, {24, 45, 66}})
  -- errors: shape, device, twice, missing, finished
  h = D.group_reduce_begin(2, "sum")
  D.group_reduce_add(h, 1, nc.zeros({3}, {device = devices[1]}))
  H.assert_error(function() D.group_reduce_add(h, 2, nc.zeros({4}, {device = devices[2]})) end,
    "tensors differ between devices: [3] float32 on device 1, [4] float32 on device 2")
  H.assert_error(function() D.group_reduce_add(h, 2, nc.zeros({3}, {device = devices[1]})) end, "same device")
  H.assert_error(function() D.group_reduce_add(h, 1, nc.zeros({3}, {device = devices[1]})) end, "added twice")
  H.assert_error(function() D.group_reduce_add(h, 3, nc.zeros({3}, {device = devices[2]})) end, "position 3")
  H.assert_error(function() D.group_reduce_finish(h) end, "device 2 of 2 gave no tensor")
  H.assert_error(function() D.group_reduce_finish(h) end, "already finished")
  -- abandoned (never finished): collected without harm
  h = D.group_reduce_begin(2, "sum")
  D.group_reduce_add(h, 1, nc.ones({1 << 16}, {device = devices[1]}))
  h = nil
  collectgarbage()
end

-- Two OpenCL devices of one platform share a context and copy device to device: the collectives
-- and cross-device copies then never read to the host. A third device that is no peer (the CPU
-- backend) sends a reduction through the host, also when it joins one that started on the device.
function TestCollectives:test_peer_path()
  local cpu = nc.device("cpu")
  lu.assertFalse(devices[1]:peers(devices[1]))
  lu.assertFalse(cpu:peers(devices[2]))
  if devices[1].kind ~= "opencl" or not devices[1]:peers(devices[2]) then
    io.stderr:write("test_peer_path: the group's devices are not peers; only the host path is checked here\n")
    return
  end
  lu.assertTrue(devices[2]:peers(devices[1]))
  local function host_reads() return nc.memory_stats(devices[1]).host_reads + nc.memory_stats(devices[2]).host_reads end
  local n = 4099
  local a, b = values(n, 11), values(n, 12)
  for _, op in ipairs({"sum", "mean", "max"}) do
    local ts = {nc.tensor(a, {device = devices[1]}), nc.tensor(b, {device = devices[2]})}
    local before = host_reads()
    g:all_reduce(ts, op)
    g:broadcast({ts[1], nc.zeros({n}, {device = devices[2]})}, 1)
    lu.assertEquals(host_reads(), before, op .. ": the all_reduce and broadcast read to the host")
    local want = {}
    for i = 1, n do want[i] = op == "sum" and a[i] + b[i] or op == "mean" and (a[i] + b[i]) / 2 or math.max(a[i], b[i]) end
    H.assert_close(ts[1], want, 1e-6, op)
    H.assert_close(ts[2], want, 1e-6, op)
  end
  -- copies between the devices: contiguous, a transposed source, a cast, a strided destination
  local m = nc.tensor({{1, 2, 3}, {4, 5, 6}}, {device = devices[1]})
  local before = host_reads()
  local t1 = m:to(devices[2])
  local t2 = m:transpose(1, 2):to(devices[2])
  local t3 = m:to({device = devices[2], dtype = "float64"})
  local dst = nc.zeros({3, 2}, {device = devices[2]})
  dst:transpose(1, 2):copy_(m)
  lu.assertEquals(host_reads(), before, "a copy between peers read to the host")
  lu.assertEquals(t1.device, devices[2])
  H.assert_close(t1, {{1, 2, 3}, {4, 5, 6}})
  H.assert_close(t2, {{1, 4}, {2, 5}, {3, 6}})
  lu.assertEquals(t3.dtype, "float64")
  H.assert_close(t3, {{1, 2, 3}, {4, 5, 6}})
  H.assert_close(dst, {{1, 4}, {2, 5}, {3, 6}})
  -- the source overwritten right after the copy: the copy saw the values queued before it
  local src = nc.full({1 << 16}, 7, {device = devices[1]})
  local out = src:to(devices[2])
  src:fill_(-1)
  lu.assertEquals(out:min():item(), 7)
  lu.assertEquals(out:max():item(), 7)
  -- a group with a device that is no peer: through the host, whichever device comes first
  local g3 = dist.DeviceGroup({devices[1], devices[2], cpu})
  local c = values(n, 13)
  for _, order in ipairs({{1, 2, 3}, {3, 1, 2}}) do
    local ts = {nc.tensor(a, {device = devices[1]}), nc.tensor(b, {device = devices[2]}), nc.tensor(c, {device = cpu})}
    local h = nc._dist.group_reduce_begin(3, "sum")
    for _, i in ipairs(order) do nc._dist.group_reduce_add(h, i, ts[i]) end
    nc._dist.group_reduce_finish(h)
    local want = {}
    for i = 1, n do want[i] = a[i] + b[i] + c[i] end
    for k = 1, 3 do H.assert_close(ts[k], want, 1e-6, string.format("order %s device %d", table.concat(order, ","), k)) end
  end
  local ts = {nc.tensor(a, {device = devices[1]}), nc.tensor(b, {device = devices[2]}), nc.tensor(c, {device = cpu})}
  g3:all_reduce(ts, "max")
  for k = 1, 3 do H.assert_close(ts[k], ts[3]:tolist()) end
end

-- ---- data-parallel training ----------------------------------------------------------------------
local function mlp()
  return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
end

local function cnn()
  return nn.Sequential(nn.Conv2d(1, 4, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
    nn.Linear(4 * 3 * 3, 3))
end

local function loss_fn(model, x, y) return ag.cross_entropy(model(x), y) end

local function snapshot(model)
  local out = {}
  for k, v in pairs(model:state_dict()) do out[k] = v:to(nc.device("cpu")) end
  return out
end

-- Trains build() for 5 steps on the full batch on devices[1], and data-parallel on the group
-- (13 samples: shards of 7 and 6), from the same initial state; compares every parameter.
local function check_equal_to_single(build, x, y, make_opt, per_replica, overlap)
  nc.manual_seed(7)
  local ref = build():to(devices[1])
  local init = snapshot(ref)
  local replicas = dist.replicate(build, g)
  for _, m in ipairs(replicas) do m:load_state_dict(init) end
  local ref_opt = make_opt(ref:parameters())
  local opt
  if per_replica then
    opt = {}
    for r, m in ipairs(replicas) do opt[r] = make_opt(m:parameters()) end
  else
    opt = make_opt(replicas[1]:parameters())
  end
  local xr, yr = x:to(devices[1]), y:to(devices[1])
  for step = 1, 5 do
    local tape = ag.Tape()
    local l = tape:record(function() return loss_fn(ref, xr, yr) end)
    ref:zero_grad()
    tape:backward(l)
    ref_opt:step()
    local dl = dist.data_parallel_step{group = g, replicas = replicas, batch = {x, y}, loss_fn = loss_fn,
      optimizer = opt, bucket_mb = 0.0005, overlap = overlap}
    lu.assertAlmostEquals(dl, l.value:item(), 1e-5 * math.max(1, math.abs(dl)), "loss at step " .. step)
  end
  local want = snapshot(ref)
  for r, m in ipairs(replicas) do
    for k, v in pairs(snapshot(m)) do H.assert_close(v, want[k], 1e-5, string.format("replica %d %s", r, k)) end
  end
  -- replicas identical: exactly when one optimizer stepped and its parameters were copied
  local s1, s2 = snapshot(replicas[1]), snapshot(replicas[2])
  for k, v in pairs(s1) do H.assert_close(s2[k], v, (per_replica and devices[1].kind ~= devices[2].kind) and 1e-6 or nil, k) end
end

TestDataParallel = {}

function TestDataParallel:test_mlp_sgd_one_optimizer_per_replica()
  nc.manual_seed(3)
  local x, y = nc.randn({13, 6}), nc.randint(0, 3, {13})
  check_equal_to_single(mlp, x, y, function(p) return optim.SGD(p, {lr = 0.1, momentum = 0.9}) end, true)
end

function TestDataParallel:test_cnn_adam_one_optimizer()
  nc.manual_seed(4)
  local x, y = nc.randn({13, 1, 6, 6}), nc.randint(0, 3, {13})
  check_equal_to_single(cnn, x, y, function(p) return optim.Adam(p, {lr = 0.01}) end, false)
end

function TestDataParallel:test_mlp_and_cnn_without_overlap()
  nc.manual_seed(3)
  local x, y = nc.randn({13, 6}), nc.randint(0, 3, {13})
  check_equal_to_single(mlp, x, y, function(p) return optim.SGD(p, {lr = 0.1, momentum = 0.9}) end, true, false)
  nc.manual_seed(4)
  x, y = nc.randn({13, 1, 6, 6}), nc.randint(0, 3, {13})
  check_equal_to_single(cnn, x, y, function(p) return optim.Adam(p, {lr = 0.01}) end, false, false)
end

-- 5 steps with the reduction overlapped with backward (the default) and without, from the same
-- state: the same parameters to 1e-6, for small buckets (one per parameter or so), the default
-- ones, and a loss that leaves some parameters without a gradient.
function TestDataParallel:test_overlap_equals_no_overlap()
  local unused_loss = function(model, x, y) return ag.cross_entropy(model:children()[1](x), y) end
  local cases = {{mlp, {13, 6}, loss_fn, 0.0005}, {mlp, {13, 6}, loss_fn, nil}, {cnn, {13, 1, 6, 6}, loss_fn, 0.0002},
                 {mlp, {13, 6}, unused_loss, 0.0005}, {mlp, {13, 6}, unused_loss, nil}}
  -- with overlap, buckets are handed over from inside backward (the gradient hook): 2 buckets
  -- of 524 bytes ({b2, W2, b1} and {W1}) on 2 replicas
  local C = require("netcl.distributed.common").C
  local add, in_backward, outside = C.group_reduce_add, 0, 0
  rawset(C, "group_reduce_add", function(...)
    if debug.traceback():find("in upvalue 'forward_backward'", 1, true) then in_backward = in_backward + 1
    else outside = outside + 1 end
    return add(...)
  end)
  local ok, err = pcall(function()
    local replicas = dist.replicate(mlp, g)
    dist.data_parallel_step{group = g, replicas = replicas, batch = {nc.randn({8, 6}), nc.randint(0, 3, {8})},
      loss_fn = loss_fn, optimizer = optim.SGD(replicas[1]:parameters(), {lr = 0.1}), bucket_mb = 0.0005}
  end)
  rawset(C, "group_reduce_add", add)
  assert(ok, err)
  lu.assertTrue(in_backward == 4 and outside == 0, string.format("%d handed in backward, %d after", in_backward, outside))
  for c, case in ipairs(cases) do
    local build, shape, lf, mb = table.unpack(case)
    nc.manual_seed(20 + c)
    local x, y = nc.randn(shape), nc.randint(0, 3, {13})
    local runs = {}
    for k, overlap in ipairs({true, false}) do
      nc.manual_seed(30 + c)
      local replicas = dist.replicate(build, g)
      local opt = optim.SGD(replicas[1]:parameters(), {lr = 0.1, momentum = 0.9})
      local losses = {}
      for step = 1, 5 do
        losses[step] = dist.data_parallel_step{group = g, replicas = replicas, batch = {x, y}, loss_fn = lf,
          optimizer = opt, bucket_mb = mb, overlap = overlap}
      end
      runs[k] = {snapshot(replicas[1]), snapshot(replicas[2]), losses}
    end
    for step = 1, 5 do
      lu.assertAlmostEquals(runs[1][3][step], runs[2][3][step], 1e-6, string.format("case %d loss %d", c, step))
    end
    for r = 1, 2 do
      for k, v in pairs(runs[1][r]) do
        H.assert_close(v, runs[2][r][k], 1e-6, string.format("case %d replica %d %s", c, r, k))
      end
    end
  end
end

function TestDataParallel:test_batch_norm_running_stats()
  local function build() return nn.Sequential(nn.Linear(4, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Linear(5, 2)) end
  nc.manual_seed(5)
  local replicas = dist.replicate(build, g)
  local x, y = nc.randn({9, 4}), nc.randint(0, 2, {9})
  local lin = replicas[1]:children()[1]
  -- the Linear's output on each shard (5 and 4 rows), before the step changes the weights
  local h = ag.no_grad(function() return lin(x:to(devices[1])).value end)
  local opt = optim.SGD(replicas[1]:parameters(), {lr = 0.05})
  dist.data_parallel_step{group = g, replicas = replicas, batch = {x, y}, loss_fn = loss_fn, optimizer = opt}
  -- per-replica statistics, averaged: 0.9 * 0 + 0.1 * shard mean; 0.9 * 1 + 0.1 * unbiased var
  local rows = h:tolist()
  local want_mean, want_var = {}, {}
  for c = 1, 5 do
    local m, v = 0, 0
    for _, range in ipairs({{1, 5}, {6, 9}}) do
      local s, n = 0, range[2] - range[1] + 1
      for i = range[1], range[2] do s = s + rows[i][c] end
      local mu = s / n
      local ss = 0
      for i = range[1], range[2] do ss = ss + (rows[i][c] - mu) ^ 2 end
      m = m + 0.1 * mu / 2
      v = v + (0.9 + 0.1 * ss / (n - 1)) / 2
    end
    want_mean[c], want_var[c] = m, v
  end
  for r = 1, 2 do
    local bn = replicas[r]:children()[2]
    H.assert_close(bn.running_mean, want_mean, 1e-5, "running_mean replica " .. r)
    H.assert_close(bn.running_var, want_var, 1e-5, "running_var replica " .. r)
  end
  H.assert_close(replicas[1]:children()[2].running_var, replicas[2]:children()[2].running_var)
  H.assert_close(replicas[1]:children()[2].running_mean, replicas[2]:children()[2].running_mean)
end

function TestDataParallel:test_errors()
  local replicas = dist.replicate(mlp, g)
  local opt = optim.SGD(replicas[1]:parameters(), {lr = 0.1})
  local x, y = nc.randn({4, 6}), nc.randint(0, 3, {4})
  local function step(o)
    local args = {group = g, replicas = replicas, batch = {x, y}, loss_fn = loss_fn, optimizer = opt}
    for k, v in pairs(o) do args[k] = v end
    return dist.data_parallel_step(args)
  end
  H.assert_error(function() step{replicas = {replicas[1]}} end, "one per device of the group")
  H.assert_error(function() step{replicas = {replicas[2], replicas[1]}} end, "replica i must be on device i")
  H.assert_error(function() step{replicas = {replicas[1], 3}} end, "replica 2 is not a module")
  H.assert_error(function() step{batch = {x, nc.zeros({5})}} end, "differ in dim 1")
  H.assert_error(function() step{batch = {x:narrow(1, 1, 1), y:narrow(1, 1, 1)}} end, "batch of 1 cannot be split")
  H.assert_error(function() step{optimizer = {opt}} end, "1 optimizers for 2 replicas")
  H.assert_error(function() step{loss_fn = function() return 1 end} end, "must return the loss")
  H.assert_error(function() step{lr = 1} end, "unknown option 'lr'")
  H.assert_error(function() step{overlap = 1} end, "overlap must be a boolean")
  H.assert_error(function() step{bucket_mb = 0} end, "bucket_mb must be a number > 0")
  H.assert_error(function() dist.data_parallel_step{model = replicas[1], batch = {x, y}, loss_fn = loss_fn,
    optimizer = opt} end, "call dist.init first")
  H.assert_error(function() dist.all_reduce(x) end, "dist.init")
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

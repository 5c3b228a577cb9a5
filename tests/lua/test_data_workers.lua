-- netcl.data.DataLoader with worker processes: batch order and contents the same for every
-- worker count, workers that start cleanly after this process used OpenMP, BLAS and OpenCL, and
-- the failure paths (a Lua error in a worker, a worker killed by a signal, a loop left early):
-- a clear error, no hang, no zombie, no shared-memory segment left.
local lu = require "luaunit"
local nc = require "netcl"
local data = require "netcl.data"
local H = require "helpers"

local dev = H.device()

local function my_pid()
  local f = assert(io.open("/proc/self/stat"))
  local pid = tonumber(f:read("l"):match("^(%d+)"))
  f:close()
  return pid
end

-- The state letter of a process ("Z": a zombie), or nil when it no longer exists.
local function proc_state(pid)
  local f = io.open("/proc/" .. pid .. "/stat")
  if not f then return nil end
  local line = f:read("l") or ""
  f:close()
  return line:match("^%d+ %b() (%a)")
end

local function assert_reaped(loader)
  lu.assertNotNil(loader._worker_pids)
  for _, pid in ipairs(loader._worker_pids) do
    lu.assertNil(proc_state(pid), "worker " .. pid .. " is still there (state " .. tostring(proc_state(pid)) .. ")")
  end
end

local function shm_segments()
  local p = io.popen("ls /dev/shm 2>/dev/null")
  local names = {}
  for line in p:lines() do
    if line:match("^netcl%-ring%-" .. my_pid() .. "%-") then names[#names + 1] = line end
  end
  p:close()
  return names
end

-- Sample i: a float32 row {i, 2i, 3i}, an integer label, a float and a boolean.
local Numbered = {}
Numbered.__index = Numbered
function Numbered.new(n, get) return setmetatable({n = n, hook = get}, Numbered) end
function Numbered:len() return self.n end
function Numbered:get(i)
  if self.hook then self.hook(i) end
  return nc.tensor({i, 2 * i, 3 * i}), i, i / 4, i % 2 == 0
end

local function epochs(loader, count)
  local out = {}
  for e = 1, count do
    for x, y, z, w in loader:iter() do
      out[#out + 1] = {x:to("cpu"):tolist(), y:tolist(), z:tolist(), w:tolist(), x.device == dev, y.dtype, z.dtype}
    end
  end
  return out
end

TestWorkers = {}

function TestWorkers:test_order_and_contents_whatever_the_worker_count()
  local ds = Numbered.new(23)
  local ref = epochs(data.DataLoader(ds, {batch_size = 4, shuffle = true, seed = 7, device = dev}), 2)
  lu.assertEquals(#ref, 12)
  lu.assertEquals(ref[1][6], "int64")
  lu.assertEquals(ref[1][7], "float32")
  lu.assertTrue(ref[1][5])
  for _, w in ipairs({1, 2, 3}) do
    for _, prefetch in ipairs({1, 3}) do
      local loader = data.DataLoader(ds, {batch_size = 4, shuffle = true, seed = 7, device = dev, num_workers = w,
                                          prefetch = prefetch})
      lu.assertEquals(epochs(loader, 2), ref, "num_workers=" .. w .. " prefetch=" .. prefetch)
      assert_reaped(loader)
    end
  end
  -- in order without shuffling, and with drop_last
  local got = {}
  for x in data.DataLoader(ds, {batch_size = 5, drop_last = true, num_workers = 2, device = dev}):iter() do
    got[#got + 1] = x:to("cpu"):tolist()[1][1]
  end
  lu.assertEquals(got, {1, 6, 11, 16})
  -- more workers than batches, and a transform run in this process on the device
  local n = 0
  local loader = data.DataLoader(Numbered.new(3), {batch_size = 2, num_workers = 4, device = dev,
                                                   transform = function(x) return x * 2 end})
  for x in loader:iter() do
    n = n + 1
    lu.assertEquals(x.device, dev)
    lu.assertEquals(x:to("cpu"):tolist()[1], n == 1 and {2, 4, 6} or {6, 12, 18})
  end
  lu.assertEquals(n, 2)
  lu.assertEquals(#shm_segments(), 0)
end

-- This process runs OpenMP parallel regions, a BLAS GEMM and (on the OpenCL run) OpenCL work
-- first; the workers then run large CPU ops of their own in get, which must neither hang nor fail.
function TestWorkers:test_workers_start_after_pools_and_drivers()
  local big = nc.rand({1 << 20}, {device = "cpu"})
  lu.assertTrue(big:sum():item() > 0)
  local a = nc.rand({256, 256}, {device = "cpu"})
  lu.assertTrue((a:matmul(a)):sum():item() > 0)
  nc.rand({1000}, {device = dev}):sum():item()
  local ds = {len = function() return 6 end,
              get = function(_, i)
                local x = nc.full({1 << 19}, i, {device = "cpu"})
                local m = nc.full({64, 64}, 1, {device = "cpu"})
                return nc.tensor({(x * 2):sum():item(), m:matmul(m):sum():item()})
              end}
  local got = {}
  for x in data.DataLoader(ds, {batch_size = 2, num_workers = 2, device = dev}):iter() do
    for _, row in ipairs(x:to("cpu"):tolist()) do got[#got + 1] = row end
  end
  lu.assertEquals(#got, 6)
  for i = 1, 6 do lu.assertEquals(got[i], {2 * i * (1 << 19), 64 * 64 * 64}) end
end

function TestWorkers:test_lua_error_in_a_worker()
  local ds = Numbered.new(20, function(i) if i == 11 then error("no sample " .. i .. " here") end end)
  local loader = data.DataLoader(ds, {batch_size = 2, num_workers = 2, device = dev})
  local seen = 0
  local ok, err = pcall(function() for _ in loader:iter() do seen = seen + 1 end end)
  lu.assertFalse(ok)
  err = tostring(err)
  lu.assertStrContains(err, "netcl.data.DataLoader: worker 2 failed on batch 6 (samples 11..12 of the epoch's order)")
  lu.assertStrContains(err, "no sample 11 here")
  lu.assertStrContains(err, "stack traceback:") -- the worker's, cut below the worker loop
  lu.assertStrContains(err, "test_data_workers.lua:51: in method 'get'")
  lu.assertNotStrContains(err, "luaunit.lua") -- this process's stack at the fork is left out
  lu.assertEquals(seen, 5)
  assert_reaped(loader)
  lu.assertEquals(#shm_segments(), 0)
  -- the loader works again in the next epoch once the dataset does
  ds.hook = nil
  local n = 0
  for _ in loader:iter() do n = n + 1 end
  lu.assertEquals(n, 10)
end

function TestWorkers:test_worker_killed_by_a_signal()
  local ds = Numbered.new(20, function(i) if i == 9 then os.execute("kill -KILL $PPID") end end)
  local loader = data.DataLoader(ds, {batch_size = 2, num_workers = 2, device = dev})
  local ok, err = pcall(function() for _ in loader:iter() do end end)
  lu.assertFalse(ok)
  lu.assertStrContains(tostring(err), "netcl.data.DataLoader: worker 1 was killed by signal 9 (Killed) before delivering batch 5")
  assert_reaped(loader)
  lu.assertEquals(#shm_segments(), 0)
end

function TestWorkers:test_leaving_the_loop_early_ends_the_workers()
  local loader = data.DataLoader(Numbered.new(50), {batch_size = 2, num_workers = 3, device = dev})
  for _ in loader:iter() do
    lu.assertEquals(#shm_segments(), 0) -- unlinked as soon as it is mapped
    break
  end
  assert_reaped(loader)
end

function TestWorkers:test_device_tensors_in_a_worker_are_an_error()
  if dev.spec == "cpu" then return end
  local on_dev = nc.ones({4, 3}, {device = dev})
  local ds = {len = function() return 4 end, get = function(_, i) return on_dev[i] end}
  H.assert_error(function() for _ in data.DataLoader(ds, {batch_size = 2, num_workers = 1, device = dev}):iter() do end end,
    "DataLoader worker")
end

os.exit(lu.LuaUnit.run())

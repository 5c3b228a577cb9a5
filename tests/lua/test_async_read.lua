-- Reads to the host that do not wait: t:to("cpu", {non_blocking = true}), t:is_ready(),
-- nc.synchronize. The result is "pending" until its bytes land; every use of it (a read, an op,
-- an index, a write, to(), free) waits first, so the values never depend on the caller waiting.
-- On OpenCL the read is enqueued into pinned memory behind the queued work; on the CPU backend
-- a read has nothing to wait for and completes at once. The references are the blocking reads.
local lu = require "luaunit"
local nc = require "netcl"
local H = require "helpers"

local dev = H.device()
local opencl = dev.kind == "opencl"

local function stats() return nc.memory_stats(dev) end

-- A tensor of n values of dtype on the device under test, values spread over the dtype's range.
local function source(n, dtype)
  local x = nc.randn({n}):mul(100)
  if dtype == "bool" then return x:gt(0) end
  if dtype == "uint8" then return x:abs():to("uint8") end
  return x:to(dtype)
end

local function dtypes()
  local list = {"float32", "int32", "int64", "uint8", "bool"}
  if dev.fp64 then list[#list + 1] = "float64" end
  return list
end

TestAsyncRead = {}

function TestAsyncRead:test_values_equal_blocking_read()
  nc.manual_seed(1)
  for _, dtype in ipairs(dtypes()) do
    for _, n in ipairs({0, 1, 3, 7, 64, 1000, 4097, 65537, (1 << 20) + 5}) do
      local x = source(n, dtype)
      local h = x:to("cpu", {non_blocking = true})
      local want = x:to("cpu")
      lu.assertEquals(h.device.kind, "cpu")
      lu.assertEquals(h.dtype, dtype)
      lu.assertEquals(h.shape, {n})
      lu.assertTrue(h:bytes() == want:bytes(), dtype .. " n=" .. n)
    end
  end
end

function TestAsyncRead:test_layouts_and_conversions()
  nc.manual_seed(2)
  local x = nc.randn({5, 7})
  -- a transposed view and a narrow (non-contiguous, offset) read the values they show
  H.assert_close(x:t():to("cpu", {non_blocking = true}), x:t():to("cpu"))
  H.assert_close(x:narrow(2, 3, 4):to("cpu", {non_blocking = true}), x:narrow(2, 3, 4):to("cpu"))
  -- dtype with the device, in one table or as options after the device
  local a = x:to({device = "cpu", dtype = "int32", non_blocking = true})
  lu.assertEquals(a.dtype, "int32")
  H.assert_close(a, x:to("int32"):to("cpu"))
  local b = x:to("cpu", {non_blocking = false})
  H.assert_close(b, x:to("cpu"))
  -- a 0-dim tensor and item()
  local s = x:sum()
  lu.assertAlmostEquals(s:to("cpu", {non_blocking = true}):item(), s:item(), 0)
  -- non_blocking toward a device, or to the same device: plain to()
  local c = x:to("cpu"):to(dev, {non_blocking = true})
  H.assert_close(c, x)
  lu.assertTrue(rawequal(x:to(dev, {non_blocking = true}), x))
end

function TestAsyncRead:test_pending_result_used_before_it_lands()
  nc.manual_seed(3)
  local x = nc.randn({300})
  local want = x:to("cpu"):tolist()
  -- (x + 0: a fresh source, which the CPU backend's to("cpu") returns itself, so writes below
  -- leave x alone on every device)
  -- A few matmuls queued ahead keep the read in flight on OpenCL while the result is used.
  local m = nc.randn({192, 192})
  local function pending()
    local busy = m
    for _ = 1, 3 do busy = busy:matmul(m) end
    return (x + 0):to("cpu", {non_blocking = true})
  end
  -- an op, an index, a reduction, a view, a to(), a printout: each sees the read's values
  H.assert_close(pending() * 2, x:to("cpu") * 2)
  lu.assertEquals(pending()[17]:item(), want[17])
  lu.assertAlmostEquals(pending():sum():item(), x:to("cpu"):sum():item(), 1e-6)
  H.assert_close(pending():view({3, 100}):select(1, 2), x:to("cpu"):view({3, 100}):select(1, 2))
  H.assert_close(pending():to(dev), x)
  lu.assertEquals(tostring(pending()), tostring(x:to("cpu")))
  -- a write waits first, so the read cannot land on top of it
  local w = pending()
  w:fill_(3)
  lu.assertEquals(w:tolist()[300], 3)
  local c = pending()
  c:copy_(nc.zeros({300}, {device = "cpu"}))
  lu.assertEquals(c:sum():item(), 0)
  local s = pending()
  s[1] = 42
  lu.assertEquals(s:tolist()[1], 42)
  lu.assertEquals(s:tolist()[2], want[2])
end

function TestAsyncRead:test_source_overwritten_after_the_read_is_issued()
  nc.manual_seed(4)
  for _, n in ipairs({1, 1000, 100000}) do
    local x = nc.randn({n})
    local want = x:to("float64"):to("cpu")
    -- float64 makes a copy on every device (the CPU backend's to("cpu") of a CPU tensor is t)
    local h = x:to({device = "cpu", dtype = "float64", non_blocking = true})
    x:fill_(-1)
    x:add_(5)
    x:free()
    H.assert_close(h, want)
    local y = nc.randn({n})
    local hy = y:to("cpu", {non_blocking = true})
    local wy = hy:to("cpu") -- (the blocking read would wait; the pending one does the same)
    y:mul_(0)
    H.assert_close(hy, wy)
  end
end

function TestAsyncRead:test_freed_and_collected_while_pending()
  nc.manual_seed(5)
  local before = stats()
  for _ = 1, 20 do
    local x = nc.randn({4096})
    local h = x:to("cpu", {non_blocking = true})
    x = nil -- the source collected with the read in flight
    collectgarbage()
    lu.assertEquals(h:numel(), 4096)
    -- the result freed, or dropped and collected, before it lands
    local p = nc.randn({4096}):to("cpu", {non_blocking = true})
    p:free()
    local q = nc.randn({100}):to("cpu", {non_blocking = true})
    q = nil
    collectgarbage()
    collectgarbage()
  end
  nc.synchronize(dev)
  if opencl then
    lu.assertEquals(stats().async_reads - before.async_reads, 60)
    lu.assertEquals(stats().host_reads, before.host_reads, "a non-blocking read read blocking")
  end
end

function TestAsyncRead:test_many_outstanding_reads()
  nc.manual_seed(6)
  local x = nc.randn({257})
  local before = stats()
  local hs = {}
  for i = 1, 400 do hs[i] = (x + i):sum():to("cpu", {non_blocking = true}) end
  local big = {}
  for i = 1, 8 do big[i] = (x * i):expand({1000, 257}):to("cpu", {non_blocking = true}) end
  if opencl then lu.assertEquals(stats().async_reads - before.async_reads, 408) end
  local base = x:to("float64"):sum():item()
  for i = 1, 400 do lu.assertAlmostEquals(hs[i]:item(), base + 257 * i, 1e-3 * (1 + math.abs(base + 257 * i))) end
  for i = 1, 8 do H.assert_close(big[i]:select(1, 1000), (x * i):to("cpu")) end
end

function TestAsyncRead:test_is_ready_becomes_true()
  nc.manual_seed(7)
  local x = nc.randn({2000})
  local h = (x * 3):to("cpu", {non_blocking = true})
  local deadline = os.time() + 30
  while not h:is_ready() and os.time() < deadline do end
  lu.assertTrue(h:is_ready(), "a pending read never landed")
  H.assert_close(h, (x * 3):to("cpu"))
  -- nothing pending: a blocking read, a CPU tensor, a read already waited for
  lu.assertTrue(x:to("cpu"):is_ready())
  lu.assertTrue(nc.zeros({3}, {device = "cpu"}):is_ready())
  lu.assertTrue(nc.is_ready(x))
end

function TestAsyncRead:test_synchronize()
  nc.manual_seed(8)
  local x = nc.randn({512})
  local hs = {}
  for i = 1, 30 do hs[i] = (x * i):to("cpu", {non_blocking = true}) end
  nc.synchronize(dev)
  for i = 1, 30 do lu.assertTrue(hs[i]:is_ready()) end
  for i = 1, 30 do hs[i] = (x + i):to("cpu", {non_blocking = true}) end
  nc.synchronize() -- every device
  for i = 1, 30 do lu.assertTrue(hs[i]:is_ready()) end
  H.assert_close(hs[30], (x + 30):to("cpu"))
  nc.synchronize(dev.spec)
  H.assert_error(function() nc.synchronize("nodevice") end, "netcl.synchronize")
end

function TestAsyncRead:test_options_are_checked()
  local x = nc.ones({2})
  local err = H.assert_error(function() return x:to("cpu", {nonblocking = true}) end)
  lu.assertStrContains(err, "netcl.to")
  lu.assertStrContains(err, "unknown option 'nonblocking'")
  lu.assertStrContains(err, "non_blocking=")
  err = H.assert_error(function() return x:to({device = "cpu", non_blocking = true, bogus = 1}) end)
  lu.assertStrContains(err, "{device=, dtype=, non_blocking=}")
  -- options go with a device or dtype given by itself, not after a table
  err = H.assert_error(function() return x:to({device = "cpu"}, {non_blocking = true}) end)
  lu.assertStrContains(err, "netcl.to")
end

os.exit(lu.LuaUnit.run())

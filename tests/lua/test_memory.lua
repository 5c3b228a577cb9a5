-- Device memory and the collector: dropped tensors are reclaimed in step with device
-- allocations (the binding reports their bytes to Lua's GC), and pool statistics add up.
local lu = require "luaunit"
local nc = require "netcl"
local H = require "helpers"

local dev = H.device()
local MB = 1024 * 1024

TestMemory = {}

function TestMemory:test_allocation_loop_stays_bounded()
  collectgarbage("collect")
  local base = nc.memory_stats(dev).in_use
  local peak = 0
  for i = 1, 10000 do
    local t = nc.empty({MB}) -- 4 MB of float32, dropped at once
    if i % 1000 == 0 then t:fill_(i) end
    peak = math.max(peak, nc.memory_stats(dev).in_use - base)
  end
  local st = nc.memory_stats(dev)
  lu.assertTrue(st.in_use - base < 64 * MB, string.format("in_use grew by %.1f MB", (st.in_use - base) / MB))
  lu.assertTrue(peak < 256 * MB, string.format("peak growth %.1f MB", peak / MB))
  lu.assertTrue(st.hits > 9000, "the pool serves repeats from its cache (hits " .. st.hits .. ")")
end

function TestMemory:test_stats_account_for_tensors()
  collectgarbage("collect")
  collectgarbage("stop")
  local a = nc.memory_stats(dev)
  local t = nc.zeros({1000, 1000})
  local b = nc.memory_stats(dev)
  -- size classes are four steps per power of two: 4,000,000 B takes the 4 MiB class
  lu.assertEquals(b.in_use - a.in_use, 4 * MB)
  lu.assertTrue(b.peak >= b.in_use)
  local v = t:view({-1}) -- views allocate nothing
  lu.assertEquals(nc.memory_stats(dev).in_use, b.in_use)
  t:free()
  lu.assertEquals(nc.memory_stats(dev).in_use, b.in_use, "the view still holds the storage")
  v:free()
  local c = nc.memory_stats(dev)
  lu.assertEquals(c.in_use, a.in_use)
  lu.assertTrue(c.cached >= 4 * 1000 * 1000)
  nc.empty_cache(dev)
  lu.assertEquals(nc.memory_stats(dev).cached, 0)
  collectgarbage("restart")
end

function TestMemory:test_zero_sized_tensors()
  local t = nc.zeros({0, 3})
  lu.assertEquals(t:numel(), 0)
  lu.assertEquals(t:tolist(), {})
  lu.assertEquals(t:bytes(), "")
  lu.assertEquals(t:transpose(1, 2):contiguous().shape, {3, 0})
  lu.assertEquals(nc.arange(0):numel(), 0)
end

function TestMemory:test_out_of_memory_is_an_error()
  local huge = math.floor(dev.memory / 4) * 2 -- elements; 8x the device's memory in float32
  local err = H.assert_error(function() nc.empty({huge, 4}) end, "netcl.empty", "out of memory")
  lu.assertStrContains(err, "requested")
  -- nothing was lost: the device still works
  lu.assertEquals(nc.ones({2}):tolist(), {1, 1})
end

os.exit(lu.LuaUnit.run())

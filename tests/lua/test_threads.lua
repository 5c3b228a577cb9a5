-- nc.set_num_threads / nc.get_num_threads: the CPU thread pool's size (tests/c/test_threads.c
-- checks the pool itself). A CPU matmul and sum give the same values, within rounding, at 1 and
-- 3 threads, against sums in Lua's double arithmetic.
local lu = require "luaunit"
local nc = require "netcl"
local H = require "helpers"

H.device()
local default_threads = nc.get_num_threads()

TestThreads = {}

function TestThreads:tearDown() nc.set_num_threads(default_threads) end

function TestThreads:test_set_and_get()
  nc.set_num_threads(3)
  lu.assertEquals(nc.get_num_threads(), 3)
  nc.set_num_threads(1)
  lu.assertEquals(nc.get_num_threads(), 1)
end

function TestThreads:test_errors()
  H.assert_error(function() nc.set_num_threads(0) end, "netcl.set_num_threads", "from 1 to 1024, got 0")
  H.assert_error(function() nc.set_num_threads(2000) end, "got 2000")
  H.assert_error(function() nc.set_num_threads("two") end, "netcl.set_num_threads", "expected an integer")
end

function TestThreads:test_cpu_results_at_1_and_3_threads()
  local a, b = nc.randn({200, 300}, {device = "cpu"}), nc.randn({300, 150}, {device = "cpu"})
  local al, bl = a:tolist(), b:tolist()
  local want, total = {}, 0
  for i = 1, 200 do
    want[i] = {}
    for j = 1, 150 do
      local s = 0
      for p = 1, 300 do s = s + al[i][p] * bl[p][j] end
      want[i][j] = s
      total = total + s
    end
  end
  for _, n in ipairs({1, 3}) do
    nc.set_num_threads(n)
    local c = a:matmul(b)
    H.assert_close(c, want, 1e-4, n .. " threads: matmul")
    lu.assertAlmostEquals(c:sum():item(), total, 1e-4 * math.abs(total) + 1e-2)
  end
end

os.exit(lu.LuaUnit.run())

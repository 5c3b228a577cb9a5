-- Exit with work still queued (docs/reliability.md "Runtime"): 40 conv2d forwards of random
-- shapes and no final sync, with a cold PoCL kernel cache, so that the driver's threads are still
-- compiling work-group functions when the script ends. Before the exit handler drained the
-- queues and released the OpenCL objects, 3 runs in 8 of this loop died with SIGSEGV.
local lu = require "luaunit"
local H = require "helpers"

local dev = H.device()
local RUNS = 8

local SCRIPT = [[
local nc = require "netcl"
math.randomseed(tonumber(arg[1]))
for i = 1, 40 do
  local c, k = math.random(1, 4), math.random(1, 3) * 2 - 1
  local x = nc.randn({math.random(1, 3), c, math.random(k, 12), math.random(k, 12)})
  local w = nc.randn({math.random(1, 5), c, k, k})
  local y = nc.conv2d(x, w, nil, {padding = math.random(0, 1)})
end
]]

TestExitDrain = {}

function TestExitDrain:test_exit_with_queued_work_and_a_cold_driver_cache()
  if dev.kind ~= "opencl" then lu.skip("an OpenCL driver's exit") end
  local dir = H.tmpdir()
  local path = dir .. "/convs.lua"
  local f = assert(io.open(path, "w"))
  f:write(SCRIPT)
  f:close()
  local run = string.format("NETCL_DEVICE=%s '%s' '%s'", dev.spec, H.netcl_lua(), path)
  -- netcl's own program cache warm (NETCL_CACHE_DIR as the suite sets it), so each run is short
  local out, rc = H.sh(string.format("POCL_CACHE_DIR='%s/warm' %s 0", dir, run))
  lu.assertEquals(rc, 0, out)
  for i = 1, RUNS do
    out, rc = H.sh(string.format("POCL_CACHE_DIR='%s/pocl%d' %s %d", dir, i, run, i))
    lu.assertEquals(rc, 0, string.format("run %d of %d ended with %s: %s", i, RUNS, tostring(rc), out))
  end
  os.execute("rm -rf '" .. dir .. "'")
end

os.exit(lu.LuaUnit.run())

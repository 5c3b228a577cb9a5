-- The on-disk program cache: a second process running the same kernels builds no program from
-- source, and a corrupt cache entry is ignored and rebuilt.
local lu = require "luaunit"
local nc = require "netcl"
local H = require "helpers"

local dev = H.device()
if dev.kind ~= "opencl" then
  io.stderr:write("SKIP: the kernel cache is an OpenCL feature\n")
  os.exit(77)
end

local script = [[
local nc = require "netcl"
local d = nc.device(os.getenv("NETCL_TEST_DEVICE"))
local t = nc.arange(10, {device = d}):transpose(1, 1)
t:fill_(2)
local s = nc.memory_stats(d)
io.write(s.programs_built, " ", s.programs_loaded, " ", t:tolist()[3])
]]

local function run(cache)
  local p = io.popen(string.format("NETCL_CACHE_DIR=%s NETCL_TEST_DEVICE=%s %s -e %q", cache, dev.spec,
                                   H.netcl_lua(), script))
  local out = p:read("a")
  p:close()
  local built, loaded, v = out:match("^(%d+) (%d+) (%S+)$")
  assert(built, "unexpected child output: " .. out)
  return tonumber(built), tonumber(loaded), tonumber(v)
end

TestKernelCache = {}

function TestKernelCache:test_second_process_loads_from_disk()
  local cache = H.tmpdir()
  local b1, l1, v1 = run(cache)
  lu.assertTrue(b1 >= 1, "the first process builds from source")
  lu.assertEquals(l1, 0)
  lu.assertEquals(v1, 2)
  local b2, l2, v2 = run(cache)
  lu.assertEquals(b2, 0, "the second process builds nothing from source")
  lu.assertTrue(l2 >= 1)
  lu.assertEquals(v2, 2)

  -- corrupt every entry: the next process must rebuild, not crash or misbehave
  local p = io.popen("ls " .. cache)
  for name in p:lines() do
    local f = assert(io.open(cache .. "/" .. name, "r+b"))
    f:seek("set", 40)
    f:write("garbage!")
    f:close()
  end
  p:close()
  local b3, l3, v3 = run(cache)
  lu.assertTrue(b3 >= 1, "a corrupt entry is rebuilt")
  lu.assertEquals(l3, 0)
  lu.assertEquals(v3, 2)
  local b4 = run(cache)
  lu.assertEquals(b4, 0, "and the rebuilt entry is cached again")
  os.execute("rm -rf " .. cache)
end

os.exit(lu.LuaUnit.run())

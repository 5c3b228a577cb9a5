-- The kernel profile (NETCL_PROFILE=1, docs/performance.md "Where a GPU's time goes"): a child
-- process launches known kernels a known number of times, and the table it prints at exit must
-- name each with that count and a total that adds up; without the variable it prints nothing.
local lu = require "luaunit"
local H = require "helpers"

local dev = H.device()

local SCRIPT = [[
local nc = require "netcl"
local a = nc.ones({1000})
local b = nc.full({1000}, 2.0)
for _ = 1, 7 do a = a + b end
for _ = 1, 3 do a = a * b end
local s = a:sum():item()
assert(s == (1 + 14) * 8 * 1000, s)
]]

local function run(env)
  local dir = H.tmpdir()
  local path = dir .. "/kernels.lua"
  local f = assert(io.open(path, "w"))
  f:write(SCRIPT)
  f:close()
  local out, rc = H.sh(string.format("%s NETCL_DEVICE=%s '%s' '%s' 2>&1", env, dev.spec, H.netcl_lua(), path))
  os.execute("rm -rf '" .. dir .. "'")
  return out, rc
end

TestProfile = {}

function TestProfile:test_table_counts_each_kernel()
  if dev.kind ~= "opencl" then lu.skip("the kernel profile is the OpenCL backend's") end
  local out, rc = run("NETCL_PROFILE=1")
  lu.assertEquals(rc, 0, out)
  local total, launches = out:match("kernel time on .-: ([%d.]+) ms in (%d+) launches")
  lu.assertNotNil(total, out)
  local rows, sum, calls = {}, 0, 0
  for ms, n, key in out:gmatch("\n%s*([%d.]+)%s+[%d.]+%s+(%d+)%s+[%d.]+%s+([^\n]+)") do
    rows[#rows + 1] = {key = key, n = tonumber(n)}
    sum, calls = sum + tonumber(ms), calls + tonumber(n)
  end
  local function count(prefix)
    local c = 0
    for _, r in ipairs(rows) do if r.key:sub(1, #prefix) == prefix then c = c + r.n end end
    return c
  end
  lu.assertEquals(count("add_float32 ["), 7, out)
  lu.assertEquals(count("mul_float32 ["), 3, out)
  lu.assertEquals(calls, tonumber(launches), out)
  lu.assertAlmostEquals(sum, tonumber(total), 0.01 * #rows + 1e-3)
  -- sorted by total time, largest first
  local prev = math.huge
  for ms in out:gmatch("\n%s*([%d.]+)%s+[%d.]+%s+%d+%s+[%d.]+%s+[^\n]+") do
    lu.assertTrue(tonumber(ms) <= prev, out)
    prev = tonumber(ms)
  end
end

function TestProfile:test_off_by_default()
  if dev.kind ~= "opencl" then lu.skip("the kernel profile is the OpenCL backend's") end
  local out, rc = run("")
  lu.assertEquals(rc, 0, out)
  lu.assertNil(out:find("kernel time on", 1, true), out)
  out, rc = run("NETCL_PROFILE=0")
  lu.assertEquals(rc, 0, out)
  lu.assertNil(out:find("kernel time on", 1, true), out)
end

os.exit(lu.LuaUnit.run())

-- netcl-lua as a script runner, and `require "netcl"` from stock lua5.4 in the build tree.
local lu = require "luaunit"
local H = require "helpers"

H.device()
local exe = H.netcl_lua()

local sh = H.sh

TestRunner = {}

function TestRunner:test_script_gets_arg_like_lua()
  local dir = H.tmpdir()
  local f = assert(io.open(dir .. "/s.lua", "w"))
  f:write('print(arg[0], arg[1], arg[2], #arg, select("#", ...), ...)')
  f:close()
  local out, code = sh(exe .. " " .. dir .. "/s.lua alpha 'b c'")
  lu.assertEquals(code, 0)
  lu.assertEquals(out, dir .. "/s.lua\talpha\tb c\t2\t2\talpha\tb c\n")
  out = sh("echo 'print(1 + 1)' | " .. exe .. " -")
  lu.assertEquals(out, "2\n")
  out, code = sh(exe .. " -e 'error(\"boom\")'")
  lu.assertNotEquals(code, 0)
  lu.assertStrContains(out, "boom")
  lu.assertStrContains(out, "stack traceback")
  out = sh(exe .. " -l netcl -e 'print(type(netcl.zeros))'")
  lu.assertEquals(out, "function\n")
  os.execute("rm -rf " .. dir)
end

function TestRunner:test_list_devices()
  local out, code = sh(exe .. " --list-devices")
  lu.assertEquals(code, 0)
  lu.assertStrContains(out, "cpu")
  local out2 = sh(exe .. " --device cpu -e 'print(require(\"netcl\").default_device().spec)'")
  lu.assertEquals(out2, "cpu\n")
  local out3, code3 = sh(exe .. " --device tpu -e 'require(\"netcl\").zeros(1)'")
  lu.assertNotEquals(code3, 0)
  lu.assertStrContains(out3, "bad device spec 'tpu'")
end

function TestRunner:test_child_process_sees_the_same_devices()
  -- listing devices loads the OpenCL drivers; a netcl-lua started afterwards, by this process,
  -- must still see every device (some ICD loaders used to truncate OCL_ICD_FILENAMES in place)
  local nc = require "netcl"
  local specs = {}
  for _, d in ipairs(nc.devices()) do specs[#specs + 1] = d.spec end
  local out, code = sh(exe .. " -e 'for _, d in ipairs(require(\"netcl\").devices()) do print(d.spec) end'")
  lu.assertEquals(code, 0, out)
  lu.assertEquals(out, table.concat(specs, "\n") .. "\n")
end

function TestRunner:test_stock_lua_requires_netcl()
  local build = exe:match("^(.*)/bin/netcl%-lua$")
  local lua = sh("command -v lua5.4"):match("^(%S+)")
  if not lua then lu.skip("lua5.4 not installed") end
  local module = build and io.open(build .. "/lib/lua/5.4/netcl/core.so")
  if not module then lu.skip("netcl-lua is not in a build tree (no <build>/lib/lua/5.4/netcl/core.so)") end
  module:close()
  local preload = os.getenv("NETCL_TEST_PRELOAD") -- sanitizer builds
  preload = preload and ("LD_PRELOAD=" .. preload .. " ASAN_OPTIONS=detect_leaks=0 ") or ""
  local cmd = preload .. string.format("LUA_CPATH='%s/lib/lua/5.4/?.so;;' LUA_PATH='lua/?.lua;lua/?/init.lua;;' %s -e " ..
                            "'local nc = require \"netcl\"; print(nc.ones({2, 2}, {device = \"cpu\"}):tolist()[2][2])'",
                            build, lua)
  local out, code = sh(cmd)
  lu.assertEquals(code, 0, out)
  lu.assertEquals(out, "1.0\n")
end

function TestRunner:test_opencl_is_loaded_at_run_time()
  -- libnetcl must start on machines with no libOpenCL at all: neither it nor netcl-lua may link
  -- it. The library is the one the loader picks for netcl-lua (a build tree, an install or a
  -- packed copy alike).
  local lib = sh("ldd " .. exe):match("libnetcl%.so[%w.]*%s+=>%s+(%S+)")
  lu.assertNotNil(lib, "netcl-lua links libnetcl dynamically")
  local out = sh("readelf -d " .. lib .. " " .. exe)
  lu.assertStrContains(out, "libnetcl")
  lu.assertNotStrContains(out, "libOpenCL")
  -- and with OpenCL hidden, everything runs on the CPU backend
  local out2 = sh("NETCL_OPENCL=0 NETCL_DEVICE= " .. exe .. " -e 'local nc = require \"netcl\"; " ..
                  "print(#nc.devices(), nc.default_device().kind, nc.ones(3):tolist()[3])'")
  lu.assertEquals(out2, "1\tcpu\t1.0\n")
end

os.exit(lu.LuaUnit.run())

-- samples/data_parallel.lua end to end on a tiny synthetic dataset in the Fashion-MNIST file
-- layout: two epochs on two devices in one process (the loss falls, the test accuracy is
-- printed), and the same under mpirun -np 2 when MPI is here (skipped with a message if not).
local lu = require "luaunit"
local nc = require "netcl"
local H = require "helpers"

local dev = H.device()
local exe = H.netcl_lua()
local SAMPLE = "samples/data_parallel.lua"

local specs = {}
for _, d in ipairs(nc.devices()) do if d.kind == "opencl" then specs[#specs + 1] = d.spec end end
if dev.kind == "cpu" then specs = {"cpu", specs[1]} elseif #specs == 1 then specs[2] = "cpu" end
if #specs < 2 then
  io.stderr:write("SKIP: the data-parallel sample needs two devices (set POCL_DEVICES=\"pthread pthread\")\n")
  os.exit(77)
end
local devices = specs[1] .. "," .. specs[2]

local sh, write_split = H.sh, H.write_fashion_split

local dir = H.tmpdir()
write_split(dir, "train", 96, 3)
write_split(dir, "t10k", 32, 5)
local ARGS = string.format("--data %s --batch-size 16 --epochs 2 --lr 0.01 --devices %s", dir, devices)

local function check_run(out, code)
  lu.assertEquals(code, 0, out)
  local l1 = tonumber(out:match("\nepoch 1: train loss ([%d.]+) over 6 steps"))
  local l2 = tonumber(out:match("\nepoch 2: train loss ([%d.]+) over 6 steps"))
  lu.assertNotNil(l1, out)
  lu.assertNotNil(l2, out)
  lu.assertTrue(l2 < l1, out)
  lu.assertNotNil(out:match("test accuracy [%d.]+%%"), out)
end

TestDataParallelSample = {}

function TestDataParallelSample:test_one_process_two_devices()
  local out, code = sh(string.format("%s %s %s", exe, SAMPLE, ARGS))
  lu.assertStrContains(out, "DeviceGroup{" .. specs[1] .. ", " .. specs[2] .. "}")
  check_run(out, code)
end

-- Without --data the sample finds the data through data.fashion_mnist_dir() ($NETCL_FASHION_MNIST here).
function TestDataParallelSample:test_default_data_dir()
  local out, code = sh(string.format("NETCL_FASHION_MNIST=%s %s %s --batch-size 16 --epochs 1 --devices cpu", dir, exe,
                                     SAMPLE))
  lu.assertEquals(code, 0, out)
  lu.assertNotNil(out:match("\nepoch 1: train loss [%d.]+ over 6 steps"), out)
end

function TestDataParallelSample:test_mpirun_two_processes()
  local p = io.popen("command -v mpirun")
  local mpirun = p:read("l")
  p:close()
  if not mpirun or not nc._dist.mpi_available() then
    lu.skip("mpirun or the MPI backend is absent")
  end
  -- no leak checking in sanitizer builds: Open MPI's unloaded plugins leak at exit (tests/dist/test_mpi.lua)
  local asan = os.getenv("ASAN_OPTIONS") or ""
  asan = (asan ~= "" and asan .. ":" or "") .. "detect_leaks=0"
  local out, code = sh(string.format("OMPI_MCA_btl_vader_single_copy_mechanism=none ASAN_OPTIONS=%s timeout 300 " ..
    "%s -np 2 --oversubscribe --allow-run-as-root %s %s --mpi %s", asan, mpirun, exe, SAMPLE, ARGS))
  lu.assertStrContains(out, "2 processes; rank 0 on " .. specs[1])
  check_run(out, code)
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

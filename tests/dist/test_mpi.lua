-- netcl.distributed across processes: runs tests/dist/mpi_worker.lua under
-- `mpirun -np 2 --oversubscribe --allow-run-as-root` on this host, once per mode: collectives
-- (every op, odd sizes, dtypes, broadcast, barrier, gather), train (5 data-parallel steps equal
-- full-batch training to 1e-5, replicas and BN statistics identical), mismatch (shapes and
-- collectives that differ between ranks: an error on every rank, and the ranks go on), die (a
-- rank exits mid-step: the other stops with an error within its timeout). Skipped with a message
-- when mpirun is absent or libnetcl was built without MPI.
local nc = require "netcl"
local H = require "helpers"

local function skip(msg)
  io.stderr:write("SKIP: " .. msg .. "\n")
  os.exit(77)
end
if not nc._dist.mpi_available() then skip("libnetcl was built without MPI (install libopenmpi-dev, rebuild)") end
local p = io.popen("command -v mpirun")
local mpirun = p:read("l")
p:close()
if not mpirun then skip("mpirun is absent (install openmpi-bin)") end

local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or "."
local exe = H.netcl_lua()
local failures = 0

-- Runs one mode; returns exit status, output, seconds.
local function run(mode, ...)
  local out = os.tmpname()
  -- CMA (single-copy) needs ptrace rights that containers often lack; the copy-in/copy-out path
  -- works everywhere. In sanitizer builds the ranks run without leak checking: Open MPI's
  -- plugins leak at exit from code that is unloaded by then (no names to suppress); netcl's
  -- own collectives are leak-checked by lua.test_distributed. Other ASan checks stay on.
  local asan = (os.getenv("ASAN_OPTIONS") or "")
  asan = (asan ~= "" and asan .. ":" or "") .. "detect_leaks=0"
  local cmd = string.format("OMPI_MCA_btl_vader_single_copy_mechanism=none ASAN_OPTIONS=%s " ..
    "timeout 120 %s -np 2 --oversubscribe --allow-run-as-root %s %s/mpi_worker.lua %s %s >%s 2>&1",
    asan, mpirun, exe, here, mode, table.concat({...}, " "), out)
  local t0 = nc.clock()
  local _, _, code = os.execute(cmd)
  local secs = nc.clock() - t0
  local f = io.open(out)
  local text = f:read("a")
  f:close()
  os.remove(out)
  return code, text, secs
end

local function expect(cond, mode, msg, text)
  if cond then return end
  failures = failures + 1
  io.stderr:write(string.format("FAIL %s: %s\n--- output ---\n%s\n", mode, msg, text))
end

for _, mode in ipairs({"collectives", "train", "mismatch"}) do
  local code, text, secs = run(mode)
  expect(code == 0 and text:find("OK " .. mode, 1, true), mode, "exit status " .. tostring(code), text)
  print(string.format("%-12s %s (%.1fs)", mode, code == 0 and "ok" or "FAILED", secs))
end

-- a rank dies mid-step: rank 0 stops within its 5 s timeout (or is stopped by mpirun), never hangs
local code, text, secs = run("die", 5)
expect(code ~= 0 and code ~= 124, "die", "expected a failure within the timeout, got exit status " .. tostring(code), text)
expect(not text:find("step returned although", 1, true), "die", "rank 0 finished the step", text)
expect(text:find("waited 5 s for the other ranks", 1, true) or text:find("exited", 1, true), "die",
  "no message about the lost rank", text)
expect(secs < 60, "die", string.format("took %.0f s", secs), text)
print(string.format("%-12s %s (%.1fs)", "die", failures == 0 and "ok" or "FAILED", secs))

if failures > 0 then os.exit(1) end
print("all MPI checks passed")

-- kill -9 during a save, 20 times: the checkpoint on disk is always a whole one (the previous,
-- or a newer one that was completed), never a mix or a torn file; and the temporaries the
-- killed saves left are removed by the next save of that checkpoint (docs/reliability.md).
-- Label `slow`.
local lu = require "luaunit"
local nc = require "netcl"
local nio = require "netcl.io"
local H = require "helpers"

if os.getenv("NETCL_TEST_DEVICE") == "opencl" then
  print("skipped: saves are the same code on every device (the .cpu variant of this test)")
  os.exit(77)
end

local exe = H.netcl_lua()
local dir = H.tmpdir()
local CK = dir .. "/ck.safetensors"
local ENTRIES, ROWS = 8, 256

-- The saver: from the step in the checkpoint on, save step + 1, step + 2, ... as fast as it can:
-- 8 entries of 1 MB, every value the step number, which the metadata repeats.
local saver = dir .. "/saver.lua"
local f = assert(io.open(saver, "w"))
f:write(string.format([[
local nc = require "netcl"
local nio = require "netcl.io"
local _, meta = nio.load(%q)
local step = math.tointeger(tonumber(meta.step))
while true do
  step = step + 1
  local t = {}
  for i = 1, %d do t["w" .. i] = nc.full({%d, 1024}, step) end
  nio.save(t, %q, {metadata = {step = step}})
  io.stdout:write("saved ", step, "\n")
  io.stdout:flush()
end
]], CK, ENTRIES, ROWS, CK))
f:close()

-- The checkpoint's step, after checking that it is whole and consistent.
local function check_whole()
  local ok, t, meta = pcall(nio.load, CK)
  lu.assertTrue(ok, tostring(t))
  local step = math.tointeger(tonumber(meta.step))
  lu.assertNotNil(step)
  local n = 0
  for name, v in pairs(t) do
    n = n + 1
    lu.assertEquals(v.shape, {ROWS, 1024}, name)
    lu.assertEquals(v:min():item(), step, name)
    lu.assertEquals(v:max():item(), step, name)
  end
  lu.assertEquals(n, ENTRIES)
  return step
end

-- How many temporaries of the checkpoint there are (those of writer pid only, when given).
local function temporaries(pid)
  local out = H.sh("ls " .. dir)
  local n = 0
  for name in out:gmatch("ck%.safetensors%.tmp%.[%d.]+\n") do
    if not pid or name:find(".tmp." .. pid .. ".", 1, true) then n = n + 1 end
  end
  return n
end

TestKill = {}

function TestKill:test_kill_9_during_saves_leaves_a_whole_checkpoint()
  local t = {}
  for i = 1, ENTRIES do t["w" .. i] = nc.full({ROWS, 1024}, 0) end
  nio.save(t, CK, {metadata = {step = 0}})
  local last, mid_save, seed = check_whole(), 0, 12345
  for round = 1, 20 do
    seed = (seed * 1103515245 + 12345) % 2147483648
    -- once the saver has completed a save (however long its start took), 0..0.3 s more
    local delay = (seed % 1000) / 1000 * 0.3
    local log = dir .. "/saver.log"
    local out = H.sh(string.format("NETCL_DEVICE=cpu %s %s >%s 2>&1 & p=$!; n=0; " ..
      "until grep -q saved %s || [ $n -ge 1200 ]; do sleep 0.05; n=$((n+1)); done; sleep %.3f; kill -9 $p; " ..
      "wait $p 2>/dev/null; echo done $p", exe, saver, log, log, delay))
    local pid = out:match("done (%d+)")
    lu.assertNotNil(pid, out)
    local step = check_whole()
    lu.assertTrue(step >= last, string.format("round %d: step %d after %d", round, step, last))
    last = step
    if temporaries(pid) > 0 then mid_save = mid_save + 1 end
  end
  print(string.format("20 kills: %d left a temporary (killed in mid-save); the last checkpoint is step %d", mid_save,
    last))
  lu.assertTrue(mid_save >= 1, "no kill landed in the middle of a save")
  lu.assertTrue(last >= 1, "the saver never completed a save")
  -- the next save of the checkpoint removes what the killed saves left
  for i = 1, ENTRIES do t["w" .. i] = nc.full({ROWS, 1024}, last + 1) end
  nio.save(t, CK, {metadata = {step = last + 1}})
  lu.assertEquals(temporaries(), 0)
  lu.assertEquals(check_whole(), last + 1)
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

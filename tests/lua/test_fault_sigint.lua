-- Ctrl-C in the middle of an epoch of samples/fashion_mnist.lua with --checkpoint: the sample
-- stops after the current step and saves where it stopped (model, optimizer, scheduler, the
-- loader's position in the epoch and the random generator's state), and a run resumed from
-- there ends with the same weights as a run that was never stopped, to 1e-6, on the CPU backend
-- (docs/reliability.md). A real SIGINT, sent while the first epoch trains.
local lu = require "luaunit"
local nio = require "netcl.io"
local H = require "helpers"

if os.getenv("NETCL_TEST_DEVICE") == "opencl" then
  print("skipped: the resumed run is compared to 1e-6 on the CPU backend (the .cpu variant of this test)")
  os.exit(77)
end

local exe = H.netcl_lua()
local dir = H.tmpdir()
-- 64 steps of 16 images an epoch: about a second each here, long enough to land a signal in
H.write_fashion_split(dir, "train", 1024, 3)
H.write_fashion_split(dir, "t10k", 64, 5)

local function command(ck, extra)
  return string.format("NETCL_DEVICE=cpu %s samples/fashion_mnist.lua --data %s --batch-size 16 --seed 4 --epochs 2 " ..
    "--checkpoint %s %s", exe, dir, ck, extra or "")
end

local function max_diff(a, b)
  local worst, n = 0, 0
  for k, v in pairs(a) do
    lu.assertNotNil(b[k], k)
    lu.assertEquals(b[k].shape, v.shape, k)
    if v.dtype == "float32" or v.dtype == "float64" then
      worst = math.max(worst, (v:to("float64") - b[k]:to("float64")):abs():max():item())
    else
      lu.assertEquals(b[k]:tolist(), v:tolist(), k)
    end
    n = n + 1
  end
  return worst, n
end

TestSigint = {}

function TestSigint:test_ctrl_c_mid_epoch_then_resume_matches_an_uninterrupted_run()
  local straight = dir .. "/straight.netcl"
  local out, code = H.sh(command(straight))
  lu.assertEquals(code, 0, out)
  local epoch1 = tonumber(out:match("\nepoch 1: train loss [%d.]+, test accuracy [%d.]+%% %(([%d.]+)s%)"))
  lu.assertNotNil(epoch1, out)

  -- the stopped run: SIGINT once training has started, half an epoch (as timed above) later
  local ck, log = dir .. "/stopped.netcl", dir .. "/stopped.log"
  local delay = math.max(0.1, epoch1 / 2)
  out, code = H.sh(string.format("%s > %s 2>&1 & p=$!; n=0; until grep -q 'parameters;' %s || [ $n -ge 600 ]; " ..
    "do sleep 0.05; n=$((n+1)); done; sleep %.2f; kill -INT $p; wait $p; echo \"exit $?\"", command(ck), log, log, delay))
  local f = assert(io.open(log))
  local stopped = f:read("a")
  f:close()
  lu.assertStrContains(out, "exit 130", false, stopped)
  local epoch, batch, total = stopped:match("interrupted in epoch (%d+) after batch (%d+) of (%d+)")
  lu.assertNotNil(epoch, "the signal did not land in an epoch's training loop:\n" .. stopped)
  batch, total = tonumber(batch), tonumber(total)
  lu.assertTrue(batch >= 1 and batch < total, stopped)
  -- what the checkpoint holds: the loader's position, the generator, optimizer and scheduler
  local _, meta = nio.load(ck)
  local extra = require("netcl")._json.decode(meta[nio.EXTRA_KEY])
  lu.assertEquals(extra.partial.loader.batch, batch)
  lu.assertEquals(extra.partial.loader.epoch, tonumber(epoch))
  lu.assertNotNil(extra.partial.rng)
  lu.assertNotNil(meta[nio.OPTIM_KEY])
  lu.assertNotNil(meta[nio.SCHED_KEY])

  out, code = H.sh(command(ck, "--resume"))
  lu.assertEquals(code, 0, out)
  lu.assertStrContains(out, string.format("in epoch %s, after batch %d of %d", epoch, batch, total))
  local worst, n = max_diff(nio.load(straight), nio.load(ck))
  lu.assertTrue(n > 10)
  lu.assertTrue(worst <= 1e-6, string.format("the resumed run's weights differ by %g", worst))
  -- the same history too (the stopped epoch's loss counts the steps before and after the stop)
  local function history(path)
    local _, m = nio.load(path)
    return require("netcl")._json.decode(m[nio.EXTRA_KEY]).history.train_loss
  end
  local a, b = history(straight), history(ck)
  lu.assertEquals(#b, 2)
  for i = 1, 2 do lu.assertAlmostEquals(b[i], a[i], 1e-6) end
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

-- samples/simclr.lua end to end on a tiny synthetic dataset in the Fashion-MNIST file layout:
-- pretraining with SimCLR, both probes and the result line, and --resume from a checkpoint
-- giving the same loss as an uninterrupted run. (The training check on the real data, one run per
-- method, is tests/ssl/methods.lua, labelled slow.)
local lu = require "luaunit"
local H = require "helpers"

H.device()
local exe = H.netcl_lua()

local sh, write_split = H.sh, H.write_fashion_split

local dir = H.tmpdir()
write_split(dir, "train", 64, 3)
write_split(dir, "t10k", 32, 5)

local function run(args)
  return sh(string.format("%s samples/simclr.lua --data %s --batch-size 16 --train-size 64 --probe-train 64 " ..
    "--probe-test 32 --probe-epochs 2 --width 4 --quiet %s", exe, dir, args))
end

TestSimclrSample = {}

function TestSimclrSample:test_methods_run_and_report()
  for _, m in ipairs({"simclr"}) do
    local out, code = run("--epochs 1 --method " .. m)
    lu.assertEquals(code, 0, out)
    lu.assertStrContains(out, "pretraining on 64 images without labels")
    local probe, random, std, threshold = out:match("result: method=" .. m ..
      " probe=([%d.]+)%% random=([%d.]+)%% gain=[-+%d.]+ points std=([%d.]+) threshold=([%d.]+)")
    lu.assertNotNil(probe, out)
    lu.assertTrue(tonumber(random) >= 0 and tonumber(probe) <= 100)
    lu.assertAlmostEquals(tonumber(threshold), 0.5 / math.sqrt(128), 1e-4)
    lu.assertTrue(tonumber(std) > 0)
  end
end

function TestSimclrSample:test_resume()
  local ck = dir .. "/byol.netcl"
  local straight = run("--epochs 2 --method byol")
  local first, code = run("--epochs 2 --stop-after 1 --method byol --checkpoint " .. ck)
  lu.assertEquals(code, 0, first)
  lu.assertNil(first:match("epoch 2: loss"), "stopped after epoch 1")
  local resumed
  resumed, code = run("--epochs 2 --method byol --checkpoint " .. ck .. " --resume")
  lu.assertEquals(code, 0, resumed)
  lu.assertStrContains(resumed, "resumed from " .. ck .. " after epoch 1")
  local want = straight:match("epoch 2: loss ([%d.]+)")
  lu.assertNotNil(want, straight)
  lu.assertEquals(resumed:match("epoch 2: loss ([%d.]+)"), want)
  lu.assertNil(resumed:match("epoch 1: loss"), "epoch 1 ran again")
  local out
  out, code = run("--method nope")
  lu.assertEquals(code, 2, out)
  lu.assertStrContains(out, "unknown --method 'nope'")
end

local rc = lu.LuaUnit.run("-o", "text", table.unpack(arg))
os.execute("rm -rf '" .. dir .. "'")
os.exit(rc)

-- samples/fashion_mnist.lua end to end on a tiny synthetic dataset in the Fashion-MNIST file
-- layout: options, per-epoch lines, the checkpoint and chart, and --resume continuing exactly
-- where an uninterrupted run would be.
local lu = require "luaunit"
local nc = require "netcl"
local nio = require "netcl.io"
local H = require "helpers"

H.device()
local exe = H.netcl_lua()
local SAMPLE = "samples/fashion_mnist.lua"

local sh, write_split = H.sh, H.write_fashion_split

local dir = H.tmpdir()
write_split(dir, "train", 64, 3)
write_split(dir, "t10k", 32, 5)

local function run(args)
  return sh(string.format("%s %s --data %s --batch-size 16 --seed 4 %s", exe, SAMPLE, dir, args))
end

-- "epoch 2: train loss 1.2345, test accuracy 56.25% (0.3s)" -> 1.2345, 56.25
local function epoch_line(out, epoch)
  local loss, acc = out:match("\nepoch " .. epoch .. ": train loss ([%d.]+), test accuracy ([%d.]+)%%")
  return tonumber(loss), tonumber(acc)
end

TestFashionSample = {}

function TestFashionSample:test_train_checkpoint_chart_and_resume()
  local straight = dir .. "/straight.netcl"
  local out, code = run("--epochs 2 --checkpoint " .. straight)
  lu.assertEquals(code, 0, out)
  local l1, a1 = epoch_line(out, 1)
  local l2, a2 = epoch_line(out, 2)
  lu.assertNotNil(l1, out)
  lu.assertNotNil(l2, out)
  lu.assertStrContains(out, "64 training and 32 test images")
  lu.assertStrContains(out, "final test accuracy")
  -- the checkpoint holds the model, the optimizer state and the history
  local tensors, meta = nio.load(straight)
  lu.assertNotNil(tensors["0.weight"])
  lu.assertNotNil(tensors["1.running_mean"])
  lu.assertNotNil(meta[nio.OPTIM_KEY], "no optimizer state")
  local extra = nc._json.decode(meta[nio.EXTRA_KEY])
  lu.assertEquals(extra.epoch, 2)
  lu.assertAlmostEquals(extra.history.train_loss[2], l2, 1e-4)
  local svg = assert(io.open(dir .. "/straight.svg")):read("a")
  lu.assertStrContains(svg, "<svg")
  lu.assertStrContains(svg, "test accuracy")

  -- a run stopped after one epoch, then --resume for the second: the same numbers as the
  -- uninterrupted run (model, Adam's state, the schedule, the shuffle and dropout all continue)
  local split = dir .. "/split.netcl"
  out, code = run("--epochs 2 --stop-after 1 --checkpoint " .. split)
  lu.assertEquals(code, 0, out)
  local r1 = epoch_line(out, 1)
  lu.assertAlmostEquals(r1, l1, 2e-4)
  lu.assertNil(epoch_line(out, 2))
  out, code = run("--epochs 2 --resume --checkpoint " .. split)
  lu.assertEquals(code, 0, out)
  lu.assertStrContains(out, "resumed from " .. split .. " after epoch 1")
  lu.assertNil(epoch_line(out, 1))
  local r2, ra2 = epoch_line(out, 2)
  lu.assertNotNil(r2, out)
  lu.assertAlmostEquals(r2, l2, 2e-4)
  lu.assertTrue(math.abs(ra2 - a2) <= 100 / 32 + 1e-9, string.format("accuracy %g vs %g", ra2, a2))
  -- nothing left to do: no epoch runs
  out, code = run("--epochs 2 --resume --checkpoint " .. split)
  lu.assertEquals(code, 0, out)
  lu.assertNil(epoch_line(out, 3))
  lu.assertTrue(a1 >= 0 and a1 <= 100)
end

function TestFashionSample:test_bad_arguments()
  local out, code = run("--epochs 0")
  lu.assertEquals(code, 2)
  lu.assertStrContains(out, "--epochs must be a positive integer")
  out, code = run("--frobnicate")
  lu.assertEquals(code, 2)
  lu.assertStrContains(out, "unknown argument '--frobnicate'")
  out, code = sh(string.format("%s %s --data %s/missing --epochs 1", exe, SAMPLE, dir))
  lu.assertNotEquals(code, 0)
  lu.assertStrContains(out, "missing")
  out, code = run("--resume --checkpoint " .. dir .. "/none.netcl")
  lu.assertNotEquals(code, 0)
  lu.assertStrContains(out, "none.netcl")
  out, code = sh(exe .. " " .. SAMPLE .. " --help")
  lu.assertEquals(code, 0)
  lu.assertStrContains(out, "--checkpoint PATH")
end

local rc = lu.LuaUnit.run()
os.execute("rm -rf '" .. dir .. "'")
os.exit(rc)

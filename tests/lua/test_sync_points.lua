-- Where a training step waits for the device: a step with valid targets reads nothing back and
-- never syncs (memory_stats' host_reads and syncs), and the target check of cross_entropy, which
-- OpenCL kernels make on the device, still fails clearly: at the call on the CPU backend, at the
-- next sync point (a read such as item(), or nc.sync) on OpenCL, naming the loss and the target.
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local nn = require "netcl.nn"
local optim = require "netcl.optim"
local H = require "helpers"

local dev = H.device()

local function counts()
  local s = nc.memory_stats(dev)
  return s.host_reads, s.syncs
end

TestSyncPoints = {}

function TestSyncPoints:test_training_step_reads_nothing_back()
  nc.manual_seed(3)
  local net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 5))
  local opt = optim.SGD(net:parameters(), {lr = 0.1})
  local x = nc.randn({16, 6})
  local t = nc.tensor({0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0}, {dtype = "int64"})
  local loss_fn = nn.CrossEntropyLoss()
  local function step()
    local tape = ag.Tape()
    local loss = tape:record(function() return loss_fn(net(x), t) end)
    opt:zero_grad()
    tape:backward(loss)
    opt:step()
    return loss
  end
  local first = step().value:item() -- builds the kernels, reads once
  local reads, syncs = counts()
  local loss
  for _ = 1, 3 do loss = step() end
  local reads2, syncs2 = counts()
  lu.assertEquals(reads2, reads, "a training step read from the device")
  lu.assertEquals(syncs2, syncs, "a training step synced the device")
  -- the counters count: the next item() is one read, after (on OpenCL) each step's target check
  lu.assertTrue(loss.value:item() < first)
  lu.assertEquals((counts()), reads + 1 + (dev.kind == "opencl" and 3 or 0))
end

function TestSyncPoints:test_bad_target_is_reported()
  local x = nc.randn({4, 5})
  local t = nc.tensor({0, 4, 1, 7}, {dtype = "int64"})
  local want = "target 7 at position 4 is not a class in [0, 5) nor ignore_index -100"
  local ok, err = pcall(function() return nc.cross_entropy(x, t):item() end)
  lu.assertFalse(ok)
  lu.assertStrContains(err, want)
  if dev.kind == "opencl" then
    lu.assertStrContains(err, "netcl.item: cross_entropy: ")
  else
    lu.assertStrContains(err, "netcl.cross_entropy: ")
  end
  -- reported once; the device goes on
  nc.sync(dev)
  lu.assertTrue(nc.cross_entropy(x, nc.tensor({0, 4, 1, 2}, {dtype = "int64"})):item() > 0)
  -- nc.sync is a sync point too, and ignore_index is no error
  ok, err = pcall(function()
    nc.cross_entropy(x, nc.tensor({-1, 0, 0, 0}, {dtype = "int64"}))
    nc.sync(dev)
  end)
  lu.assertFalse(ok)
  lu.assertStrContains(err, "target -1 at position 1 is not a class in [0, 5)")
  nc.cross_entropy(x, nc.tensor({-1, 0, 0, 0}, {dtype = "int64"}), {ignore_index = -1})
  nc.sync(dev)
end

os.exit(lu.LuaUnit.run())

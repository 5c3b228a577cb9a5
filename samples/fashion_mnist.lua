-- Fashion-MNIST with a small CNN: the end-to-end training sample (docs/training.md).
--
--   netcl-lua samples/fashion_mnist.lua [--epochs 3] [--batch-size 128] [--lr 0.002]
--            [--device SPEC] [--data DIR] [--checkpoint PATH] [--resume] [--stop-after N] [--seed N]
--
-- Each epoch prints the mean training loss and the test accuracy, then saves a checkpoint
-- (model, optimizer and scheduler state, with the history so far) and a loss/accuracy chart
-- beside it (PATH with .svg). --resume continues from the checkpoint up to --epochs. Ctrl-C
-- during training stops after the current step and saves where it stopped (the loader's
-- position in the epoch and the random generator's state too), so that --resume ends with the
-- same weights as a run that was never stopped; a second Ctrl-C ends the process at once.
local args = dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or ".") .. "/args.lua")
local nc = require "netcl"
local ag = require "netcl.autograd"
local nn = require "netcl.nn"
local optim = require "netcl.optim"
local data = require "netcl.data"
local nio = require "netcl.io"
local progress = require "netcl.progress"
local plot = require "netcl.plot"

local USAGE = [[
usage: netcl-lua samples/fashion_mnist.lua [options]
  --epochs N         epochs to train in all, counting those of a resumed run (default 3)
  --batch-size N     training batch size (default 128)
  --lr X             Adam's initial learning rate, decayed to 0 along a cosine (default 0.002)
  --device SPEC      cpu | gpu | opencl | opencl:P:D (default: the default device)
  --data DIR         directory with the four Fashion-MNIST idx files (.gz or plain);
                     default: where Debian's dataset-fashion-mnist put them
  --checkpoint PATH  checkpoint file (default fashion_mnist.netcl); the chart goes to PATH.svg
  --resume           continue from the checkpoint (also one saved by Ctrl-C in mid-epoch)
  --stop-after N     stop after epoch N (the schedule still spans --epochs; continue with --resume)
  --seed N           seed for initialization, shuffling and dropout (default 1)
  --help             this text]]

local function fail(msg) args.fail("fashion_mnist", msg) end

local function parse_args(argv)
  local o = args.parse(argv, {name = "fashion_mnist", usage = USAGE,
    defaults = {epochs = 3, batch_size = 128, lr = 0.002, checkpoint = "fashion_mnist.netcl", seed = 1},
    integers = {["--epochs"] = "epochs", ["--batch-size"] = "batch_size", ["--seed"] = "seed", ["--stop-after"] = "stop_after"},
    numbers = {["--lr"] = "lr"},
    strings = {["--device"] = "device", ["--data"] = "data", ["--checkpoint"] = "checkpoint"},
    flags = {["--resume"] = "resume"}})
  return o
end

-- Conv-BN-ReLU-pool twice, then two Linear layers: about 0.2M parameters, ~91% test accuracy
-- in 2-3 epochs with Adam, and cheap enough for a 2-core CPU.
local function build_model()
  return nn.Sequential(
    nn.Conv2d(1, 16, 3, {padding = 1}), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, {padding = 1}), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Dropout(0.2), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
end

local normalize = data.normalize_fashion_mnist

local function evaluate(model, loader)
  model:eval()
  local correct, total = nil, 0
  ag.no_grad(function()
    for x, y in loader:iter() do
      local hits = model(x).value:argmax(2):eq(y):sum()
      correct = correct and correct + hits or hits
      total = total + y.shape[1]
    end
  end)
  model:train()
  return correct:item() / total
end

local function save_chart(path, history)
  local epochs = {}
  for i = 1, #history.train_loss do epochs[i] = i end
  local acc = {}
  for i, a in ipairs(history.test_accuracy) do acc[i] = 100 * a end
  local svg = plot.grid({
    {title = "training loss", xlabel = "epoch", ylabel = "cross-entropy", series = {{name = "train", x = epochs,
      y = history.train_loss}}},
    {title = "test accuracy", xlabel = "epoch", ylabel = "%", series = {{name = "test", x = epochs, y = acc}}},
  }, {columns = 2, title = "Fashion-MNIST"})
  plot.save(path, svg)
end

local function main(argv)
  local o = parse_args(argv)
  if o.device then nc.set_default_device(nc.device(o.device)) end
  local dev = nc.default_device()
  local dir = o.data or data.fashion_mnist_dir()
  if not dir then
    fail("Fashion-MNIST not found: install Debian's dataset-fashion-mnist (make deps) or pass --data DIR")
  end

  -- fail now rather than after the first epoch when the checkpoint cannot be written
  local probe = io.open(o.checkpoint .. ".probe", "w")
  if not probe then fail("cannot write " .. o.checkpoint .. " (does its directory exist?)") end
  probe:close()
  os.remove(o.checkpoint .. ".probe")

  local t0 = nc.clock()
  local ok, xtr, ytr = pcall(data.mnist, dir, "train")
  if not ok then fail(tostring(xtr)) end
  local xte, yte
  ok, xte, yte = pcall(data.mnist, dir, "test")
  if not ok then fail(tostring(xte)) end
  print(string.format("Fashion-MNIST from %s: %d training and %d test images (%.1fs); device %s", dir,
    xtr.shape[1], xte.shape[1], nc.clock() - t0, dev.spec))

  nc.manual_seed(o.seed)
  local model = build_model()
  local opt = optim.Adam(model:parameters(), {lr = o.lr})
  local criterion = nn.CrossEntropyLoss()
  local train = data.DataLoader(data.TensorDataset(xtr, ytr), {batch_size = o.batch_size, shuffle = true,
    seed = o.seed, transform = normalize})
  local test = data.DataLoader(data.TensorDataset(xte, yte), {batch_size = 1000, transform = normalize})

  -- the learning rate follows a cosine from --lr down to 0 over all --epochs, step by step
  local sched = optim.CosineAnnealingLR(opt, {T_max = o.epochs * train:len()})

  local history = {train_loss = {}, test_accuracy = {}, seconds = {}}
  local done, partial = 0, nil
  if o.resume then
    local loaded, extra = pcall(nio.load_model, model, o.checkpoint, {optimizer = opt, scheduler = sched})
    if not loaded then fail("cannot resume: " .. tostring(extra)) end
    if type(extra) ~= "table" or type(extra.history) ~= "table" then
      fail(o.checkpoint .. " has no training history: it was not written by this sample")
    end
    history = extra.history
    done = #history.train_loss
    -- a checkpoint that Ctrl-C saved in the middle of epoch done + 1
    partial = extra.partial
    if partial then
      print(string.format("resumed from %s in epoch %d, after batch %d of %d", o.checkpoint, done + 1,
        partial.loader.batch, train:len()))
    else
      print(string.format("resumed from %s after epoch %d (test accuracy %.2f%%)", o.checkpoint, done,
        100 * (history.test_accuracy[done] or 0)))
    end
  end
  print(model)
  print(string.format("%d parameters; Adam lr %g with cosine decay over %d epochs, batch %d", model:num_parameters(),
    o.lr, o.epochs, o.batch_size))
  io.stdout:flush() -- what came before training shows at once, in a log file too
  -- the loader's shuffle is a function of (seed, epoch): a resumed run continues the sequence
  if partial then train:load_state_dict(partial.loader) else train.epoch = done end
  -- Ctrl-C from here on sets a flag that the loop reads between steps
  nc.defer_interrupts()

  local chart = o.checkpoint:gsub("%.netcl$", "") .. ".svg"
  local last = math.min(o.epochs, o.stop_after or o.epochs)
  for epoch = done + 1, last do
    -- losses are summed on the device, and every 20 steps the window's sum is read back without
    -- waiting (to("cpu", {non_blocking = true})): the bar shows it once it has landed, so the host
    -- never waits for the device before queueing the next step
    local sum, window, steps, shown, reading = nil, nil, 0, nil, nil
    if partial then
      -- the epoch Ctrl-C stopped: its generator state and its loss so far
      nc.set_rng_state(partial.rng)
      steps = partial.steps
      if partial.loss_sum then sum = nc.tensor(partial.loss_sum) end
      partial = nil
    else
      -- dropout masks per epoch, independent of how many epochs ran in this process
      nc.manual_seed(o.seed * 1000 + epoch)
    end
    local start = nc.clock()
    local bar <close> = progress.bar{total = train:len(), desc = string.format("epoch %d/%d", epoch, o.epochs)}
    if steps > 0 then bar:update(steps) end
    local stopped = false
    for x, y in train:iter() do
      local tape = ag.Tape()
      local loss = tape:record(function() return criterion(model(x), y) end)
      opt:zero_grad()
      tape:backward(loss)
      opt:step()
      sched:step()
      local l = loss.value
      sum = sum and sum + l or l
      window = window and window + l or l
      steps = steps + 1
      if reading and (reading:is_ready() or steps % 20 == 0) then -- (20 steps old: landed long ago)
        shown = reading:item() / 20
        reading = nil
      end
      if steps % 20 == 0 then
        reading = window:to("cpu", {non_blocking = true})
        window = nil
      end
      bar:update(1, shown and {loss = string.format("%.4f", shown)} or nil)
      if nc.interrupted() then
        stopped = true
        break
      end
    end
    bar:close()
    if stopped then
      nio.save_model(model, o.checkpoint, {optimizer = opt, scheduler = sched, extra = {history = history,
        epoch = epoch - 1, partial = {loader = train:state_dict(), rng = nc.get_rng_state(), steps = steps,
        loss_sum = sum and sum:item()}}})
      print(string.format("interrupted in epoch %d after batch %d of %d: saved %s; continue with --resume", epoch,
        train:state_dict().batch, train:len(), o.checkpoint))
      os.exit(130)
    end
    local train_loss = sum:item() / steps
    local acc = evaluate(model, test)
    local seconds = nc.clock() - start
    history.train_loss[epoch] = train_loss
    history.test_accuracy[epoch] = acc
    history.seconds[epoch] = seconds
    print(string.format("epoch %d: train loss %.4f, test accuracy %.2f%% (%.1fs)", epoch, train_loss, 100 * acc,
      seconds))
    nio.save_model(model, o.checkpoint, {optimizer = opt, scheduler = sched, extra = {history = history, epoch = epoch}})
    save_chart(chart, history)
    if nc.interrupted() then
      print(string.format("interrupted after epoch %d: saved %s; continue with --resume", epoch, o.checkpoint))
      os.exit(130)
    end
  end
  nc.defer_interrupts(false)
  local total = 0
  for _, s in ipairs(history.seconds) do total = total + s end
  if #history.train_loss > 0 then
    print(string.format("final test accuracy %.2f%% after %d epochs (%.1fs of training); checkpoint %s, chart %s",
      100 * history.test_accuracy[#history.test_accuracy], #history.train_loss, total, o.checkpoint, chart))
  end
end

-- require "fashion_mnist" (samples/data_parallel.lua) gets the data loading and the model
-- without training; run as a script, it trains.
if ... == "fashion_mnist" then
  return {build_model = build_model, normalize = normalize, evaluate = evaluate}
end
main(arg or {...})

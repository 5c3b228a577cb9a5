-- Architecture search on Fashion-MNIST: evolution over MLPs (depth, widths, activations) with
-- weight inheritance, on a small budget (docs/evo.md).
--
--   netcl-lua samples/nas_fashion_mnist.lua [--generations 4] [--population 4] [--train-size 4000]
--            [--test-size 1000] [--epochs 1] [--batch-size 64] [--lr 0.002] [--device SPEC]
--            [--data DIR] [--checkpoint PATH] [--resume] [--seed N]
--
-- Each candidate trains for --epochs on the first --train-size training images and is scored
-- by its accuracy on the first --test-size test images. The search saves its state after each
-- generation (--checkpoint, default nas_fashion_mnist.netcl; --resume continues from it) and a
-- chart of the best accuracy by generation beside it (PATH with .svg).
local args = dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or ".") .. "/args.lua")
local nc = require "netcl"
local ag = require "netcl.autograd"
local nn = require "netcl.nn"
local optim = require "netcl.optim"
local data = require "netcl.data"
local evo = require "netcl.evo"
local plot = require "netcl.plot"

local USAGE = [[
usage: netcl-lua samples/nas_fashion_mnist.lua [options]
  --generations N    generations after the first population (default 4)
  --population N     candidates per generation (default 4)
  --train-size N     training images used (default 4000)
  --test-size N      test images that score a candidate (default 1000)
  --epochs N         training epochs per candidate (default 1)
  --batch-size N     batch size (default 64)
  --lr X             Adam's learning rate (default 0.002)
  --device SPEC      cpu | gpu | opencl | opencl:P:D (default: the default device)
  --data DIR         directory with the four Fashion-MNIST idx files (.gz or plain);
                     default: where Debian's dataset-fashion-mnist put them
  --checkpoint PATH  search state (default nas_fashion_mnist.netcl); the chart goes to PATH.svg
  --resume           continue from the checkpoint
  --seed N           seed of the search and of the training (default 1)
  --help             this text]]

local function fail(msg) args.fail("nas_fashion_mnist", msg) end

local function parse_args(argv)
  local o = args.parse(argv, {name = "nas_fashion_mnist", usage = USAGE,
    defaults = {generations = 4, population = 4, train_size = 4000, test_size = 1000, epochs = 1, batch_size = 64,
                lr = 0.002, checkpoint = "nas_fashion_mnist.netcl", seed = 1},
    integers = {["--generations"] = "generations", ["--population"] = "population", ["--train-size"] = "train_size",
                ["--test-size"] = "test_size", ["--epochs"] = "epochs", ["--batch-size"] = "batch_size", ["--seed"] = "seed"},
    numbers = {["--lr"] = "lr"},
    strings = {["--device"] = "device", ["--data"] = "data", ["--checkpoint"] = "checkpoint"},
    flags = {["--resume"] = "resume"},
    zero_ok = {["--generations"] = true}})
  return o
end

local ACTIVATIONS = {relu = nn.ReLU, tanh = nn.Tanh, gelu = nn.GELU}

-- arch.layers: the hidden layers of an MLP on the 784 pixels
local function build(arch)
  local layers, width = {nn.Flatten()}, 784
  for _, l in ipairs(arch.layers) do
    layers[#layers + 1] = nn.Linear(width, l.width)
    layers[#layers + 1] = ACTIVATIONS[l.activation]()
    width = l.width
  end
  layers[#layers + 1] = nn.Linear(width, 10)
  return nn.Sequential(table.unpack(layers))
end

local function main(argv)
  local o = parse_args(argv)
  if o.device then nc.set_default_device(nc.device(o.device)) end
  local dir = o.data or data.fashion_mnist_dir()
  if not dir then
    fail("Fashion-MNIST not found: install Debian's dataset-fashion-mnist (make deps) or pass --data DIR")
  end
  local ok, xtr, ytr = pcall(data.mnist, dir, "train")
  if not ok then fail(tostring(xtr)) end
  local xte, yte
  ok, xte, yte = pcall(data.mnist, dir, "test")
  if not ok then fail(tostring(xte)) end
  local ntr, nte = math.min(o.train_size, #xtr), math.min(o.test_size, #xte)
  xtr, ytr = xtr:narrow(1, 1, ntr), ytr:narrow(1, 1, ntr)
  xte, yte = xte:narrow(1, 1, nte), yte:narrow(1, 1, nte)
  print(string.format("Fashion-MNIST from %s: %d training and %d test images; device %s", dir, ntr, nte,
    nc.default_device().spec))

  local test = data.DataLoader(data.TensorDataset(xte, yte), {batch_size = 1000,
    transform = data.normalize_fashion_mnist})
  local criterion = nn.CrossEntropyLoss()

  local function train(model)
    local opt = optim.Adam(model:parameters(), {lr = o.lr})
    -- the shuffle seed comes from the generator, so the search's seed fixes it
    local loader = data.DataLoader(data.TensorDataset(xtr, ytr), {batch_size = o.batch_size, shuffle = true,
      transform = data.normalize_fashion_mnist})
    for _ = 1, o.epochs do
      for x, y in loader:iter() do
        local tape = ag.Tape()
        local loss = tape:record(function() return criterion(model(x), y) end)
        opt:zero_grad()
        tape:backward(loss)
        opt:step()
      end
    end
  end

  local function evaluate(model)
    local correct, total = nil, 0
    ag.no_grad(function()
      for x, y in test:iter() do
        local hits = model(x).value:argmax(2):eq(y):sum()
        correct = correct and correct + hits or hits
        total = total + y.shape[1]
      end
    end)
    return correct:item() / total
  end

  nc.manual_seed(o.seed)
  local space = evo.ArchSpace{depth = {1, 3}, widths = {32, 64, 128}, activations = {"relu", "tanh", "gelu"}}
  local search = evo.ArchitectureSearch{space = space, build = build, train = train, evaluate = evaluate,
    population = o.population, generations = o.generations, inherit_weights = true, checkpoint = o.checkpoint,
    resume = o.resume}
  local t0 = nc.clock()
  local best, history = search:run()
  print(string.format("%-4s %-24s %9s %8s %s", "gen", "architecture", "params", "acc", "inherited"))
  for _, h in ipairs(history) do
    print(string.format("%-4d %-24s %9d %7.2f%% %d", h.generation, h.key, h.params, 100 * h.score, h.inherited))
  end
  local curve = search:best_by_generation()
  local acc = {}
  for i, v in ipairs(curve) do acc[i] = 100 * v end
  local gens = {}
  for i = 1, #curve do gens[i] = i - 1 end
  local chart = o.checkpoint:gsub("%.netcl$", "") .. ".svg"
  plot.save(chart, plot.line{title = "architecture search on Fashion-MNIST", xlabel = "generation",
    ylabel = "best test accuracy (%)", series = {{name = "best", x = gens, y = acc, markers = true}}})
  print(string.format("best: %s, %d parameters, %.2f%% test accuracy (%.1fs); checkpoint %s, chart %s",
    space:key(best), search.best.params, 100 * search.best.score, nc.clock() - t0, o.checkpoint, chart))
end

main(arg or {...})

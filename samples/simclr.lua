-- Self-supervised pretraining on Fashion-MNIST without labels, then a linear probe (docs/ssl.md).
--
--   netcl-lua samples/simclr.lua [--method simclr] [--epochs 6] [--train-size 8192] [--device SPEC]
--
-- Pretrains a small ResNet-style encoder with one of netcl.ssl's eight methods on two random views
-- of each image (ssl.views), then trains a linear classifier on its frozen features and on those
-- of the same encoder at its random initialization, and prints both test accuracies, the
-- per-dimension std of the L2-normalized embeddings against the collapse threshold 0.5/sqrt(d),
-- and the time taken.
local args = dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or ".") .. "/args.lua")
local nc = require "netcl"
local nn = require "netcl.nn"
local optim = require "netcl.optim"
local data = require "netcl.data"
local models = require "netcl.models"
local ssl = require "netcl.ssl"

local METHODS = {simclr = "SimCLR", moco = "MoCo", byol = "BYOL", simsiam = "SimSiam", barlow = "BarlowTwins",
                 vicreg = "VICReg", swav = "SwAV", dino = "DINO"}
-- Adam's learning rate per method (the others: --lr), and each method's options beyond the encoder.
local LR = {byol = 0.006}
local OPTS = {simclr = {temperature = 0.2, hidden = 256}}

local USAGE = [[
usage: netcl-lua samples/simclr.lua [options]
  --method NAME      simclr | moco | byol | simsiam | barlow | vicreg | swav | dino (default simclr)
  --epochs N         pretraining epochs (default 6)
  --train-size N     unlabelled training images used for pretraining (default 8192)
  --batch-size N     pretraining batch size (default 256)
  --lr X             Adam's learning rate, cosine-decayed (default 0.003)
  --probe-train N    labelled images the linear probe trains on (default 5000)
  --probe-test N     test images the probe is scored on (default 5000)
  --probe-epochs N   probe epochs (default 20)
  --min-scale X      smallest crop side, as a fraction of the image's (default 0.5)
  --width N          channels of the encoder's first stage (default 16; the output is 4x that)
  --device SPEC      cpu | gpu | opencl | opencl:P:D (default: the default device)
  --data DIR         directory with the four Fashion-MNIST idx files (default: Debian's package)
  --checkpoint PATH  write a checkpoint after every epoch (and --resume from it)
  --resume           continue from --checkpoint
  --stop-after N     stop after epoch N (the schedule still spans --epochs; continue with --resume)
  --seed N           seed (default 1)
  --quiet            no progress bars
  --help             this text]]

local function fail(msg) args.fail("simclr", msg) end

local function parse_args(argv)
  local o = args.parse(argv, {name = "simclr", usage = USAGE,
    defaults = {method = "simclr", epochs = 6, train_size = 8192, batch_size = 256, lr = 0.003, probe_train = 5000,
                probe_test = 5000, probe_epochs = 20, width = 16, seed = 1, min_scale = 0.5},
    integers = {["--epochs"] = "epochs", ["--train-size"] = "train_size", ["--batch-size"] = "batch_size",
                ["--probe-train"] = "probe_train", ["--probe-test"] = "probe_test", ["--probe-epochs"] = "probe_epochs",
                ["--width"] = "width", ["--seed"] = "seed", ["--stop-after"] = "stop_after"},
    numbers = {["--lr"] = "lr", ["--min-scale"] = "min_scale"},
    strings = {["--method"] = "method", ["--device"] = "device", ["--data"] = "data", ["--checkpoint"] = "checkpoint"},
    flags = {["--resume"] = "resume", ["--quiet"] = "quiet"}})
  if not METHODS[o.method] then fail("unknown --method '" .. o.method .. "'\n" .. USAGE) end
  if o.resume and not o.checkpoint then fail("--resume needs --checkpoint PATH") end
  return o
end

-- A small ResNet-style encoder: a 3x3 stride-2 stem (28x28 -> 14x14), two residual stages
-- (models.BasicBlock) that halve the resolution again (7x7, 4x4), global average pooling: 4 * width
-- features, about 1.6M multiply-adds per image at width 16 (cheap enough for a 2-core CPU).
local function build_encoder(width, device)
  local enc = nn.Sequential(
    nn.Conv2d(1, width, 3, {stride = 2, padding = 1, bias = false, device = device}), nn.BatchNorm2d(width, {device = device}), nn.ReLU(),
    models.BasicBlock(width, 2 * width, 2, device), models.BasicBlock(2 * width, 4 * width, 2, device),
    nn.AdaptiveAvgPool2d(1), nn.Flatten())
  enc.feature_dim = 4 * width
  return enc
end

-- Fashion-MNIST's pixel mean and standard deviation (training set, pixels scaled to [0, 1]).
local MEAN, STD = 0.2860, 0.3530
local function normalize(x) return (x:to("float32") * (1 / (255 * STD))) - MEAN / STD end

local function main(argv)
  local o = parse_args(argv)
  if o.device then nc.set_default_device(nc.device(o.device)) end
  local dev = nc.default_device()
  local dir = o.data or data.fashion_mnist_dir()
  if not dir then fail("Fashion-MNIST not found: install Debian's dataset-fashion-mnist or pass --data DIR") end
  local ok, xtr, ytr = pcall(data.mnist, dir, "train")
  if not ok then fail(tostring(xtr)) end
  local xte, yte
  ok, xte, yte = pcall(data.mnist, dir, "test")
  if not ok then fail(tostring(xte)) end
  local function first(t, n) return t:narrow(1, 1, math.min(n, t.shape[1])) end
  local pre = first(xtr, o.train_size)
  print(string.format("Fashion-MNIST from %s: pretraining on %d images without labels, probe on %d/%d; device %s",
    dir, pre.shape[1], math.min(o.probe_train, xtr.shape[1]), math.min(o.probe_test, xte.shape[1]), dev.spec))

  nc.manual_seed(o.seed)
  local encoder = build_encoder(o.width, dev)
  local random_encoder = encoder:deepcopy() -- the same initialization, never trained
  local cls = ssl[METHODS[o.method]]
  local mopts = {encoder = encoder}
  for k, v in pairs(OPTS[o.method] or {}) do mopts[k] = v end
  local method = cls(mopts)
  local opt = optim.Adam(method:parameters(), {lr = LR[o.method] or o.lr, weight_decay = 1e-5})
  local loader = data.DataLoader(data.TensorDataset(pre), {batch_size = o.batch_size, shuffle = true, seed = o.seed,
    drop_last = true, device = dev, transform = normalize})
  local sched = optim.CosineAnnealingLR(opt, {T_max = o.epochs * loader:len()})
  print(string.format("%s, encoder of %d parameters (%d features); Adam lr %g, batch %d, %d epochs",
    METHODS[o.method], encoder:num_parameters(), encoder.feature_dim, LR[o.method] or o.lr, o.batch_size, o.epochs))

  local trainer = ssl.Trainer{method = method, loader = loader, optimizer = opt, scheduler = sched,
    augment = ssl.views.Views{min_scale = o.min_scale},
    epochs = o.epochs, seed = o.seed, checkpoint = o.checkpoint, resume = o.resume or false,
    stop_after = o.stop_after, progress = not o.quiet, log = print}
  local t0 = nc.clock()
  local history = trainer:fit()
  local pretrain_s = nc.clock() - t0

  -- the collapse check: embeddings of unaugmented test images, eval mode
  local probe_opts = {epochs = o.probe_epochs, seed = o.seed}
  local ptrain = data.DataLoader(data.TensorDataset(first(xtr, o.probe_train), first(ytr, o.probe_train)),
    {batch_size = 500, device = dev, transform = normalize})
  local ptest = data.DataLoader(data.TensorDataset(first(xte, o.probe_test), first(yte, o.probe_test)),
    {batch_size = 500, device = dev, transform = normalize})
  method:eval()
  local z = method:embed(normalize(first(xte, 1000):to(dev)))
  method:train()
  local std, threshold = ssl.embedding_std(z), 0.5 / math.sqrt(z.shape[2])
  local t1 = nc.clock()
  local acc = ssl.linear_probe(encoder, ptrain, ptest, probe_opts)
  local acc_random = ssl.linear_probe(random_encoder, ptrain, ptest, probe_opts)
  local probe_s = nc.clock() - t1
  print(string.format("final pretraining loss %.4f", history.loss[#history.loss] or 0 / 0))
  print(string.format("embedding std %.4f (collapse threshold 0.5/sqrt(%d) = %.4f): %s", std, z.shape[2], threshold,
    std > threshold and "no collapse" or "COLLAPSED"))
  print(string.format("result: method=%s probe=%.2f%% random=%.2f%% gain=%+.2f points std=%.4f threshold=%.4f " ..
    "pretrain=%.1fs probes=%.1fs", o.method, 100 * acc, 100 * acc_random, 100 * (acc - acc_random), std, threshold,
    pretrain_s, probe_s))
end

main(arg or {...})

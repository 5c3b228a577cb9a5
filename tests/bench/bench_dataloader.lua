-- The DataLoader's throughput: images per second delivered to the default device (synced), for
-- a synthetic CIFAR-shaped dataset (uint8 [3, 32, 32] images and int64 labels, a plain Lua
-- dataset, so get runs per sample) with ToFloat + RandomCrop(32, padding 4) + flip + Normalize
-- as the transform, and a small training step (one matmul) per batch, at num_workers 0, 1 and 2:
--   cifar:   get returns a row of an in-memory tensor;
--   sleep:   get also waits 1 ms without using the CPU (stands for file I/O);
--   compute: get also computes for 1 ms (busy), which the machine's cores bound.
-- Each figure is the best of 3 epochs, the worker counts interleaved (the machine's load may
-- change during the run). The reference is num_workers = 0 in the same run: "ratio" is the
-- speedup over it. Then the
-- augmentation alone (crop + flip + color jitter + normalize on batches of 256) on every device,
-- with the CPU backend as the reference.
local nc = require "netcl"
local data = require "netcl.data"
local T = data.transforms

local dev = nc.default_device()
local clock = nc.clock
local N, BS = tonumber(os.getenv("BENCH_DATALOADER_N") or "512"), 32

nc.manual_seed(1)
local images = (nc.rand({N, 3, 32, 32}, {device = "cpu"}) * 255):to("uint8")

local function dataset(extra)
  return {
    len = function() return N end,
    get = function(_, i)
      if extra == "sleep" then
        nc._data.sleep(0.001)
      elseif extra == "compute" then
        local t0 = clock()
        local acc = 0
        while clock() - t0 < 0.001 do acc = acc + 1 end
      end
      return images[i], (i - 1) % 10
    end,
  }
end

local w = nc.randn({3 * 32 * 32, 10}, {device = dev}) * 0.01

local function epoch_rate(kind, workers)
  local aug = T.Compose{T.ToFloat(), T.RandomCrop(32, {padding = 4, seed = 1}), T.RandomHorizontalFlip(0.5, {seed = 2}),
                        T.Normalize({0.49, 0.48, 0.45}, {0.25, 0.24, 0.26})}
  local loader = data.DataLoader(dataset(kind), {batch_size = BS, shuffle = true, seed = 3, num_workers = workers,
                                                 device = dev, transform = aug})
  local t0, n = clock(), 0
  for x, y in loader:iter() do
    local loss = x:view({#x, -1}):matmul(w):sum() -- the training step's stand-in
    n = n + #y
    if n == #y then loss:item() end
  end
  dev:sync()
  return n / (clock() - t0)
end

for _, kind in ipairs({"cifar", "sleep", "compute"}) do
  local rates = {[0] = 0, 0, 0}
  for _ = 1, 3 do
    for _, workers in ipairs({0, 1, 2}) do rates[workers] = math.max(rates[workers], epoch_rate(kind, workers)) end
  end
  for _, workers in ipairs({0, 1, 2}) do
    print(string.format('{"bench":"dataloader","case":"%s","num_workers":%d,"device":"%s","images_per_s":%.0f,"ratio":%.2f}',
      kind, workers, dev.spec, rates[workers], rates[workers] / rates[0]))
  end
end

-- Augmentation throughput per device.
local function aug_rate(d)
  local aug = T.Compose{T.RandomCrop(32, {padding = 4, seed = 1}), T.RandomHorizontalFlip(0.5, {seed = 2}),
                        T.ColorJitter{brightness = 0.4, contrast = 0.4, saturation = 0.4, hue = 0.1, seed = 3},
                        T.Normalize({0.49, 0.48, 0.45}, {0.25, 0.24, 0.26})}
  local x = nc.rand({256, 3, 32, 32}, {device = d})
  aug(x)
  d:sync()
  local best = 0
  for _ = 1, 3 do
    local t0 = clock()
    for _ = 1, 4 do aug(x) end
    d:sync()
    best = math.max(best, 4 * 256 / (clock() - t0))
  end
  return best
end

local cpu_rate = aug_rate(nc.device("cpu"))
for _, d in ipairs(nc.devices()) do
  local r = d.spec == "cpu" and cpu_rate or aug_rate(d)
  print(string.format('{"bench":"augment","device":"%s","images_per_s":%.0f,"ratio_to_cpu_backend":%.2f}', d.spec, r,
    r / cpu_rate))
end

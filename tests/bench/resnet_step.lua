-- The ResNet18-CIFAR training step of bench_gpu.lua alone, for profiling: models.ResNet18 (cifar
-- stem, 10 classes), SGD with momentum 0.9, cross entropy, random images, on the default device,
-- under the matmul precision P_PREC ("highest", "high" or "medium"; default "highest"); P_W
-- warm-up steps (default 3), then P_N steps (default 10) each ended by a device sync, and the
-- best and median step time and images/s. P_B is the batch (default 256); P_DTYPE=bfloat16 (or
-- float16) keeps the parameters, images and activations in that dtype (the optimizer steps float32
-- master copies: docs/optim.md). With NETCL_PROFILE=1
-- the OpenCL kernels' device times print at exit (docs/performance.md), e.g.
--   P_PREC=medium P_N=5 NETCL_PROFILE=1 NETCL_DEVICE=opencl:1:0 netcl-lua tests/bench/resnet_step.lua
-- Not a benchmark with a reference (bench_gpu.lua has PyTorch's step beside it).
local nc = require "netcl"
local nn = require "netcl.nn"
local models = require "netcl.models"
local optim = require "netcl.optim"

local dev = nc.default_device()
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/../lua/helpers.lua")
local function env(k, d) return tonumber(os.getenv(k) or d) end
local B, N, W = env("P_B", 256), math.max(1, env("P_N", 10)), env("P_W", 3)
nc.set_matmul_precision(os.getenv("P_PREC") or "highest")
nc.manual_seed(0)
local DT = os.getenv("P_DTYPE") or "float32"
local model = models.ResNet18{num_classes = 10, stem = "cifar", device = dev}
if DT ~= "float32" then model:to(DT) end
local opt = optim.SGD(model:parameters(), {lr = 0.01, momentum = 0.9})
local crit = nn.CrossEntropyLoss()
local x = nc.randn({B, 3, 32, 32}, {device = dev}):to(DT)
local y = nc.randint(0, 10, {B}, {device = dev})
model:train()
local step = H.train_step(opt, function() return crit(model(x), y) end)
local ts = H.step_times(dev, W, N, step)
print(string.format("resnet_step %s batch %d %s precision %s: best %.2f ms, median %.2f ms over %d steps (%.0f img/s)",
  dev.spec, B, DT, nc.get_matmul_precision(), ts[1] * 1e3, ts[N // 2 + 1] * 1e3, N, B / ts[N // 2 + 1]))

-- The GPT-tiny training step of bench_attention.lua alone, for profiling: models.GPT (vocab 1024,
-- dim 256, 4 layers, 4 heads, T 128, ffn_hidden 683), AdamW, on the default device; P_W warm-up
-- steps (default 3), then P_N steps (default 10) each ended by a device sync, and the best and
-- median step time. P_B (batch, default 32), P_T, P_DIM and P_HID change the model. With
-- NETCL_PROFILE=1 the OpenCL kernels' device times print at exit (docs/performance.md), e.g.
--   P_W=1 P_N=10 NETCL_PROFILE=1 NETCL_DEVICE=opencl:1:0 netcl-lua tests/bench/gpt_step.lua
-- Not a benchmark with a reference (bench_attention.lua has PyTorch's step beside it).
local nc = require "netcl"
local ag = require "netcl.autograd"
local models = require "netcl.models"
local optim = require "netcl.optim"

local dev = nc.default_device()
local helpers = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/../lua/helpers.lua")
local function env(k, d) return tonumber(os.getenv(k) or d) end
local V, DIM, L, H, T, HID = 1024, env("P_DIM", 256), 4, 4, env("P_T", 128), env("P_HID", 683)
local B, N, W = env("P_B", 32), math.max(1, env("P_N", 10)), env("P_W", 3)
nc.manual_seed(1)
local m = models.GPT{vocab_size = V, dim = DIM, n_layers = L, n_heads = H, max_seq = T, ffn_hidden = HID, device = dev}
local opt = optim.AdamW(m:parameters(), {lr = 1e-3})
local ids = nc.randint(0, V, {B, T + 1}, {dtype = "int64", device = dev})
local x, y = ids:narrow(2, 1, T), ids:narrow(2, 2, T)
local step = helpers.train_step(opt, function() return ag.cross_entropy(m(x):reshape({-1, V}), y:reshape({-1})) end)
local ts = helpers.step_times(dev, W, N, step)
print(string.format("gpt_step %s batch %d T %d: best %.2f ms, median %.2f ms over %d steps", dev.spec, B, T, ts[1] * 1e3,
  ts[N // 2 + 1] * 1e3, N))

-- flash_attention's three kernels, each timed alone (best of NETCL_BENCH_REPS calls after a warm-up,
-- each ended by a device sync): the forward (nc.flash_attention), dq and dk/dv (nc.nn_ops'
-- flash_attention_backward_q and _kv), causal, float32, under the current matmul precision
-- (NETCL_BENCH_PRECISION: highest, high or medium). B, H, T and D from NETCL_BENCH_B / _H / _T / _D
-- (default 8, 8, 2048, 64); Hkv = H. One JSON line per kernel, with TFLOP/s counting the causal half
-- (forward 2 products, dq 3, dk/dv 4, each 2 T T D / 2 flops per head), then their sum. When the
-- Python beside netcl has PyTorch with CUDA, one more line: scaled_dot_product_attention (float32,
-- TF32 off, is_causal) forward alone and forward + backward on the same GPU, and the ratio of
-- netcl's sum to the latter (NETCL_BENCH_SDPA=0 leaves it out).
local nc = require "netcl"
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/../lua/helpers.lua")

local dev = nc.default_device()
local function env(name, default) return tonumber(os.getenv(name) or "") or default end
local B, HH, T, D = env("NETCL_BENCH_B", 8), env("NETCL_BENCH_H", 8), env("NETCL_BENCH_T", 2048), env("NETCL_BENCH_D", 64)
local REPS = env("NETCL_BENCH_REPS", 5)
nc.set_matmul_precision(os.getenv("NETCL_BENCH_PRECISION") or "highest")

nc.manual_seed(1)
local o = {device = dev}
local q, k, v, g = nc.randn({B, HH, T, D}, o), nc.randn({B, HH, T, D}, o), nc.randn({B, HH, T, D}, o),
                   nc.randn({B, HH, T, D}, o)
local out = nc.flash_attention(q, k, v, {causal = true})
local delta = (g * out):sum(4)
-- the forward's saved log-sum-exp of each query row's scores, from the scores themselves
local ar = nc.arange(0, T, 1, {device = dev})
local mask = nc.where(ar:reshape({1, T}):gt(ar:reshape({T, 1})), -math.huge, 0.0)
local lse = (q:matmul(k:transpose(3, 4)) * (1 / math.sqrt(D)) + mask):logsumexp(4)
local ops = nc.nn_ops
local flop = 2 * B * HH * T * T * D / 2 -- one causal T x T x D product
local rows, total = {}, 0
for _, kern in ipairs({
  {"forward", 2, function() return nc.flash_attention(q, k, v, {causal = true}) end},
  {"dq", 3, function() return ops.flash_attention_backward_q(g, q, k, v, lse, delta, {causal = true}) end},
  {"dkdv", 4, function() return ops.flash_attention_backward_kv(g, q, k, v, lse, delta, {causal = true}) end},
}) do
  local s = H.best_time(dev, REPS, kern[3])
  total = total + s
  rows[#rows + 1] = string.format('{"kernel": "%s", "B": %d, "H": %d, "T": %d, "D": %d, "precision": "%s", "ms": %.4f, "tflops": %.2f}',
    kern[1], B, HH, T, D, nc.get_matmul_precision(), s * 1e3, kern[2] * flop / s / 1e12)
end
for _, r in ipairs(rows) do print(r) end

local PY = os.getenv("NETCL_BENCH_SDPA") ~= "0" and H.python("torch")
local torch_line = PY and H.python_output(PY, ([==[
import time, torch
import torch.nn.functional as F
torch.backends.cuda.matmul.allow_tf32 = False
if not torch.cuda.is_available() or not hasattr(F, "scaled_dot_product_attention"):
    print("none"); raise SystemExit
b, h, t, d, reps = %d, %d, %d, %d, %d
q, k, v = (torch.randn(b, h, t, d, device="cuda", requires_grad=True) for _ in range(3))
g = torch.randn(b, h, t, d, device="cuda")
def best(fn):
    fn(); torch.cuda.synchronize()
    r = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter(); fn(); torch.cuda.synchronize(); r = min(r, time.perf_counter() - t0)
    return r
def fwd():
    with torch.no_grad(): F.scaled_dot_product_attention(q, k, v, is_causal=True)
def both():
    q.grad = k.grad = v.grad = None
    F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)
print(best(fwd), best(both))
]==]):format(B, HH, T, D, REPS)) or "none"
local f, fb = torch_line:match("([%d.e%-]+) ([%d.e%-]+)")
if f then
  print(string.format('{"kernel": "sum", "ms": %.4f, "sdpa_fwd_ms": %.4f, "sdpa_ms": %.4f, "ratio_sdpa": %.3f}', total * 1e3,
    tonumber(f) * 1e3, tonumber(fb) * 1e3, total / tonumber(fb)))
else
  print(string.format('{"kernel": "sum", "ms": %.4f, "sdpa": "skipped: PyTorch with CUDA and SDPA not found"}', total * 1e3))
end

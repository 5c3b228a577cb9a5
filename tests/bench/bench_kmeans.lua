-- k-means on the default device (NETCL_DEVICE=opencl:1:0, or run.lua --device opencl:1:0;
-- docs/cluster.md). One Lloyd iteration (kmeans_assign +
-- kmeans_update + the division) in points * centroids * dims per second, best of REPS, each
-- ended by a device sync; and a full fit to convergence from the same initial centroids.
-- References measured in the same run:
--   * the CPU backend: N = 200k, D = 64, K = 256 against scikit-learn's KMeans (lloyd, same
--     initial centroids): its iteration time is (t(max_iter = 6) - t(max_iter = 1)) / 5 with
--     tol = 0, so validation and the final labelling cancel out; its full fit is the default one
--     (tol 1e-4, max_iter 300), ours uses Hamerly's bounds. The ratio is sklearn's time over ours
--     (higher is better, 1 = as fast). Skipped with a message without python3-sklearn.
--   * an OpenCL device: N = 1M, D = 64, K = 1024 on a GPU (N = 100k, K = 256 on a CPU device)
--     against a GEMM-based iteration written with netcl ops (distances as |x|^2 - 2 X C^T + |c|^2
--     in chunks of rows, argmin, one-hot GEMM for the sums) and, on a GPU that PyTorch sees
--     through CUDA, the same GEMM-based iteration in PyTorch.
-- The data are blobs (K centres, unit noise) so that fits converge in tens of iterations.
-- NETCL_BENCH_KMEANS="N,D,K" overrides the sizes. Peak device memory (the pool's peak) is reported.
local nc = require "netcl"
-- The Python that has the reference (tests/lua/helpers.lua: NETCL_PYTHON, python3, /usr/bin/python3).
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/../lua/helpers.lua")
local PY = H.python("sklearn", "numpy") or "python3"
local cluster = require "netcl.cluster"
local nio = require "netcl.io"

local dev = nc.default_device()
local ops = nc.nn_ops
local REPS = 3
local N, D, K
if os.getenv("NETCL_BENCH_KMEANS") then
  N, D, K = os.getenv("NETCL_BENCH_KMEANS"):match("(%d+),(%d+),(%d+)")
  N, D, K = tonumber(N), tonumber(D), tonumber(K)
elseif dev.kind == "cpu" then
  N, D, K = 200000, 64, 256
elseif dev.is_gpu then
  N, D, K = 1000000, 64, 1024
else
  N, D, K = 100000, 64, 256
end

local function best_s(fn, reps) return H.best_time(dev, reps or REPS, fn) end

nc.manual_seed(0)
local centres = nc.randn({K, D}, {device = dev}) * 3
local X = (centres:index_select(1, nc.randint(0, K, {N}, {device = dev})) + nc.randn({N, D}, {device = dev})):contiguous()
local C0 = X:narrow(1, 1, K):clone()
centres = nil

local function lloyd_iter(C)
  local labels = ops.kmeans_assign(X, C)
  local sums, counts = ops.kmeans_update(X, labels, K)
  return sums / counts:clamp(1, nil):to(X.dtype):view({K, 1})
end

local function gemm_iter(C)
  local chunk = 65536
  local cn = (C * C):sum(2):view({1, K})
  local sums = nc.zeros({K, D}, {device = dev})
  local counts = nc.zeros({K}, {device = dev})
  for r0 = 1, N, chunk do
    local xc = X:narrow(1, r0, math.min(chunk, N - r0 + 1))
    local d = cn - 2 * xc:matmul(C:transpose(1, 2))     -- |x|^2 does not change the argmin
    local oh = nc.one_hot(d:argmin(2), K):to(X.dtype)
    sums = sums + oh:transpose(1, 2):matmul(xc)
    counts = counts + oh:sum(1)
  end
  return sums / counts:clamp(1, nil):view({K, 1})
end

local work = N * K * D
local t_iter = best_s(function() return lloyd_iter(C0) end)
local peak = nc.memory_stats(dev).peak
local res = {bench = "kmeans", device = dev.spec, n = N, d = D, k = K, iter_s = t_iter, pcd_per_s = work / t_iter,
             peak_bytes = peak, data_bytes = N * D * 4}

local function tmp_npy(t)
  local path = os.tmpname() .. ".npy"
  nio.save_npy(t:to("cpu"), path)
  return path
end

local function python(script) return H.python_output(PY, script) end

if dev.kind == "cpu" then
  -- full fit, Hamerly, from C0
  local fit_s = best_s(function() return cluster.KMeans{k = K, init = C0}:fit(X) end, 1)
  local m = cluster.KMeans{k = K, init = C0}:fit(X)
  res.fit_s, res.fit_inertia, res.fit_iters = fit_s, m.inertia, m.n_iter
  local fl = cluster.KMeans{k = K, init = C0, algorithm = "lloyd"}
  res.fit_lloyd_s = best_s(function() return fl:fit(X) end, 1)
  local xp, cp = tmp_npy(X), tmp_npy(C0)
  local out = python(([[
import time, numpy as np
from sklearn.cluster import KMeans
X, C = np.load("%s"), np.load("%s")
def t(**kw):
    t0 = time.perf_counter(); m = KMeans(%d, init=C, n_init=1, **kw).fit(X); return time.perf_counter() - t0, m
it = min((t(max_iter=6, tol=0, algorithm="lloyd")[0] - t(max_iter=1, tol=0, algorithm="lloyd")[0]) / 5 for _ in range(%d))
ft, m = t()
print(it, ft, m.inertia_, m.n_iter_)
]]):format(xp, cp, K, REPS))
  os.remove(xp) os.remove(cp)
  local it, ft, inertia, iters = out:match("^(%S+) (%S+) (%S+) (%S+)")
  if it then
    res.sklearn_iter_s, res.sklearn_fit_s = tonumber(it), tonumber(ft)
    res.sklearn_fit_inertia, res.sklearn_fit_iters = tonumber(inertia), tonumber(iters)
    res.iter_ratio = res.sklearn_iter_s / t_iter
    res.fit_ratio = res.sklearn_fit_s / res.fit_s
    res.fit_inertia_rel = (res.fit_inertia - res.sklearn_fit_inertia) / res.sklearn_fit_inertia
  else
    io.stderr:write("bench_kmeans: python3-sklearn not found; no reference\n")
  end
else
  res.gemm_iter_s = best_s(function() return gemm_iter(C0) end)
  res.gemm_ratio = res.gemm_iter_s / t_iter
  if dev.is_gpu then
    local xp, cp = tmp_npy(X), tmp_npy(C0)
    local out = python(([[
import time, numpy as np, torch
if not torch.cuda.is_available(): raise SystemExit(1)
torch.backends.cuda.matmul.allow_tf32 = False
X = torch.from_numpy(np.load("%s")).cuda(); C = torch.from_numpy(np.load("%s")).cuda()
K = C.shape[0]
def it():
    d = (C * C).sum(1)[None, :] - 2 * X @ C.T
    l = d.argmin(1)
    s = torch.zeros_like(C).index_add_(0, l, X)
    c = torch.bincount(l, minlength=K).clamp(min=1)
    return s / c[:, None]
it(); torch.cuda.synchronize()
b = float("inf")
for _ in range(%d):
    t0 = time.perf_counter(); it(); torch.cuda.synchronize(); b = min(b, time.perf_counter() - t0)
print(b, torch.cuda.max_memory_allocated())
]]):format(xp, cp, REPS))
    os.remove(xp) os.remove(cp)
    local tt, tm = out:match("^(%S+) (%S+)")
    if tt then
      res.torch_iter_s, res.torch_peak_bytes, res.torch_ratio = tonumber(tt), tonumber(tm), tonumber(tt) / t_iter
    else
      io.stderr:write("bench_kmeans: PyTorch with CUDA not found; no PyTorch reference\n")
    end
  end
end

local keys = {}
for k in pairs(res) do keys[#keys + 1] = k end
table.sort(keys)
local parts = {}
for _, k in ipairs(keys) do
  local v = res[k]
  parts[#parts + 1] = string.format('"%s":%s', k, type(v) == "string" and ('"' .. v .. '"') or
    (math.type(v) == "integer" and tostring(v) or string.format("%.6g", v)))
end
print("{" .. table.concat(parts, ",") .. "}")

-- Matrix products in each matmul precision on the default device against PyTorch on CUDA in the
-- same run (docs/performance.md, "Tensor-core GEMMs"): a:matmul(b) on random float32 tensors
-- under "highest", "high" and "medium", and on bfloat16 tensors, for square N x N products with B
-- stored as is ("rr") and transposed ("rc"), and for rectangular "medium" products (M x K @ K x N,
-- the shapes of linear layers). GFLOP/s, best of 5 (H.best_time). PyTorch runs the same shapes
-- float32 with TF32 off, with TF32 on, and on bfloat16 tensors; without PyTorch or CUDA the
-- reference is skipped with a message. One JSON line per case, with the ratio netcl / PyTorch.
-- NETCL_BENCH_QUICK=1 runs small shapes (a smoke run on slow devices such as PoCL).
local nc = require "netcl"
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/../lua/helpers.lua")

local QUICK = os.getenv("NETCL_BENCH_QUICK") == "1"
local dev = nc.default_device()
local SQUARE = QUICK and {256, 512} or {4096, 8192}
local RECT = QUICK and {{512, 256, 256}} or {{4096, 256, 256}, {4096, 1024, 1024}, {8192, 768, 3072}, {8192, 3072, 768},
                                              {16384, 1024, 4096}}
-- PyTorch's name for each mode's reference
local TORCH = {highest = "fp32", high = "tf32", medium = "bf16", bf16_tensors = "bf16"}

local results = {}
local function record(case, mode, flops, t)
  results[#results + 1] = {case = case, mode = mode, value = flops / t * 1e-9}
  io.stderr:write(string.format("netcl %-28s %.0f GFLOP/s\n", case, flops / t * 1e-9))
end
local function time(a, b) return H.best_time(dev, 5, function() return a:matmul(b) end) end

for _, mode in ipairs({"highest", "high", "medium", "bf16_tensors"}) do
  nc.set_matmul_precision(mode == "bf16_tensors" and "highest" or mode)
  local dt = mode == "bf16_tensors" and "bfloat16" or "float32"
  for _, n in ipairs(SQUARE) do
    local a = nc.randn({n, n}, {device = dev}):to(dt)
    local b = nc.randn({n, n}, {device = dev}):to(dt)
    local bt = nc.randn({n, n}, {device = dev}):to(dt)
    record(string.format("%s_%d_rr", mode, n), mode, 2 * n ^ 3, time(a, b))
    record(string.format("%s_%d_rc", mode, n), mode, 2 * n ^ 3, time(a, bt:t()))
  end
end
nc.set_matmul_precision("medium")
for _, s in ipairs(RECT) do
  local m, k, n = s[1], s[2], s[3]
  local a, b = nc.randn({m, k}, {device = dev}), nc.randn({k, n}, {device = dev})
  record(string.format("medium_%dx%dx%d", m, k, n), "medium", 2 * m * k * n, time(a, b))
end
nc.set_matmul_precision("highest")

-- PyTorch: the same products, a @ b with b transposed in storage for "rc"
local shapes = {}
for _, n in ipairs(SQUARE) do shapes[#shapes + 1] = string.format("(%d, %d, %d)", n, n, n) end
for _, s in ipairs(RECT) do shapes[#shapes + 1] = string.format("(%d, %d, %d)", s[1], s[2], s[3]) end
local script = ([[
def best(f, reps=5):
    f(); torch.cuda.synchronize(); b = 1e9
    for _ in range(reps):
        t0 = time.perf_counter(); f(); torch.cuda.synchronize(); b = min(b, time.perf_counter() - t0)
    return b
res = {}
for mode, dt, tf in (("fp32", torch.float32, False), ("tf32", torch.float32, True), ("bf16", torch.bfloat16, False)):
    torch.backends.cuda.matmul.allow_tf32 = tf
    for (m, k, n) in %s:
        a = torch.randn(m, k, device="cuda", dtype=dt); b = torch.randn(k, n, device="cuda", dtype=dt)
        res["%%s_%%dx%%dx%%d" %% (mode, m, k, n)] = 2 * m * k * n / best(lambda: a @ b) * 1e-9
        if m == k == n:
            bt = torch.randn(n, k, device="cuda", dtype=dt).t()
            res["%%s_%%dx%%dx%%d_rc" %% (mode, m, k, n)] = 2 * m * k * n / best(lambda: a @ bt) * 1e-9
res["device"] = torch.cuda.get_device_name(0)
print(json.dumps(res))
]]):format("[" .. table.concat(shapes, ", ") .. "]")
local ref = H.torch_cuda_reference("bench_gemm_modes", script)
for _, r in ipairs(results) do
  -- the reference's key: <torch mode>_MxKxN[_rc]
  local n, layout = r.case:match("_(%d+)_(r[rc])$")
  local key = n and string.format("%s_%sx%sx%s%s", TORCH[r.mode], n, n, n, layout == "rc" and "_rc" or "")
    or string.format("%s_%s", TORCH[r.mode], r.case:match("_(%d+x%d+x%d+)$"))
  local t = ref[key]
  print(string.format('{"bench":"gemm_modes","case":"%s","device":"%s","unit":"GFLOP/s","netcl":%.1f%s}', r.case,
    tostring(dev), r.value, t and string.format(',"torch":%.1f,"torch_case":"%s","torch_device":"%s","ratio":%.3f', t, key,
      ref.device, r.value / t) or ""))
end

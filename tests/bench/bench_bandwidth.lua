-- Memory-bound ops against PyTorch on the same device, in one run: add (a + b into out=), a full
-- sum, and softmax over the last dim of [rows, 1024], each at N floats (64M on a GPU, 16M on a
-- CPU; NETCL_BENCH_N overrides); and batch norm forward (training) and backward at the four
-- ResNet18-CIFAR shapes, batch 256 on a GPU, 32 on a CPU (NETCL_BENCH_BN_BATCH overrides), counted
-- as the least traffic (forward reads x and writes y, backward reads dy and x and writes dx). Figures are effective bandwidth in GB/s, best of 10 timed calls
-- after a warm-up, each call ended by a device sync; the ratio is netcl's bandwidth over
-- PyTorch's (higher is better, 1 = as fast). PyTorch runs on CUDA when netcl's device is a GPU and
-- torch sees CUDA, on the CPU with the same thread count otherwise, and is skipped with a
-- message when python3-torch is missing. PyTorch's fp32 runs with TF32 off (no matmul here).
local nc = require "netcl"
-- The Python that has the reference (tests/lua/helpers.lua: NETCL_PYTHON, python3, /usr/bin/python3).
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/../lua/helpers.lua")
local PY = H.python("torch") or "python3"

local dev = nc.default_device()
local N = tonumber(os.getenv("NETCL_BENCH_N") or "") or (dev.is_gpu and 64 * 1024 * 1024 or 16 * 1024 * 1024)
local COLS, REPS = 1024, 10
local BATCH = tonumber(os.getenv("NETCL_BENCH_BN_BATCH") or "") or (dev.is_gpu and 256 or 32)
local BN = {{64, 32}, {128, 16}, {256, 8}, {512, 4}} -- channels, spatial side
local ROWS = N // COLS
N = ROWS * COLS

local function best_s(fn) return H.best_time(dev, REPS, fn) end

-- bytes moved per call: add reads 2 and writes 1, sum reads 1, softmax reads 1 and writes 1
local cases = {
  {name = "add", bytes = 3 * 4 * N},
  {name = "sum", bytes = 4 * N},
  {name = "softmax", bytes = 2 * 4 * N},
}

local a, b = nc.rand({N}, {device = dev}), nc.rand({N}, {device = dev})
local c = nc.empty({N}, {device = dev})
local m = nc.randn({ROWS, COLS}, {device = dev})
local netcl = {
  add = best_s(function() nc.add(a, b, {out = c}) end),
  sum = best_s(function() return a:sum() end),
  softmax = best_s(function() return m:softmax(2) end),
}
a, b, c, m = nil, nil, nil, nil
collectgarbage()

local ops = nc.nn_ops
for _, cs in ipairs(BN) do
  local ch, side = cs[1], cs[2]
  local numel = BATCH * ch * side * side
  local x, dy = nc.randn({BATCH, ch, side, side}, {device = dev}), nc.randn({BATCH, ch, side, side}, {device = dev})
  local w, bias = nc.rand({ch}, {device = dev}), nc.rand({ch}, {device = dev})
  local rm, rv = nc.zeros({ch}, {device = dev}), nc.ones({ch}, {device = dev})
  local tag = ("%dx%dx%d"):format(ch, side, side)
  local _, mean, invstd = ops.batch_norm(x, w, bias, rm, rv, {training = true})
  cases[#cases + 1] = {name = "bn_fwd_" .. tag, bytes = 2 * 4 * numel, n = numel}
  netcl["bn_fwd_" .. tag] = best_s(function() return ops.batch_norm(x, w, bias, rm, rv, {training = true}) end)
  cases[#cases + 1] = {name = "bn_bwd_" .. tag, bytes = 3 * 4 * numel, n = numel}
  netcl["bn_bwd_" .. tag] = best_s(function() return ops.batch_norm_backward(dy, x, w, mean, invstd) end)
end
collectgarbage()

local function torch_reference()
  local items = {}
  for _, cs in ipairs(BN) do items[#items + 1] = ("(%d, %d)"):format(cs[1], cs[2]) end
  local bn_list = "[" .. table.concat(items, ", ") .. "]"
  local script = ([[
import time, torch
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = "cuda" if %s and torch.cuda.is_available() else "cpu"
if dev == "cpu": torch.set_num_threads(%d)
N, R, C = %d, %d, %d
a = torch.rand(N, device=dev); b = torch.rand(N, device=dev); c = torch.empty(N, device=dev)
m = torch.randn(R, C, device=dev)
def sync():
    if dev == "cuda": torch.cuda.synchronize()
def best(fn):
    fn(); sync()
    r = float("inf")
    for _ in range(%d):
        t0 = time.perf_counter(); fn(); sync()
        r = min(r, time.perf_counter() - t0)
    return r
print("add", best(lambda: torch.add(a, b, out=c)))
print("sum", best(lambda: a.sum()))
print("softmax", best(lambda: torch.softmax(m, 1)))
del a, b, c, m
F = torch.nn.functional
for ch, side in %s:
    tag = "%%dx%%dx%%d" %% (ch, side, side)
    x = torch.randn(%d, ch, side, side, device=dev, requires_grad=True)
    dy = torch.randn_like(x)
    w = torch.rand(ch, device=dev, requires_grad=True); bb = torch.rand(ch, device=dev, requires_grad=True)
    rm = torch.zeros(ch, device=dev); rv = torch.ones(ch, device=dev)
    with torch.no_grad():
        print("bn_fwd_" + tag, best(lambda: F.batch_norm(x, rm, rv, w, bb, training=True)))
    y = F.batch_norm(x, rm, rv, w, bb, training=True)
    def bwd():
        x.grad = None; w.grad = None; bb.grad = None
        y.backward(dy, retain_graph=True)
    print("bn_bwd_" + tag, best(bwd))
print("device", dev)
]]):format(dev.is_gpu and "True" or "False", dev.compute_units, N, ROWS, COLS, REPS, bn_list, BATCH)
  local out = {}
  for line in H.python_output(PY, script):gmatch("[^\n]+") do
    local k, v = line:match("^(%S+) (%S+)$")
    if k then out[k] = k == "device" and v or tonumber(v) end
  end
  return out.device and out or nil
end

local ref = torch_reference()
if not ref then io.stderr:write("bench_bandwidth: python3-torch not found; no reference\n") end
for _, case in ipairs(cases) do
  local gbs = case.bytes / netcl[case.name] / 1e9
  local line = string.format('{"bench":"bandwidth","case":"%s","n":%d,"device":"%s","netcl_gbs":%.1f', case.name,
    case.n or N, dev.spec, gbs)
  if ref and ref[case.name] then
    local tgbs = case.bytes / ref[case.name] / 1e9
    line = line .. string.format(',"torch_device":"%s","torch_gbs":%.1f,"ratio":%.3f', ref.device, tgbs, gbs / tgbs)
  end
  print(line .. "}")
end

-- netcl on a GPU against PyTorch on the same GPU, in one run: the workloads of docs/performance.md's
-- GPU table. netcl runs on its default device (NETCL_DEVICE picks another); PyTorch runs the same
-- shapes on CUDA in one python3 process afterwards, float32 with TF32 off for matmuls and cuDNN
-- (torch.backends.cuda.matmul.allow_tf32 = False, torch.backends.cudnn.allow_tf32 = False).
-- Without PyTorch or without CUDA the reference is skipped with a message. Prints one JSON line
-- per workload: netcl's figure, PyTorch's, and the ratio netcl / PyTorch for rates (higher is
-- better) or PyTorch / netcl for times, so a ratio of 1 means as fast, above 1 faster.
--   sgemm N           N x N @ N x N, GFLOP/s, best of 5 (N = 1024, 4096, 8192)
--   conv_fwd/_dgrad/_wgrad   3x3 conv 64 -> 64, 32x32, batch 256, padding 1: ms, best of 10
--   resnet18_train    ResNet18-cifar, batch 256, SGD momentum 0.9: images/s over 20 steps
--   resnet18_infer    the same model in eval mode under no_grad: images/s over 20 batches
--   add / sum / softmax   64M floats (softmax over rows of 1024): GB/s, best of 10
--   adam_step         Adam over ResNet18's parameters: ms per step, best of 20
--   *_tf32            sgemm 4096/8192, the conv passes and ResNet18 training again under
--                     nc.set_matmul_precision("high") (tf32 tensor cores), against PyTorch with
--                     TF32 on; only on a device with tf32 (dev.tf32)
--   *_bf16            the same under nc.set_matmul_precision("medium") (bfloat16 tensor cores,
--                     float32 tensors), against PyTorch on bfloat16 tensors (cuBLAS and cuDNN
--                     BF16) and ResNet18 training under torch.autocast(dtype=torch.bfloat16);
--                     only on a device with bf16_mma
--   gemm*_bf16_tensors  GEMM 4096/8192 on bfloat16 tensors (result bfloat16), against PyTorch's
--                     bfloat16 GEMM; only on a device with bf16_mma
-- NETCL_BENCH_QUICK=1 runs smaller shapes (a smoke run on slow devices such as PoCL).
local nc = require "netcl"
local nn = require "netcl.nn"
local ag = require "netcl.autograd"
local optim = require "netcl.optim"
local models = require "netcl.models"
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/../lua/helpers.lua")

local QUICK = os.getenv("NETCL_BENCH_QUICK") == "1"
local dev = nc.default_device()
local S = QUICK and {gemm = {256, 512}, batch = 8, elems = 1 << 20, steps = 2, reps = 2}
  or {gemm = {1024, 4096, 8192}, batch = 256, elems = 64 << 20, steps = 20, reps = 10}

local function best_of(reps, fn) return H.best_time(dev, reps, fn) end

local results, order = {}, {}
local function record(name, value, unit)
  results[name] = {value = value, unit = unit}
  order[#order + 1] = name
  io.stderr:write(string.format("netcl %-16s %.3f %s\n", name, value, unit))
end

local function randn(shape) return nc.randn(shape, {device = dev}) end

-- SGEMM
local function sgemm(sizes, suffix)
  for _, n in ipairs(sizes) do
    local a, b = randn({n, n}), randn({n, n})
    local t = best_of(n >= 8192 and 3 or 5, function() return a:matmul(b) end)
    record("sgemm" .. n .. suffix, 2 * n ^ 3 / t * 1e-9, "GFLOP/s")
  end
end
sgemm(S.gemm, "")

-- conv 3x3 64 -> 64, its two gradients
local function conv(suffix)
  local B = S.batch
  local x, w = randn({B, 64, 32, 32}), randn({64, 64, 3, 3})
  local dy = randn({B, 64, 32, 32})
  local o = {padding = 1}
  record("conv_fwd" .. suffix, 1e3 * best_of(S.reps, function() return nc.nn_ops.conv2d(x, w, nil, o) end), "ms")
  record("conv_dgrad" .. suffix, 1e3 * best_of(S.reps, function()
    return nc.nn_ops.conv2d_backward_input(dy, w, {B, 64, 32, 32}, o) end), "ms")
  record("conv_wgrad" .. suffix, 1e3 * best_of(S.reps, function()
    return nc.nn_ops.conv2d_backward_weight(dy, x, {64, 64, 3, 3}, o) end), "ms")
end
conv("")

-- ResNet18-cifar training (and the model, its data and its step, for what follows)
local function resnet_train(suffix)
  nc.manual_seed(0)
  local B = S.batch
  local model = models.ResNet18{num_classes = 10, stem = "cifar", device = dev}
  local opt = optim.SGD(model:parameters(), {lr = 0.01, momentum = 0.9})
  local crit = nn.CrossEntropyLoss()
  local x = randn({B, 3, 32, 32})
  local y = nc.randint(0, 10, {B}, {device = dev})
  local step = H.train_step(opt, function() return crit(model(x), y) end)
  model:train()
  for _ = 1, 3 do step() end
  dev:sync()
  local t0 = nc.clock()
  for _ = 1, S.steps do step() end
  dev:sync()
  record("resnet18_train" .. suffix, S.steps * B / (nc.clock() - t0), "img/s")
  return model, x, step
end

-- ResNet18-cifar inference, and Adam
do
  local B = S.batch
  local model, x, step = resnet_train("")
  model:eval()
  local function infer() return ag.no_grad(function() return model(x) end) end
  for _ = 1, 3 do infer() end
  dev:sync()
  local t0 = nc.clock()
  for _ = 1, S.steps do infer() end
  dev:sync()
  record("resnet18_infer", S.steps * B / (nc.clock() - t0), "img/s")

  -- Adam over the same parameters, gradients present
  local adam = optim.Adam(model:parameters(), {lr = 1e-3})
  model:train()
  step()
  record("adam_step", 1e3 * best_of(2 * S.reps, function() adam:step() end), "ms")
end

-- memory-bound ops
do
  local n = S.elems
  local a, b = randn({n}), randn({n})
  local out = nc.empty({n}, {device = dev})
  record("add", 12 * n / best_of(S.reps, function() nc.add(a, b, {out = out}) end) * 1e-9, "GB/s")
  record("sum", 4 * n / best_of(S.reps, function() return a:sum() end) * 1e-9, "GB/s")
  local rows = a:view({n // 1024, 1024})
  record("softmax", 8 * n / best_of(S.reps, function() return rows:softmax(2) end) * 1e-9, "GB/s")
end

-- the tensor-core modes: "high" (tf32) and "medium" (bf16), where the device has them
local function tensor_cores(has, mode, suffix, what)
  if not has then
    io.stderr:write("bench_gpu: " .. tostring(dev) .. " has no " .. what .. " tensor cores; the " .. suffix ..
                    " cases are skipped\n")
    return
  end
  nc.set_matmul_precision(mode)
  sgemm(QUICK and S.gemm or {4096, 8192}, suffix)
  conv(suffix)
  resnet_train(suffix)
  nc.set_matmul_precision("highest")
end
local TF32, BF16 = dev.tf32, dev.bf16_mma
tensor_cores(TF32, "high", "_tf32", "tf32")
tensor_cores(BF16, "medium", "_bf16", "bfloat16")
-- products of bfloat16 tensors (kernels/gemm_bf16.cl on NVIDIA; any precision mode), against
-- PyTorch's bfloat16 products (the sgemm*_bf16 reference)
if BF16 then
  for _, n in ipairs(QUICK and S.gemm or {4096, 8192}) do
    local a, b = randn({n, n}):to("bfloat16"), randn({n, n}):to("bfloat16")
    local t = best_of(n >= 8192 and 3 or 5, function() return a:matmul(b) end)
    record("gemm" .. n .. "_bf16_tensors", 2 * n ^ 3 / t * 1e-9, "GFLOP/s")
  end
end

-- PyTorch on the same GPU
local script = ([[
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = "cuda"
QUICK = %s
GEMM = %s
B, ELEMS, STEPS, REPS = %d, %d, %d, %d
res = {}
def sync(): torch.cuda.synchronize()
def best_of(reps, fn):
    fn(); sync()
    r = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter(); fn(); sync(); r = min(r, time.perf_counter() - t0)
    return r
for n in GEMM:
    a, b = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
    t = best_of(3 if n >= 8192 else 5, lambda: a @ b)
    res["sgemm%%d" %% n] = 2 * n ** 3 / t * 1e-9
    del a, b
x = torch.randn(B, 64, 32, 32, device=dev); w = torch.randn(64, 64, 3, 3, device=dev)
dy = torch.randn(B, 64, 32, 32, device=dev)
F = torch.nn.functional
res["conv_fwd"] = 1e3 * best_of(REPS, lambda: F.conv2d(x, w, padding=1))
res["conv_dgrad"] = 1e3 * best_of(REPS, lambda: torch.nn.grad.conv2d_input(x.shape, w, dy, padding=1))
res["conv_wgrad"] = 1e3 * best_of(REPS, lambda: torch.nn.grad.conv2d_weight(x, w.shape, dy, padding=1))
import torch.nn as nn
class Block(nn.Module):
    def __init__(s, cin, cout, stride):
        super().__init__()
        s.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False); s.bn1 = nn.BatchNorm2d(cout)
        s.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False); s.bn2 = nn.BatchNorm2d(cout)
        s.down = None
        if stride != 1 or cin != cout:
            s.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
    def forward(s, x):
        o = torch.relu(s.bn1(s.conv1(x))); o = s.bn2(s.conv2(o))
        return torch.relu(o + (x if s.down is None else s.down(x)))
class ResNet18(nn.Module):
    def __init__(s):
        super().__init__()
        s.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False); s.bn1 = nn.BatchNorm2d(64)
        layers, cin = [], 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            layers += [Block(cin, cout, stride), Block(cout, cout, 1)]; cin = cout
        s.layers = nn.Sequential(*layers); s.fc = nn.Linear(512, 10)
    def forward(s, x):
        x = torch.relu(s.bn1(s.conv1(x))); x = s.layers(x)
        return s.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
torch.manual_seed(0)
model = ResNet18().to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
xb = torch.randn(B, 3, 32, 32, device=dev); yb = torch.randint(0, 10, (B,), device=dev)
def step():
    loss = F.cross_entropy(model(xb), yb); opt.zero_grad(); loss.backward(); opt.step()
model.train()
for _ in range(3): step()
sync(); t0 = time.perf_counter()
for _ in range(STEPS): step()
sync(); res["resnet18_train"] = STEPS * B / (time.perf_counter() - t0)
model.eval()
with torch.no_grad():
    for _ in range(3): model(xb)
    sync(); t0 = time.perf_counter()
    for _ in range(STEPS): model(xb)
    sync(); res["resnet18_infer"] = STEPS * B / (time.perf_counter() - t0)
model.train(); step()
adam = torch.optim.Adam(model.parameters(), lr=1e-3)
res["adam_step"] = 1e3 * best_of(2 * REPS, lambda: adam.step())
a, b = torch.randn(ELEMS, device=dev), torch.randn(ELEMS, device=dev); out = torch.empty(ELEMS, device=dev)
res["add"] = 12 * ELEMS / best_of(REPS, lambda: torch.add(a, b, out=out)) * 1e-9
res["sum"] = 4 * ELEMS / best_of(REPS, lambda: a.sum()) * 1e-9
rows = a.view(ELEMS // 1024, 1024)
res["softmax"] = 8 * ELEMS / best_of(REPS, lambda: torch.softmax(rows, 1)) * 1e-9
if %s:
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    for n in (GEMM if QUICK else [4096, 8192]):
        a, b = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
        t = best_of(3 if n >= 8192 else 5, lambda: a @ b)
        res["sgemm%%d_tf32" %% n] = 2 * n ** 3 / t * 1e-9
        del a, b
    res["conv_fwd_tf32"] = 1e3 * best_of(REPS, lambda: F.conv2d(x, w, padding=1))
    res["conv_dgrad_tf32"] = 1e3 * best_of(REPS, lambda: torch.nn.grad.conv2d_input(x.shape, w, dy, padding=1))
    res["conv_wgrad_tf32"] = 1e3 * best_of(REPS, lambda: torch.nn.grad.conv2d_weight(x, w.shape, dy, padding=1))
    torch.manual_seed(0)
    model = ResNet18().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model.train()
    for _ in range(3): step()
    sync(); t0 = time.perf_counter()
    for _ in range(STEPS): step()
    sync(); res["resnet18_train_tf32"] = STEPS * B / (time.perf_counter() - t0)
if %s:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for n in (GEMM if QUICK else [4096, 8192]):
        a, b = torch.randn(n, n, device=dev, dtype=torch.bfloat16), torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        t = best_of(3 if n >= 8192 else 5, lambda: a @ b)
        res["sgemm%%d_bf16" %% n] = 2 * n ** 3 / t * 1e-9
        del a, b
    xh, wh, dyh = x.bfloat16(), w.bfloat16(), dy.bfloat16()
    res["conv_fwd_bf16"] = 1e3 * best_of(REPS, lambda: F.conv2d(xh, wh, padding=1))
    res["conv_dgrad_bf16"] = 1e3 * best_of(REPS, lambda: torch.nn.grad.conv2d_input(xh.shape, wh, dyh, padding=1))
    res["conv_wgrad_bf16"] = 1e3 * best_of(REPS, lambda: torch.nn.grad.conv2d_weight(xh, wh.shape, dyh, padding=1))
    torch.manual_seed(0)
    model = ResNet18().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    def step_bf16():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad(); loss.backward(); opt.step()
    model.train()
    for _ in range(3): step_bf16()
    sync(); t0 = time.perf_counter()
    for _ in range(STEPS): step_bf16()
    sync(); res["resnet18_train_bf16"] = STEPS * B / (time.perf_counter() - t0)
res["device"] = torch.cuda.get_device_name(0)
res["torch"] = torch.__version__
print(json.dumps(res))
]]):format(QUICK and "True" or "False", "[" .. table.concat(S.gemm, ", ") .. "]", S.batch, S.elems, S.steps, S.reps,
             TF32 and "True" or "False", BF16 and "True" or "False")

local ref = H.torch_cuda_reference("bench_gpu", script)
for _, name in ipairs(order) do
  local r = results[name]
  local t = ref[name] or ref[(name:gsub("^gemm(%d+)_bf16_tensors$", "sgemm%1_bf16"))]
  local ratio = t and (r.unit == "ms" and t / r.value or r.value / t)
  print(string.format('{"bench":"gpu","case":"%s","device":"%s","unit":"%s","netcl":%.3f%s}', name, tostring(dev),
    r.unit, r.value, t and string.format(',"torch":%.3f,"torch_device":"%s","ratio":%.3f', t, ref.device, ratio) or ""))
end

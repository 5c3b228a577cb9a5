-- The convolutions of ResNet18-CIFAR (batch 256) in each matmul precision on the default device
-- against PyTorch on CUDA in the same run (docs/performance.md): the forward, input gradient and
-- weight gradient of each distinct layer shape, on float32 tensors under "highest", "high" and
-- "medium". ms, best of 10 (H.best_time). PyTorch runs the same passes float32 with TF32 off
-- ("highest"), float32 with TF32 on ("high") and on bfloat16 tensors ("medium", cuDNN BF16, as
-- torch.autocast runs them); without PyTorch or CUDA the reference is skipped with a message. One
-- JSON line per case with the ratio PyTorch / netcl (above 1: netcl faster), then one line per
-- mode with the sums over a training step's convolutions (each shape counted as often as
-- ResNet18 has it). P_MODES picks modes (comma-separated); P_DTYPE=bfloat16 runs netcl's passes on
-- bfloat16 tensors (the weight gradient's dY too); NETCL_BENCH_QUICK=1 runs batch 8 (a smoke run
-- on slow devices such as PoCL).
local nc = require "netcl"
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/../lua/helpers.lua")
local ops = nc.nn_ops

local QUICK = os.getenv("NETCL_BENCH_QUICK") == "1"
local dev = nc.default_device()
local B, REPS = QUICK and 8 or 256, QUICK and 2 or 10
local DT = os.getenv("P_DTYPE") or "float32"
-- {name, c_in, c_out, k, stride, padding, input size, count in ResNet18-CIFAR}
local SHAPES = {
  {"stem", 3, 64, 3, 1, 1, 32, 1},
  {"l1", 64, 64, 3, 1, 1, 32, 4},
  {"l2a", 64, 128, 3, 2, 1, 32, 1},
  {"l2d", 64, 128, 1, 2, 0, 32, 1},
  {"l2", 128, 128, 3, 1, 1, 16, 3},
  {"l3a", 128, 256, 3, 2, 1, 16, 1},
  {"l3d", 128, 256, 1, 2, 0, 16, 1},
  {"l3", 256, 256, 3, 1, 1, 8, 3},
  {"l4a", 256, 512, 3, 2, 1, 8, 1},
  {"l4d", 256, 512, 1, 2, 0, 8, 1},
  {"l4", 512, 512, 3, 1, 1, 4, 3},
}
local MODES = {}
for m in (os.getenv("P_MODES") or "highest,high,medium"):gmatch("[^,]+") do MODES[#MODES + 1] = m end
local TORCH = {highest = "fp32", high = "tf32", medium = "bf16"}
local PASSES = {"fwd", "dgrad", "wgrad"}

local results, sums = {}, {}
for _, mode in ipairs(MODES) do
  nc.set_matmul_precision(mode)
  sums[mode] = 0
  for _, s in ipairs(SHAPES) do
    local name, ci, co, k, st, pd, hw, count = table.unpack(s)
    local o = {stride = st, padding = pd}
    local x, w = nc.randn({B, ci, hw, hw}, {device = dev}):to(DT), nc.randn({co, ci, k, k}, {device = dev}):to(DT)
    local y = ops.conv2d(x, w, nil, o)
    local dy = nc.randn(y.shape, {device = dev}):to(DT)
    local fns = {
      fwd = function() return ops.conv2d(x, w, nil, o) end,
      dgrad = function() return ops.conv2d_backward_input(dy, w, x.shape, o) end,
      wgrad = function() return ops.conv2d_backward_weight(dy, x, w.shape, o) end,
    }
    for _, pass in ipairs(PASSES) do
      local t = H.best_time(dev, REPS, fns[pass]) * 1e3
      results[#results + 1] = {case = string.format("%s_%s_%s", mode, name, pass), mode = mode, key = name .. "_" .. pass,
                               ms = t, count = count}
      sums[mode] = sums[mode] + count * t
      io.stderr:write(string.format("netcl %-22s %.3f ms\n", results[#results].case, t))
    end
  end
end
nc.set_matmul_precision("highest")

local shapes = {}
for _, s in ipairs(SHAPES) do
  shapes[#shapes + 1] = string.format('("%s", %d, %d, %d, %d, %d, %d)', s[1], s[2], s[3], s[4], s[5], s[6], s[7])
end
local tmodes = {}
for _, m in ipairs(MODES) do tmodes[#tmodes + 1] = '"' .. TORCH[m] .. '"' end
local script = ([[
torch.backends.cudnn.benchmark = True
F = torch.nn.functional
def best(f, reps=%d):
    f(); torch.cuda.synchronize(); b = 1e9
    for _ in range(reps):
        t0 = time.perf_counter(); f(); torch.cuda.synchronize(); b = min(b, time.perf_counter() - t0)
    return b
res = {}
B = %d
for mode in [%s]:
    tf = mode == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf; torch.backends.cudnn.allow_tf32 = tf
    dt = torch.bfloat16 if mode == "bf16" else torch.float32
    for (name, ci, co, k, st, pd, hw) in [%s]:
        x = torch.randn(B, ci, hw, hw, device="cuda", dtype=dt); w = torch.randn(co, ci, k, k, device="cuda", dtype=dt)
        y = F.conv2d(x, w, stride=st, padding=pd); dy = torch.randn_like(y)
        res["%%s_%%s_fwd" %% (mode, name)] = 1e3 * best(lambda: F.conv2d(x, w, stride=st, padding=pd))
        res["%%s_%%s_dgrad" %% (mode, name)] = 1e3 * best(lambda: torch.nn.grad.conv2d_input(x.shape, w, dy, stride=st, padding=pd))
        res["%%s_%%s_wgrad" %% (mode, name)] = 1e3 * best(lambda: torch.nn.grad.conv2d_weight(x, w.shape, dy, stride=st, padding=pd))
res["device"] = torch.cuda.get_device_name(0)
print(json.dumps(res))
]]):format(REPS, B, table.concat(tmodes, ", "), table.concat(shapes, ", "))
local ref = H.torch_cuda_reference("bench_conv_modes", script)
local tsums = {}
for _, r in ipairs(results) do
  local key = TORCH[r.mode] .. "_" .. r.key
  local t = ref[key]
  if t then tsums[r.mode] = (tsums[r.mode] or 0) + r.count * t end
  print(string.format('{"bench":"conv_modes","case":"%s","device":"%s","unit":"ms","netcl":%.4f%s}', r.case, tostring(dev),
    r.ms, t and string.format(',"torch":%.4f,"torch_case":"%s","torch_device":"%s","ratio":%.3f', t, key, ref.device,
      t / r.ms) or ""))
end
for _, mode in ipairs(MODES) do
  local t = tsums[mode]
  print(string.format('{"bench":"conv_modes","case":"%s_step_convolutions","device":"%s","unit":"ms","netcl":%.3f%s}',
    mode, tostring(dev), sums[mode], t and string.format(',"torch":%.3f,"ratio":%.3f', t, t / sums[mode]) or ""))
end

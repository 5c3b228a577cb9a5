-- relu's backward on the default device: the fused op nc.nn_ops.relu_backward(dy, y) against the
-- two passes the autograd rule ran before it (where(y > 0, dy, 0): a comparison, then a where), in
-- the same run, for y float32 and y bfloat16 (dy float32: the tape's gradient of a bfloat16
-- activation). N elements (16M; NETCL_BENCH_N overrides); best of 10 timed calls after a warm-up,
-- each ended by a device sync; GB/s counts the fused op's bytes (y read, dy read, dx written) for
-- both, so the ratio is the time saved. With python3 and torch, torch's threshold_backward on the
-- same shapes prints beside it (CUDA where the device is a GPU and torch sees one, else its CPU;
-- dy of y's dtype, as under torch.autocast); without them that line says it skipped. One JSON object per line.
local nc = require "netcl"
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/../lua/helpers.lua")

local dev = nc.default_device()
local N = tonumber(os.getenv("NETCL_BENCH_N") or "") or 16 * 1024 * 1024
local REPS = 10
local SIZE = {float32 = 4, bfloat16 = 2}

local dy = nc.randn({N}, {device = dev})
for _, ydt in ipairs({"float32", "bfloat16"}) do
  local y = nc.randn({N}, {device = dev}):relu():to(ydt)
  local bytes = (SIZE[ydt] + 8) * N
  local fused = H.best_time(dev, REPS, function() return nc.nn_ops.relu_backward(dy, y) end)
  local composed = H.best_time(dev, REPS, function() return nc.where(y:gt(0), dy, 0) end)
  print(string.format('{"bench":"relu_backward","device":"%s","n":%d,"y":"%s","fused_ms":%.3f,"fused_gbs":%.1f,' ..
    '"composed_ms":%.3f,"composed_gbs":%.1f,"speedup":%.2f}', dev.name, N, ydt, fused * 1e3, bytes / fused / 1e9,
    composed * 1e3, bytes / composed / 1e9, composed / fused))
end

-- PyTorch's threshold_backward on the same shapes, for reference.
local gpu = dev.is_gpu == true
local script = string.format([[
import json, sys, time
try:
    import torch
except ImportError:
    print(json.dumps({"bench": "relu_backward_torch", "skipped": "python3 has no torch"})); sys.exit(0)
dev = "cuda" if %s and torch.cuda.is_available() else "cpu"
sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
n = %d
dy = torch.randn(n, device=dev)
for ydt in ("float32", "bfloat16"):
    # under autocast, relu's output and its gradient are both bfloat16
    t = getattr(torch, ydt)
    y, g = torch.relu(torch.randn(n, device=dev)).to(t), dy.to(t)
    f = lambda: torch.ops.aten.threshold_backward(g, y, 0)
    f(); sync(); best = 1e9
    for _ in range(%d):
        t0 = time.perf_counter(); f(); sync(); best = min(best, time.perf_counter() - t0)
    print(json.dumps({"bench": "relu_backward_torch", "device": dev, "n": n, "y": ydt, "dy": ydt,
                      "ms": round(best * 1e3, 3), "gbs": round(3 * y.element_size() * n / best / 1e9, 1)}))
]], gpu and "True" or "False", N, REPS)
local f = io.popen("python3 - 2>&1 <<'EOF'\n" .. script .. "EOF\n")
if f then
  local out = f:read("a")
  f:close()
  if out:find('"bench"') then
    io.write(out)
  else
    print('{"bench":"relu_backward_torch","skipped":"python3 did not run: ' .. (out:gsub('[%c"\\]', " ")):sub(1, 120) .. '"}')
  end
end

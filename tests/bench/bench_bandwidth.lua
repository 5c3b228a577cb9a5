-- Memory-bound ops against PyTorch on the same device, in one run: add (a + b into out=), a full
-- sum, and softmax over the last dim of [rows, 1024], each at N floats (64M on a GPU, 16M on a
-- CPU; NETCL_BENCH_N overrides). Figures are effective bandwidth in GB/s, best of 10 timed calls
-- after a warm-up, each call ended by a device sync; the ratio is netcl's bandwidth over
-- PyTorch's (higher is better, 1 = as fast). PyTorch runs on CUDA when netcl's device is a GPU and
-- torch sees CUDA, on the CPU with the same thread count otherwise, and is skipped with a
-- message when python3-torch is missing. PyTorch's fp32 runs with TF32 off (no matmul here).
local nc = require "netcl"
-- The Python that has the reference (tests/lua/helpers.lua: NETCL_PYTHON, python3, /usr/bin/python3).
local PY = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/../lua/helpers.lua").python("torch") or "python3"

local dev = nc.default_device()
local N = tonumber(os.getenv("NETCL_BENCH_N") or "") or (dev.is_gpu and 64 * 1024 * 1024 or 16 * 1024 * 1024)
local COLS, REPS = 1024, 10
local ROWS = N // COLS
N = ROWS * COLS

local function best_s(fn)
  fn()
  dev:sync()
  local best = math.huge
  for _ = 1, REPS do
    local t0 = nc.clock()
    fn()
    dev:sync()
    best = math.min(best, nc.clock() - t0)
  end
  return best
end

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

local function torch_reference()
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
print(dev, best(lambda: torch.add(a, b, out=c)), best(lambda: a.sum()), best(lambda: torch.softmax(m, 1)))
]]):format(dev.is_gpu and "True" or "False", dev.compute_units, N, ROWS, COLS, REPS)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(script)
  f:close()
  local p = io.popen(PY .. " '" .. path .. "' 2>/dev/null")
  local line = p and p:read("l")
  if p then p:close() end
  os.remove(path)
  if not line then return nil end
  local tdev, add, sum, softmax = line:match("^(%S+) (%S+) (%S+) (%S+)$")
  if not tdev then return nil end
  return {device = tdev, add = tonumber(add), sum = tonumber(sum), softmax = tonumber(softmax)}
end

local ref = torch_reference()
if not ref then io.stderr:write("bench_bandwidth: python3-torch not found; no reference\n") end
for _, case in ipairs(cases) do
  local gbs = case.bytes / netcl[case.name] / 1e9
  local line = string.format('{"bench":"bandwidth","case":"%s","n":%d,"device":"%s","netcl_gbs":%.1f', case.name,
    N, dev.spec, gbs)
  if ref then
    local tgbs = case.bytes / ref[case.name] / 1e9
    line = line .. string.format(',"torch_device":"%s","torch_gbs":%.1f,"ratio":%.3f', ref.device, tgbs, gbs / tgbs)
  end
  print(line .. "}")
end

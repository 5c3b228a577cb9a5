-- softmax / log_softmax bandwidth on netcl's default device (NETCL_DEVICE picks another), with an
-- optional PyTorch reference on the same GPU (skipped when python3 has no torch or no CUDA).
--   NETCL_DEVICE=opencl:1:0 netcl-lua tests/bench/softmax_shapes.lua [RxC ...]
-- Per shape (float32, along dim 2): GB/s counted as 8 bytes per element (one read, one write),
-- best of 10 timed calls after a warm-up, each call ended by a device sync; then the max abs
-- difference against the CPU backend on the first rows. Default shapes: the four of the task
-- (65536x1024, 262144x256, 16384x4096, 131072x512) and two of short rows (2097152x32,
-- 1048576x64), which the warp kernel now also takes (before: one row per work-item below 64).
-- "path" says which program the first softmax took: "warp" when it built or loaded a program
-- beyond reduce.cl (kernels/softmax_warp.cl), "reduce.cl" otherwise (a non-NVIDIA device, or a
-- PTX build the driver refused).
local nc = require "netcl"
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/../lua/helpers.lua")

local dev = nc.default_device()
local cpu = nc.device("cpu")
local REPS, CHECK_ROWS = 10, 64

local shapes = {}
for _, a in ipairs(arg) do
  local r, c = a:match("^(%d+)x(%d+)$")
  assert(r, "shapes are RxC, e.g. 65536x1024: " .. a)
  shapes[#shapes + 1] = {tonumber(r), tonumber(c)}
end
if #shapes == 0 then
  shapes = {{65536, 1024}, {262144, 256}, {16384, 4096}, {131072, 512}, {2097152, 32}, {1048576, 64}}
end

print(("device: %s (%s), driver %s"):format(dev.name, dev.spec, dev.driver_version or "?"))

-- which program softmax takes: count programs before and after the first call (reduce.cl built
-- first, by a sum)
local function path_of()
  if dev.kind ~= "opencl" then return "cpu backend" end
  local x = nc.randn({4, 1024}, {device = dev})
  x:sum():item()
  local a = nc.memory_stats(dev)
  x:softmax(2):sum():item()
  local b = nc.memory_stats(dev)
  return (b.programs_built + b.programs_loaded > a.programs_built + a.programs_loaded) and "warp" or "reduce.cl"
end
print("path (rows <= 1024): " .. path_of())

local function torch_reference()
  local PY = H.python("torch")
  if not PY or not dev.is_gpu then return nil end
  local items = {}
  for _, s in ipairs(shapes) do items[#items + 1] = ("(%d, %d)"):format(s[1], s[2]) end
  local script = ([[
import time, torch
if not torch.cuda.is_available(): raise SystemExit(0)
def best(fn):
    fn(); torch.cuda.synchronize()
    r = float("inf")
    for _ in range(%d):
        t0 = time.perf_counter(); fn(); torch.cuda.synchronize()
        r = min(r, time.perf_counter() - t0)
    return r
for R, C in [%s]:
    x = torch.randn(R, C, device="cuda")
    print(R, C, best(lambda: torch.softmax(x, 1)), best(lambda: torch.log_softmax(x, 1)))
    del x
]]):format(REPS, table.concat(items, ", "))
  local out = {}
  for line in H.python_output(PY, script):gmatch("[^\n]+") do
    local r, c, s, l = line:match("^(%d+) (%d+) (%S+) (%S+)$")
    if r then out[r .. "x" .. c] = {tonumber(s), tonumber(l)} end
  end
  return next(out) and out or nil
end

local function max_diff(got, want)
  return (got:to(cpu) - want):abs():max():item()
end

local results = {}
for _, s in ipairs(shapes) do
  local R, C = s[1], s[2]
  local x = nc.randn({R, C}, {device = dev}) * 3
  local gb = 8 * R * C * 1e-9
  local ts = H.best_time(dev, REPS, function() return x:softmax(2) end)
  local tl = H.best_time(dev, REPS, function() return x:log_softmax(2) end)
  -- the device's result on the whole tensor, its first rows against the CPU backend
  local n = math.min(R, CHECK_ROWS)
  local head = x:narrow(1, 1, n):to(cpu)
  local ds = max_diff(x:softmax(2):narrow(1, 1, n), head:softmax(2))
  local dl = max_diff(x:log_softmax(2):narrow(1, 1, n), head:log_softmax(2))
  results[#results + 1] = {key = R .. "x" .. C, s = gb / ts, l = gb / tl, ds = ds, dl = dl}
  x = nil
  collectgarbage()
end

local ref = torch_reference()
if not ref then print("(no PyTorch reference: python3 without torch or CUDA)") end
print(("%-14s %12s %12s %14s %14s %10s %10s"):format("shape", "softmax", "log_softmax", "torch sm", "torch lsm",
                                                     "diff sm", "diff lsm"))
for _, r in ipairs(results) do
  local t = ref and ref[r.key]
  local R, C = r.key:match("(%d+)x(%d+)")
  local gb = 8 * tonumber(R) * tonumber(C) * 1e-9
  print(("%-14s %7.0f GB/s %7.0f GB/s %14s %14s %10.2e %10.2e"):format(
    r.key, r.s, r.l, t and ("%.0f (%.2fx)"):format(gb / t[1], r.s / (gb / t[1])) or "-",
    t and ("%.0f (%.2fx)"):format(gb / t[2], r.l / (gb / t[2])) or "-", r.ds, r.dl))
end

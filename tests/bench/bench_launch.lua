-- The fixed cost of one tiny op through the Lua binding: a 64-float add into an existing tensor
-- (`nc.add(a, b, {out = c})`) and into a new one (`nc.add(a, b)`), each timed per op over
-- 10,000 launches ended by one sync, best of 5 rounds. The reference is PyTorch doing the same
-- from Python in the same run (`torch.add(a, b, out=c)` and `torch.add(a, b)`), on CUDA when
-- available (against netcl's default device, the first GPU) and on the CPU otherwise; the
-- ratio is netcl's time over PyTorch's (lower is better, 1 = as fast). Without python3-torch
-- the reference is skipped with a message.
local nc = require "netcl"
-- The Python that has the reference (tests/lua/helpers.lua: NETCL_PYTHON, python3, /usr/bin/python3).
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/../lua/helpers.lua")
local PY = H.python("torch") or "python3"

local N, LAUNCHES, ROUNDS = 64, 10000, 5

local clock = nc.clock

local function best_us(fn, dev)
  local best = math.huge
  fn() -- warm-up: builds the kernels, fills the pools
  dev:sync()
  for _ = 1, ROUNDS do
    local t0 = clock()
    for _ = 1, LAUNCHES do fn() end
    dev:sync()
    best = math.min(best, (clock() - t0) / LAUNCHES * 1e6)
  end
  return best
end

local function torch_reference(cuda)
  local script = ([[
import time, torch
dev = "cuda" if %s and torch.cuda.is_available() else "cpu"
a = torch.rand(%d, device=dev); b = torch.rand(%d, device=dev); c = torch.empty(%d, device=dev)
def best(fn):
    fn()
    if dev == "cuda": torch.cuda.synchronize()
    r = float("inf")
    for _ in range(%d):
        t0 = time.perf_counter()
        for _ in range(%d): fn()
        if dev == "cuda": torch.cuda.synchronize()
        r = min(r, (time.perf_counter() - t0) / %d * 1e6)
    return r
torch.set_num_threads(1)
print(dev, best(lambda: torch.add(a, b, out=c)), best(lambda: torch.add(a, b)))
]]):format(cuda and "True" or "False", N, N, N, ROUNDS, LAUNCHES, LAUNCHES)
  local dev, into, new = H.python_output(PY, script):match("^(%S+) (%S+) (%S+)\n")
  if not dev then return nil end
  return {device = dev, into = tonumber(into), new = tonumber(new)}
end

local dev = nc.default_device()
local a, b = nc.rand({N}, {device = dev}), nc.rand({N}, {device = dev})
local c = nc.empty({N}, {device = dev})
local into = best_us(function() nc.add(a, b, {out = c}) end, dev)
local new = best_us(function() return nc.add(a, b) end, dev)
local ref = torch_reference(dev.is_gpu)
if not ref then io.stderr:write("bench_launch: python3-torch not found; no reference\n") end
for _, case in ipairs({{"add_out", into, ref and ref.into}, {"add_new", new, ref and ref.new}}) do
  local name, us, ref_us = case[1], case[2], case[3]
  print(string.format('{"bench":"launch","case":"%s","n":%d,"device":"%s","netcl_us":%.2f%s}', name, N,
    tostring(dev), us,
    ref_us and string.format(',"torch_device":"%s","torch_us":%.2f,"ratio":%.3f', ref.device, ref_us, us / ref_us)
      or ""))
end

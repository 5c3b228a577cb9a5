-- The CPU backend against PyTorch CPU with the same thread count, interleaved: in each of ROUNDS
-- rounds (NETCL_BENCH_ROUNDS, default 5) every workload runs in netcl, then in PyTorch (a python3
-- process per workload and round), so a busy machine hits both alike. Prints one JSON line per
-- workload and round, then the median over rounds of each side and the ratio of medians
-- (PyTorch's time over netcl's: above 1, netcl is faster). Without python3-torch the PyTorch
-- side is skipped with a message.
--   loop     300 x (matmul 256x512 @ 512x256, relu, * 2, sum): threading between BLAS and ops
--   softmax  softmax over the rows of 4096 x 1024, best of 5
--   sum      full sum of 16M floats, best of 5
--   sgemm N  N x N @ N x N for N = 512, 1024, 2048, best of 3
local nc = require "netcl"
-- The Python that has the reference (tests/lua/helpers.lua: NETCL_PYTHON, python3, /usr/bin/python3).
local PY = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/../lua/helpers.lua").python("torch") or "python3"

local ROUNDS = tonumber(os.getenv("NETCL_BENCH_ROUNDS") or "") or 5
local THREADS = nc.get_num_threads()
local cpu = nc.device("cpu")

local function best_of(reps, fn)
  fn()
  local best = math.huge
  for _ = 1, reps do
    local t0 = nc.clock()
    fn()
    best = math.min(best, nc.clock() - t0)
  end
  return best
end

local function randn(shape) return nc.randn(shape, {device = cpu}) end

local workloads = {
  {name = "loop", netcl = function()
    local a, b = randn({256, 512}), randn({512, 256})
    return best_of(1, function()
      for _ = 1, 300 do local c = a:matmul(b):relu(); c = (c * 2):sum() end
    end)
  end, torch = [[
a, b = torch.randn(256, 512), torch.randn(512, 256)
def f():
    for _ in range(300):
        c = torch.relu(a @ b); c = (c * 2).sum()
print(best_of(1, f))]]},
  {name = "softmax", netcl = function()
    local x = randn({4096, 1024})
    return best_of(5, function() return x:softmax(2) end)
  end, torch = [[
x = torch.randn(4096, 1024)
print(best_of(5, lambda: torch.softmax(x, 1)))]]},
  {name = "sum", netcl = function()
    local x = randn({16 * 1024 * 1024})
    return best_of(5, function() return x:sum() end)
  end, torch = [[
x = torch.randn(16 * 1024 * 1024)
print(best_of(5, lambda: x.sum()))]]},
}
for _, n in ipairs({512, 1024, 2048}) do
  workloads[#workloads + 1] = {name = "sgemm" .. n, netcl = function()
    local a, b = randn({n, n}), randn({n, n})
    return best_of(3, function() return a:matmul(b) end)
  end, torch = ([[
a, b = torch.randn(%d, %d), torch.randn(%d, %d)
print(best_of(3, lambda: a @ b))]]):format(n, n, n, n)}
end

local PRELUDE = ([[
import time, torch
torch.set_num_threads(%d)
def best_of(reps, fn):
    fn()
    r = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter(); fn(); r = min(r, time.perf_counter() - t0)
    return r
]]):format(THREADS)

local have_torch = os.execute(PY .. " -c 'import torch' >/dev/null 2>&1")
if not have_torch then io.stderr:write("bench_cpu: python3-torch not found; the PyTorch side is skipped\n") end

local function torch_time(body)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(PRELUDE, body, "\n")
  f:close()
  local p = io.popen(PY .. " '" .. path .. "' 2>/dev/null")
  local line = p and p:read("l")
  if p then p:close() end
  os.remove(path)
  return line and tonumber(line)
end

local function median(t)
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  local n = #s
  if n == 0 then return nil end
  return n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
end

local times = {}
for _, w in ipairs(workloads) do times[w.name] = {netcl = {}, torch = {}} end
for round = 1, ROUNDS do
  for _, w in ipairs(workloads) do
    local tn = w.netcl()
    collectgarbage()
    local tt = have_torch and torch_time(w.torch) or nil
    table.insert(times[w.name].netcl, tn)
    if tt then table.insert(times[w.name].torch, tt) end
    print(string.format('{"bench":"cpu","case":"%s","round":%d,"threads":%d,"netcl_s":%.5f%s}', w.name, round,
      THREADS, tn, tt and string.format(',"torch_s":%.5f,"ratio":%.3f', tt, tt / tn) or ""))
    io.stdout:flush()
  end
end
for _, w in ipairs(workloads) do
  local mn, mt = median(times[w.name].netcl), median(times[w.name].torch)
  print(string.format('{"bench":"cpu","case":"%s","median_of":%d,"netcl_s":%.5f%s}', w.name, ROUNDS, mn,
    mt and string.format(',"torch_s":%.5f,"ratio":%.3f', mt, mt / mn) or ""))
end

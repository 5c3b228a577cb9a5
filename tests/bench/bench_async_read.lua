-- A training loop's metric read: STEPS steps of a small compute (a chain of N x N matmuls and
-- elementwise ops, then a sum to a scalar "loss") each followed by a read of that scalar to the
-- host, timed two ways on the default device:
-- * blocking: loss:item() every step, so the host waits for the step before queueing the next;
-- * non_blocking: loss:to("cpu", {non_blocking = true}) every step, its value consumed (item())
--   one step later, after the next step is queued, so the device always has work queued.
-- Both sum the same values (checked). Best of ROUNDS runs each; the ratio is blocking time over
-- non-blocking time (higher is better; about 1 on the CPU backend, whose ops and reads complete
-- before they return). NETCL_BENCH_N (default 256) and NETCL_BENCH_STEPS (default 200) override.
local nc = require "netcl"

local dev = nc.default_device()
local N = tonumber(os.getenv("NETCL_BENCH_N") or "") or 256
local STEPS = tonumber(os.getenv("NETCL_BENCH_STEPS") or "") or 200
local ROUNDS = 3

nc.manual_seed(1)
local a = nc.randn({N, N}, {device = dev}):mul(1 / math.sqrt(N))
local b = nc.randn({N, N}, {device = dev}):mul(1 / math.sqrt(N))

local function step(i)
  local x = a:matmul(b)
  x = nc.relu(x:matmul(b) + i * 1e-3)
  return x:mul(x):mean()
end

local function blocking()
  local total = 0
  for i = 1, STEPS do total = total + step(i):item() end
  return total
end

local function non_blocking()
  local total, pending = 0, nil
  for i = 1, STEPS do
    local loss = step(i)
    if pending then total = total + pending:item() end
    pending = loss:to("cpu", {non_blocking = true})
  end
  return total + pending:item()
end

local function best(fn)
  local want = fn() -- warm-up: kernels built, pools filled
  nc.synchronize(dev)
  local t = math.huge
  for _ = 1, ROUNDS do
    local t0 = nc.clock()
    local got = fn()
    nc.synchronize(dev)
    t = math.min(t, nc.clock() - t0)
    assert(math.abs(got - want) <= 1e-6 * math.max(1, math.abs(want)), "the loop's sum changed between runs")
  end
  return t, want
end

local reads0 = nc.memory_stats(dev).async_reads
local tb, sb = best(blocking)
local tn, sn = best(non_blocking)
assert(math.abs(sb - sn) <= 1e-4 * math.max(1, math.abs(sb)),
  string.format("blocking and non-blocking sums differ: %.9g vs %.9g", sb, sn))
print(string.format(
  '{"bench": "async_read", "device": "%s", "n": %d, "steps": %d, "blocking_ms_per_step": %.4f, ' ..
  '"non_blocking_ms_per_step": %.4f, "ratio": %.3f, "async_reads": %d}',
  dev.spec, N, STEPS, tb / STEPS * 1e3, tn / STEPS * 1e3, tb / tn, nc.memory_stats(dev).async_reads - reads0))

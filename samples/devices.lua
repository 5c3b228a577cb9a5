-- Lists every device and runs tensor ops on each: creation, random draws, views, strided
-- copies, dtype conversion and a transfer back to the CPU, checked against the CPU backend.
local nc = require "netcl"

local cpu = nc.device("cpu")
print(string.format("netcl %s: %d device(s)", nc.version, #nc.devices()))
for _, dev in ipairs(nc.devices()) do
  print(string.format("\n== %s  %s (%s)  %d compute units, %.1f GiB, fp64 %s", dev.spec, dev.name, dev.vendor,
                      dev.compute_units, dev.memory / 2 ^ 30, dev.fp64 and "yes" or "no"))
  local t0 = nc.clock()
  nc.manual_seed(2024)
  local x = nc.randn({4, 6}, {device = dev})
  local y = x:transpose(1, 2):narrow(1, 2, 3):contiguous()
  local z = nc.arange(12, {device = dev, dtype = "int64"}):view({3, 4})
  print("randn [4,6], transposed and narrowed to [3,4]:")
  print(y)
  print("arange as int64, viewed [3,4]:")
  print(z)
  nc.manual_seed(2024)
  local ref = nc.randn({4, 6}, {device = cpu}):transpose(1, 2):narrow(1, 2, 3):contiguous()
  local a, b, worst = y:to(cpu):tolist(), ref:tolist(), 0
  for i = 1, #a do
    for j = 1, #a[i] do worst = math.max(worst, math.abs(a[i][j] - b[i][j])) end
  end
  dev:sync()
  print(string.format("max difference from the CPU backend: %.2e   (%.1f ms)", worst, (nc.clock() - t0) * 1e3))
  local st = nc.memory_stats(dev)
  print(string.format("pool: %d B in use, %d B cached, %d hits, %d misses; programs built %d, loaded %d",
                      st.in_use, st.cached, st.hits, st.misses, st.programs_built, st.programs_loaded))
end

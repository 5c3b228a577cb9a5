-- Conversions between float32 and the storage dtypes (bfloat16, float16) on the default device,
-- against a same-dtype clone of the same tensor measured in the same run (a pure copy: the
-- bandwidth the conversion could at best reach). N elements (16M; NETCL_BENCH_N overrides);
-- figures are effective bandwidth in GB/s (bytes read + bytes written), best of 10 timed calls
-- after a warm-up, each ended by a device sync; ratio = conversion / clone of the source dtype
-- (1 = as fast as copying). One JSON object per line.
local nc = require "netcl"
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/../lua/helpers.lua")

local dev = nc.default_device()
local N = tonumber(os.getenv("NETCL_BENCH_N") or "") or 16 * 1024 * 1024
local REPS = 10

local function best_s(fn) return H.best_time(dev, REPS, fn) end

local SIZE = {float32 = 4, bfloat16 = 2, float16 = 2}
local x32 = nc.randn({N}, {device = dev})
local src = {float32 = x32, bfloat16 = x32:to("bfloat16"), float16 = x32:to("float16")}
local clone_gbs = {}
for dt, t in pairs(src) do
  clone_gbs[dt] = 2 * SIZE[dt] * N / best_s(function() return t:clone() end) / 1e9
end

for _, case in ipairs({{"float32", "bfloat16"}, {"bfloat16", "float32"}, {"float32", "float16"},
                       {"float16", "float32"}, {"bfloat16", "float16"}}) do
  local from, to = case[1], case[2]
  local t = src[from]
  local gbs = (SIZE[from] + SIZE[to]) * N / best_s(function() return t:to(to) end) / 1e9
  print(string.format('{"bench":"convert","device":"%s","n":%d,"from":"%s","to":"%s","gbs":%.2f,' ..
    '"clone_%s_gbs":%.2f,"ratio":%.3f}', dev.name, N, from, to, gbs, from, clone_gbs[from], gbs / clone_gbs[from]))
end

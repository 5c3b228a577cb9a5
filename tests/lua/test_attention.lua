-- rope and flash_attention (op-table ops) against their naive formulas: rope against the pairwise rotation
-- computed in Lua, flash attention's output and gradients against softmax(scale q k^T) v composed of ops
-- (causal and not, grouped-query, odd T, more keys than queries, head_dim 64 and 128), each device's
-- forward and backward against the CPU backend, and the errors.
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local H = require "helpers"

local dev = H.device()
local cpu = nc.device("cpu")

local function I64(vals, d) return nc.tensor(vals, {dtype = "int64", device = d or dev}) end

TestRope = {}

function TestRope:test_rotates_pairs_like_the_formula()
  nc.manual_seed(1)
  local theta, dh = 500, 6
  local x = nc.randn({2, 3, dh}, {dtype = "float64", device = cpu})
  local pos = {0, 7, -3}
  local y = nc.rope(x:to(dev), I64(pos), {theta = theta}):to(cpu):tolist()
  local xv = x:tolist()
  for b = 1, 2 do
    for t = 1, 3 do
      for p = 0, dh / 2 - 1 do
        local ang = pos[t] * theta ^ (-2 * p / dh)
        local x0, x1 = xv[b][t][2 * p + 1], xv[b][t][2 * p + 2]
        lu.assertAlmostEquals(y[b][t][2 * p + 1], x0 * math.cos(ang) - x1 * math.sin(ang), 1e-12)
        lu.assertAlmostEquals(y[b][t][2 * p + 2], x0 * math.sin(ang) + x1 * math.cos(ang), 1e-12)
      end
    end
  end
  -- inverse undoes it; int32 positions are the same positions
  local back = nc.rope(nc.rope(x:to(dev), I64(pos), {theta = theta}), I64(pos), {theta = theta, inverse = true})
  H.assert_close(back:to(cpu), x, 1e-12, "inverse")
  H.assert_close(nc.rope(x:to(dev), nc.tensor(pos, {dtype = "int32", device = dev})):to(cpu),
                 nc.rope(x:to(dev), I64(pos)):to(cpu), 0, "int32 positions")
end

function TestRope:test_errors()
  local x = nc.randn({2, 3, 4}, {device = dev})
  H.assert_error(function() nc.rope(x, I64({0, 1})) end, "positions must be [3]")
  H.assert_error(function() nc.rope(nc.randn({3, 5}, {device = dev}), I64({0, 1, 2})) end, "must be even")
  H.assert_error(function() nc.rope(x, I64({0, 1, 2}), {theta = -1}) end, "theta")
  H.assert_error(function() nc.rope(x, nc.tensor({0, 1, 2}, {device = dev})) end, "int64 or int32")
  H.assert_error(function() nc.rope(x, I64({0, 1, 2}), {thta = 5}) end, "thta")
end

-- softmax(scale q k^T + mask) v with k and v repeated over the query heads of their group.
local function naive(q, k, v, causal, scale)
  local b, h, tq, d = q.shape[1], q.shape[2], q.shape[3], q.shape[4]
  local hkv, tk = k.shape[2], k.shape[3]
  local function rep(t) return t:unsqueeze(3):expand({b, hkv, h // hkv, tk, d}):reshape({b, h, tk, d}) end
  local s = q:matmul(rep(k):transpose(3, 4)) * (scale or 1 / math.sqrt(d))
  if causal then
    local mask = {}
    for i = 1, tq do
      for j = 1, tk do mask[#mask + 1] = (j > i + tk - tq) and -math.huge or 0 end
    end
    s = s + nc.tensor(mask, {shape = {tq, tk}, dtype = q.dtype, device = dev})
  end
  return s:softmax(4):matmul(rep(v))
end

-- Output and gradients of q, k, v of f against a random weighting of the output.
local function run(f, q, k, v, w)
  local pq, pk, pv = ag.param(q), ag.param(k), ag.param(v)
  local tape = ag.Tape()
  local out = tape:record(function() return f(pq, pk, pv) end)
  local loss = tape:record(function() return (out * w):sum() end)
  tape:backward(loss)
  return out.value, pq.grad, pk.grad, pv.grad
end

local CASES = { -- b, h, hkv, tq, tk, d, causal, scale
  {2, 2, 2, 9, 9, 16, true}, {1, 4, 2, 7, 7, 64, false}, {1, 4, 1, 5, 13, 64, true},
  {2, 2, 1, 33, 33, 128, true, 0.2}, {1, 2, 2, 1, 70, 128, false}, {1, 1, 1, 65, 65, 256, true},
  {1, 4, 2, 100, 130, 64, true}, -- several query and key blocks of the tiled OpenCL kernels
  {2, 4, 2, 67, 67, 40, false}, -- a head dim the tensor-core kernels pad
}

TestFlashAttention = {}

function TestFlashAttention:test_matches_naive_attention_and_its_gradients()
  for n, c in ipairs(CASES) do
    local b, h, hkv, tq, tk, d, causal, scale = table.unpack(c)
    nc.manual_seed(100 + n)
    local o = {dtype = "float64", device = dev}
    if not dev.fp64 then o.dtype = "float32" end
    local q, k, v = nc.randn({b, h, tq, d}, o), nc.randn({b, hkv, tk, d}, o), nc.randn({b, hkv, tk, d}, o)
    local w = nc.randn({b, h, tq, d}, o)
    local got = {run(function(a, bb, cc) return ag.flash_attention(a, bb, cc, {causal = causal, scale = scale}) end, q, k, v, w)}
    local want = {run(function(a, bb, cc) return naive(a, bb, cc, causal, scale) end, q, k, v, w)}
    local tol = o.dtype == "float64" and 1e-10 or 1e-4
    for i, what in ipairs({"out", "dq", "dk", "dv"}) do
      H.assert_close(got[i]:to(cpu), want[i]:to(cpu), tol, string.format("case %d %s", n, what))
    end
  end
end

function TestFlashAttention:test_device_matches_the_cpu_backend()
  if dev.kind == "cpu" then lu.success() end
  for n, c in ipairs(CASES) do
    local b, h, hkv, tq, tk, d, causal, scale = table.unpack(c)
    nc.manual_seed(200 + n)
    local q, k, v = nc.randn({b, h, tq, d}, {device = cpu}), nc.randn({b, hkv, tk, d}, {device = cpu}),
                    nc.randn({b, hkv, tk, d}, {device = cpu})
    local w = nc.randn({b, h, tq, d}, {device = cpu})
    local f = function(a, bb, cc) return ag.flash_attention(a, bb, cc, {causal = causal, scale = scale}) end
    local got = {run(f, q:to(dev), k:to(dev), v:to(dev), w:to(dev))}
    local want = {run(f, q, k, v, w)}
    for i, what in ipairs({"out", "dq", "dk", "dv"}) do
      H.assert_close(got[i]:to(cpu), want[i], 2e-4, string.format("case %d %s", n, what))
    end
  end
end

-- The error of the device's float32 kernels against float64 on the CPU under each matmul
-- precision: "highest" within float32's reach (on NVIDIA GPUs the tensor-core kernels split each
-- product in three tf32 products), "high" within tf32's (one tf32 product).
function TestFlashAttention:test_device_error_bounds_of_each_precision()
  if dev.kind == "cpu" then lu.success() end
  local before = nc.get_matmul_precision()
  local ok, err = pcall(function()
    for n, c in ipairs({{1, 4, 2, 100, 130, 64, true}, {2, 2, 1, 70, 70, 40, false}, {1, 2, 2, 9, 9, 16, true}}) do
      local b, h, hkv, tq, tk, d, causal = table.unpack(c)
      nc.manual_seed(300 + n)
      local q, k, v = nc.randn({b, h, tq, d}, {device = cpu}), nc.randn({b, hkv, tk, d}, {device = cpu}),
                      nc.randn({b, hkv, tk, d}, {device = cpu})
      local w = nc.randn({b, h, tq, d}, {device = cpu})
      local f = function(a, bb, cc) return ag.flash_attention(a, bb, cc, {causal = causal}) end
      local f64 = function(t) return t:to("float64") end
      local want = {run(f, f64(q), f64(k), f64(v), f64(w))}
      for _, mode in ipairs({{"highest", 2e-5}, {"high", 3e-2}}) do
        nc.set_matmul_precision(mode[1])
        local got = {run(f, q:to(dev), k:to(dev), v:to(dev), w:to(dev))}
        for i, what in ipairs({"out", "dq", "dk", "dv"}) do
          H.assert_close(got[i]:to(cpu):to("float64"), want[i], mode[2], string.format("case %d %s %s", n, mode[1], what))
        end
      end
    end
  end)
  nc.set_matmul_precision(before)
  if not ok then error(err, 0) end
end

function TestFlashAttention:test_errors()
  local function r(s) return nc.randn(s, {device = dev}) end
  local q, k = r({1, 4, 3, 8}), r({1, 2, 3, 8})
  H.assert_error(function() nc.flash_attention(q, r({1, 3, 3, 8}), r({1, 3, 3, 8})) end, "must divide")
  H.assert_error(function() nc.flash_attention(q, k, r({1, 2, 4, 8})) end, "same shape")
  H.assert_error(function() nc.flash_attention(r({1, 1, 3, 300}), r({1, 1, 3, 300}), r({1, 1, 3, 300})) end,
                 "over the supported 256")
  H.assert_error(function() nc.flash_attention(q, r({1, 2, 2, 8}), r({1, 2, 2, 8})) end, "at least as many keys")
  H.assert_error(function() nc.flash_attention(r({4, 3, 8}), k, k) end, "4 dims")
  H.assert_error(function() nc.flash_attention(q, k, k, {casual = true}) end, "casual")
  H.assert_error(function() nc.flash_attention(q, k:to("float64"), k:to("float64")) end, "float64")
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

-- The GPU access patterns of the reductions and softmax (16-byte loads with an unaligned head and
-- tail, several rows per work-group), which PoCL's CPU device does not pick by itself: ctest runs
-- the opencl variant with NETCL_CL_PATTERN=gpu, and again with NETCL_SHFL_EMULATE=1 as well, which
-- sends softmax's contiguous float32 rows of up to 1024 to the warp-shuffle kernels that NVIDIA
-- GPUs take (kernels/softmax_warp.cl, shuffles emulated through local memory). Each result is
-- compared with the CPU backend in float64 (an independent implementation); rows long enough
-- that every item takes several vectors.
local lu = require "luaunit"
local nc = require "netcl"
local H = require "helpers"

local dev = H.device()
local cpu = nc.device("cpu")

local function max_err(a, b)
  local d = (a:to(cpu):to("float64") - b):abs():max():item()
  return d / (b:abs():max():item() + 1)
end

TestGpuPatterns = {}

function TestGpuPatterns:test_sum_and_mean()
  nc.manual_seed(11)
  -- offsets 0..3 in elements: every alignment of the vector body, odd lengths for the tail
  local base = nc.randn({5, 70001}, {device = dev})
  for off = 1, 4 do
    local x = base:narrow(2, off, 70001 - 4)
    local ref = x:to(cpu):to("float64")
    lu.assertTrue(max_err(x:sum(2), ref:sum(2)) < 1e-5, "sum, offset " .. off)
    lu.assertTrue(max_err(x:mean(2), ref:mean(2)) < 1e-6, "mean, offset " .. off)
  end
  local flat = base:view({5 * 70001}):narrow(1, 3, 350000)
  lu.assertTrue(max_err(flat:sum(), flat:to(cpu):to("float64"):sum()) < 1e-5, "full sum")
  local d = base:to("float64")
  if dev.fp64 then lu.assertTrue(max_err(d:sum(2), d:to(cpu):sum(2)) < 1e-12, "float64 sum") end
  -- short rows keep their path; a non-contiguous input the strided one
  local t = base:narrow(2, 1, 40):transpose(1, 2)
  lu.assertTrue(max_err(t:sum(1), t:to(cpu):to("float64"):sum(1)) < 1e-5, "strided sum")
end

function TestGpuPatterns:test_softmax()
  nc.manual_seed(12)
  -- rows kept in registers (up to 32 per item: 65, 1024, 5000), rows past that (9000: the
  -- online pass), short rows (7), and a strided input
  for _, shape in ipairs({{3, 5000}, {37, 65}, {1000, 7}, {9, 1024}, {2, 9000}}) do
    local x = nc.randn(shape, {device = dev}) * 4
    local ref = x:to(cpu):to("float64")
    lu.assertTrue(max_err(x:softmax(2), ref:softmax(2)) < 1e-6, "softmax " .. shape[2])
    lu.assertTrue(max_err(x:log_softmax(2), ref:log_softmax(2)) < 1e-5, "log_softmax " .. shape[2])
  end
  local t = nc.randn({300, 70}, {device = dev}):transpose(1, 2)
  lu.assertTrue(max_err(t:softmax(2), t:to(cpu):to("float64"):softmax(2)) < 1e-6, "strided softmax")
  -- contiguous rows at an offset that is not a multiple of 4 (scalar loads, not 4-vectors)
  local o = nc.randn({4099}, {device = dev}):narrow(1, 2, 4096):view({4, 1024})
  lu.assertTrue(max_err(o:softmax(2), o:to(cpu):to("float64"):softmax(2)) < 1e-6, "offset softmax")
  lu.assertTrue(max_err(o:log_softmax(2), o:to(cpu):to("float64"):log_softmax(2)) < 1e-5, "offset log_softmax")
  -- masked positions (-inf) add nothing; a row of -inf only, and a row with NaN, give NaN as on the CPU
  local rows = {}
  for i = 1, 4 do
    rows[i] = {}
    for j = 1, 300 do rows[i][j] = (j % 3 == 0) and -math.huge or (i + j) / 50 end
  end
  for j = 1, 300 do rows[3][j] = -math.huge end
  rows[4][17] = 0 / 0
  local m = nc.tensor(rows, {device = dev})
  local got, want = m:softmax(2):to(cpu):tolist(), m:to(cpu):softmax(2):tolist()
  for i = 1, 4 do
    for j = 1, 300 do
      local g, w = got[i][j], want[i][j]
      if w ~= w then lu.assertTrue(g ~= g, string.format("[%d][%d] should be NaN", i, j))
      else lu.assertTrue(math.abs(g - w) < 1e-6, string.format("[%d][%d]: %g vs %g", i, j, g, w)) end
    end
  end
end

-- Every kernel of softmax_warp.cl (1, 2, 4 ... 32 elements per work-item; rows of at most 32 share
-- a warp; the 16-byte kernels for lengths 65 to 1024 that are multiples of 4), full and partial rows, more rows than the grid (each group takes several turns), and
-- the lengths around them that reduce.cl keeps (1025, 4096); then extreme values.
function TestGpuPatterns:test_softmax_rows_of_every_length()
  nc.manual_seed(13)
  if os.getenv("NETCL_SHFL_EMULATE") == "1" and dev.kind == "opencl" then
    -- A fresh process's first softmax takes one program more than reduce.cl (built by the sum):
    -- the warp program, whose build failing falls back to reduce.cl silently, as it must on a
    -- driver that refuses the PTX (NETCL_FAULT_BUILD breaks the build): no error, same values.
    local function first_softmax(env)
      local p = io.popen(string.format("%s %s -e %q 2>/dev/null", env, H.netcl_lua(), [[
        local nc = require "netcl"
        local d = nc.device(os.getenv("NETCL_TEST_DEVICE"))
        local x = nc.randn({2, 40}, {device = d})
        x:sum()
        local a = nc.memory_stats(d)
        local y = x:softmax(2)
        local b = nc.memory_stats(d)
        local err = (y:to("cpu") - x:to("cpu"):softmax(2)):abs():max():item()
        io.write(b.programs_built + b.programs_loaded - a.programs_built - a.programs_loaded, " ", tostring(err < 1e-6))]]))
      local out = p:read("a")
      p:close()
      return out
    end
    lu.assertEquals(first_softmax(""), "1 true", "programs the first softmax took, and its result")
    lu.assertEquals(first_softmax("NETCL_FAULT_BUILD=softmax_warp"), "0 true", "the same when the warp build fails")
  end
  for _, shape in ipairs({{5, 1}, {300, 2}, {37, 7}, {9, 31}, {64, 32}, {20000, 7}, {33, 33}, {5000, 100},
                          {17, 255}, {8, 256}, {3, 257}, {11, 1000}, {2, 1023}, {9, 1024}, {3, 1025}, {2, 4096}}) do
    local x = nc.randn(shape, {device = dev}) * 4
    local ref = x:to(cpu):to("float64")
    local what = shape[1] .. "x" .. shape[2]
    lu.assertTrue(max_err(x:softmax(2), ref:softmax(2)) < 1e-6, "softmax " .. what)
    lu.assertTrue(max_err(x:log_softmax(2), ref:log_softmax(2)) < 1e-5, "log_softmax " .. what)
  end
  -- the max subtracted before exp: values near float32's largest, +inf (NaN rows, as on the CPU),
  -- -inf (masked positions, a row of -inf only), and NaN; rows of 40 (two elements per item) and
  -- of 160 (the 16-byte kernels)
  for _, len in ipairs({40, 160}) do
  local rows = {}
  for i = 1, 6 do
    rows[i] = {}
    for j = 1, len do rows[i][j] = ((i + j) % 7) * 1e37 end
  end
  rows[2][5] = math.huge
  for j = 1, len, 3 do rows[3][j] = -math.huge end
  for j = 1, len do rows[4][j] = -math.huge end
  rows[5][len] = 0 / 0
  rows[6][1], rows[6][2] = -3e38, 3e38
  local m = nc.tensor(rows, {device = dev})
  for _, op in ipairs({"softmax", "log_softmax"}) do
    local got, want = m[op](m, 2):to(cpu):tolist(), m:to(cpu)[op](m:to(cpu), 2):tolist()
    for i = 1, 6 do
      for j = 1, len do
        local g, w = got[i][j], want[i][j]
        if w ~= w then lu.assertTrue(g ~= g, string.format("%s [%d][%d] should be NaN", op, i, j))
        elseif w == -math.huge then lu.assertEquals(g, w, string.format("%s [%d][%d]", op, i, j))
        else lu.assertTrue(math.abs(g - w) <= 1e-5 * math.max(1, math.abs(w)),
                           string.format("%s [%d][%d]: %g vs %g", op, i, j, g, w)) end
      end
    end
  end
  end
end

os.exit(lu.LuaUnit.run())

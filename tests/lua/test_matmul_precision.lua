-- nc.set_matmul_precision on the device under test ("medium": the same checks with bfloat16's
-- bound and 1 + 2^-9, below bfloat16's half ulp but exact in tf32). On a device with tf32 tensor cores
-- (dev.tf32: an NVIDIA GPU, or any OpenCL device under the test hook NETCL_MMA_EMULATE=1, which
-- ctest's lua.test_matmul_precision.opencl_emulated sets), "high" must (1) take effect: inputs
-- are rounded to tf32, so 1 + 2^-12 (below tf32's half ulp) multiplies as 1; (2) stay within
-- tf32's error bound of a float64 reference, for matrix products of odd shapes and layouts and
-- for the three convolution passes. Elsewhere "high" must give the same bits as "highest".
local lu = require "luaunit"
local nc = require "netcl"
local H = require "helpers"

local dev = H.device()
local cpu = nc.device("cpu")
local ops = nc.nn_ops

local flat = H.flat

-- Each element of got (float32, on dev) against want (float64) within
-- bound = (u + k 2^-23) * mag, mag the same product of the absolute values (float64): the
-- rounding of each input costs at most half an ulp relative (tf32: 2^-11, so u = 2^-10 for a
-- product; bfloat16: 2^-8, u = 2^-7 + 2^-14), the float32 sums k 2^-24 each.
local UNIT = {high = 2 ^ -10, medium = 2 ^ -7 + 2 ^ -14}
local function within(got, want, mag, k, what, mode)
  local g, w, m = flat(got:to(cpu):double():tolist()), flat(want:tolist()), flat(mag:tolist())
  lu.assertEquals(#g, #w)
  local worst = 0
  for i = 1, #w do
    local bound = (UNIT[mode] + k * 2 ^ -23) * m[i] + 1e-30
    local r = math.abs(g[i] - w[i]) / bound
    if r > worst then worst = r end
  end
  lu.assertTrue(worst <= 1, string.format("%s (%s): error %.3g times the bound", what, mode, worst))
end

local function rand(shape, seed)
  nc.manual_seed(seed)
  return nc.randn(shape, {device = cpu})
end

local function with_precision(mode, fn)
  nc.set_matmul_precision(mode)
  local ok, a, b, c = pcall(fn)
  nc.set_matmul_precision("highest")
  if not ok then error(a, 0) end
  return a, b, c
end

TestMatmulPrecision = {}

function TestMatmulPrecision:tearDown() nc.set_matmul_precision("highest") end

function TestMatmulPrecision:test_the_device_says_what_it_runs()
  lu.assertEquals(nc.get_matmul_precision(dev), "highest")
  nc.set_matmul_precision("high")
  lu.assertEquals(nc.get_matmul_precision(), "high")
  lu.assertEquals(nc.get_matmul_precision(dev), dev.tf32 and "high" or "highest")
  lu.assertEquals(nc.get_matmul_precision(cpu), "highest")
  lu.assertFalse(cpu.tf32)
  nc.set_matmul_precision("medium")
  lu.assertEquals(nc.get_matmul_precision(), "medium")
  lu.assertEquals(nc.get_matmul_precision(dev), dev.bf16_mma and "medium" or dev.tf32 and "high" or "highest")
  lu.assertEquals(nc.get_matmul_precision(cpu), "highest")
  lu.assertFalse(cpu.bf16_mma)
end

-- 1 + 2^-12 rounds to 1 in tf32 (and bfloat16): the products say whether tf32 took effect.
function TestMatmulPrecision:test_high_takes_effect_exactly_where_the_device_has_tf32()
  local k = 96
  local a = nc.full({130, k}, 1 + 2 ^ -12, {device = dev})
  local b = nc.ones({k, 70}, {device = dev})
  local strict = a:matmul(b):to(cpu):tolist()[1][1]
  lu.assertAlmostEquals(strict, k * (1 + 2 ^ -12), 1e-5)
  local high = with_precision("high", function() return a:matmul(b):to(cpu):tolist() end)
  local x = nc.full({2, 8, 12, 12}, 1 + 2 ^ -12, {device = dev})
  local w = nc.ones({72, 8, 3, 3}, {device = dev})
  local y_strict = nc.conv2d(x, w, nil, {padding = 1}):to(cpu):tolist()[1][1][6][6]
  local y_high = with_precision("high", function() return nc.conv2d(x, w, nil, {padding = 1}):to(cpu):tolist() end)
  if dev.tf32 then
    lu.assertEquals(high[1][1], k)
    lu.assertEquals(high[130][70], k)
    lu.assertEquals(y_high[1][1][6][6], 72)
    lu.assertEquals(y_high[2][72][12][12], 32) -- a corner sees 2 x 2 of 3 x 3 for 8 channels
  else
    lu.assertEquals(high[1][1], strict)
    lu.assertEquals(y_high[1][1][6][6], y_strict)
  end
end

-- 1 + 2^-9 rounds to 1 in bfloat16 but is exact in tf32: "medium" runs bfloat16 where the
-- device has bf16_mma, tf32 where it has only tf32, float32 elsewhere.
function TestMatmulPrecision:test_medium_takes_effect_exactly_where_the_device_has_bf16()
  local k = 96
  local v = 1 + 2 ^ -9
  local a = nc.full({130, k}, v, {device = dev})
  local b = nc.ones({k, 70}, {device = dev})
  local med = with_precision("medium", function() return a:matmul(b):to(cpu):tolist() end)
  local x = nc.full({2, 8, 12, 12}, v, {device = dev})
  local w = nc.ones({72, 8, 3, 3}, {device = dev})
  local y_med = with_precision("medium", function() return nc.conv2d(x, w, nil, {padding = 1}):to(cpu):tolist() end)
  if dev.bf16_mma then
    lu.assertEquals(med[1][1], k)
    lu.assertEquals(med[130][70], k)
    lu.assertEquals(y_med[1][1][6][6], 72)
    lu.assertEquals(y_med[2][72][12][12], 32)
  else
    lu.assertAlmostEquals(med[1][1], k * v, 1e-4)
    lu.assertAlmostEquals(y_med[1][1][6][6], 72 * v, 1e-4)
  end
end

-- Products of odd shapes, transposed operands and batches, against float64.
function TestMatmulPrecision:test_products_within_bound()
 for _, mode in ipairs({"high", "medium"}) do
  local cases = {{130, 200, 77}, {257, 129, 300}, {64, 33, 64}, {300, 520, 260}}
  for i, c in ipairs(cases) do
    local m, k, n = c[1], c[2], c[3]
    local a64, b64 = rand({m, k}, i):double(), rand({k, n}, 100 + i):double()
    local want, mag = a64:matmul(b64), a64:abs():matmul(b64:abs())
    local a, b = a64:float():to(dev), b64:float():to(dev)
    local got = with_precision(mode, function() return a:matmul(b) end)
    within(got, want, mag, k, string.format("%dx%dx%d", m, k, n), mode)
    -- the same product with transposed storage on both sides
    local at, bt = a64:t():contiguous():float():to(dev), b64:t():contiguous():float():to(dev)
    got = with_precision(mode, function() return at:t():matmul(bt:t()) end)
    within(got, want, mag, k, string.format("%dx%dx%d transposed", m, k, n), mode)
    if not dev.tf32 then
      local strict = a:matmul(b)
      lu.assertEquals(with_precision(mode, function() return a:matmul(b) end):tolist(), strict:tolist())
    end
  end
  -- every row 16-byte aligned (the kernel with asynchronous copies, kernels/gemm_mma.cl), with
  -- edges in M, N and K, in the two mixed layouts, and K = 130 inside rows of 136 (a last K
  -- chunk of 2 floats)
  do
    local m, k, n = 260, 132, 196
    local a64, b64 = rand({m, k}, 31):double(), rand({k, n}, 32):double()
    local want, mag = a64:matmul(b64), a64:abs():matmul(b64:abs())
    local at, b = a64:t():contiguous():float():to(dev), b64:float():to(dev)
    within(with_precision(mode, function() return at:t():matmul(b) end), want, mag, k, "A^T B", mode)
    local a, bt = a64:float():to(dev), b64:t():contiguous():float():to(dev)
    within(with_precision(mode, function() return a:matmul(bt:t()) end), want, mag, k, "A B^T", mode)
    local wide = rand({m, 136}, 33):double()
    local an = wide:narrow(2, 1, 130)
    local bn = b64:narrow(1, 1, 130)
    local got = with_precision(mode, function() return wide:float():to(dev):narrow(2, 1, 130):matmul(bn:contiguous():float():to(dev)) end)
    within(got, an:matmul(bn), an:abs():matmul(bn:abs()), 130, "K = 130 in rows of 136", mode)
  end
  local a64, b64 = rand({3, 70, 90}, 7):double(), rand({3, 90, 150}, 8):double()
  local got = with_precision(mode, function() return a64:float():to(dev):matmul(b64:float():to(dev)) end)
  within(got, a64:matmul(b64), a64:abs():matmul(b64:abs()), 90, "batched", mode)
  -- batched with both operands transposed in storage: tiles enough (6) that "medium" rounds them
  -- into bfloat16 temporaries in their own orientation, with their own batch strides
  local at64, bt64 = rand({3, 90, 70}, 14):double(), rand({3, 150, 90}, 15):double()
  local ta64, tb64 = at64:transpose(2, 3), bt64:transpose(2, 3)
  got = with_precision(mode, function()
    return at64:float():to(dev):transpose(2, 3):matmul(bt64:float():to(dev):transpose(2, 3))
  end)
  within(got, ta64:matmul(tb64), ta64:abs():matmul(tb64:abs()), 90, "batched, both transposed", mode)
  -- one operand broadcast over the batch (batch stride 0), rows of odd length; tiles enough
  -- (18 of 128 x 128) that "medium" rounds the operands into bfloat16 temporaries on a device
  -- with bfloat16 tensor cores (cl_gemm_lowp.c)
  local x64, w64 = rand({3, 260, 90}, 12):double(), rand({90, 139}, 13):double()
  got = with_precision(mode, function() return x64:float():to(dev):matmul(w64:float():to(dev)) end)
  within(got, x64:matmul(w64), x64:abs():matmul(w64:abs()), 90, "batched times one matrix", mode)
  -- linear: x @ w^T + bias
  local bias64
  x64, w64, bias64 = rand({150, 96}, 9):double(), rand({130, 96}, 10):double(), rand({130}, 11):double()
  got = with_precision(mode, function()
    return nc.linear(x64:float():to(dev), w64:float():to(dev), bias64:float():to(dev))
  end)
  within(got, nc.linear(x64, w64, bias64), nc.linear(x64:abs(), w64:abs(), bias64:abs()), 96, "linear", mode)
 end
end

-- conv2d and its two gradients (stride 1 and 2; the input gradient of stride 2 by phases) against
-- float64 on the CPU backend.
function TestMatmulPrecision:test_convolution_passes_within_bound()
 for _, mode in ipairs({"high", "medium"}) do
  local shapes = {
    {x = {4, 16, 13, 11}, w = {40, 16, 3, 3}, o = {padding = 1}},
    {x = {3, 8, 15, 15}, w = {130, 8, 3, 3}, o = {padding = 1, stride = 2}},
    {x = {2, 24, 9, 9}, w = {72, 24, 1, 1}, o = {}},
    {x = {3, 12, 8, 6}, w = {20, 12, 3, 3}, o = {padding = 2, dilation = 2}},
    {x = {2, 8, 32, 32}, w = {16, 8, 3, 3}, o = {padding = 1}}, -- a weight gradient split along K
    {x = {2, 12, 11, 12}, w = {16, 12, 3, 3}, o = {padding = 1, stride = 2}}, -- input gradient phases on conv_mma
    {x = {2, 8, 9, 9}, w = {12, 8, 1, 1}, o = {stride = 2}}, -- phases no tap reaches
    {x = {2, 128, 8, 8}, w = {32, 128, 3, 3}, o = {padding = 1}}, -- one tile: the forward splits K
    {x = {2, 32, 16, 16}, w = {256, 32, 3, 3}, o = {padding = 1, stride = 2}}, -- an input gradient phase splits K
  }
  for i, s in ipairs(shapes) do
    local x64, w64 = rand(s.x, 20 + i):double(), rand(s.w, 40 + i):double()
    local k = s.w[2] * s.w[3] * s.w[4]
    local y64 = nc.conv2d(x64, w64, nil, s.o)
    local dy64 = rand(y64.shape, 60 + i):double()
    local x, w, dy = x64:float():to(dev), w64:float():to(dev), dy64:float():to(dev)
    local y, dx, dw = with_precision(mode, function()
      return nc.conv2d(x, w, nil, s.o), ops.conv2d_backward_input(dy, w, x.shape, s.o),
             ops.conv2d_backward_weight(dy, x, w.shape, s.o)
    end)
    local what = string.format("conv %d", i)
    within(y, y64, nc.conv2d(x64:abs(), w64:abs(), nil, s.o), k, what .. " forward", mode)
    within(dx, ops.conv2d_backward_input(dy64, w64, x64.shape, s.o),
                ops.conv2d_backward_input(dy64:abs(), w64:abs(), x64.shape, s.o), s.w[1] * s.w[3] * s.w[4],
                what .. " input gradient", mode)
    within(dw, ops.conv2d_backward_weight(dy64, x64, w64.shape, s.o),
                ops.conv2d_backward_weight(dy64:abs(), x64:abs(), w64.shape, s.o), s.x[1] * y64.shape[3] * y64.shape[4],
                what .. " weight gradient", mode)
  end
 end
end

-- bfloat16 tensors under "medium": the three passes take them as they are (the weight gradient also
-- beside a float32 dY, as the tape calls it) where the device has bfloat16 tensor cores (conv_mma.cl's bfloat16 build: word pairs of pixels, the results rounded
-- in the kernel), else the widened path. Either way the bits must be those of the float32
-- convolution of the widened tensors, rounded once: the same products in the same order. The
-- shapes cover taps of both parities (padding 1, padding 0, dilation 2), K split in the forward
-- and in a phase of an input gradient, phases no tap reaches, and shapes that keep the widened
-- path (stride 2 along x, odd widths, c kh kw not a multiple of 4, oh ow not a multiple of 8).
local BF16_CONVS = {
  {x = {2, 8, 12, 10}, w = {24, 8, 3, 3}, o = {padding = 1}},
  {x = {3, 16, 8, 8}, w = {96, 16, 3, 3}, o = {padding = 0}},
  {x = {2, 8, 10, 12}, w = {16, 8, 3, 3}, o = {padding = 2, dilation = 2}},
  {x = {2, 8, 6, 6}, w = {8, 8, 3, 3}, o = {padding = {1, 2}}},
  {x = {2, 128, 8, 8}, w = {32, 128, 3, 3}, o = {padding = 1}},
  {x = {2, 32, 16, 16}, w = {256, 32, 3, 3}, o = {padding = 1, stride = 2}},
  {x = {2, 8, 12, 12}, w = {12, 8, 1, 1}, o = {stride = 2}},
  {x = {2, 8, 11, 12}, w = {16, 8, 3, 3}, o = {stride = 2}}, -- ow odd: a word per pixel
  {x = {2, 8, 10, 14}, w = {8, 8, 3, 3}, o = {padding = {1, 2}, stride = {1, 2}}},
  -- weight gradients by image rows: 16 pixels of a row, two tiles a row, four rows a tile,
  -- five taps, dilation
  {x = {2, 8, 16, 16}, w = {16, 8, 3, 3}, o = {padding = 1}},
  {x = {1, 4, 6, 32}, w = {8, 4, 3, 3}, o = {padding = 1}},
  {x = {2, 16, 4, 4}, w = {32, 16, 3, 3}, o = {padding = 1}},
  {x = {2, 4, 16, 16}, w = {8, 4, 5, 5}, o = {padding = 2}},
  {x = {2, 8, 16, 16}, w = {8, 8, 3, 3}, o = {padding = 2, dilation = 2}},
  {x = {2, 16, 8, 8}, w = {16, 16, 3, 3}, o = {padding = 1, stride = {2, 1}}},
  {x = {2, 8, 9, 11}, w = {16, 8, 3, 3}, o = {padding = 1}},
  {x = {2, 3, 8, 8}, w = {16, 3, 3, 3}, o = {padding = 1}},
}

-- a's and b's bit patterns are the same; else fails naming the first element that differs
-- (luaunit's diff of two long lists would take minutes)
local function same_bits(a, b, what)
  local x, y = H.u16s(a:to(cpu)), H.u16s(b:to(cpu))
  lu.assertEquals(#x, #y, what)
  for e = 1, #x do
    if x[e] ~= y[e] then lu.fail(string.format("%s: element %d is 0x%04x, not 0x%04x", what, e, x[e], y[e])) end
  end
end

function TestMatmulPrecision:test_bfloat16_convolutions_are_the_widened_path_bit_for_bit()
  for i, s in ipairs(BF16_CONVS) do
    local x = rand(s.x, 120 + i):to("bfloat16"):to(dev)
    local w = (rand(s.w, 140 + i) * 0.2):to("bfloat16"):to(dev)
    local r = with_precision("medium", function()
      local y = nc.conv2d(x, w, nil, s.o)
      local dy = rand(y.shape, 160 + i):to("bfloat16"):to(dev)
      return {y, nc.conv2d(x:float(), w:float(), nil, s.o):to("bfloat16"),
              ops.conv2d_backward_input(dy, w, x.shape, s.o),
              ops.conv2d_backward_input(dy:float(), w:float(), x.shape, s.o):to("bfloat16"),
              ops.conv2d_backward_weight(dy, x, w.shape, s.o),
              ops.conv2d_backward_weight(dy:float(), x:float(), w.shape, s.o):to("bfloat16"),
              -- a float32 dY beside the bfloat16 x (the tape's case): float32, the float32 op's
              ops.conv2d_backward_weight(dy:float(), x, w.shape, s.o),
              ops.conv2d_backward_weight(dy:float(), x:float(), w.shape, s.o)}
    end)
    for p, what in ipairs({"forward", "input gradient", "weight gradient"}) do
      lu.assertEquals(r[2 * p - 1].dtype, "bfloat16")
      same_bits(r[2 * p - 1], r[2 * p], string.format("conv %d %s", i, what))
    end
    lu.assertEquals(r[7].dtype, "float32")
    lu.assertTrue(r[7]:to(cpu):bytes() == r[8]:to(cpu):bytes(), string.format("conv %d weight gradient of float32 dY", i))
  end
end

-- ... and where the device has bfloat16 tensor cores, those passes run the bfloat16 kernels
-- (the kernel profile of a child process names them).
function TestMatmulPrecision:test_bfloat16_convolutions_run_without_widening()
  if dev.kind ~= "opencl" or not dev.bf16_mma then lu.skip("no bfloat16 tensor cores on " .. dev.spec) end
  local dir = H.tmpdir()
  local path = dir .. "/conv.lua"
  local f = assert(io.open(path, "w"))
  f:write([[
local nc = require "netcl"
nc.set_matmul_precision("medium")
local x = nc.randn({2, 16, 8, 8}):to("bfloat16")
local w = nc.randn({32, 16, 3, 3}):to("bfloat16")
local y = nc.conv2d(x, w, nil, {padding = 1})
local dx = nc.nn_ops.conv2d_backward_input(y, w, x.shape, {padding = 1})
local dw = nc.nn_ops.conv2d_backward_weight(y, x, w.shape, {padding = 1})
local dy32 = nc.ones(y.shape) -- float32 beside the bfloat16 x
local dw32 = nc.nn_ops.conv2d_backward_weight(dy32, x, w.shape, {padding = 1})
local y2 = nc.conv2d(x, w, nil, {padding = 1, stride = 2})
local x12 = nc.randn({2, 16, 12, 12}):to("bfloat16") -- ow 12: the word-pair weight gradient
local dw12 = nc.nn_ops.conv2d_backward_weight(nc.ones({2, 32, 12, 12}), x12, w.shape, {padding = 1})
print(y.dtype, dx.dtype, dw.dtype, dw32.dtype, y2.dtype, dw12.dtype)
]])
  f:close()
  local out = H.sh(string.format("NETCL_PROFILE=1 NETCL_DEVICE=%s '%s' '%s' 2>&1", dev.spec, H.netcl_lua(), path))
  os.execute("rm -rf '" .. dir .. "'")
  lu.assertStrContains(out, "bfloat16\tbfloat16\tbfloat16\tfloat32\tbfloat16\tfloat32")
  local function calls(kernel)
    local c = 0
    for n in out:gmatch("(%d+)%s+[%d%.]+%s+" .. kernel .. " ") do c = c + tonumber(n) end
    return c
  end
  lu.assertEquals(calls("conv_mma_fwd_bx_s"), 2, out) -- the forward and the input gradient's one phase
  lu.assertEquals(calls("conv_mma_fwd_bx2_s"), 1, out) -- the stride-2 forward
  lu.assertEquals(calls("conv_mma_wgrad_bxr_s"), 1, out) -- by image rows (ow 8)
  lu.assertEquals(calls("conv_mma_wgrad_bxrf_s"), 1, out)
  lu.assertEquals(calls("conv_mma_wgrad_bxf_s"), 1, out) -- word pairs (ow 12)
  lu.assertEquals(calls("half_widen_bfloat16"), 3, out) -- the weights, widened for the
  -- forwards and dX (contiguous: the vector conversion)
end

-- float64 never changes precision.
function TestMatmulPrecision:test_float64_is_untouched()
  if dev.kind == "opencl" and not dev.fp64 then lu.skip("no float64 on this device") end
  local a = nc.full({70, 40}, 1 + 2 ^ -30, {device = dev, dtype = "float64"})
  local b = nc.ones({40, 90}, {device = dev, dtype = "float64"})
  local got = with_precision("high", function() return a:matmul(b):to(cpu):tolist()[1][1] end)
  lu.assertEquals(got, 40 * (1 + 2 ^ -30))
end

os.exit(lu.LuaUnit.run())

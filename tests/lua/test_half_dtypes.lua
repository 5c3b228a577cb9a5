-- The storage dtypes bfloat16 and float16 on the device under test: conversions against a
-- reference written here from the formats' definitions (nearest value by search, ties to even)
-- and bit for bit against the CPU backend; every pattern widened; conversions with the other
-- dtypes; views, copies, transfers and reads; the storage-only error of compute ops (other than
-- the matrix products, tests/lua/test_lowp_matmul.lua, and the elementwise ops,
-- tests/lua/test_half_elementwise.lua); safetensors
-- and npy files; optimizers stepping a float32 master copy. NumPy's float16, when python3 has
-- numpy, is a second reference.
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local optim = require "netcl.optim"
local nio = require "netcl.io"
local H = require "helpers"

local dev = H.device()
local cpu = nc.device("cpu")
local dir = H.tmpdir()

-- ---- the reference -------------------------------------------------------------------------------
-- Each format: exponent and mantissa widths; the value of a positive pattern by definition.
local FORMATS = {
  float16 = {ebits = 5, mbits = 10},
  bfloat16 = {ebits = 8, mbits = 7},
}
for _, f in pairs(FORMATS) do
  local bias, mant = (1 << (f.ebits - 1)) - 1, 1 << f.mbits
  f.inf = ((1 << f.ebits) - 1) << f.mbits -- the bits of +inf
  f.quiet = 1 << (f.mbits - 1)
  f.value = function(h) -- h: a positive finite pattern
    local e, m = h >> f.mbits, h & (mant - 1)
    if e == 0 then return m * 2.0 ^ (1 - bias - f.mbits) end
    return (mant + m) * 2.0 ^ (e - bias - f.mbits)
  end
  local max, below = f.value(f.inf - 1), f.value(f.inf - 2)
  f.overflow = max + (max - below) / 2 -- from here on (the tie included: inf is even) -> inf
end

local function f32_bits(x) return string.unpack("<I4", string.pack("<f", x)) end
local function f32_of(bits) return (string.unpack("<f", string.pack("<I4", bits))) end

-- The bits of float32 value x (a Lua number that is a float32) in format f.
local function ref_encode(f, x)
  local bits = f32_bits(x)
  local sign = (bits >> 31) << (f.ebits + f.mbits)
  if x ~= x then -- quiet NaN keeping the payload's top bits
    return sign | f.inf | f.quiet | ((bits & 0x7fffff) >> (23 - f.mbits))
  end
  local a = math.abs(x)
  if a >= f.overflow then return sign | f.inf end
  local lo, hi = 0, f.inf - 1 -- largest k with value(k) <= a
  while lo < hi do
    local mid = (lo + hi + 1) // 2
    if f.value(mid) <= a then lo = mid else hi = mid - 1 end
  end
  local k = lo
  if f.value(k) ~= a then
    local dl, du = a - f.value(k), f.value(k + 1) - a
    if du < dl or (du == dl and k & 1 == 1) then k = k + 1 end
  end
  return sign | k
end

-- The value of bits h of format f (NaN for NaN patterns).
local function ref_decode(f, h)
  local sign = h >> (f.ebits + f.mbits) == 1 and -1 or 1
  local a = h & ~(1 << (f.ebits + f.mbits))
  if a == f.inf then return sign * math.huge end
  if a > f.inf then return 0 / 0 end
  return sign * f.value(a)
end

local u16s = H.u16s

local function from_u16s(list, dtype, device)
  local parts = {}
  for i, h in ipairs(list) do parts[i] = string.pack("<I2", h) end
  return nc.from_bytes(table.concat(parts), {#list}, dtype, {device = device})
end

local function f32_tensor(values, device)
  local parts = {}
  for i, v in ipairs(values) do parts[i] = string.pack("<f", v) end
  return nc.from_bytes(table.concat(parts), {#values}, "float32", {device = device})
end

-- Edge values and random float32s of every magnitude (random bit patterns, and values near the
-- formats' ranges); all are float32 values.
local function test_values()
  local v = {0.0, -0.0, 1.0, -1.0, 1 + 2 ^ -8, 1 + 3 * 2 ^ -8, 1 + 2 ^ -11, 1 + 3 * 2 ^ -11, 65504.0, 65519.0,
             65520.0, -65520.0, 65536.0, 2 ^ -24, 2 ^ -25, -2 ^ -25, 3 * 2 ^ -25, 2 ^ -14, 1023.5 * 2 ^ -24,
             2 ^ -26, 2 ^ -133, 2 ^ -134, 3 * 2 ^ -134, 2 ^ -149, -2 ^ -149, 2 ^ -126, 3.14159265358979,
             math.huge, -math.huge, 0 / 0, f32_of(0x7f7fffff), f32_of(0xff7fffff), f32_of(0x7f800001),
             f32_of(0xffc12345), f32_of(0x7fbfffff), f32_of(0x477fefff), f32_of(0x477ff000), f32_of(0x477ff001)}
  for i = 1, #v do v[i] = f32_of(f32_bits(v[i])) end
  local seed = 20260418
  local function rand32()
    seed = (seed * 6364136223846793005 + 1442695040888963407) & 0xffffffffffffffff
    return seed >> 32
  end
  for _ = 1, 3000 do v[#v + 1] = f32_of(rand32()) end
  for _ = 1, 3000 do -- sign, exponent within float16's range and just outside, any mantissa
    local b = rand32()
    v[#v + 1] = f32_of((b & 0x807fffff) | (((b >> 23) % 36 + 99) << 23))
  end
  return v
end

-- ---- conversions -----------------------------------------------------------------------------------
TestConvert = {}

function TestConvert.test_narrowing_matches_reference_and_cpu()
  local values = test_values()
  local x = f32_tensor(values, dev)
  for name, f in pairs(FORMATS) do
    local got, on_cpu = u16s(x:to(name)), u16s(x:to("cpu"):to(name))
    for i, v in ipairs(values) do
      local want = ref_encode(f, v)
      if got[i] ~= want or on_cpu[i] ~= want then
        lu.fail(string.format("%s of %.9g (0x%08x): device 0x%04x, cpu 0x%04x, reference 0x%04x", name, v,
          f32_bits(v), got[i], on_cpu[i], want))
      end
    end
  end
end

function TestConvert.test_every_pattern_widens_exactly()
  for name, f in pairs(FORMATS) do
    local all = {}
    for h = 0, 65535 do all[h + 1] = h end
    local t = from_u16s(all, name, dev)
    local got, on_cpu = t:float():tolist(), t:to("cpu"):float():tolist()
    local bits_dev, bits_cpu = t:float():bytes(), t:to("cpu"):float():bytes()
    lu.assertEquals(bits_dev, bits_cpu, name .. ": device and CPU widen to different bits")
    for h = 0, 65535 do
      local want, v = ref_decode(f, h), got[h + 1]
      local ok = (want ~= want and v ~= v) or (v == want and (1 / v > 0) == (1 / want > 0))
      if not ok then lu.fail(string.format("%s 0x%04x: got %.9g, want %.9g", name, h, v, want)) end
      if want == want and on_cpu[h + 1] ~= v then lu.fail(name .. ": cpu differs") end
    end
    -- and back: every non-NaN pattern round-trips; NaNs come back NaN, quiet
    local back = u16s(t:float():to(name))
    for h = 0, 65535 do
      if ref_decode(f, h) == ref_decode(f, h) then
        if back[h + 1] ~= h then lu.fail(string.format("%s 0x%04x came back as 0x%04x", name, h, back[h + 1])) end
      elseif back[h + 1] ~= h | f.quiet then
        lu.fail(string.format("%s NaN 0x%04x came back as 0x%04x", name, h, back[h + 1]))
      end
    end
  end
end

-- Contiguous conversions to and from float32 at every offset mod 4 and length mod 4 (the device's
-- vector path and its scalar rest, and the unaligned path), into fresh tensors and into views.
function TestConvert.test_contiguous_conversions_at_any_offset()
  local n = 1031
  local x = nc.randn({n}, {device = cpu}) * 3
  for name in pairs(FORMATS) do
    local xs = x:to(name)
    for off = 1, 4 do
      for _, len in ipairs({1, 2, 3, 4, 5, 6, 7, 1021, 1022, 1023, 1024}) do
        local what = string.format("%s offset %d length %d", name, off - 1, len)
        local narrow = x:to(dev):narrow(1, off, len):to(name)
        lu.assertEquals(narrow:bytes(), xs:narrow(1, off, len):contiguous():bytes(), what .. " narrowing")
        local wide = xs:to(dev):narrow(1, off, len):float()
        lu.assertEquals(wide:bytes(), xs:narrow(1, off, len):float():bytes(), what .. " widening")
        local into = nc.zeros({n}, {dtype = name, device = dev})
        into:narrow(1, 5 - off, len):copy_(x:to(dev):narrow(1, off, len))
        lu.assertEquals(into:narrow(1, 5 - off, len):bytes(), xs:narrow(1, off, len):contiguous():bytes(),
          what .. " narrowing into a view")
      end
    end
  end
end

-- Every other dtype to and from both storage dtypes, strided sources included, device vs CPU.
function TestConvert.test_other_dtypes_match_cpu()
  local base = nc.tensor({{-3.75, 0, 1.5, 255}, {7, -0.5, 100000, 2.5}, {1e-3, -2, 3, 65519}})
  local sources = {
    float32 = base, int32 = base:to("int32"), int64 = base:to("int64"), uint8 = base:abs():to("uint8"),
    bool = base:ne(0), bfloat16 = base:to("bfloat16"), float16 = base:to("float16"),
  }
  if pcall(function() return nc.zeros({1}, {dtype = "float64", device = dev}) end) then
    sources.float64 = base:to("float64") + 1e-9
  end
  for sname, s in pairs(sources) do
    for _, dt in ipairs({"bfloat16", "float16"}) do
      local on_dev = s:to(dev):transpose(1, 2):to(dt)
      local want = s:to(cpu):transpose(1, 2):to(dt)
      lu.assertEquals(on_dev:bytes(), want:bytes(), sname .. " -> " .. dt)
      for _, out in ipairs({"float32", "float64", "int32", "int64", "uint8", "bool", "bfloat16", "float16"}) do
        local ok, r = pcall(function() return on_dev:transpose(1, 2):to(out) end)
        local integer = out == "int32" or out == "int64" or out == "uint8"
        if ok and integer then
          -- an infinity (100000 in float16) or a value outside the integer's range (-3.75 as
          -- uint8) has no integer value: C leaves the result undefined, and devices differ (x86
          -- wraps or gives INT_MIN, NVIDIA saturates), so only values in range compare
          local lo, hi = -2 ^ 31, 2 ^ 31
          if out == "uint8" then lo, hi = 0, 256 elseif out == "int64" then lo, hi = -2 ^ 63, 2 ^ 63 end
          local got, exp = r:to(cpu):tolist(), want:transpose(1, 2):to(out):tolist()
          local vals = want:transpose(1, 2):float():tolist()
          for i = 1, #vals do
            for j = 1, #vals[i] do
              if vals[i][j] > lo - 1 and vals[i][j] < hi then
                lu.assertEquals(got[i][j], exp[i][j], string.format("%s -> %s -> %s [%d][%d]", sname, dt, out, i, j))
              end
            end
          end
        elseif ok then
          lu.assertEquals(r:bytes(), want:transpose(1, 2):to(out):bytes(), sname .. " -> " .. dt .. " -> " .. out)
        else
          lu.assertStrContains(tostring(r), "float64") -- only a device without fp64 may refuse
        end
      end
    end
  end
  -- float64 goes through float32 (documented): the value that float32 rounds to, then narrowed
  if sources.float64 then
    local x = nc.tensor({1 + 2 ^ -8 + 2 ^ -30}, {dtype = "float64", device = dev})
    lu.assertEquals(u16s(x:to("bfloat16"))[1], 0x3f80)
  end
end

-- ---- storage: creation, views, copies, transfers, reads ------------------------------------------------
TestStorage = {}

function TestStorage.test_creation_and_reads()
  for _, dt in ipairs({"bfloat16", "float16"}) do
    local t = nc.tensor({{1, 2.5}, {-3, 0.1}}, {dtype = dt})
    lu.assertEquals(t.dtype, dt)
    lu.assertEquals(t:numel(), 4)
    lu.assertEquals(#t:bytes(), 8)
    lu.assertEquals(t[1][2].dtype, dt) -- indexing gives views, as for every dtype
    lu.assertEquals(t[1][2]:item(), 2.5) -- a Lua number
    lu.assertEquals(math.type(t[2][1]:item()), "float")
    lu.assertEquals(t:tolist()[2][2], nc.tensor({0.1}):to(dt):float():item())
    lu.assertNotEquals(t:tolist()[2][2], 0.1) -- rounded
    lu.assertStrContains(tostring(t), "dtype=" .. dt)
    lu.assertEquals(nc.zeros({3}, {dtype = dt}):tolist(), {0, 0, 0})
    lu.assertEquals(nc.ones({2}, {dtype = dt}):tolist(), {1, 1})
    lu.assertEquals(nc.full({2}, 1 / 3, {dtype = dt}):tolist()[1], nc.tensor({1 / 3}):to(dt):float():item())
    local z = nc.empty({2, 2}, {dtype = dt})
    z:fill_(-7)
    z[1] = 4
    lu.assertEquals(z:tolist(), {{4, 4}, {-7, -7}})
    z:zero_()
    lu.assertEquals(z:tolist(), {{0, 0}, {0, 0}})
    lu.assertEquals(nc.zeros({2}):to({dtype = dt}).dtype, dt)
  end
  lu.assertEquals(nc.zeros({1}, {dtype = "half"}).dtype, "float16")
  lu.assertEquals(nc.zeros({1}, {dtype = "bf16"}).dtype, "bfloat16")
end

function TestStorage.test_views_and_copies_move_bits()
  local x = nc.randn({4, 6})
  for _, dt in ipairs({"bfloat16", "float16"}) do
    local t = x:to(dt)
    local ref = t:float()
    local cases = {
      {t:transpose(1, 2):contiguous(), ref:transpose(1, 2):contiguous()},
      {t:view({6, 4}), ref:view({6, 4})},
      {t:reshape({2, 12}), ref:reshape({2, 12})},
      {t:permute({2, 1}):clone(), ref:permute({2, 1}):clone()},
      {t:narrow(2, 2, 3):contiguous(), ref:narrow(2, 2, 3):contiguous()},
      {t:select(1, 3), ref:select(1, 3)},
      {t:unsqueeze(1):expand({2, 4, 6}):contiguous(), ref:unsqueeze(1):expand({2, 4, 6}):contiguous()},
      {t:flatten(), ref:flatten()},
      {t:transpose(1, 2):flatten(), ref:transpose(1, 2):flatten()},
      {nc.cat({t, t}, 1), nc.cat({ref, ref}, 1)},
    }
    for i, c in ipairs(cases) do
      lu.assertEquals(c[1].dtype, dt, "case " .. i)
      lu.assertEquals(c[1]:float():tolist(), c[2]:tolist(), dt .. " case " .. i)
    end
    -- copy_ between storage dtypes and into strided destinations
    local d = nc.zeros({6, 4}, {dtype = dt})
    d:copy_(t:transpose(1, 2))
    lu.assertEquals(d:float():tolist(), ref:transpose(1, 2):tolist())
    local w = nc.zeros({6, 4})
    w:transpose(1, 2):copy_(t)
    lu.assertEquals(w:tolist(), ref:transpose(1, 2):tolist())
    -- between devices, both ways, bits unchanged
    local back = t:to("cpu"):to(dev)
    lu.assertEquals(back:bytes(), t:bytes())
    lu.assertEquals(back.device.name, dev.name)
  end
end

function TestStorage.test_compute_ops_refuse_storage_dtypes()
  local msg = "is a storage type; convert it with t:float() first"
  for _, dt in ipairs({"bfloat16", "float16"}) do
    local t = nc.randn({4, 4}):to(dt)
    local f = nc.randn({4, 4})
    -- the elementwise families, the comparisons and the activations take them
    -- (tests/lua/test_half_elementwise.lua), and so do convolution, pooling, normalization, the
    -- float reductions, softmax and cross_entropy (tests/lua/test_half_nn.lua); the other compute
    -- ops refuse them
    local ops = {
      any = function() return t:any() end, sort = function() return t:sort(1) end,
      where = function() return nc.where(f:gt(0), t, t) end, cumsum = function() return t:cumsum(1) end,
      index_select = function() return t:index_select(1, nc.tensor({0}, {dtype = "int64"})) end,
      rand = function() return nc.rand({2}, {dtype = dt}) end,
    }
    for name, fn in pairs(ops) do
      H.assert_error(fn, "netcl." .. name:gsub("_$", ""), "dtype " .. dt .. " " .. msg)
    end
    -- mixed with float32, an elementwise op promotes as for every dtype (float32 result); the
    -- products take storage-dtype operands all of one dtype only (tests/lua/test_lowp_matmul.lua)
    lu.assertEquals((f + t).dtype, "float32")
    H.assert_error(function() return nc.linear(f, t) end, "netcl.linear", "expected operands of one float dtype")
    lu.assertEquals(t:matmul(t).dtype, dt)
    lu.assertEquals((t:float() + f).dtype, "float32")
    lu.assertEquals((t + t).dtype, dt)
  end
end

-- ---- files --------------------------------------------------------------------------------------------
TestFiles = {}

function TestFiles.test_safetensors_round_trip()
  local x = f32_tensor(test_values(), dev)
  local t = {b = x:to("bfloat16"), h = x:to("float16"), s = x:view({-1, 2}):transpose(1, 2):to("float16")}
  local p = dir .. "/half.safetensors"
  nio.save(t, p)
  local r = nio.load(p, {device = dev})
  for k, v in pairs(t) do
    lu.assertEquals(r[k].dtype, v.dtype)
    lu.assertEquals(r[k].shape, v.shape)
    lu.assertEquals(r[k]:bytes(), v:contiguous():bytes(), k)
  end
  -- the header names BF16 and F16
  local f = assert(io.open(p, "rb"))
  local s = f:read("a")
  f:close()
  lu.assertStrContains(s, '"dtype":"BF16"')
  lu.assertStrContains(s, '"dtype":"F16"')
end

function TestFiles.test_npy_float16()
  local x = f32_tensor(test_values(), dev):to("float16")
  local p = dir .. "/h.npy"
  nio.save_npy(x:view({-1, 2}), p)
  local f = assert(io.open(p, "rb"))
  lu.assertStrContains(f:read("a"), "'descr': '<f2'")
  f:close()
  local r = nio.load_npy(p, {device = dev})
  lu.assertEquals(r.dtype, "float16")
  lu.assertEquals(r:bytes(), x:bytes())
  H.assert_error(function() nio.save_npy(x:to("bfloat16"), dir .. "/b.npy") end, "bfloat16")
end

-- NumPy's float32 -> float16 conversion (round to nearest even) as a second reference.
function TestFiles.test_numpy_float16_agrees()
  local py = H.python("numpy")
  if not py then
    print("  (skipped: no python3 with numpy (Debian: python3-numpy); the reference above still ran)")
    return
  end
  local values = {}
  for _, v in ipairs(test_values()) do
    if v == v then values[#values + 1] = v end -- NaN payloads: numpy keeps them signaling
  end
  local x = f32_tensor(values, dev)
  nio.save_npy(x, dir .. "/x.npy")
  local out, code = H.sh(py .. " -c \"import numpy as np; np.save('" .. dir .. "/y.npy', np.load('" .. dir ..
    "/x.npy').astype(np.float16))\"")
  lu.assertEquals(code, 0, out)
  local y = nio.load_npy(dir .. "/y.npy", {device = dev})
  lu.assertEquals(x:to("float16"):bytes(), y:bytes())
end

-- ---- optimizers -----------------------------------------------------------------------------------------
TestOptim = {}

-- A linear least-squares model whose weight is stored in dt: the optimizer keeps a float32
-- master, the loss falls, and the stored weight is the master rounded.
function TestOptim.test_master_copy_trains()
  nc.manual_seed(7)
  local x = nc.randn({64, 8})
  local y = x:matmul(nc.randn({8, 1}))
  for _, dt in ipairs({"bfloat16", "float16"}) do
    for _, make in ipairs({function(p) return optim.SGD(p, {lr = 0.05, momentum = 0.9}) end,
                           function(p) return optim.Adam(p, {lr = 0.05}) end,
                           function(p) return optim.RMSprop(p, {lr = 0.02}) end}) do
      local w = ag.param(nc.zeros({8, 1}, {dtype = dt}))
      local opt = make({w})
      local first, last
      for _ = 1, 60 do
        local tape = ag.Tape()
        local loss = tape:record(function() return ag.mse_loss(x:matmul(w:float()), y) end)
        tape:backward(loss)
        lu.assertEquals(w.grad.dtype, "float32")
        opt:step()
        opt:zero_grad()
        last = loss.value:item()
        first = first or last
      end
      lu.assertTrue(last < first * 0.01, string.format("%s: loss %g -> %g", dt, first, last))
      lu.assertEquals(w.dtype, dt)
      local master = opt.state[1].master
      lu.assertEquals(master.dtype, "float32")
      lu.assertEquals(w.value:bytes(), master:to(dt):bytes())
      for k, v in pairs(opt.state[1]) do
        if nc.is_tensor(v) then lu.assertEquals(v.dtype, "float32", k) end
      end
      -- the master survives state_dict / load_state_dict, in float32
      local opt2 = make({w})
      opt2:load_state_dict(opt:state_dict())
      lu.assertEquals(opt2.state[1].master:tolist(), master:tolist())
      lu.assertEquals(opt2.state[1].master.dtype, "float32")
    end
  end
end

-- The fused updates' rounded copy (the parameter of a master, written in the update's pass on
-- the device under test): the same bits as rounding the updated master afterwards, into a
-- contiguous tensor (the kernel writes it) and a strided one (copied after the update); and the
-- cases it refuses.
function TestOptim.test_updates_write_the_rounded_master()
  local C = nc._optim
  local n = 1037
  local steps = {
    sgd = function(p, g, st, r) C.sgd_step(p, g, st[1], false, {lr = 0.1, momentum = 0.9, dampening = 0,
      weight_decay = 0.01, nesterov = true}, r) end,
    rmsprop = function(p, g, st, r) C.rmsprop_step(p, g, st[1], st[2], st[3], {lr = 0.01, alpha = 0.99, eps = 1e-8,
      weight_decay = 0, momentum = 0.5, centered = true}, r) end,
    adam = function(p, g, st, r) C.adam_step(p, g, st[1], st[2], nil, 3, true, {lr = 0.01, betas = {0.9, 0.999},
      eps = 1e-8, weight_decay = 0.1, amsgrad = false}, r) end,
  }
  for name, step in pairs(steps) do
    for _, dt in ipairs({"bfloat16", "float16"}) do
      for _, strided in ipairs({false, true}) do
        local what = string.format("%s into %s%s", name, dt, strided and " (strided)" or "")
        nc.manual_seed(3)
        local p = nc.randn({n}, {device = dev})
        local g = nc.randn({n}, {device = dev})
        local st = {nc.rand({n}, {device = dev}), nc.randn({n}, {device = dev}) * 0.1, nc.randn({n}, {device = dev})}
        local r = strided and nc.zeros({n, 2}, {dtype = dt, device = dev}):select(2, 2)
          or nc.zeros({n}, {dtype = dt, device = dev})
        step(p, g, st, r)
        lu.assertEquals(r:contiguous():bytes(), p:to(dt):bytes(), what)
        if strided then lu.assertEquals(r:to(cpu):float():sum():item() ~= 0, true, what) end
      end
    end
  end
  local p, g, r = nc.zeros({4}, {device = dev}), nc.ones({4}, {device = dev}), nc.zeros({4}, {dtype = "bfloat16", device = dev})
  local o = {lr = 1, momentum = 0, dampening = 0, weight_decay = 0}
  H.assert_error(function() C.sgd_step(p, g, nil, false, o, nc.zeros({4}, {device = dev})) end,
    "sgd: the rounded copy must be bfloat16 or float16, got float32")
  H.assert_error(function() C.sgd_step(p, g, nil, false, o, nc.zeros({3}, {dtype = "bfloat16", device = dev})) end,
    "sgd: the rounded copy has shape [3] but the parameter has shape [4]")
  if pcall(function() return nc.zeros({1}, {dtype = "float64", device = dev}) end) then
    H.assert_error(function() C.sgd_step(p:double(), g:double(), nil, false, o, r) end,
      "sgd: a rounded copy needs a float32 parameter (the master copy), got float64")
  end
  lu.assertEquals(p:to(cpu):tolist(), {0, 0, 0, 0}, "nothing written on failure")
end

function TestOptim.test_node_conversion_gradient()
  local w = ag.param(nc.tensor({1.5, -2, 0.25}, {dtype = "bfloat16"}))
  local tape = ag.Tape()
  local out = tape:record(function() return (w:float() * nc.tensor({1, 2, 3})):sum() end)
  tape:backward(out)
  lu.assertEquals(w.grad.dtype, "float32")
  lu.assertEquals(w.grad:tolist(), {1, 2, 3})
  H.assert_error(function() return w:to("int32") end, "netcl.autograd.to", "expected a float dtype")
  lu.assertEquals(w:to("bfloat16"), w)
end

local rc = lu.LuaUnit.run()
os.execute("rm -rf " .. dir)
os.exit(rc)

-- The elementwise ops on the storage dtypes bfloat16 and float16 (unary, binary with tensors and
-- numbers, comparisons, clamp, the activations and their gradients) on the device under test.
-- The rule (docs/lua-api.md): each element is the float32 op on the widened inputs, rounded once
-- into the storage dtype (to nearest, ties to even; NaN stays NaN).
--
-- References, compared bit for bit (every NaN counts as equal to every NaN):
--   * for the correctly rounded ops (neg, abs, relu, add, sub, mul, div, sqrt, maximum, minimum,
--     comparisons) the float32 result computed here in Lua (a double rounded to float32, which for
--     these ops is float32's correctly rounded result), then rounded to the storage dtype by the
--     conversion that test_half_dtypes.lua checks against the formats' definitions;
--   * for every op, the same device's float32 op on the widened values, rounded the same way.
-- Against the CPU backend (when the device under test is another one) the results are equal for
-- the correctly rounded ops and within 1 unit in the last place of the storage dtype for the others:
-- float32 exp, log, tanh, ... may differ by an ulp between backends, which can move a rounding.
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local H = require "helpers"

local dev = H.device()
local cpu = nc.device("cpu")
local DTYPES = {"bfloat16", "float16"}

-- ---- bits -------------------------------------------------------------------------------------
local u16s = H.u16s

local function is_nan(dt, h)
  if dt == "bfloat16" then return h & 0x7f80 == 0x7f80 and h & 0x7f ~= 0 end
  return h & 0x7c00 == 0x7c00 and h & 0x3ff ~= 0
end

-- Position of h on the line of patterns ordered by value (-0 and +0 both 0).
local function ordinal(h)
  return h & 0x8000 ~= 0 and -(h & 0x7fff) or h
end

local function f32(x) return (string.unpack("<f", string.pack("<f", x))) end

-- The storage bits of float32 values (Lua numbers already rounded to float32).
local function rounded(values, dt)
  return u16s(nc.tensor(values, {device = cpu}):to(dt))
end

-- got and want: lists of bits of dtype dt; ulps: the largest distance allowed; skip(i): elements
-- not compared.
local function assert_bits(got, want, dt, what, ulps, skip)
  lu.assertEquals(#got, #want, what .. ": lengths")
  for i = 1, #want do
    local g, w = got[i], want[i]
    if skip and skip(i) then -- luacheck: ignore 542
    elseif is_nan(dt, w) or is_nan(dt, g) then
      lu.assertTrue(is_nan(dt, g) and is_nan(dt, w),
                    string.format("%s [%d]: got 0x%04x, want 0x%04x (NaN on one side only)", what, i, g, w))
    elseif g ~= w and math.abs(ordinal(g) - ordinal(w)) > (ulps or 0) then
      lu.fail(string.format("%s [%d]: got 0x%04x, want 0x%04x (%s)", what, i, g, w, dt))
    end
  end
end

-- ---- inputs -----------------------------------------------------------------------------------
-- More than one CPU block (8192) and not a multiple of 4: vector loops, tails and thread splits.
local N = 2 * 8192 + 37
local SPECIAL = {0.0, -0.0, 1.0, -1.0, 1 / 0, -1 / 0, 0 / 0, 0.5, 2.5, -2.5, 3.5, 65504.0, 70000.0, -70000.0,
                 1e-8, -3e-7, 6e-5, 3e38, -3e38, 1e-40, 1e-38, 0.1, 100.0, -100.0, 20.0, -20.0}

-- n values of dt (as a tensor on dev): the specials, then a spread of magnitudes.
local function inputs(dt, n, seed)
  math.randomseed(seed)
  local v = {}
  for i = 1, n do
    if i <= #SPECIAL then
      v[i] = SPECIAL[i]
    else
      local scale = 2.0 ^ math.random(-12, 8)
      v[i] = (math.random() * 2 - 1) * scale
    end
  end
  return nc.tensor(v, {device = dev}):to(dt)
end

-- The widened values of a storage tensor, as Lua numbers.
local function widened(t) return t:float():to(cpu):contiguous():view({-1}):tolist() end

-- ---- unary --------------------------------------------------------------------------------------
local UNARY = {"abs", "neg", "exp", "log", "log1p", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu",
               "gelu", "gelu_tanh", "silu", "floor", "ceil", "round", "sign"}
-- Lua's float32 result of the correctly rounded ones.
local LUA_UNARY = {
  neg = function(v) return -v end,
  abs = function(v) return math.abs(v) end,
  relu = function(v) return v < 0 and 0.0 or v end,
  sqrt = function(v) return f32(math.sqrt(v)) end,
}
local EXACT = {abs = true, neg = true, relu = true, sqrt = true, floor = true, ceil = true, round = true,
               sign = true, add = true, sub = true, mul = true, div = true, maximum = true, minimum = true,
               floor_divide = true, remainder = true}

-- The layouts a unary op is tried on: contiguous (aligned), contiguous at an odd offset, and a
-- transposed (strided) view.
local function layouts(x)
  return {
    contiguous = x,
    offset = x:narrow(1, 2, x.shape[1] - 1),
    strided = x:narrow(1, 1, 120 * 130):view({120, 130}):transpose(1, 2),
  }
end

TestUnary = {}

function TestUnary.test_every_unary_op_rounds_the_float32_op_once()
  for _, dt in ipairs(DTYPES) do
    local x = inputs(dt, N, 1)
    for lname, t in pairs(layouts(x)) do
      local wide = t:float()
      for _, op in ipairs(UNARY) do
        local what = string.format("%s %s (%s)", op, dt, lname)
        local y = nc[op](t)
        lu.assertEquals(y.dtype, dt, what)
        lu.assertEquals(y.shape, t.shape, what)
        local got = u16s(y)
        assert_bits(got, u16s(nc[op](wide):to(dt)), dt, what .. " vs the device's float32 op")
        if LUA_UNARY[op] then
          local ref = {}
          for i, v in ipairs(widened(t)) do ref[i] = LUA_UNARY[op](v) end
          assert_bits(got, rounded(ref, dt), dt, what .. " vs Lua")
        end
        if dev.type ~= "cpu" then
          assert_bits(got, u16s(nc[op](t:to(cpu))), dt, what .. " vs cpu", EXACT[op] and 0 or 1)
        end
      end
    end
  end
end

function TestUnary.test_clamp_and_predicates()
  for _, dt in ipairs(DTYPES) do
    local x = inputs(dt, 4099, 2)
    local y = x:clamp(-0.3, 0.7)
    lu.assertEquals(y.dtype, dt)
    -- the bounds are float32 numbers: 0.7 is not a bfloat16 value, and bounds the values above it
    assert_bits(u16s(y), u16s(x:float():clamp(-0.3, 0.7):to(dt)), dt, "clamp " .. dt)
    local nan, inf, want_nan, want_inf = x:isnan():tolist(), x:isinf():tolist(), {}, {}
    for i, v in ipairs(widened(x)) do
      want_nan[i] = v ~= v
      want_inf[i] = v == math.huge or v == -math.huge
    end
    lu.assertEquals(nan, want_nan)
    lu.assertEquals(inf, want_inf)
    lu.assertTrue(nan[7] and inf[5] and inf[6]) -- the specials: nan, inf, -inf
  end
end

-- NaN stays NaN, infinities and overflow follow float32 then the rounding.
function TestUnary.test_specials()
  local b = nc.tensor({0 / 0, 1 / 0, -1 / 0, -0.0, 60000, 3e38}, {device = dev}):to("bfloat16")
  local h = nc.tensor({0 / 0, 1 / 0, -1 / 0, -0.0, 60000, 1e-7}, {device = dev}):to("float16")
  local bits = u16s(nc.neg(b))
  lu.assertTrue(is_nan("bfloat16", bits[1]))
  lu.assertEquals({bits[2], bits[3], bits[4]}, {0xff80, 0x7f80, 0x0000})
  bits = u16s(nc.relu(h))
  lu.assertTrue(is_nan("float16", bits[1]))
  lu.assertEquals({bits[2], bits[3], bits[4]}, {0x7c00, 0x0000, 0x8000}) -- relu(-0) = -0, as in float32
  -- 60000 * 2 overflows float16 (max 65504) but not float32: inf after the rounding
  lu.assertEquals(u16s(h * 2)[5], 0x7c00)
  -- bfloat16 keeps float32's range: 3e38 * 2 is inf in float32 already
  lu.assertEquals(u16s(b * 2)[6], 0x7f80)
  -- a float16 subnormal result: 1e-7 is about 1.68 * 2^-24, and halving it rounds to 2^-24 (ties to even: 1)
  lu.assertEquals(u16s(h * 0.5)[6], 0x0001)
end

-- ---- binary -------------------------------------------------------------------------------------
local BINARY = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "floor_divide", "remainder"}
local LUA_BINARY = {
  add = function(v, w) return f32(v + w) end,
  sub = function(v, w) return f32(v - w) end,
  mul = function(v, w) return f32(v * w) end,
  div = function(v, w) return f32(v / w) end,
  maximum = function(v, w) return (v > w or v ~= v) and v or w end,
  minimum = function(v, w) return (v < w or v ~= v) and v or w end,
}
local COMPARE = {
  eq = function(v, w) return v == w end, ne = function(v, w) return v ~= w end,
  lt = function(v, w) return v < w end, le = function(v, w) return v <= w end,
  gt = function(v, w) return v > w end, ge = function(v, w) return v >= w end,
}

-- Lua's references over two lists of widened values (or a number for either).
local function lua_ref(fn, a, b, n)
  local r = {}
  for i = 1, n do r[i] = fn(type(a) == "table" and a[i] or a, type(b) == "table" and b[i] or b) end
  return r
end

-- Operand pairs: (a, b, description); a and b tensors of dt or numbers.
local function pairs_of(dt)
  local a, b = inputs(dt, N, 3), inputs(dt, N, 4)
  local m = a:narrow(1, 1, 120 * 130):view({120, 130})
  local n = b:narrow(1, 1, 130 * 120):view({130, 120})
  return {
    {a, b, "contiguous"},
    {a:narrow(1, 2, N - 1), b:narrow(1, 1, N - 1), "odd offset"},
    {m, n:transpose(1, 2), "strided"},
    {a, 0.1, "tensor, number"}, -- 0.1 as float32, not rounded to the storage dtype first
    {-2.5, b, "number, tensor"},
    {a, 3, "tensor, integer"},
  }
end

TestBinary = {}

function TestBinary.test_every_binary_op_rounds_the_float32_op_once()
  for _, dt in ipairs(DTYPES) do
    for _, p in ipairs(pairs_of(dt)) do
      local a, b, lname = p[1], p[2], p[3]
      local wa = type(a) == "number" and a or a:float()
      local wb = type(b) == "number" and b or b:float()
      local la = type(a) == "number" and f32(a) or widened(a)
      local lb = type(b) == "number" and f32(b) or widened(b)
      for _, op in ipairs(BINARY) do
        local what = string.format("%s %s (%s)", op, dt, lname)
        local y = nc[op](a, b)
        lu.assertEquals(y.dtype, dt, what)
        local got = u16s(y)
        assert_bits(got, u16s(nc[op](wa, wb):to(dt)), dt, what .. " vs the device's float32 op")
        if LUA_BINARY[op] then
          assert_bits(got, rounded(lua_ref(LUA_BINARY[op], la, lb, #got), dt), dt, what .. " vs Lua")
        end
        if dev.type ~= "cpu" then
          local ca = type(a) == "number" and a or a:to(cpu)
          local cb = type(b) == "number" and b or b:to(cpu)
          assert_bits(got, u16s(nc[op](ca, cb)), dt, what .. " vs cpu", EXACT[op] and 0 or 1)
        end
      end
      for op, fn in pairs(COMPARE) do
        local what = string.format("%s %s (%s)", op, dt, lname)
        local y = nc[op](a, b)
        lu.assertEquals(y.dtype, "bool", what)
        lu.assertEquals(y:to(cpu):contiguous():view({-1}):tolist(), lua_ref(fn, la, lb, y:numel()), what)
      end
    end
  end
end

function TestBinary.test_broadcasting_and_in_place()
  for _, dt in ipairs(DTYPES) do
    local a = inputs(dt, 7 * 1 * 5, 5):view({7, 1, 5})
    local b = inputs(dt, 6 * 5, 6):view({6, 5})
    local y = a + b
    lu.assertEquals(y.shape, {7, 6, 5})
    lu.assertEquals(y.dtype, dt)
    assert_bits(u16s(y), u16s((a:float() + b:float()):to(dt)), dt, "broadcast add " .. dt)
    local lref = lua_ref(LUA_BINARY.add, widened(a:expand({7, 6, 5})), widened(b:expand({7, 6, 5})), 210)
    assert_bits(u16s(y), rounded(lref, dt), dt, "broadcast add vs Lua " .. dt)
    -- in place, into the storage dtype
    local c = b:clone()
    c:mul_(1.5)
    assert_bits(u16s(c), u16s((b:float() * 1.5):to(dt)), dt, "mul_ " .. dt)
  end
end

-- Mixed dtypes promote as for every other dtype (nc.promote_types): with float32 (or between the
-- two storage dtypes) the op runs in float32 on the widened values.
function TestBinary.test_mixed_dtypes_promote()
  local f = nc.randn({64}, {device = dev})
  local b, h = f:to("bfloat16"), (f * 3):to("float16")
  for _, case in ipairs({{b, f}, {f, b}, {b, h}, {h, b}, {h, f}}) do
    local x, y = case[1], case[2]
    local r = x * y
    lu.assertEquals(r.dtype, "float32")
    lu.assertEquals(r:tolist(), (x:float() * y:float()):tolist())
  end
  lu.assertEquals((b + 1).dtype, "bfloat16")
  lu.assertEquals((h + 0.5).dtype, "float16")
  lu.assertEquals(nc.eq(b, f).dtype, "bool")
end

-- ---- what still refuses ------------------------------------------------------------------------
function TestBinary.test_other_ops_still_refuse_storage_dtypes()
  local msg = "is a storage type; convert it with t:float() first"
  for _, dt in ipairs(DTYPES) do
    local t = nc.randn({4, 4}, {device = dev}):to(dt)
    local f = nc.randn({4, 4}, {device = dev})
    local ops = {
      any = function() return t:any() end, cumsum = function() return t:cumsum(1) end,
      where = function() return nc.where(f:gt(0), t, t) end, sort = function() return t:sort(1) end,
    }
    for name, fn in pairs(ops) do H.assert_error(fn, "netcl." .. name, "dtype " .. dt .. " " .. msg) end
  end
end

-- ---- activations ------------------------------------------------------------------------------
function TestBinary.test_activations()
  local acts = {
    elu = {}, mish = {}, softplus = {{beta = 2, threshold = 10}}, leaky_relu = {{negative_slope = 0.1}},
  }
  for _, dt in ipairs(DTYPES) do
    local x = inputs(dt, 4099, 7)
    for name, args in pairs(acts) do
      for _, t in pairs({contiguous = x, strided = x:narrow(1, 1, 4096):view({64, 64}):transpose(1, 2)}) do
        local y = nc[name](t, table.unpack(args))
        lu.assertEquals(y.dtype, dt, name)
        assert_bits(u16s(y), u16s(nc[name](t:float(), table.unpack(args)):to(dt)), dt, name .. " " .. dt)
      end
    end
  end
end

-- ---- gradients ---------------------------------------------------------------------------------
TestGrad = {}

-- The gradient of a storage-dtype leaf is float32: the float32 op's gradient at the same values,
-- exactly where the rule reads only the (exactly widened) inputs and g, within the storage
-- dtype's rounding where it reads the op's rounded output (exp, tanh, sqrt, div).
function TestGrad.test_gradients_match_float32()
  local U = {bfloat16 = 2 ^ -8, float16 = 2 ^ -11}
  local cases = {
    {"relu", function(x, y) return nc.relu(x) * y end, true},
    {"add", function(x, y) return (x + y) * (x + 2) end, false},
    {"mul", function(x, y) return x * y end, true},
    {"abs neg", function(x, y) return x:abs() * y - x end, true},
    {"maximum", function(x, y) return nc.maximum(x, y) end, true},
    {"leaky_relu", function(x, y) return nc.leaky_relu(x) + y * 2 end, true},
    {"exp", function(x, y) return (x * 0.5):exp() * y end, false},
    {"tanh", function(x, y) return x:tanh() * y end, false},
    {"div", function(x, y) return x / (y:abs() + 1) end, false},
    {"sigmoid elu", function(x, y) return x:sigmoid() + nc.elu(y) end, false},
  }
  for _, dt in ipairs(DTYPES) do
    local xv = nc.randn({5, 7}, {device = dev}):to(dt)
    local yv = nc.randn({5, 7}, {device = dev}):to(dt)
    for _, c in ipairs(cases) do
      local name, fn, exact = c[1], c[2], c[3]
      local x, y = ag.param(xv), ag.param(yv)
      local xf, yf = ag.param(xv:float()), ag.param(yv:float())
      local tape = ag.Tape()
      local out = tape:record(function() return fn(x, y):float():sum() end)
      tape:backward(out)
      local tf = ag.Tape()
      local outf = tf:record(function() return fn(xf, yf):sum() end)
      tf:backward(outf)
      for _, p in ipairs({{x, xf, "x"}, {y, yf, "y"}}) do
        local what = string.format("%s %s d%s", name, dt, p[3])
        lu.assertEquals(p[1].grad.dtype, "float32", what)
        local g, want = p[1].grad:to(cpu):view({-1}):tolist(), p[2].grad:to(cpu):view({-1}):tolist()
        for i = 1, #want do
          if exact then
            lu.assertEquals(g[i], want[i], what)
          else
            -- the forward's rounded values enter the rule: a few units of the storage dtype
            lu.assertTrue(math.abs(g[i] - want[i]) <= 4 * U[dt] * (math.abs(want[i]) + 1),
                          string.format("%s [%d]: %g vs %g", what, i, g[i], want[i]))
          end
        end
      end
    end
  end
end

os.exit(lu.LuaUnit.run())

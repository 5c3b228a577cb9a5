-- The PyTorch and Torch7 idioms: t:dim(), t:float()/t:double()/t:long(), t:t(), t:size() as a
-- Size, and // and % on tensors (floor_divide and remainder), checked against Lua's own // and %
-- on numbers and against PyTorch where python3-torch is installed.
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local H = require "helpers"

local dev = H.device()

TestIdioms = {}

function TestIdioms:test_dim_and_casts()
  local t = nc.arange(0, 6):view({2, 3})
  lu.assertEquals(t:dim(), 2)
  lu.assertEquals(nc.zeros({}):dim(), 0)
  lu.assertEquals(t:dim(), t.ndim)
  lu.assertEquals(t:double().dtype, "float64")
  lu.assertEquals(t:long().dtype, "int64")
  lu.assertEquals(t:long():float().dtype, "float32")
  lu.assertIs(t:float(), t) -- already float32: t itself, as t:to does
  H.assert_close(nc.tensor({-1.5, 2.7}):long(), {-1, 2}) -- truncation, as to("int64")
  lu.assertEquals(t:double().device, dev)
  lu.assertEquals(ag.param(t):dim(), 2)
  lu.assertNil(nc.float) -- methods only: nc.float would read as a dtype
  H.assert_error(function() return nc.zeros({1}).float({}) end, "netcl.float")
end

function TestIdioms:test_t()
  local m = nc.arange(0, 6):view({2, 3})
  local mt = m:t()
  lu.assertEquals(mt.shape, {3, 2})
  H.assert_close(mt, {{0, 3}, {1, 4}, {2, 5}})
  mt[1][2] = 9 -- a view: shares storage
  lu.assertEquals(m[2][1]:item(), 9)
  local v = nc.arange(0, 4)
  lu.assertIs(v:t(), v)
  H.assert_error(function() return nc.zeros({2, 2, 2}):t() end, "netcl.t", "at most 2 dims")
  -- on a Node it records the transpose
  local w = ag.param(nc.arange(0, 6):view({2, 3}):double())
  local tape = ag.Tape()
  local y = tape:record(function() return (w:t() * nc.arange(0, 6):view({3, 2}):double()):sum() end)
  tape:backward(y)
  H.assert_close(w.grad, {{0, 2, 4}, {1, 3, 5}})
end

function TestIdioms:test_size()
  local t = nc.zeros({2, 3, 4})
  local s = t:size()
  lu.assertEquals(tostring(s), "Size([2, 3, 4])")
  lu.assertEquals(tostring(nc.zeros({}):size()), "Size([])")
  -- still the array it was: indexing, #, ipairs, table.unpack, a shape argument
  lu.assertEquals(s[1], 2)
  lu.assertEquals(#s, 3)
  local n = 0
  for i, v in ipairs(s) do n = n + i * v end
  lu.assertEquals(n, 2 + 6 + 12)
  lu.assertEquals({table.unpack(s)}, {2, 3, 4})
  lu.assertEquals(nc.ones(s).shape, {2, 3, 4})
  lu.assertEquals(t:size(2), 3)
  -- compares by value
  lu.assertTrue(s == t.shape)
  lu.assertTrue(s == nc.ones({2, 3, 4}):size())
  lu.assertFalse(s == {2, 3})
  lu.assertEquals(ag.tensor(t):size(), {2, 3, 4})
end

-- Lua's integer // and % floor, with the remainder taking the divisor's sign: the tensors give
-- the same for every sign combination.
function TestIdioms:test_integer_floor_div_and_mod_match_lua()
  local as, bs = {}, {}
  for _, a in ipairs({-9, -7, -6, -1, 0, 1, 5, 6, 7, 13}) do
    for _, b in ipairs({-4, -3, -1, 1, 2, 3, 5}) do as[#as + 1], bs[#bs + 1] = a, b end
  end
  for _, dtype in ipairs({"int64", "int32"}) do
    local a, b = nc.tensor(as, {dtype = dtype}), nc.tensor(bs, {dtype = dtype})
    local q, r = a // b, a % b
    lu.assertEquals(q.dtype, dtype)
    local want_q, want_r = {}, {}
    for i = 1, #as do want_q[i], want_r[i] = as[i] // bs[i], as[i] % bs[i] end
    H.assert_close(q, want_q, nil, dtype .. " //")
    H.assert_close(r, want_r, nil, dtype .. " %")
    H.assert_close(nc.floor_divide(a, b), want_q, nil, "nc.floor_divide")
    H.assert_close(a:remainder(b), want_r, nil, "t:remainder")
  end
  -- numbers on either side
  local a = nc.tensor(as, {dtype = "int64"})
  local w1, w2 = {}, {}
  for i = 1, #as do w1[i], w2[i] = as[i] // -3, 17 % (as[i] == 0 and 1 or as[i]) end
  H.assert_close(a // -3, w1)
  local nz = nc.where(a:eq(0), 1, a)
  H.assert_close(17 % nz, w2)
  -- the overflow corner: Lua wraps math.mininteger // -1 and gives 0 for % -1
  local m = nc.tensor({math.mininteger}, {dtype = "int64"})
  lu.assertEquals((m // -1):item(), math.mininteger // -1)
  lu.assertEquals((m % -1):item(), math.mininteger % -1)
  -- uint8 stays uint8
  local u = nc.tensor({7, 200}, {dtype = "uint8"})
  H.assert_close(u // 3, {2, 66})
  H.assert_close(u % 3, {1, 2})
  lu.assertEquals((u % 3).dtype, "uint8")
end

function TestIdioms:test_integer_division_by_zero_is_an_error()
  local a = nc.tensor({4, 5}, {dtype = "int64"})
  H.assert_error(function() return a // 0 end, "netcl.floor_divide", "division by zero")
  H.assert_error(function() return a % nc.tensor({1, 0}, {dtype = "int64"}) end, "netcl.remainder", "division by zero")
  H.assert_error(function() return a:remainder_(0) end, "division by zero")
  -- floats follow IEEE: x // 0 is a / 0 and x % 0 is nan, as in PyTorch
  local f = nc.tensor({1, -1, 0}, {dtype = "float64"}) // 0
  local l = f:tolist()
  lu.assertEquals(l[1], math.huge)
  lu.assertEquals(l[2], -math.huge)
  lu.assertNotEquals(l[3], l[3])
  local r = (nc.tensor({1.5}) % 0):item()
  lu.assertNotEquals(r, r)
end

-- Floats: where the quotient is exact (divisors are powers of two), Lua's floor(a / b) and
-- fmod-based % agree with PyTorch's definitions, and the tensors give the same bits.
function TestIdioms:test_float_floor_div_and_mod_match_lua()
  local as, bs = {}, {}
  for _, a in ipairs({-7.75, -5.5, -2.25, -0.5, 0.0, 0.25, 3.0, 5.5, 9.125}) do
    for _, b in ipairs({-4.0, -2.0, -0.5, 0.25, 2.0, 8.0}) do as[#as + 1], bs[#bs + 1] = a, b end
  end
  for _, dtype in ipairs({"float32", "float64"}) do
    local a, b = nc.tensor(as, {dtype = dtype}), nc.tensor(bs, {dtype = dtype})
    local want_q, want_r = {}, {}
    for i = 1, #as do want_q[i], want_r[i] = as[i] // bs[i], as[i] % bs[i] end
    H.assert_close(a // b, want_q, nil, dtype .. " //")
    H.assert_close(a % b, want_r, nil, dtype .. " %")
  end
  -- integer tensors with a float number promote to float32, as other arithmetic does
  local q = nc.tensor({7, -7}, {dtype = "int32"}) // 2.5
  lu.assertEquals(q.dtype, "float32")
  H.assert_close(q, {7 // 2.5, -7 // 2.5})
  -- where Lua's floor(a / b) rounds the quotient first, the tensors follow PyTorch and Python:
  -- 1 // 0.1 is 9 (0.1 is a little more than a tenth), while Lua says 10
  lu.assertEquals((nc.tensor({1}, {dtype = "float64"}) // 0.1):item(), 9)
end

-- // and % on Nodes record: d(a % b)/da = 1, d(a % b)/db = -floor(a / b); floor_divide's
-- gradient is 0. (tests/lua/test_autograd_gradcheck.lua checks both numerically.)
function TestIdioms:test_nodes()
  local a = ag.param(nc.tensor({5.5, -3.5}, {dtype = "float64"}))
  local b = ag.param(nc.tensor({2, 2}, {dtype = "float64"}))
  local tape = ag.Tape()
  local y = tape:record(function() return (a % b + a // b):sum() end)
  lu.assertTrue(ag.is_node(y))
  tape:backward(y)
  H.assert_close(a.grad, {1, 1})
  H.assert_close(b.grad, {-2, 2})
end

local TORCH = [[
import sys, torch
a = torch.tensor([float(v) for v in sys.argv[1].split(',')], dtype=torch.float64)
b = torch.tensor([float(v) for v in sys.argv[2].split(',')], dtype=torch.float64)
for t in (torch.floor_divide(a, b), torch.remainder(a, b), a.float() // b.float(), a.float() % b.float()):
    print(','.join(repr(float(v)) for v in t.tolist()))
]]

function TestIdioms:test_pytorch()
  local py = H.python("torch")
  if not py then
    lu.skip("PyTorch is not installed for python3 (Debian: python3-torch): the comparison with torch.floor_divide and torch.remainder did not run")
  end
  nc.manual_seed(7)
  local a = (nc.rand({200}, {dtype = "float64", device = "cpu"}) * 40 - 20)
  local b = (nc.rand({200}, {dtype = "float64", device = "cpu"}) * 10 - 5)
  local al, bl = a:tolist(), b:tolist()
  al[1], bl[1] = 1, 0.1 -- the case where Lua's floor(a / b) differs
  al[2], bl[2] = -7.5, 2.5
  local sa, sb = {}, {}
  for i = 1, #al do sa[i], sb[i] = string.format("%.17g", al[i]), string.format("%.17g", bl[i]) end
  local tmp = os.tmpname()
  local f = assert(io.open(tmp, "w"))
  f:write(TORCH)
  f:close()
  local p = io.popen(py .. " " .. tmp .. " " .. table.concat(sa, ",") .. " " .. table.concat(sb, ","))
  local out = p:read("a")
  p:close()
  os.remove(tmp)
  local rows = {}
  for line in out:gmatch("[^\n]+") do
    local r = {}
    for v in line:gmatch("[^,]+") do r[#r + 1] = tonumber(v) end
    rows[#rows + 1] = r
  end
  lu.assertEquals(#rows, 4, "python3 output: " .. out)
  local x, y = nc.tensor(al, {dtype = "float64"}), nc.tensor(bl, {dtype = "float64"})
  H.assert_close(x // y, rows[1], nil, "float64 floor_divide")
  H.assert_close(x % y, rows[2], nil, "float64 remainder")
  H.assert_close(x:float() // y:float(), rows[3], nil, "float32 floor_divide")
  H.assert_close(x:float() % y:float(), rows[4], 1e-6, "float32 remainder")
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

-- Tensor and Device userdata on the device under test, each result
-- checked against the CPU backend or against values worked out here.
local lu = require "luaunit"
local nc = require "netcl"
local H = require "helpers"

local dev = H.device()
local cpu = nc.device("cpu")

TestCreation = {}

function TestCreation:test_tensor_from_nested_tables()
  local t = nc.tensor({{1, 2, 3}, {4, 5, 6}})
  lu.assertEquals(t.shape, {2, 3})
  lu.assertEquals(t.dtype, "float32")
  lu.assertEquals(t.device, dev)
  lu.assertEquals(t.ndim, 2)
  lu.assertEquals(t.strides, {3, 1})
  lu.assertEquals(#t, 2)
  lu.assertEquals(t:numel(), 6)
  lu.assertEquals(t:size(2), 3)
  lu.assertEquals(t:size(-1), 3)
  lu.assertEquals(t:tolist(), {{1, 2, 3}, {4, 5, 6}})
  lu.assertEquals(nc.tensor(2.5):item(), 2.5)
  lu.assertEquals(nc.tensor({}).shape, {0})
  lu.assertEquals(nc.tensor({1, 2, 3, 4}, {shape = {2, 2}}):tolist(), {{1, 2}, {3, 4}})
end

function TestCreation:test_dtypes()
  lu.assertEquals(nc.tensor({1, 2}, {dtype = "int64"}):tolist(), {1, 2})
  lu.assertEquals(math.type(nc.tensor({7}, {dtype = "int32"})[1]:item()), "integer")
  lu.assertEquals(nc.tensor({true, false}, {dtype = "bool"}):tolist(), {true, false})
  lu.assertEquals(nc.tensor({300}, {dtype = "int64"}):to("uint8"):item(), 300 % 256)
  lu.assertEquals(nc.tensor({0, 2, -1}):to("bool"):tolist(), {false, true, true})
  local big = 2 ^ 53 + 2
  lu.assertEquals(nc.tensor({math.tointeger(big)}, {dtype = "int64"}):item(), math.tointeger(big))
  if dev.fp64 then
    lu.assertEquals(nc.tensor({0.1}, {dtype = "float64"}):item(), 0.1)
  end
end

function TestCreation:test_constants_and_ranges()
  lu.assertEquals(nc.zeros({2, 2}):tolist(), {{0, 0}, {0, 0}})
  lu.assertEquals(nc.ones(3):tolist(), {1, 1, 1})
  lu.assertEquals(nc.full({2}, 7, {dtype = "int32"}):tolist(), {7, 7})
  lu.assertEquals(nc.empty({0, 4}).shape, {0, 4})
  lu.assertEquals(nc.arange(5):tolist(), {0, 1, 2, 3, 4})
  lu.assertEquals(nc.arange(1, 2, 0.25):tolist(), {1, 1.25, 1.5, 1.75})
  lu.assertEquals(nc.arange(10, 0, -3, {dtype = "int64"}):tolist(), {10, 7, 4, 1})
  lu.assertEquals(nc.linspace(0, 1, 5):tolist(), {0, 0.25, 0.5, 0.75, 1})
  lu.assertEquals(nc.eye(3):tolist(), {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}})
  lu.assertEquals(nc.eye(2, 3, {dtype = "int64"}):tolist(), {{1, 0, 0}, {0, 1, 0}})
end

function TestCreation:test_bytes_round_trip()
  local t = nc.tensor({{1, -2}, {3.5, 4}})
  local b = t:bytes()
  lu.assertEquals(#b, 16)
  lu.assertEquals(string.unpack("<f", b, 5), -2.0)
  local u = nc.from_bytes(b, {2, 2}, "float32")
  lu.assertEquals(u:tolist(), t:tolist())
  lu.assertEquals(nc.from_bytes(string.pack("<i8<i8", 5, -9), {2}, "int64"):tolist(), {5, -9})
  -- bytes of a strided view are its values in row-major order
  lu.assertEquals(nc.from_bytes(t:transpose(1, 2):bytes(), {4}, "float32"):tolist(), {1, 3.5, -2, 4})
end

TestRandom = {}

function TestRandom:test_same_stream_on_every_backend()
  nc.manual_seed(1234)
  local a = nc.rand({1000})
  local b = nc.randn({1001}, {dtype = dev.fp64 and "float64" or "float32"})
  nc.manual_seed(1234)
  local ca = nc.rand({1000}, {device = cpu})
  local cb = nc.randn({1001}, {device = cpu, dtype = b.dtype})
  H.assert_close(a, ca, nil, "uniform is bit-identical")
  H.assert_close(b, cb, 1e-5, "normal agrees up to libm rounding")
  nc.manual_seed(1234)
  H.assert_close(nc.rand({1000}), a, nil, "reseeding replays the stream")
end

function TestRandom:test_statistics()
  nc.manual_seed(7)
  local u = nc.rand({20000}):tolist()
  local n = nc.randn({20000}):tolist()
  local su, sn, sn2, lo, hi = 0, 0, 0, 1, 0
  for i = 1, #u do
    su = su + u[i]; sn = sn + n[i]; sn2 = sn2 + n[i] * n[i]
    lo = math.min(lo, u[i]); hi = math.max(hi, u[i])
  end
  lu.assertTrue(lo >= 0 and hi < 1)
  lu.assertAlmostEquals(su / #u, 0.5, 0.01)
  lu.assertAlmostEquals(sn / #n, 0.0, 0.03)
  lu.assertAlmostEquals(sn2 / #n, 1.0, 0.03)
  local t = nc.zeros({3, 4}):transpose(1, 2)
  t:uniform_(2, 3)
  for _, v in ipairs(H.flat(t:tolist())) do lu.assertTrue(v >= 2 and v < 3) end
end

TestViews = {}

local function grid()
  return nc.arange(24):view({2, 3, 4})
end

function TestViews:test_views_share_storage()
  local t = grid()
  local v = t:view({6, 4})
  v[1] = 100 -- writes through to t
  lu.assertEquals(t[1][1]:tolist(), {100, 100, 100, 100})
  lu.assertEquals(t:transpose(1, 3).shape, {4, 3, 2})
  lu.assertEquals(t:transpose(1, 3)[2][1]:tolist(), {100, 13})
  lu.assertEquals(t:permute({3, 1, 2}).shape, {4, 2, 3})
  lu.assertEquals(t:narrow(3, 2, 2)[2][1]:tolist(), {13, 14})
  lu.assertEquals(t:select(2, -1):tolist(), {{8, 9, 10, 11}, {20, 21, 22, 23}})
  lu.assertEquals(t[-1][-1][-1]:item(), 23)
  lu.assertEquals(nc.tensor({1, 2}):unsqueeze(1).shape, {1, 2})
  lu.assertEquals(nc.tensor({1, 2}):unsqueeze(-1).shape, {2, 1})
  lu.assertEquals(nc.zeros({1, 3, 1}):squeeze().shape, {3})
  lu.assertEquals(nc.zeros({1, 3, 1}):squeeze(3).shape, {1, 3})
  lu.assertEquals(nc.tensor({1, 2, 3}):view({3, 1}):expand({3, 2}):tolist(), {{1, 1}, {2, 2}, {3, 3}})
  lu.assertEquals(nc.tensor({1, 2, 3}):expand({2, 3}):tolist(), {{1, 2, 3}, {1, 2, 3}})
  lu.assertEquals(grid():flatten().shape, {24})
  lu.assertEquals(grid():flatten(2).shape, {2, 12})
  lu.assertEquals(grid():view({-1, 8}).shape, {3, 8})
end

function TestViews:test_strided_copies_match_cpu()
  local t = grid()
  local c = t:to(cpu)
  local cases = {
    function(x) return x:transpose(1, 3) end,
    function(x) return x:narrow(3, 2, 3):transpose(1, 2) end,
    function(x) return x:select(2, 2):expand({5, 2, 4}) end,
    function(x) return x:permute({2, 3, 1}):narrow(1, 2, 2) end,
  }
  for i, f in ipairs(cases) do
    local a, b = f(t):contiguous(), f(c):contiguous()
    lu.assertTrue(a:is_contiguous())
    H.assert_close(a, b, nil, "case " .. i)
    H.assert_close(f(t):reshape({-1}), f(c):reshape({-1}), nil, "reshape " .. i)
    H.assert_close(f(t):clone(), b, nil, "clone " .. i)
  end
  -- copy_ into a strided destination, with dtype conversion and broadcasting
  local d = nc.zeros({4, 3}, {dtype = "int64"})
  d:transpose(1, 2):copy_(nc.tensor({1.9, -2.5, 3}):view({3, 1}))
  lu.assertEquals(d:tolist(), {{1, -2, 3}, {1, -2, 3}, {1, -2, 3}, {1, -2, 3}})
  local s = nc.zeros({2, 3})
  s[2] = nc.tensor({7, 8, 9})
  s[1]:fill_(1)
  lu.assertEquals(s:tolist(), {{1, 1, 1}, {7, 8, 9}})
  lu.assertEquals(s:zero_():tolist(), {{0, 0, 0}, {0, 0, 0}})
end

-- Attention's head transposes ([B, T, H, D] -> [B, H, T, D]) made contiguous, in every element
-- size: rows of D = 8 move 4 elements at a time on OpenCL devices (strided_copy_<size>), D = 6
-- and an offset that is not a multiple of 4 one at a time; each checked against the CPU backend.
function TestViews:test_head_transposes_in_every_element_size()
  local dtypes = {"float32", "int32", "int64", "uint8", "bool", "bfloat16", "float16"}
  if dev.fp64 then dtypes[#dtypes + 1] = "float64" end
  for _, dt in ipairs(dtypes) do
    for _, d in ipairs({8, 6}) do
      local src = nc.arange(0, 2 * 5 * 3 * d + 1, 1, {dtype = dt == "bool" and "int64" or "float32", device = cpu})
      if dt == "bool" then src = src % 3 end
      src = src:to(dt)
      for _, off in ipairs({0, 1}) do
        local c = src:narrow(1, 1 + off, 2 * 5 * 3 * d):view({2, 5, 3, d}):transpose(2, 3)
        local t = src:to(dev):narrow(1, 1 + off, 2 * 5 * 3 * d):view({2, 5, 3, d}):transpose(2, 3)
        local a, b = t:contiguous(), c:contiguous()
        lu.assertEquals(a.shape, {2, 3, 5, d})
        lu.assertEquals(a:to(cpu):to("float32"):tolist(), b:to("float32"):tolist(),
          string.format("%s, D %d, offset %d", dt, d, off))
      end
    end
  end
end

function TestViews:test_copy_between_overlapping_views()
  local t = nc.arange(6)
  t:copy_(t) -- the same view: nothing to do
  lu.assertEquals(t:tolist(), {0, 1, 2, 3, 4, 5})
  t:narrow(1, 2, 5):copy_(t:narrow(1, 1, 5)) -- shifted: reads happen before writes
  lu.assertEquals(t:tolist(), {0, 0, 1, 2, 3, 4})
  local m = nc.arange(9):view({3, 3})
  m:copy_(m:transpose(1, 2))
  lu.assertEquals(m:tolist(), {{0, 3, 6}, {1, 4, 7}, {2, 5, 8}})
  local r = nc.arange(4)
  r:copy_(r:narrow(1, 2, 1)) -- broadcast from inside the destination
  lu.assertEquals(r:tolist(), {1, 1, 1, 1})
  local i = nc.arange(4, {dtype = "int32"})
  i:narrow(1, 1, 3):copy_(i:narrow(1, 2, 3))
  lu.assertEquals(i:tolist(), {1, 2, 3, 3})
end

function TestViews:test_between_devices()
  local t = grid():transpose(2, 3)
  local back = t:to(cpu):to(dev)
  H.assert_close(back, t, nil, "round trip through the CPU backend")
  lu.assertEquals(t:to("int32").dtype, "int32")
  lu.assertEquals(t:to({device = cpu, dtype = "int64"}):tolist()[2][4][3], 23)
  for _, other in ipairs(nc.devices()) do
    local u = t:to(other)
    lu.assertEquals(u.device, other)
    H.assert_close(u, t, nil, "to " .. other.spec)
    local dst = nc.zeros({2, 4, 3}, {device = other}):transpose(1, 3)
    dst:copy_(t:transpose(1, 3))
    H.assert_close(dst, t:transpose(1, 3), nil, "strided copy_ from " .. dev.spec .. " to " .. other.spec)
  end
end

function TestViews:test_tostring()
  local s = tostring(nc.tensor({{1, 2}, {3, 4}}))
  lu.assertStrContains(s, "tensor([[1., 2.],\n        [3., 4.]]")
  lu.assertStrContains(s, "dtype=float32, device=" .. dev.spec)
  local big = tostring(nc.zeros({5000}))
  lu.assertStrContains(big, "0., 0., 0., ..., 0., 0., 0.")
  lu.assertTrue(#big < 200)
  lu.assertStrContains(tostring(nc.tensor({0.1, 1000.5})), "1.0000e-01")
  lu.assertStrContains(tostring(nc.tensor({1, 2}, {dtype = "int64"})), "tensor([1, 2], dtype=int64")
  lu.assertStrContains(tostring(dev), dev.spec)
end

function TestViews:test_devices()
  local all = nc.devices()
  lu.assertEquals(all[1].kind, "cpu")
  for _, d in ipairs(all) do
    lu.assertIsString(d.name)
    lu.assertIsString(d.vendor)
    lu.assertTrue(d.memory > 0)
    lu.assertTrue(d.compute_units > 0)
    lu.assertEquals(nc.device(d.spec), d)
    d:sync()
  end
  nc.sync()
  lu.assertIsNumber(nc.clock())
  lu.assertIsString(nc.version)
end

TestErrors = {}

function TestErrors:test_bad_shapes()
  H.assert_error(function() nc.zeros({2, -1}) end, "netcl.zeros", "size -1 at dim 2 is negative")
  H.assert_error(function() nc.zeros({2.5}) end, "netcl.zeros", "not an integer")
  H.assert_error(function() nc.ones({1, 1, 1, 1, 1, 1, 1, 1, 1}) end, "netcl.ones", "at most 8")
  H.assert_error(function() nc.zeros("3") end, "netcl.zeros")
  H.assert_error(function() nc.tensor({{1, 2}, {3}}) end, "netcl.tensor", "ragged")
  H.assert_error(function() nc.tensor({1, 2, 3}, {shape = {2, 2}}) end, "netcl.tensor", "4 elements")
  H.assert_error(function() nc.from_bytes("abc", {1}, "float32") end, "netcl.from_bytes", "3 bytes")
  H.assert_error(function() grid():view({5, 5}) end, "netcl.view", "25 elements")
end

function TestErrors:test_view_needs_copy()
  H.assert_error(function() grid():transpose(1, 2):view({24}) end, "netcl.view", "non-contiguous",
                 "would need a copy")
  lu.assertEquals(grid():transpose(1, 2):reshape({24}).shape, {24})
end

function TestErrors:test_dtype_errors()
  H.assert_error(function() nc.zeros({2}, {dtype = "float17"}) end, "netcl.zeros", "unknown dtype 'float17'")
  H.assert_error(function() nc.rand({2}, {dtype = "int32"}) end, "netcl.rand", "floating dtype")
  H.assert_error(function() nc.zeros({2}, {dtype = 5}) end, "netcl.zeros", "dtype must be a string")
end

function TestErrors:test_index_errors()
  local t = grid()
  H.assert_error(function() return t[3] end, "netcl.index", "index 3 out of range for a dim of size 2")
  H.assert_error(function() return t[0] end, "netcl.index", "index 0 out of range")
  H.assert_error(function() t:transpose(1, 4) end, "netcl.transpose", "dim 4 out of range for 3 dims")
  H.assert_error(function() t:narrow(3, 3, 5) end, "netcl.narrow", "outside dim 3")
  H.assert_error(function() t:select(1, 5) end, "netcl.select", "out of range")
  H.assert_error(function() t[1] = "x" end, "netcl.setindex", "number, boolean or Tensor")
  H.assert_error(function() nc.tensor(1)[1] = 2 end, "0-dim")
  H.assert_error(function() t:item() end, "netcl.item", "one element")
end

function TestErrors:test_foreign_values()
  local t = grid()
  H.assert_error(function() t.view(io.stdout, {24}) end, "netcl.view", "expected Tensor, got FILE*")
  H.assert_error(function() t.view({1, 2}, {2}) end, "netcl.view", "expected Tensor, got table")
  H.assert_error(function() t:copy_(42) end, "netcl.copy_", "expected Tensor, got number")
  H.assert_error(function() nc.zeros({2}, {device = 3}) end, "netcl.zeros", "expected a Device")
  H.assert_error(function() nc.zeros({2}, {device = "tpu"}) end, "netcl.zeros", "bad device spec 'tpu'")
end

function TestErrors:test_freed_tensor()
  local t = nc.ones({4})
  t:free()
  t:free() -- idempotent
  H.assert_error(function() t:numel() end, "netcl.numel", "freed")
  H.assert_error(function() nc.zeros({4}):copy_(t) end, "netcl.copy_", "freed")
  lu.assertEquals(tostring(t), "tensor(<freed>)")
  collectgarbage("collect")
  collectgarbage("stop") -- so no other tensor is collected while we measure
  local before = nc.memory_stats().in_use
  do
    local c <close> = nc.ones({1024, 1024})
    lu.assertTrue(nc.memory_stats().in_use >= before + 4 * 1024 * 1024)
  end
  lu.assertEquals(nc.memory_stats().in_use, before)
  collectgarbage("restart")
end

os.exit(lu.LuaUnit.run())

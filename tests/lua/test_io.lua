-- netcl.io: safetensors and npy round trips on the device under test,
-- every kind of bad file, checkpoints of models and optimizers, and files exchanged with an
-- independent Python reader/writer (tests/interop/formats.py).
local lu = require "luaunit"
local nc = require "netcl"
local nio = require "netcl.io"
local H = require "helpers"

local dev = H.device()
local dir = H.tmpdir()

local function path(name) return dir .. "/" .. name end

local function write(p, bytes)
  local f = assert(io.open(p, "wb"))
  f:write(bytes)
  f:close()
end

local function read(p)
  local f = assert(io.open(p, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- A safetensors file from a header string and data bytes (no padding added).
local function st_file(header, data) return string.pack("<I8", #header) .. header .. (data or "") end

local function sample_tensors()
  local t = {
    ["w.f32"] = nc.tensor({{1.5, -2}, {3, 4.25}, {0, 1e-3}}),
    i32 = nc.tensor({-7, 0, 2147483647}, {dtype = "int32"}),
    i64 = nc.tensor({math.mininteger, 1 << 40, -1}, {dtype = "int64"}),
    u8 = nc.tensor({0, 1, 255}, {dtype = "uint8"}),
    mask = nc.tensor({true, false, true}, {dtype = "bool"}),
    empty = nc.zeros({0, 3}),
    scalar = nc.tensor(42.5),
    strided = nc.arange(12):view({3, 4}):transpose(1, 2),
  }
  if dev.fp64 then t.f64 = nc.tensor({0.1, -1e300}, {dtype = "float64"}) end
  return t
end

TestSafetensors = {}

function TestSafetensors:test_round_trip_all_dtypes()
  local t = sample_tensors()
  local p = path("all.safetensors")
  nio.save(t, p, {metadata = {epoch = 3, note = "hello", flag = true}})
  local got, meta = nio.load(p)
  lu.assertEquals(meta, {epoch = "3", note = "hello", flag = "true"})
  local names = {}
  for k, v in pairs(got) do
    names[#names + 1] = k
    lu.assertEquals(v.device, dev, k)
    lu.assertEquals(v.dtype, t[k].dtype, k)
    lu.assertEquals(v.shape, t[k].shape, k)
    lu.assertTrue(v:is_contiguous())
    H.assert_close(v, t[k], nil, k)
  end
  lu.assertEquals(#names, (dev.fp64 and 9 or 8))
  -- onto another device by option
  local cpu = nio.load(p, {device = "cpu"})
  lu.assertEquals(cpu["w.f32"].device.kind, "cpu")
  H.assert_close(cpu.i64, t.i64)
  -- header padded so the data start 8-byte aligned
  local bytes = read(p)
  lu.assertEquals((8 + string.unpack("<I8", bytes)) % 8, 0)
end

function TestSafetensors:test_save_is_atomic()
  local p = path("atomic.safetensors")
  nio.save({a = nc.ones({4})}, p)
  local before = read(p)
  -- a failed save (a non-tensor value) leaves the old file and no temporary file
  H.assert_error(function() nio.save({a = nc.ones({2}), b = {1, 2}}, p) end, "netcl.io.save",
    "'b' holds a table, expected a Tensor")
  H.assert_error(function() nio.save({[1] = nc.ones({2})}, p) end, "netcl.io.save", "names must be strings")
  H.assert_error(function() nio.save({["a\0b"] = nc.ones({2})}, p) end, "tensor names cannot hold NUL bytes")
  lu.assertEquals(read(p), before)
  local ls = io.popen("ls -a " .. dir):read("a")
  lu.assertNotStrContains(ls, ".tmp.")
  H.assert_error(function() nio.save({a = nc.ones({2})}, dir .. "/no/such/dir/x.netcl") end,
    "netcl.io.save", "no/such/dir/x.netcl: cannot create a temporary file")
  H.assert_error(function() nio.save({a = nc.ones({2})}, p, {meta = {}}) end, "unknown option 'meta'")
  H.assert_error(function() nio.save({a = nc.ones({2})}, p, {metadata = {x = {}}}) end,
    "metadata 'x' is a table")
end

-- Every kind of malformed file raises an error naming the function, the path and the problem.
function TestSafetensors:test_bad_files()
  local ok = '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
  local data = string.pack("<ff", 1, 2)
  local cases = {
    {"truncated length", "\1\0\0", "file is 3 bytes, too short for the 8-byte header length"},
    {"truncated data", st_file(ok, data):sub(1, -3),
      "tensor 'a': data_offsets [0, 8] are out of range: the data section holds 6 bytes (is the file truncated?)"},
    {"header past the end", string.pack("<I8", 99999) .. string.rep(" ", 112),
      "header length 99999 is past the end of the file (120 bytes)"},
    {"not JSON", st_file("{'a': 1}    "), "header is not valid JSON"},
    {"binary garbage", st_file("\0\1\2\3\4\5\6\7"), "header is not valid JSON"},
    {"not an object", st_file("[1, 2, 3]"), "header is an array, expected a JSON object"},
    {"unknown dtype", st_file(ok:gsub("F32", "Q7"), data), "tensor 'a': unknown dtype 'Q7'"},
    {"foreign dtype", st_file(ok:gsub("F32", "I16"):gsub("%[2%]", "[4]"), data),
      "tensor 'a': dtype I16 has no netcl element type"},
    {"shape vs bytes", st_file(ok:gsub("%[2%]", "[2,2]"), data),
      "tensor 'a': shape [2, 2] of F32 needs 16 bytes but data_offsets [0, 8] hold 8"},
    {"offsets past the data", st_file(ok:gsub("%[0,8%]", "[8,16]"), data),
      "tensor 'a': data_offsets [8, 16] are out of range"},
    {"offsets reversed", st_file(ok:gsub("%[0,8%]", "[8,0]"), data), "tensor 'a': data_offsets [8, 0] are out of range (need 0 <= begin <= end)"},
    {"overlap", st_file('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},' ..
      '"b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}}', data),
      "tensors 'a' (bytes 0..8) and 'b' (bytes 4..8) overlap"},
    {"hole", st_file('{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', data),
      "bytes 0..4 of the data section belong to no tensor"},
    {"unindexed tail", st_file(ok, data .. "xx"), "the data section holds 10 bytes but the tensors end at byte 8"},
    {"duplicate names", st_file('{"a":{},"a":{}}'), "header is not valid JSON: duplicate object key"},
    {"bad boolean", st_file('{"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}}', "\1\7"),
      "tensor 'm': BOOL element 1 holds 7"},
    {"metadata not strings", st_file('{"__metadata__":{"epoch":3}}'), "__metadata__ must map strings to strings: 'epoch' holds an integer"},
  }
  for _, c in ipairs(cases) do
    local p = path("bad-" .. c[1]:gsub(" ", "-") .. ".safetensors")
    write(p, c[2])
    H.assert_error(function() nio.load(p) end, "netcl.io.load: " .. p .. ": " .. c[3])
  end
  write(path("good.safetensors"), st_file(ok, data))
  H.assert_close(nio.load(path("good.safetensors")).a, {1, 2})
  H.assert_error(function() nio.load(path("absent.safetensors")) end,
    "netcl.io.load: " .. path("absent.safetensors") .. ": cannot open: No such file")
  H.assert_error(function() nio.load(dir) end, "is a directory")
  H.assert_error(function() nio.load(42) end, "netcl.io.load: argument 1: expected a path string")
end

TestNpy = {}

function TestNpy:test_round_trip()
  local t = sample_tensors()
  for name, x in pairs(t) do
    local p = path(name .. ".npy")
    nio.save_npy(x, p)
    local y = nio.load_npy(p)
    lu.assertEquals(y.dtype, x.dtype, name)
    lu.assertEquals(y.shape, x.shape, name)
    lu.assertEquals(y.device, dev, name)
    H.assert_close(y, x, nil, name)
  end
  local b = read(path("w.f32.npy"))
  lu.assertEquals(b:sub(1, 8), "\x93NUMPY\1\0")
  lu.assertStrContains(b, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }")
  lu.assertEquals((10 + string.unpack("<I2", b, 9)) % 64, 0)
  lu.assertEquals(nio.load_npy(path("u8.npy"), {device = "cpu"}).device.kind, "cpu")
end

function TestNpy:test_bad_files()
  local function npy(dict, data)
    local pad = (64 - (10 + #dict + 1) % 64) % 64
    local h = dict .. string.rep(" ", pad) .. "\n"
    return "\x93NUMPY\1\0" .. string.pack("<I2", #h) .. h .. (data or "")
  end
  local f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }"
  local cases = {
    {"magic", "PK\3\4 this is a zip file", "not an npy file (bad magic)"},
    {"short", "\x93NUMPY", "file is 6 bytes, too short for an npy header"},
    {"truncated", npy(f4, string.rep("\0", 12)), "the shape needs 16 bytes of data, the file holds 12 (truncated?)"},
    {"extra", npy(f4, string.rep("\0", 20)), "the shape needs 16 bytes of data, the file holds 20 (extra bytes"},
    {"dims", npy(f4:gsub("%(2, 2%)", "(2, 2, 2)"), string.rep("\0", 16)), "the shape needs 32 bytes"},
    {"dtype", npy(f4:gsub("<f4", "<c16"), ""), "dtype '<c16' is not supported"},
    {"big-endian", npy(f4:gsub("<f4", ">f4"), string.rep("\0", 16)), "big-endian data ('>f4') are not supported"},
    {"header", npy("{'descr': '<f4', 'shape': (2, 2), }", string.rep("\0", 16)), "malformed header: it lacks 'fortran_order'"},
    {"header past end", "\x93NUMPY\1\0\255\255{}", "header length 65535 is past the end of the file"},
  }
  for _, c in ipairs(cases) do
    local p = path("bad-" .. c[1] .. ".npy")
    write(p, c[2])
    H.assert_error(function() nio.load_npy(p) end, "netcl.io.load_npy: " .. p .. ": " .. c[3])
  end
  H.assert_error(function() nio.save_npy({1, 2}, path("x.npy")) end, "netcl.io.save_npy", "expected Tensor")
end

-- A stand-in for nn modules and optimizers: anything with state_dict/load_state_dict.
local function toy_model(seed)
  nc.manual_seed(seed)
  local m = {params = {["fc.weight"] = nc.randn({3, 2}), ["fc.bias"] = nc.randn({3}),
                       ["bn.num_batches_tracked"] = nc.tensor(5, {dtype = "int64"})}}
  function m:state_dict() return self.params end
  function m:load_state_dict(sd, opts)
    self.loaded_opts = opts
    for k, v in pairs(sd) do
      if not self.params[k] then
        if opts.strict then error("unexpected key " .. k) end
      else
        self.params[k]:copy_(v)
      end
    end
    if opts.strict then
      for k in pairs(self.params) do if not sd[k] then error("missing key " .. k) end end
    end
  end
  return m
end

local function toy_optimizer(model)
  local o = {lr = 0.01, step_count = 0, state = {}}
  local i = 0
  for _, name in ipairs({"fc.bias", "fc.weight"}) do
    i = i + 1
    o.state[i] = {exp_avg = nc.zeros(model.params[name].shape), step = 0}
  end
  function o:step()
    self.step_count = self.step_count + 1
    for _, s in ipairs(self.state) do
      s.exp_avg:fill_(self.step_count * 0.5)
      s.step = s.step + 1
    end
  end
  function o:state_dict()
    return {state = self.state, param_groups = {{lr = self.lr, betas = {0.9, 0.999}, params = {0, 1}}}}
  end
  function o:load_state_dict(sd)
    self.state = sd.state
    self.lr = sd.param_groups[1].lr
    self.betas = sd.param_groups[1].betas
  end
  return o
end

TestCheckpoint = {}

function TestCheckpoint:test_model_round_trip()
  local a, b = toy_model(1), toy_model(2)
  local p = path("model.netcl")
  nio.save_model(a, p)
  local extra, meta = nio.load_model(b, p)
  lu.assertNil(extra)
  lu.assertEquals(meta.format, "pt")
  lu.assertEquals(meta["netcl.version"], nc.version)
  lu.assertEquals(b.loaded_opts, {strict = true})
  for k, v in pairs(a.params) do H.assert_close(b.params[k], v, nil, k) end
  -- the file is a plain state_dict: nio.load sees exactly the model's entries
  local raw = nio.load(p)
  local n = 0
  for k in pairs(raw) do n = n + 1; lu.assertNotNil(a.params[k], k) end
  lu.assertEquals(n, 3)
  -- strict is passed through
  a.params["extra.weight"] = nc.ones({1})
  nio.save_model(a, p)
  H.assert_error(function() nio.load_model(b, p) end, "unexpected key extra.weight")
  nio.load_model(b, p, {strict = false})
  lu.assertEquals(b.loaded_opts, {strict = false})
end

function TestCheckpoint:test_resume_with_optimizer()
  local model = toy_model(3)
  local opt = toy_optimizer(model)
  opt:step()
  opt:step()
  local p = path("ckpt.netcl")
  nio.save_model(model, p, {optimizer = opt, extra = {epoch = 2, best = 0.875, history = {0.5, 0.75}}})
  -- optimizer tensors are entries under "optim.", the rest is JSON metadata
  local raw, meta = nio.load(p)
  lu.assertNotNil(raw["optim.state.1.exp_avg"])
  lu.assertNotNil(raw["optim.state.2.exp_avg"])
  lu.assertNotNil(raw["fc.weight"])
  lu.assertStrContains(meta["netcl.optimizer"], '"$tensor":"optim.state.1.exp_avg"')
  -- resume into fresh objects
  local model2 = toy_model(4)
  local opt2 = toy_optimizer(model2)
  local extra = nio.load_model(model2, p, {optimizer = opt2})
  lu.assertEquals(extra, {epoch = 2, best = 0.875, history = {0.5, 0.75}})
  lu.assertEquals(math.type(extra.epoch), "integer")
  lu.assertEquals(opt2.lr, 0.01)
  lu.assertEquals(opt2.betas, {0.9, 0.999})
  lu.assertEquals(#opt2.state, 2)
  lu.assertEquals(opt2.state[1].step, 2)
  lu.assertEquals(math.type(opt2.state[1].step), "integer")
  H.assert_close(opt2.state[2].exp_avg, nc.full({3, 2}, 1.0))
  lu.assertEquals(opt2.state[2].exp_avg.device, dev)
  for k, v in pairs(model.params) do H.assert_close(model2.params[k], v, nil, k) end
  -- strict model loading ignores the optimizer entries
  nio.load_model(toy_model(5), p)
  -- asking for optimizer state a file lacks
  nio.save_model(model, path("plain.netcl"))
  H.assert_error(function() nio.load_model(model2, path("plain.netcl"), {optimizer = opt2}) end,
    "netcl.io.load_model", "holds no optimizer state")
end

function TestCheckpoint:test_errors()
  local p = path("err.netcl")
  H.assert_error(function() nio.save_model({}, p) end, "netcl.io.save_model: argument 1 has no state_dict method")
  local bad = {state_dict = function() return {w = 3} end}
  H.assert_error(function() nio.save_model(bad, p) end, "state_dict entry 'w' is a number, expected a Tensor")
  local clash = {state_dict = function() return {["optim.w"] = nc.ones({1})} end}
  H.assert_error(function() nio.save_model(clash, p) end, "reserve for optimizer state")
  local m = toy_model(1)
  local weird = {state_dict = function() return {f = function() end} end}
  H.assert_error(function() nio.save_model(m, p, {optimizer = weird}) end, "netcl.io.save_model: optimizer state",
    "cannot encode a function (at .f)")
  H.assert_error(function() nio.save_model(m, p, {optimiser = weird}) end, "unknown option 'optimiser'")
  H.assert_error(function() nio.load_model(m, path("absent.netcl")) end, "netcl.io.load_model", "cannot open")
end

TestJson = {}

function TestJson:test_round_trip()
  local v = {a = 1, b = 2.5, c = "x\ny", d = {1, 2, {3}}, e = true, f = false, g = {}, [3] = "three",
             nested = {[1] = "one", [5] = "five"}, big = math.maxinteger, tiny = 5e-324}
  local back = nc._json.decode(nc._json.encode(v))
  lu.assertEquals(back, v)
  lu.assertEquals(math.type(back.a), "integer")
  lu.assertEquals(math.type(back.b), "float")
  lu.assertEquals(nc._json.encode({1, 2, 3}), "[1,2,3]")
  H.assert_error(function() nc._json.encode({x = 0 / 0}) end, "no NaN or infinity (at .x)")
  H.assert_error(function() nc._json.encode({[1.5] = 1}) end, "non-integer number key")
  H.assert_error(function() nc._json.encode({s = "\xff"}) end, "not valid UTF-8 (at .s)")
  local cycle = {}
  cycle.self = cycle
  H.assert_error(function() nc._json.encode(cycle) end, "deeper than 200 levels")
  H.assert_error(function() nc._json.decode("{") end, "netcl.json.decode: not valid JSON")
end

-- Files exchanged with tests/interop/formats.py: a reader and writer written from the format
-- descriptions with Python's standard library, cross-checked with numpy (and the safetensors
-- package) when they are installed.
local function find_python()
  local candidates = {"python3", "/usr/bin/python3"}
  if os.getenv("NETCL_PYTHON") then table.insert(candidates, 1, os.getenv("NETCL_PYTHON")) end
  local fallback
  for _, py in ipairs(candidates) do
    local out = io.popen(py .. " tests/interop/formats.py probe 2>/dev/null"):read("a")
    local ok, info = pcall(nc._json.decode, out)
    if ok and type(info) == "table" then
      if info.numpy then return py, info end
      fallback = fallback or {py, info}
    end
  end
  if fallback then return fallback[1], fallback[2] end
end

local function run(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  local ok = p:close()
  assert(ok, cmd .. " failed:\n" .. out)
  return out
end

TestInterop = {}

function TestInterop:setUp()
  self.py, self.info = find_python()
  if not self.py then lu.skip("python3 not found: the safetensors/npy interop checks did not run") end
  if not self.info.numpy then
    print("note: numpy is not installed for " .. self.py .. "; the interop checks use the standard-library reader only")
  end
end

function TestInterop:test_netcl_writes_python_reads()
  local t = sample_tensors()
  local p = path("to-python.safetensors")
  nio.save(t, p, {metadata = {source = "netcl"}})
  local got = nc._json.decode(run(self.py .. " tests/interop/formats.py read-st " .. p))
  lu.assertEquals(got.metadata, {source = "netcl"})
  local n = 0
  for name, x in pairs(t) do
    n = n + 1
    local e = got.tensors[name]
    lu.assertNotNil(e, name)
    local want_dtype = ({float32 = "F32", float64 = "F64", int32 = "I32", int64 = "I64", uint8 = "U8",
                         bool = "BOOL"})[x.dtype]
    lu.assertEquals(e.dtype, want_dtype, name)
    lu.assertEquals(#e.shape, x.ndim, name)
    for d = 1, x.ndim do lu.assertEquals(e.shape[d], x.shape[d], name) end
    H.assert_close(e.values, H.flat(x:tolist()), nil, name)
  end
  lu.assertEquals(got.numpy, self.info.numpy)
  for name, x in pairs({f = t["w.f32"], i = t.i64, b = t.mask, u = t.u8}) do
    local p2 = path("to-python-" .. name .. ".npy")
    nio.save_npy(x, p2)
    local r = nc._json.decode(run(self.py .. " tests/interop/formats.py read-npy " .. p2))
    lu.assertEquals(#r.shape, x.ndim)
    H.assert_close(r.values, H.flat(x:tolist()), nil, name)
  end
end

function TestInterop:test_python_writes_netcl_reads()
  local p = path("from-python.safetensors")
  run(self.py .. " tests/interop/formats.py write-st " .. p)
  local t, meta = nio.load(p)
  lu.assertEquals(meta, {writer = "formats.py", epoch = "7"})
  lu.assertEquals(t.bytes.dtype, "uint8")
  lu.assertEquals(t.bytes:tolist(), {1, 2, 255})
  lu.assertEquals(t.weight.shape, {2, 3})
  H.assert_close(t.weight, {{0.5, -1.0, 2.0}, {3.25, -4.5, 1e-3}}, 1e-7)
  lu.assertEquals(t.big:tolist(), {-(1 << 40), 1 << 62})
  lu.assertEquals(t.mask:tolist(), {{true}, {false}})
  lu.assertEquals(t.scalar.ndim, 0)
  if dev.fp64 then lu.assertEquals(t.scalar:item(), 3.141592653589793) end
  lu.assertEquals(t.i32:tolist(), {-7, 2147483647})
  lu.assertEquals(t.empty.shape, {0, 4})
  for _, descr in ipairs({"<f4", "<f8", "<i4", "<i8", "|u1", "|b1"}) do
    local p2 = path("from-python.npy")
    run(self.py .. " tests/interop/formats.py write-npy " .. p2 .. " '" .. descr .. "'")
    if descr ~= "<f8" or dev.fp64 then
      local x = nio.load_npy(p2)
      lu.assertEquals(x.shape, {2, 3}, descr)
      if descr == "|b1" then
        lu.assertEquals(x:tolist(), {{false, true, true}, {true, true, true}})
      else
        lu.assertEquals(x:tolist(), {{0, 1, 2}, {3, 4, 5}}, descr)
      end
    end
  end
end

local rc = lu.LuaUnit.run()
os.execute("rm -rf " .. dir)
os.exit(rc)

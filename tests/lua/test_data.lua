-- netcl.data: TensorDataset, DataLoader (batching, drop_last, seeded
-- shuffles, devices, transforms, any dataset), idx files and MNIST-family datasets, on the
-- device under test.
local lu = require "luaunit"
local nc = require "netcl"
local data = require "netcl.data"
local H = require "helpers"

local dev = H.device()
local dir = H.tmpdir()
local FASHION = os.getenv("NETCL_FASHION_MNIST") or "/usr/share/datasets/fashion-mnist"

local function write(p, bytes)
  local f = assert(io.open(p, "wb"))
  f:write(bytes)
  f:close()
end

-- An idx file: magic (0, 0, type, ndim), big-endian dims, data.
local function idx(type_code, dims, payload)
  local parts = {string.pack("BBBB", 0, 0, type_code, #dims)}
  for _, d in ipairs(dims) do parts[#parts + 1] = string.pack(">I4", d) end
  parts[#parts + 1] = payload
  return table.concat(parts)
end

local function bytes(n, f)
  local t = {}
  for i = 1, n do t[i] = string.char(f(i) % 256) end
  return table.concat(t)
end

local function gzip_available() return os.execute("command -v gzip >/dev/null 2>&1") end

-- x[i] holds i (as every element of its row), y[i] = i: batches show which rows they took.
local function numbered(n)
  local x = nc.arange(1, n + 1):view({n, 1}):expand({n, 3}):contiguous():view({n, 3})
  local y = nc.arange(1, n + 1, 1, {dtype = "int64"})
  return x, y
end

local function rows_of(batch) -- first column of x (or y itself)
  local l = batch:tolist()
  local out = {}
  for i, v in ipairs(l) do out[i] = type(v) == "table" and v[1] or v end
  return out
end

TestTensorDataset = {}

function TestTensorDataset:test_len_get()
  local x, y = numbered(5)
  local ds = data.TensorDataset(x, y)
  lu.assertEquals(ds:len(), 5)
  local xi, yi = ds:get(2)
  lu.assertEquals(xi:tolist(), {2, 2, 2})
  lu.assertEquals(yi:item(), 2)
  lu.assertEquals(tostring(ds), "TensorDataset(5 rows: float32[5,3], int64[5])")
  H.assert_error(function() ds:get(6) end, "netcl.data.TensorDataset.get: index 6 is out of range 1..5")
  H.assert_error(function() ds:get(0) end, "out of range")
  H.assert_error(function() data.TensorDataset(x, nc.zeros({4})) end, "argument 2 has 4 rows, argument 1 has 5")
  H.assert_error(function() data.TensorDataset(x, {1, 2}) end, "argument 2 is a table, expected a Tensor")
  H.assert_error(function() data.TensorDataset(nc.tensor(1)) end, "argument 1 is 0-dim")
  H.assert_error(function() data.TensorDataset() end, "needs at least one tensor")
  -- strided inputs are made contiguous once
  local t = nc.arange(6):view({2, 3}):transpose(1, 2)
  local ds2 = data.TensorDataset(t)
  lu.assertEquals(ds2:get(3):tolist(), {2, 5})
end

TestDataLoader = {}

function TestDataLoader:test_batches_in_order()
  local x, y = numbered(10)
  local loader = data.DataLoader(data.TensorDataset(x, y), {batch_size = 4})
  lu.assertEquals(loader:len(), 3)
  local seen = {}
  for xb, yb in loader:iter() do
    lu.assertEquals(xb.device, dev)
    lu.assertEquals(xb.dtype, "float32")
    lu.assertEquals(yb.dtype, "int64")
    lu.assertEquals(xb.shape[2], 3)
    seen[#seen + 1] = rows_of(yb)
    lu.assertEquals(rows_of(xb), rows_of(yb))
  end
  lu.assertEquals(seen, {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10}})
  local dl = data.DataLoader(data.TensorDataset(x, y), {batch_size = 4, drop_last = true})
  lu.assertEquals(dl:len(), 2)
  local n = 0
  for xb in dl:iter() do n = n + 1; lu.assertEquals(#xb, 4) end
  lu.assertEquals(n, 2)
  lu.assertEquals(data.DataLoader(data.TensorDataset(x)):len(), 10) -- batch_size 1 by default
end

local function epoch_order(loader)
  local order = {}
  for xb, yb in loader:iter() do
    lu.assertEquals(rows_of(xb), rows_of(yb)) -- rows stay paired
    for _, v in ipairs(rows_of(yb)) do order[#order + 1] = v end
  end
  return order
end

function TestDataLoader:test_seeded_shuffle()
  local x, y = numbered(50)
  local ds = data.TensorDataset(x, y)
  local a = data.DataLoader(ds, {batch_size = 8, shuffle = true, seed = 123})
  local b = data.DataLoader(ds, {batch_size = 8, shuffle = true, seed = 123})
  local a1, a2, b1 = epoch_order(a), epoch_order(a), epoch_order(b)
  lu.assertEquals(a1, b1) -- deterministic for a seed
  lu.assertNotEquals(a1, a2) -- a new permutation each epoch
  local sorted = {table.unpack(a1)}
  table.sort(sorted)
  for i = 1, 50 do lu.assertEquals(sorted[i], i) end -- every row once
  local inorder = 0
  for i = 1, 50 do if a1[i] == i then inorder = inorder + 1 end end
  lu.assertTrue(inorder < 10)
  -- the order is the documented permutation of (seed, epoch): nc._data.permutation, 0-based
  local perm = nc._data.permutation(50, 123, 2):tolist()
  for i = 1, 50 do lu.assertEquals(a2[i], perm[i] + 1) end
  lu.assertNotEquals(epoch_order(data.DataLoader(ds, {batch_size = 8, shuffle = true, seed = 124})), a1)
  -- without a seed, nc.manual_seed decides
  nc.manual_seed(7)
  local c = data.DataLoader(ds, {batch_size = 8, shuffle = true})
  nc.manual_seed(7)
  local d = data.DataLoader(ds, {batch_size = 8, shuffle = true})
  lu.assertEquals(epoch_order(c), epoch_order(d))
end

function TestDataLoader:test_device_and_transform()
  local x, y = numbered(6)
  local cpu_x = x:to("cpu")
  local seen_device
  local loader = data.DataLoader(data.TensorDataset(cpu_x, y:to("cpu")), {
    batch_size = 4, device = dev, shuffle = true, seed = 1,
    transform = function(xb)
      seen_device = xb.device
      return xb:to("int32")
    end})
  for xb, yb in loader:iter() do
    lu.assertEquals(xb.dtype, "int32")
    lu.assertEquals(yb.device, dev)
    lu.assertEquals(rows_of(xb), rows_of(yb))
  end
  lu.assertEquals(seen_device, dev) -- transforms see the batch on the target device
  lu.assertEquals(data.DataLoader(data.TensorDataset(x), {device = "cpu"}).device.kind, "cpu")
  lu.assertStrContains(tostring(loader), "DataLoader(2 batches of 4, shuffled, device=")
end

-- Any table with len and get; its batches match the TensorDataset fast path's.
function TestDataLoader:test_any_dataset()
  local x, y = numbered(9)
  local generic = {
    len = function() return 9 end,
    get = function(_, i) return x[i], i, i * 0.5, i % 2 == 0 end,
  }
  local g = data.DataLoader(generic, {batch_size = 4, shuffle = true, seed = 5})
  local f = data.DataLoader(data.TensorDataset(x, y), {batch_size = 4, shuffle = true, seed = 5})
  local fast = {}
  for xb, yb in f:iter() do fast[#fast + 1] = {xb:tolist(), yb:tolist()} end
  local k = 0
  for xb, ib, hb, bb in g:iter() do
    k = k + 1
    lu.assertEquals(xb.device, dev)
    lu.assertEquals(ib.dtype, "int64")
    lu.assertEquals(hb.dtype, "float32")
    lu.assertEquals(bb.dtype, "bool")
    lu.assertEquals(xb:tolist(), fast[k][1])
    lu.assertEquals(ib:tolist(), fast[k][2])
    for j, i in ipairs(ib:tolist()) do
      lu.assertEquals(hb:tolist()[j], i * 0.5)
      lu.assertEquals(bb:tolist()[j], i % 2 == 0)
    end
  end
  lu.assertEquals(k, 3)
  local ragged = {len = function() return 2 end, get = function(_, i) return nc.zeros({i}) end}
  H.assert_error(function() for _ in data.DataLoader(ragged, {batch_size = 2}):iter() do end end,
    "netcl.data.DataLoader: get(2) field 1 does not match the first sample of the batch (a tensor [1])")
  local odd = {len = function() return 1 end, get = function() return "text" end}
  H.assert_error(function() for _ in data.DataLoader(odd):iter() do end end,
    "get(1) field 1 is a string; samples hold tensors, numbers or booleans")
end

function TestDataLoader:test_errors()
  local ds = data.TensorDataset(nc.zeros({4, 2}))
  H.assert_error(function() data.DataLoader(ds, {num_workers = -1}) end,
    "netcl.data.DataLoader: num_workers must be an integer >= 0, got -1")
  H.assert_error(function() data.DataLoader(ds, {num_workers = 2, prefetch = 65}) end, "prefetch must be at most 64")
  H.assert_error(function() data.DataLoader(ds, {batchsize = 2}) end, "unknown option 'batchsize'")
  H.assert_error(function() data.DataLoader(ds, {batch_size = 0}) end, "batch_size must be an integer >= 1, got 0")
  H.assert_error(function() data.DataLoader(ds, {shuffle = "yes"}) end, "shuffle must be a boolean")
  H.assert_error(function() data.DataLoader(ds, {transform = 3}) end, "transform must be a function")
  H.assert_error(function() data.DataLoader({1, 2, 3}) end, "argument 1 must be a dataset")
  H.assert_error(function() data.DataLoader(ds, {prefetch = 0}) end, "prefetch must be an integer >= 1")
  H.assert_error(function() data.DataLoader(ds, {device = 3}) end, "device must be a Device or a device spec")
  local nil_transform = data.DataLoader(ds, {transform = function() end})
  H.assert_error(function() for _ in nil_transform:iter() do end end, "transform returned nil")
end

TestIdx = {}

function TestIdx:test_small_files()
  local p = dir .. "/small-idx3-ubyte"
  write(p, idx(0x08, {2, 3, 4}, bytes(24, function(i) return i * 11 end)))
  local t = data.load_idx(p)
  lu.assertEquals(t.shape, {2, 3, 4})
  lu.assertEquals(t.dtype, "uint8")
  lu.assertEquals(t.device.kind, "cpu") -- datasets stay in host memory by default
  lu.assertEquals(t[2][3]:tolist(), {(21 * 11) % 256, (22 * 11) % 256, (23 * 11) % 256, (24 * 11) % 256})
  lu.assertEquals(data.load_idx(p, {device = dev}).device, dev)
  -- big-endian floats and ints
  write(p, idx(0x0D, {3}, string.pack(">fff", 1.5, -2, 1e-3)))
  H.assert_close(data.load_idx(p), {1.5, -2, 1e-3}, 1e-7)
  write(p, idx(0x0B, {2}, string.pack(">i2i2", -300, 300)))
  lu.assertEquals(data.load_idx(p):tolist(), {-300, 300})
  if gzip_available() then
    write(p, idx(0x0C, {2, 2}, string.pack(">i4i4i4i4", 1, -1, 65536, 7)))
    os.execute("gzip -f " .. p)
    local z = data.load_idx(p .. ".gz")
    lu.assertEquals(z.dtype, "int32")
    lu.assertEquals(z:tolist(), {{1, -1}, {65536, 7}})
  else
    print("note: gzip not installed; the gzip idx case here did not run (tests/c/test_idx covers it)")
  end
end

function TestIdx:test_bad_files()
  local p = dir .. "/bad-idx"
  local cases = {
    {"\1\2\8\1" .. string.pack(">I4", 1) .. "x", "not an idx file (bad magic 01 02 08 01"},
    {"\0\0\5\1" .. string.pack(">I4", 1) .. "x", "not an idx file: unknown element type 0x05"},
    {"\0\0\8", "file is 3 bytes, too short for the 4-byte idx magic"},
    {idx(0x08, {2, 3}, "12345"), "data are truncated: dims [2, 3] of ubyte need 6 bytes, the file holds 5"},
    {idx(0x08, {2, 2}, "123456"), "wrong dims: the file holds more data than dims [2, 2] of ubyte need (4 bytes)"},
    {"\0\0\8\2" .. string.pack(">I4", 7), "file ends inside the header: 2 dims need 8 bytes, 4 are left"},
    {"\0\0\8\0", "idx header declares 0 dims"},
  }
  for _, c in ipairs(cases) do
    write(p, c[1])
    H.assert_error(function() data.load_idx(p) end, "netcl.data.load_idx: " .. p .. ": " .. c[2])
  end
  H.assert_error(function() data.load_idx(dir .. "/absent") end, "cannot open")
end

TestMnist = {}

-- Small MNIST-format folders built here: the layout rules, and bad folders.
function TestMnist:test_small_folder()
  local d = dir .. "/mini"
  os.execute("mkdir -p " .. d)
  write(d .. "/t10k-images-idx3-ubyte", idx(0x08, {3, 2, 2}, bytes(12, function(i) return i end)))
  write(d .. "/t10k-labels.idx1-ubyte", idx(0x08, {3}, "\9\0\4"))
  local x, y = data.mnist(d, "test")
  lu.assertEquals(x.shape, {3, 1, 2, 2})
  lu.assertEquals(x.dtype, "uint8")
  lu.assertEquals(x[3]:tolist(), {{{9, 10}, {11, 12}}})
  lu.assertEquals(y.dtype, "int64")
  lu.assertEquals(y:tolist(), {9, 0, 4})
  H.assert_error(function() data.mnist(d, "train") end, "netcl.data.mnist: " .. d .. ": no train-images-idx3-ubyte")
  H.assert_error(function() data.mnist(d, "validation") end, 'split must be "train" or "test", got validation')
  write(d .. "/t10k-labels.idx1-ubyte", idx(0x08, {2}, "\9\0"))
  H.assert_error(function() data.mnist(d, "test") end, "3 images but 2 labels")
  write(d .. "/t10k-labels.idx1-ubyte", idx(0x08, {3, 1}, "\9\0\4"))
  H.assert_error(function() data.mnist(d, "test") end, "expected uint8 labels [N]")
  write(d .. "/t10k-labels.idx1-ubyte", idx(0x08, {3}, "\9\0"))
  H.assert_error(function() data.mnist(d, "test") end, "netcl.data.mnist: " .. d .. "/t10k-labels.idx1-ubyte: data are truncated")
end

-- The real Fashion-MNIST files of Debian's dataset-fashion-mnist, checked against gzip -dc.
function TestMnist:test_fashion_mnist()
  local f = io.open(FASHION .. "/train-images-idx3-ubyte.gz", "rb")
  if not f then lu.skip("Fashion-MNIST not found in " .. FASHION .. " (Debian package dataset-fashion-mnist)") end
  f:close()
  local t0 = nc.clock()
  local x, y = data.mnist(FASHION, "train")
  local elapsed = nc.clock() - t0
  lu.assertEquals(x.shape, {60000, 1, 28, 28})
  lu.assertEquals(y.shape, {60000})
  local xt, yt = data.mnist(FASHION, "test")
  lu.assertEquals(xt.shape, {10000, 1, 28, 28})
  lu.assertEquals(yt.shape, {10000})
  -- ten balanced classes, 0..9
  local counts = {}
  for _, v in ipairs(yt:tolist()) do counts[v] = (counts[v] or 0) + 1 end
  for c = 0, 9 do lu.assertEquals(counts[c], 1000) end
  if gzip_available() then
    local raw = io.popen("gzip -dc " .. FASHION .. "/train-labels-idx1-ubyte.gz"):read("a")
    lu.assertEquals(#raw, 8 + 60000)
    for i = 1, 60000, 997 do lu.assertEquals(y[i]:item(), raw:byte(8 + i)) end
    local img = io.popen("gzip -dc " .. FASHION .. "/t10k-images-idx3-ubyte.gz"):read("a")
    local last = xt[10000]:flatten():tolist()
    for k = 1, 784 do lu.assertEquals(last[k], img:byte(16 + 9999 * 784 + k)) end
  end
  -- a training epoch's batches
  local loader = data.DataLoader(data.TensorDataset(x, y), {batch_size = 256, shuffle = true, seed = 0})
  local n, t1 = 0, nc.clock()
  for xb, yb in loader:iter() do
    n = n + 1
    if n == 1 then
      lu.assertEquals(xb.shape, {256, 1, 28, 28})
      lu.assertEquals(xb.device, dev)
    end
  end
  lu.assertEquals(n, 235)
  print(string.format("fashion-mnist: train split read in %.2f s; one shuffled epoch of batches in %.2f s on %s",
    elapsed, nc.clock() - t1, dev.spec))
end

TestCifar = {}

-- CIFAR-10 binary batches: record r has label labels[r] and pixel i = (r * 7 + i) % 256.
local function cifar_records(labels)
  local parts = {}
  for r, lab in ipairs(labels) do
    parts[#parts + 1] = string.char(lab) .. bytes(3072, function(i) return (r - 1) * 7 + i - 1 end)
  end
  return table.concat(parts)
end

function TestCifar:test_splits_layout_and_errors()
  local root = dir .. "/cifar"
  os.execute("mkdir -p " .. root .. "/cifar-10-batches-bin")
  local base = root .. "/cifar-10-batches-bin/"
  write(base .. "test_batch.bin", cifar_records({3, 8}))
  local x, y = data.cifar10(root, "test", {device = dev})
  lu.assertEquals(x.shape, {2, 3, 32, 32})
  lu.assertEquals(x.dtype, "uint8")
  lu.assertEquals(x.device, dev)
  lu.assertEquals(y:tolist(), {3, 8})
  lu.assertEquals(y.dtype, "int64")
  -- channel planes in order: x[2][3][1][2] is record 2's pixel 2048 + 1
  lu.assertEquals(x[2][3][1][2]:item(), (7 + 2049) % 256)
  H.assert_error(function() data.cifar10(root, "train") end, "netcl.data.cifar10: " .. root .. ": no data_batch_1.bin")
  for i = 1, 5 do write(base .. "data_batch_" .. i .. ".bin", cifar_records({i, i + 1})) end
  local _, ty = data.cifar10(base, "train")
  lu.assertEquals(ty:tolist(), {1, 2, 2, 3, 3, 4, 4, 5, 5, 6})
  write(base .. "data_batch_4.bin", cifar_records({1}):sub(1, 3000))
  H.assert_error(function() data.cifar10(root, "train") end, "data_batch_4.bin: 3000 bytes are not a whole number of CIFAR-10 records")
  H.assert_error(function() data.cifar10(root, "val") end, 'split must be "train" or "test", got val')
  H.assert_error(function() data.cifar10(root, "test", {dev = "cpu"}) end, "unknown option 'dev' (accepted: {device=})")
end

TestNpyDataset = {}

-- A format 1.0 npy file: magic, version, header length, the header dict padded to 64 bytes.
local function npy(descr, fortran, shape, payload)
  local dims = {}
  for i, d in ipairs(shape) do dims[i] = tostring(d) end
  local header = string.format("{'descr': '%s', 'fortran_order': %s, 'shape': (%s,), }", descr,
    fortran and "True" or "False", table.concat(dims, ", "))
  header = header .. string.rep(" ", 63 - (10 + #header) % 64) .. "\n"
  return "\x93NUMPY\x01\x00" .. string.pack("<I2", #header) .. header .. payload
end

function TestNpyDataset:test_mapped_files_as_a_dataset()
  local nio = require "netcl.io"
  local x = nc.arange(0, 30, 1, {device = "cpu"}):view({10, 3})
  local y = nc.arange(0, 10, 1, {dtype = "int64", device = "cpu"})
  local px, py = dir .. "/x.npy", dir .. "/y.npy"
  nio.save_npy(x, px)
  nio.save_npy(y, py)
  local ds = data.npy_dataset(px, py)
  lu.assertEquals(ds:len(), 10)
  local xi, yi = ds:get(4)
  lu.assertEquals(xi:tolist(), {9, 10, 11})
  lu.assertEquals(yi:item(), 3)
  local seen = {}
  for xb, yb in data.DataLoader(ds, {batch_size = 4, shuffle = true, seed = 2, device = dev}):iter() do
    local xs, ys = xb:to("cpu"):tolist(), yb:to("cpu"):tolist()
    for k = 1, #ys do
      lu.assertEquals(xs[k], {3 * ys[k], 3 * ys[k] + 1, 3 * ys[k] + 2})
      seen[ys[k]] = true
    end
  end
  for k = 0, 9 do lu.assertTrue(seen[k]) end
  -- writes to the mapped tensor stay in this process: the file keeps its data
  ds.tensors[1]:fill_(-1)
  lu.assertEquals(nio.load_npy(px):tolist()[2], {3, 4, 5})
  -- a column-major file is read in row-major order
  local pf = dir .. "/f.npy"
  write(pf, npy("<f4", true, {2, 3}, string.pack("<ffffff", 1, 4, 2, 5, 3, 6)))
  lu.assertEquals(data.npy_dataset(pf).tensors[1]:tolist(), {{1, 2, 3}, {4, 5, 6}})
  H.assert_error(function() data.npy_dataset(dir .. "/none.npy") end, "none.npy: cannot open")
  H.assert_error(function() data.npy_dataset(px, dir .. "/f.npy") end, "argument 2 has 2 rows, argument 1 has 10")
  write(dir .. "/cut.npy", npy("<f4", false, {4}, string.pack("<fff", 1, 2, 3)))
  H.assert_error(function() data.npy_dataset(dir .. "/cut.npy") end, "cut.npy: the shape needs 16 bytes of data, the file holds 12")
end

local rc = lu.LuaUnit.run()
os.execute("rm -rf " .. dir)
os.exit(rc)

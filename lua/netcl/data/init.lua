-- netcl.data: datasets, the DataLoader, transforms, and dataset files (MNIST-family idx files,
-- CIFAR-10 binary batches).
-- docs/data.md describes batching, shuffling and devices.
local nc = require "netcl"

local M = {}

M.TensorDataset = require "netcl.data.dataset"
M.DataLoader = require "netcl.data.loader"
M.mnist = require "netcl.data.mnist"
M.cifar10 = require "netcl.data.cifar"
M.transforms = require "netcl.data.transforms"

--- data.load_idx(path, {device=}) -> Tensor: an idx file, plain or gzip. Datasets stay in host
-- memory by default (device "cpu"); the DataLoader moves each batch to its device.
function M.load_idx(path, opts)
  if type(path) ~= "string" then
    error("netcl.data.load_idx: argument 1: expected a path string, got " .. type(path), 2)
  end
  if opts ~= nil and type(opts) ~= "table" then
    error("netcl.data.load_idx: options must be a table, got " .. type(opts), 2)
  end
  local ok, t = pcall(nc._io.load_idx, path, opts and opts.device or "cpu", "netcl.data.load_idx")
  -- re-raised at the caller's line rather than this one
  if not ok then error((tostring(t):gsub("^%[netcl%][^:]*:%d+: ", "")), 2) end
  return t
end

--- data.debian_dataset_dir(package, file) -> the folder where Debian's dataset package
-- `package` installed `file` (plain or .gz), or nil. For the samples:
-- data.debian_dataset_dir("dataset-fashion-mnist", "train-images-idx3-ubyte").
function M.debian_dataset_dir(package, file)
  if type(package) ~= "string" or not package:match("^[%w.+-]+$") then
    error("netcl.data.debian_dataset_dir: argument 1: expected a Debian package name, got " .. tostring(package), 2)
  end
  if type(file) ~= "string" then
    error("netcl.data.debian_dataset_dir: argument 2: expected a file name, got " .. type(file), 2)
  end
  local p = io.popen("dpkg -L " .. package .. " 2>/dev/null")
  local listing = p and p:read("a") or ""
  if p then p:close() end
  local pat = file:gsub("%p", "%%%0")
  for line in listing:gmatch("[^\n]+") do
    local dir = line:match("^(.*)/" .. pat .. "%.gz$") or line:match("^(.*)/" .. pat .. "$")
    if dir then return dir end
  end
  return nil
end

--- data.fashion_mnist_dir() -> the directory holding Fashion-MNIST's idx files, or nil:
-- $NETCL_FASHION_MNIST when set, else where Debian's dataset-fashion-mnist installed them.
-- The samples use it as their default --data.
function M.fashion_mnist_dir()
  local env = os.getenv("NETCL_FASHION_MNIST")
  if env and env ~= "" then return env end
  return M.debian_dataset_dir("dataset-fashion-mnist", "train-images-idx3-ubyte")
end

--- Fashion-MNIST's pixel mean and standard deviation (training set, pixels scaled to [0, 1]).
M.FASHION_MNIST_MEAN, M.FASHION_MNIST_STD = 0.2860, 0.3530

--- data.normalize_fashion_mnist(x) -> float32 (x / 255 - mean) / std, for uint8 images.
function M.normalize_fashion_mnist(x)
  return (x:to("float32") * (1 / (255 * M.FASHION_MNIST_STD))) - M.FASHION_MNIST_MEAN / M.FASHION_MNIST_STD
end

--- data.npy_dataset(path1, path2, ...) -> TensorDataset: one tensor per .npy file (rows along the
-- first dim), each a CPU tensor over the file mapped with mmap, so a dataset larger than memory
-- is paged in as batches read it (column-major files are read into memory instead).
function M.npy_dataset(...)
  local n = select("#", ...)
  if n == 0 then error("netcl.data.npy_dataset: needs at least one path", 2) end
  local tensors = {}
  for i = 1, n do
    local path = select(i, ...)
    if type(path) ~= "string" then
      error(string.format("netcl.data.npy_dataset: argument %d: expected a path string, got %s", i, type(path)), 2)
    end
    local ok, t = pcall(nc._io.map_npy, path, "netcl.data.npy_dataset")
    if not ok then error((tostring(t):gsub("^%[netcl%][^:]*:%d+: ", "")), 2) end
    tensors[i] = t
  end
  local ok, ds = pcall(M.TensorDataset, table.unpack(tensors, 1, n))
  if not ok then error((tostring(ds):gsub("^[^:]*:%d+: ", "")), 2) end
  return ds
end

return M

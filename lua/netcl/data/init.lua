-- netcl.data: datasets, the DataLoader, and dataset files (MNIST-family idx files).
-- docs/data.md describes batching, shuffling and devices.
local nc = require "netcl"

local M = {}

M.TensorDataset = require "netcl.data.dataset"
M.DataLoader = require "netcl.data.loader"
M.mnist = require "netcl.data.mnist"

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

--- Fashion-MNIST's pixel mean and standard deviation (training set, pixels scaled to [0, 1]).
M.FASHION_MNIST_MEAN, M.FASHION_MNIST_STD = 0.2860, 0.3530

--- data.normalize_fashion_mnist(x) -> float32 (x / 255 - mean) / std, for uint8 images.
function M.normalize_fashion_mnist(x)
  return (x:to("float32") * (1 / (255 * M.FASHION_MNIST_STD))) - M.FASHION_MNIST_MEAN / M.FASHION_MNIST_STD
end

return M

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

return M

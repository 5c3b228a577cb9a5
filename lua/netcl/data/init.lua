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

--- data.fashion_mnist_dir() -> the directory holding Fashion-MNIST's idx files, or nil:
-- $NETCL_FASHION_MNIST when set, else where Debian's dataset-fashion-mnist installed them
-- (asked of dpkg). The samples use it as their default --data.
function M.fashion_mnist_dir()
  local env = os.getenv("NETCL_FASHION_MNIST")
  if env and env ~= "" then return env end
  local p = io.popen("dpkg -L dataset-fashion-mnist 2>/dev/null")
  local listing = p and p:read("a") or ""
  if p then p:close() end
  for line in listing:gmatch("[^\n]+") do
    local dir = line:match("^(.*)/train%-images%-idx3%-ubyte%.gz$") or line:match("^(.*)/train%-images%-idx3%-ubyte$")
    if dir then return dir end
  end
  return nil
end

return M

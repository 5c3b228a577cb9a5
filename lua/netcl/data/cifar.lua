-- data.cifar10(dir, split, {device=}): CIFAR-10's binary batches (the "binary version" of the
-- dataset: data_batch_1.bin ... data_batch_5.bin and test_batch.bin, in dir or in its
-- cifar-10-batches-bin folder).
local nc = require "netcl"

local FILES = {
  train = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"},
  test = {"test_batch.bin"},
}

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

--- -> x (uint8 [N, 3, 32, 32]), y (int64 [N], class labels 0..9)
return function(dir, split, opts)
  local fname = "netcl.data.cifar10"
  if type(dir) ~= "string" then error(fname .. ": argument 1: expected a folder path, got " .. type(dir), 2) end
  local files = FILES[split]
  if not files then error(string.format("%s: split must be \"train\" or \"test\", got %s", fname, tostring(split)), 2) end
  if opts ~= nil and type(opts) ~= "table" then error(fname .. ": options must be a table, got " .. type(opts), 2) end
  for k in pairs(opts or {}) do
    if k ~= "device" then error(string.format("%s: unknown option '%s' (accepted: {device=})", fname, tostring(k)), 2) end
  end
  local base = dir
  if not exists(base .. "/" .. files[1]) and exists(base .. "/cifar-10-batches-bin/" .. files[1]) then
    base = base .. "/cifar-10-batches-bin"
  end
  local paths = {}
  for i, f in ipairs(files) do
    paths[i] = base .. "/" .. f
    if not exists(paths[i]) then error(string.format("%s: %s: no %s (the binary version of CIFAR-10)", fname, dir, f), 2) end
  end
  local ok, x, y = pcall(nc._data.cifar10, paths, opts and opts.device or "cpu")
  -- re-raised at the caller's line rather than this one
  if not ok then error((tostring(x):gsub("^%[netcl%][^:]*:%d+: ", "")), 2) end
  return x, y
end

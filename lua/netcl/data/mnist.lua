-- data.mnist(dir, split, {device=}): the MNIST family (MNIST, Fashion-MNIST, KMNIST, ...) from
-- their idx files, plain or gzip.
local nc = require "netcl"

local FILES = {
  train = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"},
  test = {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"},
}

-- The names as distributed ("train-images-idx3-ubyte.gz") and as some mirrors spell them
-- ("train-images.idx3-ubyte").
local function find(dir, base)
  local dotted = base:gsub("%-idx", ".idx")
  for _, name in ipairs({base, base .. ".gz", dotted, dotted .. ".gz"}) do
    local path = dir .. "/" .. name
    local f = io.open(path, "rb")
    if f then
      f:close()
      return path
    end
  end
  error(string.format("netcl.data.mnist: %s: no %s or %s.gz", dir, base, base), 3)
end

local function dims(t) return "[" .. table.concat(t.shape, ", ") .. "]" end

--- -> x (uint8 [N, 1, rows, cols]), y (int64 [N], class labels 0..9)
return function(dir, split, opts)
  local fname = "netcl.data.mnist"
  if type(dir) ~= "string" then error(fname .. ": argument 1: expected a folder path, got " .. type(dir), 2) end
  local files = FILES[split]
  if not files then error(string.format("%s: split must be \"train\" or \"test\", got %s", fname, tostring(split)), 2) end
  if opts ~= nil and type(opts) ~= "table" then error(fname .. ": options must be a table, got " .. type(opts), 2) end
  local dev = opts and opts.device or "cpu"
  local ipath, lpath = find(dir, files[1]), find(dir, files[2])
  local ok, x = pcall(nc._io.load_idx, ipath, dev, fname)
  local ok2, y = true, nil
  if ok then ok2, y = pcall(nc._io.load_idx, lpath, dev, fname) end
  -- re-raised at the caller's line rather than this one
  if not (ok and ok2) then error((tostring(ok and y or x):gsub("^%[netcl%][^:]*:%d+: ", "")), 2) end
  if x.dtype ~= "uint8" or x.ndim ~= 3 then
    error(string.format("%s: %s holds %s %s, expected uint8 images [N, rows, cols]", fname, ipath, x.dtype, dims(x)), 2)
  end
  if y.dtype ~= "uint8" or y.ndim ~= 1 then
    error(string.format("%s: %s holds %s %s, expected uint8 labels [N]", fname, lpath, y.dtype, dims(y)), 2)
  end
  if #y ~= #x then
    error(string.format("%s: %d images but %d labels (%s, %s)", fname, #x, #y, ipath, lpath), 2)
  end
  return x:view({#x, 1, x.shape[2], x.shape[3]}), y:to("int64")
end

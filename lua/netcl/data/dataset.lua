-- TensorDataset: rows of one or more tensors that share their first dim. Any table with
-- len(self) and get(self, i) is a dataset too; the DataLoader gathers batches of a
-- TensorDataset in C instead of calling get for every sample.
local nc = require "netcl"
local class = require "netcl.class"

local TensorDataset = class("netcl.data.TensorDataset")

--- data.TensorDataset(t1, t2, ...). Errors at level 3 are the caller's line (netcl.class calls
-- init).
function TensorDataset:init(...)
  local fname = "netcl.data.TensorDataset"
  local n = select("#", ...)
  if n == 0 then error(fname .. ": needs at least one tensor", 3) end
  local tensors = {}
  for i = 1, n do
    local t = select(i, ...)
    if not nc.is_tensor(t) then
      error(string.format("%s: argument %d is a %s, expected a Tensor", fname, i, type(t)), 3)
    end
    if t.ndim == 0 then error(string.format("%s: argument %d is 0-dim; samples are rows along dim 1", fname, i), 3) end
    if i > 1 and #t ~= #tensors[1] then
      error(string.format("%s: argument %d has %d rows, argument 1 has %d", fname, i, #t, #tensors[1]), 3)
    end
    -- Contiguous once here, so every batch gather copies whole rows.
    tensors[i] = t:contiguous()
  end
  self.tensors, self.size = tensors, #tensors[1]
end

function TensorDataset:len() return self.size end

--- ds:get(i) -> the i-th row (1-based) of each tensor, as views.
function TensorDataset:get(i)
  if math.type(i) ~= "integer" or i < 1 or i > self.size then
    error(string.format("netcl.data.TensorDataset.get: index %s is out of range 1..%d", tostring(i), self.size), 2)
  end
  local row = {}
  for k, t in ipairs(self.tensors) do row[k] = t[i] end
  return table.unpack(row, 1, #self.tensors)
end

function TensorDataset:__tostring()
  local parts = {}
  for k, t in ipairs(self.tensors) do
    parts[k] = string.format("%s[%s]", t.dtype, table.concat(t.shape, ","))
  end
  return string.format("TensorDataset(%d rows: %s)", self.size, table.concat(parts, ", "))
end

return TensorDataset

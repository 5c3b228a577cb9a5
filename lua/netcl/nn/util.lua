-- Argument checks shared by the layers: every constructor validates what it is given and names
-- itself in the error, so a typo in an option fails at construction, not inside a kernel.
-- The checks run in a layer's init, which the class call runs from the user's line: level 4
-- from a check below is that line.
local nc = require "netcl"

local M = {}
local LEVEL = 4

--- options(fname, opts, allowed) -> opts (a table, {} for nil); errors on unknown keys.
function M.options(fname, opts, allowed)
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    error(string.format("%s: options must be a table, got %s", fname, type(opts)), LEVEL)
  end
  for k in pairs(opts) do
    if not allowed[k] then
      local names = {}
      for a in pairs(allowed) do names[#names + 1] = a end
      table.sort(names)
      error(string.format("%s: unknown option '%s' (options: %s)", fname, tostring(k), table.concat(names, ", ")),
        LEVEL)
    end
  end
  return opts
end

local function int(fname, what, v, min, level)
  if math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v) and v == v) then
    error(string.format("%s: %s must be an integer, got %s", fname, what, tostring(v)), level)
  end
  v = math.tointeger(v)
  if min and v < min then error(string.format("%s: %s must be >= %d, got %d", fname, what, min, v), level) end
  return v
end

--- int(fname, what, v, min) -> v, an integer >= min. (The parentheses keep this from being a
-- tail call, which would drop this function's level from the count.)
function M.int(fname, what, v, min) return (int(fname, what, v, min, LEVEL + 1)) end

--- pair(fname, what, v, min) -> {a, b}: an integer or a pair of integers, each >= min.
function M.pair(fname, what, v, min)
  if type(v) == "table" then
    if #v ~= 2 then error(string.format("%s: %s must be an integer or a pair {h, w}", fname, what), LEVEL) end
    return {int(fname, what, v[1], min, LEVEL + 1), int(fname, what, v[2], min, LEVEL + 1)}
  end
  local i = int(fname, what, v, min, LEVEL + 1)
  return {i, i}
end

--- number(fname, what, v, lo, hi) -> v, a number in [lo, hi].
function M.number(fname, what, v, lo, hi)
  if type(v) ~= "number" or v ~= v then
    error(string.format("%s: %s must be a number, got %s", fname, what, tostring(v)), LEVEL)
  end
  if (lo and v < lo) or (hi and v > hi) then
    error(string.format("%s: %s must be in [%s, %s], got %s", fname, what, tostring(lo or "-inf"),
      tostring(hi or "inf"), tostring(v)), LEVEL)
  end
  return v
end

--- bool(fname, what, v, default) -> v or default.
function M.bool(fname, what, v, default)
  if v == nil then return default end
  if type(v) ~= "boolean" then
    error(string.format("%s: %s must be a boolean, got %s", fname, what, type(v)), LEVEL)
  end
  return v
end

--- tensor_opts(opts) -> {device=, dtype=} for creating a layer's parameters.
function M.tensor_opts(opts)
  local dev = opts.device
  if type(dev) == "string" then dev = nc.device(dev) end
  return {device = dev or nc.default_device(), dtype = opts.dtype or "float32"}
end

--- uniform(shape, bound, topts) -> Tensor uniform in [-bound, bound). Drawn with nc.rand, so
-- the same seed gives the same weights on every backend.
function M.uniform(shape, bound, topts)
  local t = nc.rand(shape, topts)
  return t:mul_(2 * bound):add_(-bound)
end

--- shape_str({2, 3}) -> "[2, 3]"
function M.shape_str(shape) return "[" .. table.concat(shape, ", ") .. "]" end

return M

-- netcl.ssl's common part: the strict options reader and value() (a Node's Tensor) (docs/ssl.md).
local nc = require "netcl"
local nn = require "netcl.nn"
local class = require "netcl.class"

local is_node = nc.is_node

local function value(x) return is_node(x) and x.value or x end

-- ---- options -------------------------------------------------------------------------------------
-- spec: key -> {kind, default} with kind "number", "integer", "positive", "unit" ([0, 1]),
-- "boolean", "module", "any"; default nil = required.
local function read_opts(fname, opts, spec, level)
  level = level + 1
  if type(opts) ~= "table" then error(string.format("%s: expected an options table, got %s", fname, type(opts)), level) end
  local keys = {}
  for k in pairs(spec) do keys[#keys + 1] = k .. "=" end
  table.sort(keys)
  for k in pairs(opts) do
    if spec[k] == nil then
      error(string.format("%s: unknown option '%s' (accepted: {%s})", fname, tostring(k), table.concat(keys, ", ")), level)
    end
  end
  local out = {}
  for k, s in pairs(spec) do
    local v = opts[k]
    if v == nil then v = s[2] end
    local kind = s[1]
    if v == nil and not s.optional then error(string.format("%s: option '%s' is required", fname, k), level) end
    if v ~= nil then
      local ok = true
      if kind == "number" then ok = type(v) == "number"
      elseif kind == "positive" then ok = type(v) == "number" and v > 0
      elseif kind == "integer" then ok = math.type(v) == "integer" and v > 0
      elseif kind == "unit" then ok = type(v) == "number" and v >= 0 and v <= 1
      elseif kind == "boolean" then ok = type(v) == "boolean"
      elseif kind == "module" then ok = class.is_instance(v, nn.Module)
      elseif kind == "string" then ok = type(v) == "string" end
      if not ok then
        local want = ({number = "a number", positive = "a positive number", integer = "a positive integer",
                       unit = "a number in [0, 1]", boolean = "a boolean", module = "an nn.Module",
                       string = "a string"})[kind] or kind
        error(string.format("%s: option '%s' must be %s, got %s", fname, k, want, tostring(v)), level)
      end
    end
    out[k] = v
  end
  return out
end


return {
  value = value,
  read_opts = read_opts,
}

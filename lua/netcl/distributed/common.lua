-- netcl.distributed's common part: the C collectives (netcl.core._dist) with their errors at the
-- user's line, device and option checks, and split_sizes (docs/distributed.md).
local nc = require "netcl"

local M = {}

-- The C collectives, raising their errors at the level of this module's caller's caller (the
-- user's line), without this file's position.
local C = setmetatable({}, {__index = function(t, k)
  local f = nc._dist[k]
  local function call(...)
    local res = table.pack(pcall(f, ...))
    if not res[1] then error((tostring(res[2]):gsub("^%[netcl%][^:]*:%d+: ", "")), 3) end
    return table.unpack(res, 2, res.n)
  end
  rawset(t, k, call)
  return call
end})

local function device_of(v, fname, what)
  if type(v) == "string" then
    local ok, d = pcall(nc.device, v)
    if not ok then error(string.format("%s: %s: %s", fname, what, tostring(d):gsub("^.-netcl%.device: ", "")), 3) end
    return d
  end
  if (getmetatable(v) or {}).__name ~= "netcl.Device" then
    error(string.format("%s: %s: expected a Device or a device spec, got %s", fname, what, type(v)), 3)
  end
  return v
end

local function shape_str(s) return "[" .. table.concat(s, ",") .. "]" end

local function check_opts(fname, opts, accepted, level)
  if opts == nil then return {} end
  if type(opts) ~= "table" then error(string.format("%s: options must be a table, got %s", fname, type(opts)), level + 1) end
  for k in pairs(opts) do
    if not accepted[k] then
      local names = {}
      for name in pairs(accepted) do names[#names + 1] = name .. "=" end
      table.sort(names)
      error(string.format("%s: unknown option '%s' (accepted: {%s})", fname, tostring(k), table.concat(names, ", ")),
        level + 1)
    end
  end
  return opts
end

--- dist.split_sizes(n, k) -> array of k sizes summing to n, the first n % k one larger.
function M.split_sizes(n, k)
  local out, base, extra = {}, n // k, n % k
  for i = 1, k do out[i] = base + (i <= extra and 1 or 0) end
  return out
end

M.C, M.device_of, M.shape_str, M.check_opts = C, device_of, shape_str, check_opts

return M

-- The samples' command-line parser (fashion_mnist, nas_fashion_mnist, data_parallel, simclr).
--
--   local args = dofile(here .. "/args.lua")
--   local o = args.parse(argv, {name = "fashion_mnist", usage = USAGE, defaults = {epochs = 3},
--     integers = {["--epochs"] = "epochs"},        -- positive integers
--     numbers = {["--lr"] = "lr"},                 -- positive numbers
--     strings = {["--device"] = "device"},
--     flags = {["--resume"] = "resume"},           -- true when given
--     zero_ok = {["--generations"] = true}})       -- integers that may also be 0
--
-- Values come as `--key value` or `--key=value`; `--help` (or -h) prints the usage and exits 0.
-- A bad argument prints "NAME: message" and the usage to stderr and exits 2.
local M = {}

--- args.fail(name, msg): the samples' error exit.
function M.fail(name, msg)
  io.stderr:write(name, ": ", msg, "\n")
  os.exit(2)
end

function M.parse(argv, spec)
  local o = {}
  for k, v in pairs(spec.defaults or {}) do o[k] = v end
  local integers, numbers = spec.integers or {}, spec.numbers or {}
  local strings, flags, zero_ok = spec.strings or {}, spec.flags or {}, spec.zero_ok or {}
  local i = 1
  while i <= #argv do
    local a = argv[i]
    local key, inline = a:match("^(%-%-[%w-]+)=(.*)$")
    key = key or a
    if key == "--help" or key == "-h" then
      print(spec.usage)
      os.exit(0)
    elseif flags[key] then
      o[flags[key]] = true
    elseif integers[key] or numbers[key] or strings[key] then
      local v = inline
      if not v then
        i = i + 1
        v = argv[i]
      end
      if v == nil then M.fail(spec.name, key .. " needs a value\n" .. spec.usage) end
      if strings[key] then
        o[strings[key]] = v
      else
        local n = tonumber(v)
        local ok = n and (numbers[key] and n > 0 or math.type(n) == "integer" and (n > 0 or zero_ok[key] and n == 0))
        if not ok then
          M.fail(spec.name, string.format("%s must be a positive %s, got '%s'", key,
                                          numbers[key] and "number" or "integer", v))
        end
        o[numbers[key] or integers[key]] = n
      end
    else
      M.fail(spec.name, "unknown argument '" .. a .. "'\n" .. spec.usage)
    end
    i = i + 1
  end
  return o
end

return M

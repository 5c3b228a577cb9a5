-- Shared by the op suites: the device under test (NETCL_TEST_DEVICE, default cpu; exit 77 = skip
-- when it does not exist) and tensor comparisons.
local nc = require "netcl"
local lu = require "luaunit"

local M = {}

local spec = os.getenv("NETCL_TEST_DEVICE") or "cpu"
local ok, dev = pcall(nc.device, spec)
if not ok then
  io.stderr:write("skipping: no device ", spec, "\n")
  os.exit(77)
end
nc.set_default_device(dev)
M.device = dev

local function flatten(v, out)
  if type(v) == "table" then
    for _, x in ipairs(v) do flatten(x, out) end
  else
    out[#out + 1] = v
  end
  return out
end
M.flatten = flatten

local function same(a, b, tol)
  if type(a) == "boolean" or type(b) == "boolean" then return a == b end
  if a ~= a then return b ~= b end
  if a == b then return true end
  if tol == 0 or a == math.huge or a == -math.huge or b == math.huge or b == -math.huge then return false end
  return math.abs(a - b) <= tol * math.max(1, math.abs(b))
end

-- t holds the values of expected (nested tables or a number), elementwise within tol (relative
-- above 1, absolute below); nan matches nan.
function M.assert_values(t, expected, tol)
  tol = tol or 1e-6
  local got = flatten(t:tolist(), {})
  local want = flatten(expected, {})
  lu.assertEquals(#got, #want, "element count")
  for i = 1, #want do
    if not same(got[i], want[i], tol) then
      lu.fail(string.format("element %d: got %s, expected %s\n%s", i, tostring(got[i]), tostring(want[i]), tostring(t)))
    end
  end
end

function M.assert_shape(t, shape)
  lu.assertEquals(t.shape, shape)
end

-- The error message of fn(...), which must fail.
function M.error_of(fn, ...)
  local ok, err = pcall(fn, ...)
  lu.assertFalse(ok, "expected an error")
  return tostring(err)
end

function M.assert_error(needle, fn, ...)
  local msg = M.error_of(fn, ...)
  if not msg:find(needle, 1, true) then lu.fail(string.format("error %q does not contain %q", msg, needle)) end
end

return M

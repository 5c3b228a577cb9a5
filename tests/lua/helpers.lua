-- Shared by the Lua suites: the device under test (NETCL_TEST_DEVICE, as ctest sets it) and
-- comparisons against the CPU backend.
local nc = require "netcl"

local M = {}

-- The device under test; exits with 77 (ctest: skipped) when it is not present here.
function M.device()
  local spec = os.getenv("NETCL_TEST_DEVICE") or "cpu"
  local ok, dev = pcall(nc.device, spec)
  if not ok then
    io.stderr:write("SKIP: no device '" .. spec .. "' here: " .. tostring(dev) .. "\n")
    os.exit(77)
  end
  nc.set_default_device(dev)
  return dev
end

-- The benchmarks' timer: fn once to warm up (kernels, pools), then the fastest of reps calls,
-- each ended by a sync of dev, in seconds.
function M.best_time(dev, reps, fn)
  fn()
  dev:sync()
  local best = math.huge
  for _ = 1, reps do
    local t0 = nc.clock()
    fn()
    dev:sync()
    best = math.min(best, nc.clock() - t0)
  end
  return best
end

-- The times of n calls of fn after `warm` unmeasured ones, each ended by a sync of dev, sorted
-- (fastest first): the step benchmarks' best (t[1]) and median (t[n // 2 + 1]).
function M.step_times(dev, warm, n, fn)
  for _ = 1, warm do fn() end
  dev:sync()
  local ts = {}
  for i = 1, n do
    local t0 = nc.clock()
    fn()
    dev:sync()
    ts[i] = nc.clock() - t0
  end
  table.sort(ts)
  return ts
end

-- A training step for the benchmarks: records loss_fn() (a scalar node) on a fresh tape, zeroes
-- opt's gradients, backpropagates and steps; the function returns the loss node.
function M.train_step(opt, loss_fn)
  local ag = require "netcl.autograd"
  return function()
    local tape = ag.Tape()
    local loss = tape:record(loss_fn)
    opt:zero_grad()
    tape:backward(loss)
    opt:step()
    return loss
  end
end

-- The 16-bit patterns (little-endian) of a bfloat16 or float16 tensor's elements, in order.
function M.u16s(t)
  local s, out = t:contiguous():bytes(), {}
  for i = 1, #s, 2 do out[#out + 1] = string.unpack("<I2", s, i) end
  return out
end

-- Flattens a nested table of numbers/booleans.
function M.flat(t, out)
  out = out or {}
  if type(t) ~= "table" then out[#out + 1] = t return out end
  for _, v in ipairs(t) do M.flat(v, out) end
  return out
end

-- Asserts two tensors (or tables) hold the same values within tol (exact when tol is nil).
function M.assert_close(a, b, tol, msg)
  local fa = M.flat(type(a) == "userdata" and a:tolist() or a)
  local fb = M.flat(type(b) == "userdata" and b:tolist() or b)
  assert(#fa == #fb, (msg or "") .. ": sizes differ: " .. #fa .. " vs " .. #fb)
  for i = 1, #fa do
    local x, y = fa[i], fb[i]
    local ok
    if type(x) == "number" and type(y) == "number" then
      if x ~= x or y ~= y then ok = (x ~= x) == (y ~= y)
      elseif tol then ok = math.abs(x - y) <= tol * math.max(1, math.abs(y))
      else ok = x == y end
    else
      ok = x == y
    end
    assert(ok, string.format("%s: element %d differs: %s vs %s", msg or "", i, tostring(x), tostring(y)))
  end
end

-- Asserts fn raises an error whose message contains every needle (plain find).
function M.assert_error(fn, ...)
  local ok, err = pcall(fn)
  assert(not ok, "expected an error, got success")
  err = tostring(err)
  for _, needle in ipairs({...}) do
    assert(err:find(needle, 1, true), "error message '" .. err .. "' lacks '" .. needle .. "'")
  end
  return err
end

-- Directory of a fresh temporary folder.
function M.tmpdir()
  local p = io.popen("mktemp -d")
  local d = p:read("l")
  p:close()
  return d
end

-- Path of the netcl-lua binary running this suite (arg[-1]).
-- The netcl-lua running this suite, as a path (a bare name is looked up on PATH, as the shell did).
function M.netcl_lua()
  local i = -1
  while arg[i - 1] do i = i - 1 end
  local exe = arg[i]
  if not exe:find("/", 1, true) then
    local p = io.popen("command -v '" .. exe .. "'")
    local path = p and p:read("l")
    if p then p:close() end
    exe = path or exe
  end
  return exe
end

-- A Python interpreter that imports every module named (M.python("torch"), M.python("sklearn",
-- "numpy")), or nil: $NETCL_PYTHON when set, else python3 on the PATH, else Debian's
-- /usr/bin/python3 (Debian's python3-torch, -sklearn and -torchvision install for it, and a PATH
-- python3 such as pyenv's may not see them). Asked once per list of modules.
local pythons = {}
function M.python(...)
  local mods = table.concat({...}, ", ")
  if pythons[mods] == nil then
    pythons[mods] = false
    local candidates = {"python3", "/usr/bin/python3"}
    local env = os.getenv("NETCL_PYTHON")
    if env and env ~= "" then table.insert(candidates, 1, env) end
    for _, py in ipairs(candidates) do
      if os.execute(py .. " -c 'import " .. mods .. "' >/dev/null 2>&1") then
        pythons[mods] = py
        break
      end
    end
  end
  return pythons[mods] or nil
end

-- Runs a shell command; returns its output (stdout and stderr) and its exit code.
-- The standard output of a Python script (its text) run by the interpreter py with the command-line
-- arguments args (a string, may be nil), its standard error dropped; "" when it could not be
-- started. Benchmarks run their PyTorch references this way.
function M.python_output(py, script, args)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(script)
  f:close()
  local p = io.popen(py .. " '" .. path .. "' " .. (args or "") .. " 2>/dev/null")
  local out = p and p:read("a") or ""
  if p then p:close() end
  os.remove(path)
  return out
end

-- The figures of a PyTorch reference script (run by M.python("torch"), else python3) that prints
-- one JSON object of numbers and the strings "device" and "torch": a table of them, empty (with a
-- message to stderr naming `who`) when PyTorch or CUDA is missing or the script failed. The script
-- runs after a preamble that imports json, sys, time and torch and stops (printing "nocuda")
-- without a CUDA device. The GPU benchmarks' references go this way.
local TORCH_CUDA_PREAMBLE = [[
import json, sys, time
try:
    import torch
except Exception:
    print("notorch"); raise SystemExit
if not torch.cuda.is_available():
    print("nocuda"); raise SystemExit
]]
function M.torch_cuda_reference(who, script)
  local out = M.python_output(M.python("torch") or "python3", TORCH_CUDA_PREAMBLE .. script)
  local ref = {}
  if out:match("nocuda") then
    io.stderr:write(who .. ": PyTorch has no CUDA device here; the reference is skipped\n")
  elseif not out:match("^%s*{") then
    io.stderr:write(who .. ": python3-torch not found or failed; the reference is skipped\n")
  else
    for k, v in out:gmatch('"([%w_]+)": ([%d%.e%+%-]+)') do ref[k] = tonumber(v) end
    ref.device = out:match('"device": "([^"]*)"')
    ref.torch = out:match('"torch": "([^"]*)"')
  end
  return ref
end

function M.sh(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  local ok, _, code = p:close()
  return out, ok and 0 or code
end

-- An idx file (uint8): a big-endian header (magic 0x08 = uint8, then the number of dims), the bytes.
function M.write_idx(path, dims, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(string.pack(">I4", 0x0800 + #dims))
  for _, d in ipairs(dims) do f:write(string.pack(">I4", d)) end
  f:write(bytes)
  f:close()
end

-- A split in the Fashion-MNIST file layout (DIR/PREFIX-images-idx3-ubyte and -labels-idx1-ubyte):
-- n 28x28 images whose mean brightness depends on the label, so there is something to learn;
-- the same seed gives the same files.
function M.write_fashion_split(dir, prefix, n, seed)
  local pixels, labels = {}, {}
  for i = 1, n do
    local label = (i * 7 + seed) % 10
    labels[i] = string.char(label)
    local img = {}
    for k = 1, 784 do
      seed = (seed * 1103515245 + 12345) % 2147483648
      img[k] = string.char((seed >> 16) % 64 + label * 19)
    end
    pixels[i] = table.concat(img)
  end
  M.write_idx(dir .. "/" .. prefix .. "-images-idx3-ubyte", {n, 28, 28}, table.concat(pixels))
  M.write_idx(dir .. "/" .. prefix .. "-labels-idx1-ubyte", {n}, table.concat(labels))
end

return M

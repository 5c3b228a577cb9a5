-- Parity harness: every op in cases.lua, on every device, against the CPU backend.
--
--   netcl-lua tests/parity/parity.lua [--op a,b] [--family f,g] [--skip-family f,g]
--                                     [--device all|cpu|opencl|SPEC]
--                                     [--dtype d] [--size n] [--layout l] [--list] [--selftest] [-v]
--
-- Each case expands into trials: inputs of sizes 1, 7, 33, 1000 and 65537 in contiguous,
-- transposed, narrowed (inside a larger buffer of sentinels) and broadcast layouts, plus inputs
-- holding nan and +-inf, for float32, float64 where the device has it, and the integer dtypes
-- the op takes. A trial runs on the device and is compared with the CPU backend's result for
-- the same logical inputs (on the CPU device itself, float32 is compared with the float64
-- computation and other dtypes with the contiguous inputs' result): nan and inf must agree
-- exactly, finite values within a normalized error |got - ref| / (|ref| + 1) below the
-- dtype's threshold times the case's tol, integers and bools exactly. Ops that write into a
-- destination also run into guarded destinations (contiguous and strided views inside buffers
-- of sentinels); any sentinel that changes is an out-of-bounds write.
--
-- --selftest expects failures: run with NETCL_FAULT=elementwise,reduce, which builds the
-- deliberately wrong kernel variants, and it passes only if each planted fault is caught by
-- the check meant for it. Exit status: 0 pass, 1 failure, 77 nothing to test (no such device).
local nc = require "netcl"

local here = (arg and arg[0] or ""):match("^(.*[/\\])") or "./"
local cases = dofile(here .. "cases.lua")
-- The layer ops (linalg, conv, pool, norm, embedding, loss) keep their builders apart.
for _, c in ipairs(dofile(here .. "cases_linalg.lua")) do cases[#cases + 1] = c end

-- ---- command line -------------------------------------------------------------------------------
local opt = {device = "all", verbose = false}
do
  local i = 1
  while arg and arg[i] do
    local a = arg[i]
    local function value()
      i = i + 1
      if not arg[i] then error("parity: " .. a .. " needs a value") end
      return arg[i]
    end
    if a == "--op" then opt.op = value()
    elseif a == "--family" then opt.family = value()
    elseif a == "--skip-family" then opt.skip_family = value()
    elseif a == "--device" then opt.device = value()
    elseif a == "--dtype" then opt.dtype = value()
    elseif a == "--size" then opt.size = tonumber(value())
    elseif a == "--layout" then opt.layout = value()
    elseif a == "--list" then opt.list = true
    elseif a == "--selftest" then opt.selftest = true
    elseif a == "-v" or a == "--verbose" then opt.verbose = true
    else error("parity: unknown argument " .. a) end
    i = i + 1
  end
end

local function set_of(csv)
  if not csv then return nil end
  local s = {}
  for w in csv:gmatch("[^,]+") do s[w] = true end
  return s
end
local only_ops = set_of(opt.op)
local only_families = set_of(opt.family)
local skip_families = set_of(opt.skip_family)

-- ---- devices ---------------------------------------------------------------------------------------
local cpu = nc.device("cpu")
local devices = {}
for _, d in ipairs(nc.devices()) do
  local want = opt.device == "all" or opt.device == d.kind or opt.device == d.spec
  if want then devices[#devices + 1] = d end
end

-- ---- helpers handed to the cases -----------------------------------------------------------------------
local H = {cpu = cpu}
H.SIZES = {1, 7, 33, 1000, 65537}
H.SHAPES = {[1] = {1}, [7] = {7}, [33] = {3, 11}, [1000] = {10, 10, 10}, [65537] = {65537}}
H.FLOATS = {float32 = true, float64 = true}
local SENTINEL = {float32 = -7777.25, float64 = -7777.25, int32 = 77777, int64 = 77777, uint8 = 77, bool = true}
local INPUT_SENTINEL = {float32 = 0 / 0, float64 = 0 / 0, bfloat16 = 0 / 0, float16 = 0 / 0, int32 = 99, int64 = 99,
                        uint8 = 99, bool = true}
local THRESHOLD = {float32 = 1e-5, float64 = 1e-12}

local function hash(s)
  local h = 5381
  for i = 1, #s do h = (h * 33 + s:byte(i)) % 2147483647 end
  return h
end

local function numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end
H.numel = numel

function H.copy_shape(s)
  local r = {}
  for i, v in ipairs(s) do r[i] = v end
  return r
end

-- Deterministic CPU values of a shape and dtype: floats uniform on domain, integers on the
-- integer range of domain, bools half true.
function H.values(shape, dtype, domain, key)
  nc.manual_seed(hash(key))
  local lo, hi = domain[1], domain[2]
  if H.FLOATS[dtype] then
    return (nc.rand(shape, {dtype = "float64", device = cpu}) * (hi - lo) + lo):to(dtype)
  elseif dtype == "bool" then
    return nc.randint(0, 2, shape, {dtype = "bool", device = cpu})
  end
  local ilo, ihi = math.ceil(lo), math.floor(hi)
  if dtype == "uint8" and ilo < 0 then ilo, ihi = 0, ihi - ilo end
  return nc.randint(ilo, ihi + 1, shape, {dtype = dtype, device = cpu})
end

-- Sets nan, +inf and -inf at a few positions of a float tensor (in place, CPU).
function H.specials(t)
  if not H.FLOATS[t.dtype] then return t end
  local flat = t:view({-1})
  local n = flat:numel()
  local put = {{2, 0 / 0}, {4, math.huge}, {6, -math.huge}, {n, 0 / 0}}
  for _, p in ipairs(put) do
    if p[1] <= n then flat[p[1]] = p[2] end
  end
  return t
end

-- The logical values v (CPU, contiguous) on dev in the given layout.
--   contiguous | special: a plain copy
--   transposed: last two dims swapped in memory (1-D: every other element of a buffer)
--   narrowed: inside a buffer padded by one sentinel on each side of every dim
--   broadcast: v is already expanded by the caller; kept as an expanded (stride 0) view
function H.place(v, layout, dev, bshape)
  if type(v) ~= "userdata" then return v end
  if layout == "transposed" then
    if v.ndim >= 2 then
      return v:transpose(-1, -2):contiguous():to(dev):transpose(-1, -2)
    elseif v.ndim == 1 then
      local buf = nc.zeros({v:numel(), 2}, {dtype = v.dtype, device = dev})
      local view = buf:select(2, 1)
      view:copy_(v)
      return view
    end
  elseif layout == "narrowed" and v.ndim > 0 then
    local padded = H.copy_shape(v.shape)
    for i = 1, #padded do padded[i] = padded[i] + 2 end
    local buf = nc.full(padded, INPUT_SENTINEL[v.dtype], {dtype = v.dtype, device = dev})
    local view = buf
    for i = 1, #padded do view = view:narrow(i, 2, v.shape[i]) end
    view:copy_(v)
    return view
  elseif layout == "broadcast" and bshape then
    return v:contiguous():to(dev):expand(bshape)
  end
  return v:to(dev)
end

-- A small shape that broadcasts to shape (first dim 1, or the middle one for 3-D).
function H.broadcast_shape(shape)
  local b = H.copy_shape(shape)
  if #b == 0 then return b end
  b[#b >= 3 and 2 or 1] = 1
  return b
end

-- dtypes a case runs: its own list, or the op table's that the harness knows how to test.
local DTYPES = {"float32", "float64", "int32", "int64", "uint8", "bool"}
local function case_dtypes(case, info)
  local allowed = {}
  for _, d in ipairs(case.dtypes or (info and info.dtypes) or {"float32", "float64"}) do allowed[d] = true end
  local r = {}
  for _, d in ipairs(DTYPES) do
    if allowed[d] and (not opt.dtype or opt.dtype == d) then r[#r + 1] = d end
  end
  return r
end

-- ---- comparison ---------------------------------------------------------------------------------------
local function fmt_shape(s)
  local p = {}
  for i, v in ipairs(s) do p[i] = tostring(v) end
  return "[" .. table.concat(p, ",") .. "]"
end

local function at(t, pos) -- value at 0-based flat position
  return t:contiguous():view({-1})[pos + 1]:item()
end

local function first_true(mask)
  return mask:view({-1}):to("int32"):argmax():item()
end

-- nil when got matches ref; else (kind, message). kind: "shape", "dtype", "nan", "inf", "value".
local function compare(ref, got, tol)
  ref, got = ref:to(cpu), got:to(cpu)
  if fmt_shape(ref.shape) ~= fmt_shape(got.shape) then
    return "shape", "shape " .. fmt_shape(got.shape) .. ", expected " .. fmt_shape(ref.shape)
  end
  if ref.dtype ~= got.dtype then return "dtype", "dtype " .. got.dtype .. ", expected " .. ref.dtype end
  if ref:numel() == 0 then return nil end
  if not H.FLOATS[ref.dtype] then
    local bad = ref:ne(got)
    if bad:any():item() then
      local p = first_true(bad)
      return "value", string.format("element %d is %s, expected %s", p, tostring(at(got, p)), tostring(at(ref, p)))
    end
    return nil
  end
  local r, g = ref:to("float64"), got:to("float64")
  local rn, gn = r:isnan(), g:isnan()
  local bad = rn:ne(gn)
  if bad:any():item() then
    local p = first_true(bad)
    return "nan", string.format("nan disagreement at element %d: got %s, expected %s", p, tostring(at(g, p)), tostring(at(r, p)))
  end
  local ri, gi = r:isinf(), g:isinf()
  bad = ri:ne(gi) + ri * r:ne(g) -- bool: + is or, * is and
  if bad:any():item() then
    local p = first_true(bad)
    return "inf", string.format("inf disagreement at element %d: got %s, expected %s", p, tostring(at(g, p)), tostring(at(r, p)))
  end
  local err = ((g - r):abs() / (r:abs() + 1)):masked_fill(rn + ri, 0)
  local e = err:max():item()
  local limit = THRESHOLD[ref.dtype] * (tol or 1)
  if e > limit then
    local p = err:view({-1}):argmax():item()
    return "value", string.format("normalized error %.3g > %.3g at element %d: got %.9g, expected %.9g", e, limit, p,
      at(g, p), at(r, p))
  end
  return nil
end

-- A destination for ref's shape and dtype inside a sentinel-filled buffer: contiguous, or every
-- other element. Returns the buffer, the view and a checker for the sentinels.
local function guarded(ref, dev, strided)
  local n, G = ref:numel(), 7
  local sentinel = SENTINEL[ref.dtype]
  local span = strided and 2 * n or n
  local buf = nc.full({span + 2 * G}, sentinel, {dtype = ref.dtype, device = dev})
  local function view_of(b)
    local v = b:narrow(1, G + 1, span)
    if strided then v = v:view({n, 2}):select(2, 1) end
    return v:view(ref.shape)
  end
  local function check()
    local host = buf:to(cpu):clone()
    view_of(host):fill_(sentinel)
    local bad = host:ne(nc.full({1}, sentinel, {dtype = ref.dtype, device = cpu}))
    if bad:any():item() then
      local p = first_true(bad)
      local where = p < G and string.format("%d elements before", G - p)
        or p >= G + span and string.format("%d elements after", p - G - span + 1) or "between the elements of"
      return string.format("wrote %s at %s the %s destination", tostring(at(host, p)), where,
        strided and "strided" or "contiguous")
    end
  end
  return view_of(buf), check
end

-- ---- running ---------------------------------------------------------------------------------------------
local results = {pass = 0, fail = 0, skip = 0, failures = {}}
local caught = {} -- selftest: op -> {kind = true}

local function report(case, trial, dev, dtype, kind, msg)
  results.fail = results.fail + 1
  caught[case.name] = caught[case.name] or {}
  caught[case.name][kind] = true
  local line = string.format("FAIL %s [%s] %s %s size %d %s: %s: %s", case.name, case.kernel or "", dev.spec, dtype,
    trial.size, trial.label, kind, msg)
  results.failures[#results.failures + 1] = line
  if not opt.selftest then print(line) end
end

local function as_list(...)
  local n = select("#", ...)
  local first = ...
  if n == 1 and type(first) == "table" and getmetatable(first) == nil then return first end
  return {...}
end

-- Runs fn, turning a Lua error into (nil, message).
local function attempt(fn, ...)
  local r = table.pack(pcall(fn, ...))
  if not r[1] then return nil, tostring(r[2]) end
  return as_list(table.unpack(r, 2, r.n))
end

local function to_dtype(v, dtype)
  if type(v) == "userdata" then return v:to(dtype) end
  return v
end

local function layout_of(trial, i) return (trial.layouts and trial.layouts[i]) or trial.layout or "contiguous" end

-- The reference result of a trial: CPU, on float64 inputs when float32 runs on the CPU device.
local function reference(trial, dev, dtype)
  local upcast = dev == cpu and dtype == "float32" and not trial.exact
  local ins = {}
  for i, v in ipairs(trial.inputs) do
    if type(v) == "userdata" then
      if layout_of(trial, i) == "broadcast" and trial.bshape then v = v:expand(trial.bshape) end
      if upcast and v.dtype == "float32" then v = v:to("float64") end
    end
    ins[i] = v
  end
  local outs, err = attempt(trial.call, ins)
  if not outs then return nil, err end
  if upcast then
    for i, o in ipairs(outs) do
      if o.dtype == "float64" then outs[i] = o:to("float32") end
    end
  end
  return outs
end

local function run_trial(case, trial, dev, dtype)
  local ref, rerr = reference(trial, dev, dtype)
  if not ref then
    report(case, trial, dev, dtype, "error", "the CPU reference failed: " .. rerr)
    return
  end
  local ins = {}
  for i, v in ipairs(trial.inputs) do ins[i] = H.place(v, layout_of(trial, i), dev, trial.bshape) end
  local got, err = attempt(trial.call, ins)
  if not got then
    report(case, trial, dev, dtype, "error", err)
    return
  end
  if #got ~= #ref then
    report(case, trial, dev, dtype, "shape", string.format("%d results, expected %d", #got, #ref))
    return
  end
  for i = 1, #ref do
    local kind, msg = compare(ref[i], got[i], trial.tol or case.tol)
    if kind then
      report(case, trial, dev, dtype, kind, (#ref > 1 and ("result " .. i .. ": ") or "") .. msg)
      return
    end
  end
  if trial.into and ref[1]:numel() > 0 then
    for _, strided in ipairs({false, true}) do
      local dst, check = guarded(ref[1], dev, strided)
      local ins2 = {}
      for i, v in ipairs(trial.inputs) do ins2[i] = H.place(v, layout_of(trial, i), dev, trial.bshape) end
      local r, e = attempt(trial.into, ins2, dst)
      if not r then
        report(case, trial, dev, dtype, "error", "into a guarded destination: " .. e)
        return
      end
      local g = check()
      if g then
        report(case, trial, dev, dtype, "guard", g)
        return
      end
      local kind, msg = compare(ref[1], dst, trial.tol or case.tol)
      if kind then
        report(case, trial, dev, dtype, kind, "into a " .. (strided and "strided" or "contiguous") .. " destination: " .. msg)
        return
      end
    end
  end
  results.pass = results.pass + 1
end

local info_of = {}
for _, o in ipairs(nc.ops()) do info_of[o.name] = o end

-- Whether the filters select an op (families come from the op table).
local function selected(name)
  if only_ops and not only_ops[name] then return false end
  local family = info_of[name] and info_of[name].family
  if only_families and not (family and only_families[family]) then return false end
  if skip_families and family and skip_families[family] then return false end
  return true
end

if opt.list then
  for _, c in ipairs(cases) do
    local info = info_of[c.name]
    print(string.format("%-14s %-8s %s", c.name, c.kind, table.concat(case_dtypes(c, info), ",")))
  end
  os.exit(0)
end

-- Every op of the op table needs a case: a new op cannot skip parity.
local missing = {}
do
  local have = {}
  for _, c in ipairs(cases) do have[c.name] = true end
  for _, o in ipairs(nc.ops()) do
    if not have[o.name] and selected(o.name) then missing[#missing + 1] = o.name end
  end
end

if #devices == 0 then
  print("parity: no device matches " .. opt.device)
  os.exit(77)
end

local t0 = nc.clock()
for _, case in ipairs(cases) do
  if selected(case.name) then
    local info = info_of[case.name]
    case.kernel = info and info.kernel
    for _, dev in ipairs(devices) do
      local dt0, count = nc.clock(), 0
      for _, dtype in ipairs(case_dtypes(case, info)) do
        if dtype ~= "float64" or dev.fp64 then
          for _, size in ipairs(H.SIZES) do
            if not opt.size or opt.size == size then
              local trials = case.trials(case, size, dtype, H)
              for _, trial in ipairs(trials) do
                trial.size = size
                if not opt.layout or opt.layout == (trial.layout or "") then
                  run_trial(case, trial, dev, dtype)
                  count = count + 1
                end
              end
            end
          end
        else
          results.skip = results.skip + 1
        end
      end
      if opt.verbose then print(string.format("%-14s %-12s %4d trials %6.2fs", case.name, dev.spec, count, nc.clock() - dt0)) end
    end
  end
end

if opt.selftest then
  -- Each planted fault (kernels under NC_FAULT) and the check that must catch it.
  local expect = {{"add", "value"}, {"relu", "nan"}, {"neg", "guard"}, {"sum", "value"}}
  local ok = true
  for _, e in ipairs(expect) do
    if selected(e[1]) then
      local hit = caught[e[1]] and caught[e[1]][e[2]]
      print(string.format("selftest: fault in %-5s %s by the %s check", e[1], hit and "caught" or "NOT caught", e[2]))
      ok = ok and hit
    end
  end
  if not ok then
    print("selftest FAILED: the harness missed a planted fault (is NETCL_FAULT=elementwise,reduce set?)")
    for _, f in ipairs(results.failures) do print("  " .. f) end
  end
  os.exit(ok and 0 or 1)
end

for _, m in ipairs(missing) do
  print("FAIL " .. m .. ": op has no parity case in tests/parity/cases.lua")
  results.fail = results.fail + 1
end
print(string.format("parity: %d trials passed, %d failed, %d dtype/device pairs skipped (%.1fs)", results.pass,
  results.fail, results.skip, nc.clock() - t0))
os.exit(results.fail == 0 and 0 or 1)

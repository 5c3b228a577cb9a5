-- netcl.autograd: nodes, tapes and differentiable ops (docs/autograd.md). The engine and every
-- op are C (runtime/autograd, bindings/); this file adds what is easier to say in Lua: in-place
-- guards, read-only Tensor methods on Nodes, and gradcheck.
local nc = require "netcl"
local core = require "netcl.core"

local ag = {}
for k, v in pairs(core.autograd) do
  if k ~= "node_methods" then ag[k] = v end
end
local node_methods = core.autograd.node_methods
local tensor_methods = getmetatable(nc.zeros({0})).methods

local is_node, is_tensor = ag.is_node, nc.is_tensor

local function unwrap(...)
  local args = table.pack(...)
  for i = 1, args.n do
    if is_node(args[i]) then args[i] = args[i].value end
  end
  return table.unpack(args, 1, args.n)
end

-- In-place Tensor methods (add_, mul_, fill_, copy_, ...) act on a Node's value. On a Node that
-- requires grad while a tape records they would make the recorded graph lie, so they fail;
-- elsewhere (no tape, ag.no_grad: optimizer steps, initialization) they run, and the version
-- counters still catch a saved value changed behind the tape's back.
for name, f in pairs(tensor_methods) do
  if name:sub(-1) == "_" and node_methods[name] == nil then
    node_methods[name] = nc._wrapper(function(self, ...)
      if not is_node(self) then
        error(string.format("netcl.autograd.%s: argument 1: expected a Node, got %s", name, type(self)), 2)
      end
      if self.requires_grad and ag.recording() then
        error(string.format("netcl.autograd.%s: in-place op on a Node that requires grad while a tape is " ..
                            "recording; use the out-of-place op (or ag.no_grad for updates)", name), 2)
      end
      f(self.value, unwrap(...))
      return self
    end)
  end
end

-- Read-only Tensor methods apply to the value and return plain values or Tensors (no gradient
-- flows through host copies). The ops' bindings (comparisons, argmax, any, sort, ...) serve
-- Nodes themselves.
local read_only = {"numel", "size", "dim", "is_contiguous", "item", "tolist", "bytes"}
for _, name in ipairs(read_only) do
  local f = tensor_methods[name]
  if f and node_methods[name] == nil then
    node_methods[name] = nc._wrapper(function(self, ...)
      if not is_node(self) then
        error(string.format("netcl.autograd.%s: argument 1: expected a Node, got %s", name, type(self)), 2)
      end
      return f(self.value, unwrap(...))
    end)
  end
end

-- n:to(dtype) and n:float(): the value converted to another float dtype, as an op the tape
-- records; the gradient flows back converted to the input's dtype (float32 for a bfloat16 or
-- float16 input, whose gradients are float32). This is how a storage-dtype parameter enters a
-- computation: x:matmul(w:float()). Moving a Node between devices is not an op: move p.value.
local FLOAT_DTYPES = {float32 = true, float64 = true, bfloat16 = true, float16 = true}
local Convert = ag.Function {
  forward = function(_, x, dtype) return x:to(dtype) end,
  backward = function(_, g) return g, nil end,
}
local function convert(fname, self, dtype)
  if not is_node(self) then
    error(string.format("%s: argument 1: expected a Node, got %s", fname, type(self)), 3)
  end
  if not FLOAT_DTYPES[dtype] then
    error(string.format("%s: argument 2: expected a float dtype (float32, float64, bfloat16, float16), got %s",
      fname, tostring(dtype)), 3)
  end
  if not FLOAT_DTYPES[self.dtype] then
    error(string.format("%s: a %s Node has no gradient to convert; convert its value", fname, self.dtype), 3)
  end
  if self.dtype == dtype then return self end
  return Convert(self, dtype)
end
node_methods.to = nc._wrapper(function(self, dtype) return convert("netcl.autograd.to", self, dtype) end)
node_methods.float = nc._wrapper(function(self) return convert("netcl.autograd.float", self, "float32") end)

-- ---- gradcheck ----------------------------------------------------------------------------------
local function is_float(dtype) return dtype == "float32" or dtype == "float64" end

-- A float64 copy of a Tensor (a fresh one even when it is float64 already: gradcheck writes it).
local function f64(t)
  if t.dtype == "float64" then return t:clone() end
  return t:to("float64")
end

local function flat(t)
  local out = {}
  local function walk(v)
    if type(v) == "table" then
      for _, x in ipairs(v) do walk(x) end
    else
      out[#out + 1] = v
    end
  end
  walk(t:tolist())
  return out
end

-- "[i,j,...]" (1-based) of flat position k in shape.
local function position(shape, k)
  local idx, rest = {}, k - 1
  for d = #shape, 1, -1 do
    idx[d] = rest % shape[d] + 1
    rest = rest // shape[d]
  end
  return "[" .. table.concat(idx, ",") .. "]"
end

-- ag.gradcheck(fn, inputs, {eps=1e-6, atol=1e-5, rtol=1e-3}): fn(inputs...) must return a Node.
-- Inputs that are Nodes requiring grad are checked: each becomes a float64 leaf, the tape's
-- gradient of sum(out * r) (r a fixed pseudo-random projection) is compared with central
-- differences of that sum. Other float Tensors and Nodes become float64 constants; anything
-- else is passed unchanged. Returns true, or raises an error naming the input and its worst
-- element.
function ag.gradcheck(fn, inputs, opts)
  opts = opts or {}
  local eps, atol, rtol = opts.eps or 1e-6, opts.atol or 1e-5, opts.rtol or 1e-3
  local n = inputs.n or #inputs
  local args, checked = {}, {}
  for i = 1, n do
    local x = inputs[i]
    if is_node(x) and is_float(x.dtype) then
      args[i] = ag.tensor(f64(x.value), {requires_grad = x.requires_grad})
      if x.requires_grad then checked[#checked + 1] = i end
    elseif is_node(x) then
      args[i] = x:detach()
    elseif is_tensor(x) and is_float(x.dtype) then
      args[i] = f64(x)
    else
      args[i] = x
    end
  end
  if #checked == 0 then error("netcl.autograd.gradcheck: no input is a Node that requires grad", 2) end

  local tape = ag.Tape()
  local out = tape:record(function() return fn(table.unpack(args, 1, n)) end)
  if not is_node(out) then error("netcl.autograd.gradcheck: fn must return a Node, got " .. type(out), 2) end
  if not out.requires_grad then
    error("netcl.autograd.gradcheck: fn's output does not depend on any input that requires grad", 2)
  end
  -- a fixed projection with values in [-1, 1] and no zeros, so every output element counts
  local proj, seed = {}, 12345
  for k = 1, math.max(out.value:numel(), 1) do
    seed = (seed * 1103515245 + 12345) % 2147483648
    proj[k] = (seed / 2147483648) * 1.5 + 0.25
    if k % 2 == 0 then proj[k] = -proj[k] end
  end
  local r
  if #out.shape == 0 then r = nc.tensor(proj[1], {dtype = "float64", device = out.device})
  else r = nc.tensor(proj, {shape = out.shape, dtype = "float64", device = out.device}) end
  tape:backward(out, r)

  local function objective()
    local o = ag.no_grad(function() return fn(table.unpack(args, 1, n)) end)
    local v = flat(is_node(o) and o.value or o)
    local s = 0
    for k = 1, #v do s = s + v[k] * proj[k] end
    return s
  end

  for _, i in ipairs(checked) do
    local x = args[i]
    local analytic = x.grad and flat(x.grad) or nil
    local values = flat(x.value)
    local view = x.value:view({-1})
    local worst, worst_k, worst_a, worst_n = 0, nil, nil, nil
    for k = 1, #values do
      local v = values[k]
      view[k] = v + eps
      local fp = objective()
      view[k] = v - eps
      local fm = objective()
      view[k] = v
      local num = (fp - fm) / (2 * eps)
      local a = analytic and analytic[k] or 0
      local ratio = math.abs(a - num) / (atol + rtol * math.abs(num))
      if ratio ~= ratio then ratio = math.huge end -- nan
      if ratio > worst then worst, worst_k, worst_a, worst_n = ratio, k, a, num end
    end
    if worst > 1 then
      error(string.format("netcl.autograd.gradcheck: input %d, element %s: analytic gradient %.10g vs numeric %.10g " ..
                          "(|difference| %.3g > atol %g + rtol %g * |numeric|)%s", i, position(x.shape, worst_k),
                          worst_a, worst_n, math.abs(worst_a - worst_n), atol, rtol,
                          analytic and "" or "; the tape gave this input no gradient"), 2)
    end
  end
  return true
end

return ag

-- nn.Module: the base class of layers and models (docs/nn.md). A module keeps its
-- parameters (leaf Nodes that require grad), buffers (Tensors such as running statistics) and
-- submodules in ordered registries, so that names, state-dict order and optimizer order are the
-- order of assignment, as in PyTorch.
--
-- Every field of an instance lives in a private state table rather than in the instance
-- itself: Lua calls __newindex only for absent keys, and keeping the instance empty is what
-- makes every assignment (including a re-assignment of a plain field with a module) pass
-- through registration.
local nc = require "netcl"
local ag = require "netcl.autograd"
local class = require "netcl.class"

local STATE = setmetatable({}, {__name = "nn.Module state key"})

local is_tensor, is_node = nc.is_tensor, nc.is_node

local FLOAT_DTYPES = {float32 = true, float64 = true, float16 = true, bfloat16 = true}
local STORAGE_DTYPES = {float16 = true, bfloat16 = true}

local Module = class("Module")

local function is_module(v)
  return class.is_instance(v, Module)
end

local function new_state()
  return {
    params = {}, param_order = {},
    buffers = {}, buffer_order = {}, non_persistent = {},
    modules = {}, module_order = {},
    attrs = {},
  }
end

local function remove_name(order, name)
  for i, n in ipairs(order) do
    if n == name then table.remove(order, i) return end
  end
end

-- Drops name from whichever registry holds it (a name lives in at most one).
local function unregister(st, name)
  if st.params[name] ~= nil then st.params[name] = nil; remove_name(st.param_order, name) end
  if st.buffers[name] ~= nil then
    st.buffers[name] = nil; st.non_persistent[name] = nil; remove_name(st.buffer_order, name)
  end
  if st.modules[name] ~= nil then st.modules[name] = nil; remove_name(st.module_order, name) end
  st.attrs[name] = nil
end

local function type_name(self)
  local cls = getmetatable(self)
  return cls and rawget(cls, "__name") or "Module"
end

-- ---- metamethods (netcl.class copies them into every subclass: Lua looks them up raw) ---------
local function index(self, k)
  local st = rawget(self, STATE)
  local v = st.params[k]
  if v ~= nil then return v end
  v = st.modules[k]
  if v ~= nil then return v end
  v = st.buffers[k]
  if v ~= nil then return v end
  v = st.attrs[k]
  if v ~= nil then return v end
  local cls = getmetatable(self)
  if math.type(k) == "integer" and cls._indexed_children then
    -- containers: child i (1-based, as Lua arrays) is registered as "i-1", PyTorch's name
    return st.modules[tostring(k - 1)]
  end
  return cls[k]
end

local function newindex(self, k, v)
  local st = rawget(self, STATE)
  if math.type(k) == "integer" and getmetatable(self)._indexed_children then
    -- containers: c[i] = m replaces child i in place (its name and position stay)
    local name = tostring(k - 1)
    if st.modules[name] == nil or not is_module(v) then
      error(string.format("%s: c[%d] = m needs an existing index (1..%d) and a Module; use append to add",
        type_name(self), k, #st.module_order), 2)
    end
    st.modules[name] = v
    return
  end
  if type(k) ~= "string" then
    error(string.format("%s: field names must be strings, got %s", type_name(self), type(k)), 2)
  end
  if st.buffers[k] ~= nil and (v == nil or is_tensor(v)) then
    -- re-assigning a buffer keeps it a buffer (and its persistence)
    st.buffers[k] = v
    if v == nil then st.non_persistent[k] = nil; remove_name(st.buffer_order, k) end
    return
  end
  unregister(st, k)
  if v == nil then return end
  if is_module(v) then
    st.modules[k] = v
    st.module_order[#st.module_order + 1] = k
  elseif is_node(v) and v.is_leaf and v.requires_grad then
    st.params[k] = v
    st.param_order[#st.param_order + 1] = k
  else
    st.attrs[k] = v
  end
end

local function call(self, ...)
  return self:forward(...)
end

-- ---- classes --------------------------------------------------------------------------------------
-- Class(...) makes an instance (netcl.class): the state is set up here, before init runs, so init
-- never has to call a parent constructor for the bookkeeping; it calls one only to reuse its
-- layers (Parent.init(self, ...)).
function Module.__new()
  local st = new_state()
  st.attrs.training = true
  return {[STATE] = st}
end

--- Module:extend(name) -> a subclass named `name` (used by tostring and error messages).
function Module.extend(parent, name)
  if type(name) ~= "string" or name == "" then
    error("nn.Module.extend: a class needs a name (a non-empty string), got " .. tostring(name), 2)
  end
  return class(name, parent)
end

function Module:init() end

function Module:forward()
  error(string.format("%s: forward is not defined (define %s:forward)", type_name(self), type_name(self)), 2)
end

-- ---- explicit registration --------------------------------------------------------------------------
--- m:register_buffer(name, tensor, {persistent=true}): a Tensor that is state but not a
-- parameter (running statistics); persistent buffers go into state_dict. tensor may be nil.
function Module:register_buffer(name, t, opts)
  if type(name) ~= "string" or name == "" or name:find(".", 1, true) then
    error(string.format("%s.register_buffer: name must be a non-empty string without '.', got %s",
      type_name(self), tostring(name)), 2)
  end
  if t ~= nil and not is_tensor(t) then
    error(string.format("%s.register_buffer: '%s' must be a Tensor (or nil), got %s", type_name(self), name,
      is_node(t) and "a Node" or type(t)), 2)
  end
  local st = rawget(self, STATE)
  unregister(st, name)
  st.buffers[name] = t or false
  st.buffer_order[#st.buffer_order + 1] = name
  if opts and opts.persistent == false then st.non_persistent[name] = true end
end

--- m:register_parameter(name, node): registers a leaf Node as a parameter even when it does not
-- require grad (a frozen weight); nil removes it.
function Module:register_parameter(name, p)
  if type(name) ~= "string" or name == "" or name:find(".", 1, true) then
    error(string.format("%s.register_parameter: name must be a non-empty string without '.', got %s",
      type_name(self), tostring(name)), 2)
  end
  local st = rawget(self, STATE)
  unregister(st, name)
  if p == nil then return end
  if not (is_node(p) and p.is_leaf) then
    error(string.format("%s.register_parameter: '%s' must be a leaf Node (ag.param), got %s", type_name(self),
      name, is_tensor(p) and "a Tensor" or type(p)), 2)
  end
  st.params[name] = p
  st.param_order[#st.param_order + 1] = name
end

--- m:add_module(name, child): registers child under name (for names that are not identifiers).
function Module:add_module(name, child)
  if type(name) ~= "string" or name == "" or name:find(".", 1, true) then
    error(string.format("%s.add_module: name must be a non-empty string without '.', got %s",
      type_name(self), tostring(name)), 2)
  end
  if not is_module(child) then
    error(string.format("%s.add_module: '%s' must be a Module, got %s", type_name(self), name, type(child)), 2)
  end
  local st = rawget(self, STATE)
  unregister(st, name)
  st.modules[name] = child
  st.module_order[#st.module_order + 1] = name
  return child
end

-- ---- traversal -----------------------------------------------------------------------------------------
-- Calls fn(prefix, module) for self and every descendant, pre-order, each module once (a module
-- reachable twice is visited under its first name, as PyTorch's named_modules does).
local function walk(self, fn, prefix, seen)
  if seen[self] then return end
  seen[self] = true
  fn(prefix, self)
  local st = rawget(self, STATE)
  for _, name in ipairs(st.module_order) do
    walk(st.modules[name], fn, prefix == "" and name or prefix .. "." .. name, seen)
  end
end

local function ordered_iter(list)
  local i = 0
  return function()
    i = i + 1
    local e = list[i]
    if e then return e[1], e[2] end
  end
end

local function named_parameter_list(self)
  local out, seen = {}, {}
  walk(self, function(prefix, m)
    local st = rawget(m, STATE)
    for _, name in ipairs(st.param_order) do
      local p = st.params[name]
      if not seen[p] then
        seen[p] = true
        out[#out + 1] = {prefix == "" and name or prefix .. "." .. name, p}
      end
    end
  end, "", {})
  return out
end

--- m:parameters() -> array of Nodes (each once, in registration order).
function Module:parameters()
  local out = {}
  for i, e in ipairs(named_parameter_list(self)) do out[i] = e[2] end
  return out
end

--- for name, p in m:named_parameters() do ... end   (dotted names, registration order)
function Module:named_parameters()
  return ordered_iter(named_parameter_list(self))
end

--- for name, t in m:named_buffers() do ... end
function Module:named_buffers()
  local out = {}
  walk(self, function(prefix, m)
    local st = rawget(m, STATE)
    for _, name in ipairs(st.buffer_order) do
      local b = st.buffers[name]
      if b then out[#out + 1] = {prefix == "" and name or prefix .. "." .. name, b} end
    end
  end, "", {})
  return ordered_iter(out)
end

--- m:children() -> array of direct submodules.
function Module:children()
  local st, out = rawget(self, STATE), {}
  for i, name in ipairs(st.module_order) do out[i] = st.modules[name] end
  return out
end

--- for name, child in m:named_children() do ... end
function Module:named_children()
  local st, out = rawget(self, STATE), {}
  for i, name in ipairs(st.module_order) do out[i] = {name, st.modules[name]} end
  return ordered_iter(out)
end

--- m:modules() -> array: m itself, then every descendant (pre-order, each once).
function Module:modules()
  local out = {}
  walk(self, function(_, m) out[#out + 1] = m end, "", {})
  return out
end

--- for name, mod in m:named_modules() do ... end   (m itself is named "")
function Module:named_modules()
  local out = {}
  walk(self, function(prefix, m) out[#out + 1] = {prefix, m} end, "", {})
  return ordered_iter(out)
end

--- m:apply(fn): fn(module) for every descendant, children first, then m; returns m.
function Module:apply(fn)
  for _, c in ipairs(self:children()) do c:apply(fn) end
  fn(self)
  return self
end

-- ---- modes, devices, gradients ----------------------------------------------------------------------
--- m:train(flag=true): sets .training on m and every descendant; returns m.
function Module:train(flag)
  if flag == nil then flag = true end
  if type(flag) ~= "boolean" then
    error(string.format("%s.train: flag must be a boolean, got %s", type_name(self), type(flag)), 2)
  end
  for _, m in ipairs(self:modules()) do m.training = flag end
  return self
end

function Module:eval() return self:train(false) end

--- m:to(device or dtype): moves (or converts) every parameter and buffer; returns m. Parameters
-- keep their identity (the Node's value is replaced), so tied weights stay tied and an optimizer
-- built before the move still holds the model's parameters. Integer buffers
-- (num_batches_tracked) keep their dtype on a dtype conversion.
function Module:to(target)
  local fname = type_name(self) .. ".to"
  local is_dtype = type(target) == "string" and FLOAT_DTYPES[target] ~= nil
  if type(target) == "string" and not is_dtype then target = nc.device(target) end
  if not is_dtype and (getmetatable(target) or {}).__name ~= "netcl.Device" then
    error(fname .. ": expected a Device, a device spec or a float dtype, got " .. tostring(target), 2)
  end
  local function needs(t)
    if is_dtype then return FLOAT_DTYPES[t.dtype] ~= nil and t.dtype ~= target end
    return t.device ~= target
  end
  for _, p in ipairs(self:parameters()) do
    if needs(p.value) then
      p.value = p.value:to(target)
      -- a bfloat16 or float16 parameter's gradient is float32 (docs/optim.md)
      if p.grad then p.grad = p.grad:to(STORAGE_DTYPES[target] and "float32" or target) end
    end
  end
  for _, m in ipairs(self:modules()) do
    local st = rawget(m, STATE)
    for _, name in ipairs(st.buffer_order) do
      local b = st.buffers[name]
      if b and needs(b) then st.buffers[name] = b:to(target) end
    end
  end
  return self
end

--- m:zero_grad(): drops every parameter's gradient (the next backward writes a fresh one).
function Module:zero_grad()
  for _, p in ipairs(self:parameters()) do p.grad = nil end
end

--- m:deepcopy() -> a new module of the same classes with copies of every parameter (new leaf
-- Nodes, same requires_grad) and buffer, and the same plain fields. Parameters and submodules
-- shared within m stay shared within the copy; nothing is shared with m (momentum encoders of
-- netcl.ssl are deep copies of the online one).
function Module:deepcopy()
  local copies = {}
  local function copy_node(p)
    if not copies[p] then
      local v = p.value:clone()
      copies[p] = p.requires_grad and ag.param(v) or ag.tensor(v)
    end
    return copies[p]
  end
  local function copy(m)
    if copies[m] then return copies[m] end
    local st, nst = rawget(m, STATE), new_state()
    local new = setmetatable({[STATE] = nst}, getmetatable(m))
    copies[m] = new
    for _, name in ipairs(st.param_order) do
      nst.params[name] = copy_node(st.params[name])
      nst.param_order[#nst.param_order + 1] = name
    end
    for _, name in ipairs(st.buffer_order) do
      local b = st.buffers[name]
      nst.buffers[name] = b and b:clone() or false
      nst.non_persistent[name] = st.non_persistent[name]
      nst.buffer_order[#nst.buffer_order + 1] = name
    end
    for _, name in ipairs(st.module_order) do
      nst.modules[name] = copy(st.modules[name])
      nst.module_order[#nst.module_order + 1] = name
    end
    for k, v in pairs(st.attrs) do
      if is_node(v) then v = copy_node(v) elseif is_tensor(v) then v = v:clone() end
      nst.attrs[k] = v
    end
    return new
  end
  return copy(self)
end

--- m:num_parameters() -> number of scalars in the parameters (each shared parameter once).
function Module:num_parameters()
  local n = 0
  for _, p in ipairs(self:parameters()) do n = n + p.value:numel() end
  return n
end

-- ---- state dict --------------------------------------------------------------------------------------
-- Entries {name, kind, holder_state, local_name} of everything state_dict holds, in PyTorch's
-- order: a module's parameters, then its persistent buffers, then its children. Unlike
-- parameters(), a shared parameter or module appears under every name (PyTorch does the same),
-- so a checkpoint loads into a model that ties weights and into one that does not.
local function state_entries(self)
  local out = {}
  local function visit(m, prefix, active)
    if active[m] then
      error(string.format("%s: module '%s' contains itself", type_name(self), prefix:sub(1, -2)), 0)
    end
    active[m] = true
    local st = rawget(m, STATE)
    for _, name in ipairs(st.param_order) do out[#out + 1] = {prefix .. name, "param", st, name} end
    for _, name in ipairs(st.buffer_order) do
      if st.buffers[name] and not st.non_persistent[name] then
        out[#out + 1] = {prefix .. name, "buffer", st, name}
      end
    end
    for _, name in ipairs(st.module_order) do visit(st.modules[name], prefix .. name .. ".", active) end
    active[m] = nil
  end
  visit(self, "", {})
  return out
end

local function entry_tensor(e)
  local st, name = e[3], e[4]
  if e[2] == "param" then return st.params[name].value end
  return st.buffers[name]
end

--- m:state_dict() -> {name = Tensor}: parameter values and persistent buffers, sharing storage
-- with the model (clone them to keep a snapshot).
function Module:state_dict()
  local sd = {}
  for _, e in ipairs(state_entries(self)) do sd[e[1]] = entry_tensor(e) end
  return sd
end

--- m:state_dict_keys() -> the names of state_dict() in order (parameters, buffers, children).
function Module:state_dict_keys()
  local keys = {}
  for i, e in ipairs(state_entries(self)) do keys[i] = e[1] end
  return keys
end

local function shape_str(shape) return "[" .. table.concat(shape, ", ") .. "]" end

local function same_shape(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

local function quoted(list)
  local q = {}
  for i, k in ipairs(list) do q[i] = '"' .. k .. '"' end
  return table.concat(q, ", ")
end

--- m:load_state_dict(sd, {strict=true}) -> {missing_keys=, unexpected_keys=}: copies each
-- entry into the model's tensor of the same name (values are converted to its dtype and moved
-- to its device). Everything is checked before anything is copied, so a failed load leaves the
-- model as it was. Shape mismatches are errors even when strict is false.
function Module:load_state_dict(sd, opts)
  local fname = type_name(self) .. ".load_state_dict"
  if type(sd) ~= "table" then error(fname .. ": expected a table of Tensors, got " .. type(sd), 2) end
  opts = opts or {}
  if type(opts) ~= "table" then error(fname .. ": options must be a table, got " .. type(opts), 2) end
  for k in pairs(opts) do
    if k ~= "strict" then error(string.format("%s: unknown option '%s'", fname, tostring(k)), 2) end
  end
  local strict = opts.strict ~= false
  local entries = state_entries(self)
  local expected, missing, unexpected, problems = {}, {}, {}, {}
  for _, e in ipairs(entries) do
    local name = e[1]
    expected[name] = true
    local src = sd[name]
    if src == nil then
      missing[#missing + 1] = name
    else
      if is_node(src) then src = src.value end
      if not is_tensor(src) then
        problems[#problems + 1] = string.format('entry "%s" is a %s, expected a Tensor', name, type(src))
      else
        local dst = entry_tensor(e)
        if not same_shape(src.shape, dst.shape) then
          problems[#problems + 1] = string.format('size mismatch for "%s": the checkpoint has shape %s, the model %s',
            name, shape_str(src.shape), shape_str(dst.shape))
        end
      end
    end
  end
  local names = {}
  for k in pairs(sd) do names[#names + 1] = k end
  table.sort(names, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(names) do
    if not expected[k] then unexpected[#unexpected + 1] = tostring(k) end
  end
  if strict then
    if #missing > 0 then problems[#problems + 1] = "missing key(s) in state_dict: " .. quoted(missing) end
    if #unexpected > 0 then problems[#problems + 1] = "unexpected key(s) in state_dict: " .. quoted(unexpected) end
  end
  if #problems > 0 then
    error(string.format("%s: error(s) loading state_dict for %s:\n  %s", fname, type_name(self),
      table.concat(problems, "\n  ")), 2)
  end
  ag.no_grad(function()
    for _, e in ipairs(entries) do
      local src = sd[e[1]]
      if src ~= nil then
        if is_node(src) then src = src.value end
        local dst = entry_tensor(e)
        -- A state dict often shares storage with the model it is loaded into
        -- (m:load_state_dict(m:state_dict())), and a device copy of a buffer onto itself is an
        -- error in OpenCL; nothing from Lua tells whether two tensors share a buffer, so a
        -- same-device source goes through a fresh copy.
        if src.device ~= dst.device then src = src:to(dst.device) else src = src:clone() end
        dst:copy_(src)
      end
    end
  end)
  return {missing_keys = missing, unexpected_keys = unexpected}
end

-- ---- printing ------------------------------------------------------------------------------------------
local function group_digits(n)
  local s = tostring(math.tointeger(n) or n)
  local sign, digits = s:match("^(-?)(%d+)$")
  if not digits then return s end
  return sign .. digits:reverse():gsub("(%d%d%d)", "%1,"):reverse():gsub("^,", "")
end

local function plural(n) return group_digits(n) .. (n == 1 and " param" or " params") end

-- Parameter count of m's subtree, each parameter once.
local function subtree_count(m) return Module.num_parameters(m) end

--- m:extra_repr() -> the text inside Name(...) on m's line of tostring (layers override it).
function Module:extra_repr() return "" end

local function describe(m, name, indent, lines, seen)
  local st = rawget(m, STATE)
  local head = indent .. (name and "(" .. name .. "): " or "") .. type_name(m)
  local extra = m:extra_repr()
  if extra ~= "" then head = head .. "(" .. extra .. ")" end
  if seen[m] then
    lines[#lines + 1] = head .. "  (shared, listed above)"
    return
  end
  seen[m] = true
  local own = {}
  for _, pname in ipairs(st.param_order) do
    own[#own + 1] = pname .. " " .. shape_str(st.params[pname].shape)
  end
  local count = subtree_count(m)
  if #own > 0 then head = head .. "  {" .. table.concat(own, ", ") .. "}" end
  if count > 0 then head = head .. "  " .. plural(count) end
  lines[#lines + 1] = head
  for _, cname in ipairs(st.module_order) do
    describe(st.modules[cname], cname, indent .. "  ", lines, seen)
  end
end

function Module.__tostring(self)
  local lines = {}
  describe(self, nil, "", lines, {})
  return table.concat(lines, "\n")
end

Module.__index = index
Module.__newindex = newindex
Module.__call = call

return {Module = Module, is_module = is_module, type_name = type_name}

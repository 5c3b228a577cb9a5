-- Containers: Sequential (runs its children in order) and ModuleList (holds them). Children
-- are registered under "0", "1", ... as in PyTorch, so state-dict names match
-- (features.0.weight), and indexed 1-based from Lua: seq[1] is child "0".
local M_ = require "netcl.nn.module"
local Module, is_module, type_name = M_.Module, M_.is_module, M_.type_name

local M = {}

local function child_list(fname, ...)
  local n, list = select("#", ...), {...}
  -- nn.Sequential{a, b} as well as nn.Sequential(a, b)
  if n == 1 and type(list[1]) == "table" and not is_module(list[1]) then
    list = list[1]
    n = #list
  end
  for i = 1, n do
    if not is_module(list[i]) then
      error(string.format("%s: argument %d must be a Module, got %s", fname, i, type(list[i])), 4)
    end
  end
  return list, n
end

local function append(self, fname, m)
  if not is_module(m) then error(string.format("%s.append: expected a Module, got %s", fname, type(m)), 3) end
  self:add_module(tostring(#self), m)
  return self
end

local function length(self)
  local n = 0
  while self[n + 1] ~= nil do n = n + 1 end
  return n
end

M.Sequential = Module:extend("Sequential")
M.Sequential._indexed_children = true
M.Sequential._label = "nn.Sequential"
M.Sequential.__len = length

--- nn.Sequential(m1, m2, ...) or nn.Sequential{m1, m2, ...}
function M.Sequential:init(...)
  local list, n = child_list("nn.Sequential", ...)
  for i = 1, n do self:add_module(tostring(i - 1), list[i]) end
end

--- seq:append(m) -> seq
function M.Sequential:append(m) return append(self, "nn.Sequential", m) end

-- A failing child is named by position and type, so an error deep in a model says where it is:
-- "nn.Sequential: child 3 (Linear): netcl.linear: ...".
function M.Sequential:forward(x)
  local label = rawget(getmetatable(self), "_label") or type_name(self)
  local i = 1
  local child = self[1]
  while child ~= nil do
    local ok, out = pcall(child, x)
    if not ok then
      error(string.format("%s: child %d (%s): %s", label, i, type_name(child), tostring(out)), 0)
    end
    x = out
    i = i + 1
    child = self[i]
  end
  return x
end

M.ModuleList = Module:extend("ModuleList")
M.ModuleList._indexed_children = true
M.ModuleList.__len = length

--- nn.ModuleList(list?): holds modules (registered, so their parameters count) without
-- defining how they run; index it (list[1]), ipairs it, #list, append, extend.
function M.ModuleList:init(list)
  if list == nil then return end
  if type(list) ~= "table" or is_module(list) then
    error("nn.ModuleList: expected an array of Modules, got " .. (is_module(list) and "a Module" or type(list)), 3)
  end
  local _, n = child_list("nn.ModuleList", list)
  for i = 1, n do self:add_module(tostring(i - 1), list[i]) end
end

function M.ModuleList:append(m) return append(self, "nn.ModuleList", m) end

-- list:extend(modules) appends; on the class, ModuleList:extend(name) still makes a subclass.
function M.ModuleList.extend(self, list)
  if not is_module(self) then return Module.extend(self, list) end
  if type(list) ~= "table" or is_module(list) then
    error("nn.ModuleList.extend: expected an array of Modules, got " .. (is_module(list) and "a Module" or type(list)), 2)
  end
  for _, m in ipairs(list) do append(self, "nn.ModuleList", m) end
  return self
end

function M.ModuleList:forward()
  error("nn.ModuleList: has no forward; iterate over it (for i, m in ipairs(list) do ... end)", 2)
end

return M

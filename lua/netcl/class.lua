-- netcl.class: the one way the Lua layer defines classes (docs/architecture.md, "Classes").
--
--   local class = require "netcl.class"
--   local Point = class("Point")                 -- a class named "Point"
--   function Point:init(x, y) self.x, self.y = x, y end
--   function Point:__tostring() return ("Point(%g, %g)"):format(self.x, self.y) end
--   local Point3 = class("Point3", Point)        -- a subclass
--   local p = Point3(1, 2)                       -- makes an instance and calls init(1, 2)
--   class.is_instance(p, Point)                  --> true
--
-- A class is the metatable of its instances: methods are looked up in it (its __index is
-- itself, unless a class sets another one), and its parent is reached through the class's own
-- metatable. Lua reads metamethods (__index, __call, __tostring, __len, ...) from the metatable
-- without following __index, so a subclass starts with copies of its parent's: define a
-- class's metamethods before subclassing it.
local class = {}

-- Each class made here -> its parent (false for a root). Weak keys: a class that is no longer
-- used goes away with its instances.
local parents = setmetatable({}, {__mode = "k"})

-- Class(...): a fresh instance. A class may define __new(cls) to give its instances a layout
-- before init runs (nn.Module keeps every field in a private table); by default an instance
-- starts empty. init's errors at level 3 point at the line that called Class(...).
local function construct(cls, ...)
  local self = setmetatable(cls.__new and cls.__new(cls) or {}, cls)
  local init = cls.init
  if init then init(self, ...) end
  return self
end

--- class(name, parent?) -> a new class. name is what __name carries: tostring of an instance
-- defaults to "name: 0x..." and error messages can use getmetatable(obj).__name.
local function new_class(_, name, parent)
  if type(name) ~= "string" or name == "" then
    error("netcl.class: a class needs a name (a non-empty string), got " .. tostring(name), 2)
  end
  if parent ~= nil and parents[parent] == nil then
    error("netcl.class: the parent of " .. name .. " is not a class, got " .. type(parent), 2)
  end
  local cls = {}
  if parent then
    for k, v in pairs(parent) do
      -- metamethods (and __new) are inherited by copy; a parent's self-index is replaced below
      if type(k) == "string" and k:sub(1, 2) == "__" and not (k == "__index" and v == parent) then cls[k] = v end
    end
  end
  cls.__name = name
  if cls.__index == nil then cls.__index = cls end
  parents[cls] = parent or false
  return setmetatable(cls, {__index = parent, __call = construct, __name = name .. " class"})
end

--- class.is_instance(v, cls) -> whether v is an instance of cls or of a subclass of it.
function class.is_instance(v, cls)
  local c = getmetatable(v)
  while c do
    if c == cls then return true end
    c = parents[c]
  end
  return false
end

--- class.is_class(v) -> whether v is a class made by class().
function class.is_class(v)
  return parents[v] ~= nil
end

local function index(v, k) return v[k] end

--- class.field(v, k) -> v[k] when v can be indexed (a table, or a userdata whose metatable has
-- __index), else nil. For arguments checked by what they offer rather than by their class (a
-- dataset is anything with len and get), without calling them to find out. A userdata whose
-- __index raises for names it lacks (Tensors, Nodes) gives nil for those.
function class.field(v, k)
  local t = type(v)
  if t == "table" then return v[k] end
  if t == "userdata" then
    local mt = getmetatable(v)
    if type(mt) == "table" and mt.__index ~= nil then
      local ok, r = pcall(index, v, k)
      if ok then return r end
    end
  end
  return nil
end

return setmetatable(class, {__call = new_class})

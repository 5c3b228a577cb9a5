-- netcl.class (the class helper of the Lua layer) and the type checks exported from C:
-- nc.is_tensor, nc.is_node / ag.is_node.
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local class = require "netcl.class"
local nn = require "netcl.nn"
local optim = require "netcl.optim"
local data = require "netcl.data"
local text = require "netcl.text"
local H = require "helpers"

H.device()

local Point = class("Point")
function Point:init(x, y) self.x, self.y = x, y end
function Point:norm2() return self.x * self.x + self.y * self.y end
function Point:__tostring() return string.format("Point(%g, %g)", self.x, self.y) end
function Point.__eq(a, b) return a.x == b.x and a.y == b.y end
function Point:__len() return 2 end

local Point3 = class("Point3", Point)
function Point3:init(x, y, z)
  Point.init(self, x, y)
  self.z = z
end
function Point3:norm2() return Point.norm2(self) + self.z * self.z end

TestClass = {}

function TestClass:test_construct_and_methods()
  local p = Point(3, 4)
  lu.assertEquals(p.x, 3)
  lu.assertEquals(p:norm2(), 25)
  lu.assertIs(getmetatable(p), Point)
  lu.assertEquals(getmetatable(p).__name, "Point")
  -- fields live in the instance, methods in the class
  lu.assertNil(rawget(p, "norm2"))
  lu.assertEquals(rawget(p, "x"), 3)
end

function TestClass:test_without_init()
  local Empty = class("Empty")
  local e = Empty(1, 2, 3)
  lu.assertIs(getmetatable(e), Empty)
  lu.assertNil(next(e))
end

function TestClass:test_inheritance()
  local q = Point3(1, 2, 2)
  lu.assertEquals(q:norm2(), 9) -- the override, calling the parent's method
  lu.assertEquals(q.x, 1)
  lu.assertEquals(q.z, 2)
  -- methods added to the parent later are still found (lookup goes through the parent)
  function Point:sum() return self.x + self.y end
  lu.assertEquals(q:sum(), 3)
  Point.sum = nil
end

function TestClass:test_metamethods_are_inherited()
  local p, q = Point(1, 2), Point3(1, 2, 5)
  lu.assertEquals(tostring(p), "Point(1, 2)")
  lu.assertEquals(tostring(q), "Point(1, 2)")
  lu.assertEquals(#q, 2)
  lu.assertTrue(Point3(1, 2, 0) == Point3(1, 2, 7)) -- __eq compares x and y only
  -- a subclass overrides a metamethod by defining it
  local Named = class("Named", Point)
  function Named:__tostring() return "named" end
  lu.assertEquals(tostring(Named(0, 0)), "named")
  lu.assertEquals(tostring(Point(0, 0)), "Point(0, 0)")
end

function TestClass:test_default_tostring_uses_the_name()
  local Plain = class("netcl.test.Plain")
  lu.assertStrMatches(tostring(Plain()), "netcl%.test%.Plain: 0x%x+")
  lu.assertStrMatches(tostring(Plain), "netcl%.test%.Plain class: 0x%x+")
end

function TestClass:test_custom_index_and_new()
  -- a class may define __index itself (a property) and __new (the instance's layout)
  local Box = class("Box")
  function Box.__new() return {store = {}} end
  function Box.__index(self, k)
    if k == "size" then return #rawget(self, "store") end
    return getmetatable(self)[k]
  end
  function Box:put(v) table.insert(self.store, v) return self end
  local b = Box():put(1):put(2)
  lu.assertEquals(b.size, 2)
  local Sub = class("SubBox", Box)
  local s = Sub():put(1)
  lu.assertEquals(s.size, 1)
  lu.assertEquals(s.store, {1})
end

function TestClass:test_is_instance()
  local p, q = Point(0, 0), Point3(0, 0, 0)
  lu.assertTrue(class.is_instance(p, Point))
  lu.assertFalse(class.is_instance(p, Point3))
  lu.assertTrue(class.is_instance(q, Point3))
  lu.assertTrue(class.is_instance(q, Point))
  for _, v in ipairs({{}, 1, "x", true, nc.zeros({1}), Point, Point3, print}) do
    lu.assertFalse(class.is_instance(v, Point))
  end
  lu.assertFalse(class.is_instance(nil, Point))
  lu.assertTrue(class.is_class(Point))
  lu.assertTrue(class.is_class(Point3))
  lu.assertFalse(class.is_class(p))
  lu.assertFalse(class.is_class({}))
end

function TestClass:test_field()
  lu.assertEquals(class.field({a = 1}, "a"), 1)
  lu.assertEquals(class.field(Point(5, 6), "y"), 6)
  lu.assertEquals(class.field(Point(5, 6), "norm2"), Point.norm2)
  for _, v in ipairs({1, "x", true, print, io.stdout}) do lu.assertNil(class.field(v, "len")) end
  lu.assertNil(class.field(nil, "len"))
  local n = ag.param(nc.zeros({2}))
  lu.assertTrue(nc.is_tensor(class.field(n, "value")))
end

function TestClass:test_errors()
  H.assert_error(function() class() end, "netcl.class: a class needs a name")
  H.assert_error(function() class("") end, "a class needs a name")
  H.assert_error(function() class("X", {}) end, "the parent of X is not a class")
  -- init's errors at level 3 point at the line that called the class
  local Checked = class("Checked")
  function Checked:init(n) if type(n) ~= "number" then error("Checked: n must be a number", 3) end end
  local ok, err = pcall(function() local c = Checked("x"); return c end)
  lu.assertFalse(ok)
  lu.assertStrContains(err, "test_class.lua:")
end

function TestClass:test_library_classes()
  lu.assertTrue(class.is_instance(nn.Linear(2, 3), nn.Module))
  lu.assertTrue(class.is_instance(nn.BatchNorm2d(2), nn.Module))
  local Net = nn.Module:extend("Net")
  lu.assertTrue(class.is_class(Net))
  lu.assertTrue(class.is_instance(Net(), nn.Module))
  local p = ag.param(nc.zeros({2}))
  local opt = optim.SGD({p}, {lr = 0.1})
  local Optimizer = require("netcl.optim.optimizer").Optimizer
  lu.assertTrue(class.is_instance(opt, Optimizer))
  lu.assertTrue(class.is_instance(opt, optim.SGD))
  lu.assertFalse(class.is_instance(opt, optim.Adam))
  local Scheduler = require("netcl.optim.scheduler").Scheduler
  lu.assertTrue(class.is_instance(optim.CosineAnnealingLR(opt, {T_max = 2}), Scheduler))
  lu.assertTrue(class.is_instance(optim.ReduceLROnPlateau(opt), Scheduler))
  local ds = data.TensorDataset(nc.zeros({4, 2}))
  lu.assertTrue(class.is_instance(ds, data.TensorDataset))
  lu.assertTrue(class.is_instance(data.DataLoader(ds), data.DataLoader))
  local tok = text.BPETokenizer.train({"hello"}, {vocab_size = 260})
  lu.assertTrue(class.is_instance(tok, text.BPETokenizer))
  H.assert_error(function() text.BPETokenizer("x") end, "make a tokenizer with BPETokenizer.train")
end

TestTypeChecks = {}

function TestTypeChecks:test_is_tensor()
  local t = nc.zeros({2})
  lu.assertTrue(nc.is_tensor(t))
  lu.assertTrue(nc.is_tensor(t:view({1, 2})))
  lu.assertFalse(nc.is_tensor(ag.tensor(t)))
  lu.assertFalse(nc.is_tensor(nc.default_device()))
  for _, v in ipairs({{}, 1, "x", true, print, io.stdout}) do lu.assertFalse(nc.is_tensor(v)) end
  lu.assertFalse(nc.is_tensor(nil))
  lu.assertFalse(nc.is_tensor())
  -- a table that claims the name is not a Tensor
  lu.assertFalse(nc.is_tensor(setmetatable({}, {__name = "netcl.Tensor"})))
  -- a freed tensor is still a Tensor (using it raises)
  local f = nc.ones({3})
  f:free()
  lu.assertTrue(nc.is_tensor(f))
end

function TestTypeChecks:test_is_node()
  local t = nc.zeros({2})
  local n = ag.tensor(t)
  lu.assertIs(ag.is_node, nc.is_node)
  lu.assertTrue(ag.is_node(n))
  lu.assertTrue(nc.is_node(ag.param(nc.ones({1}))))
  lu.assertTrue(nc.is_node(n * 2))
  lu.assertFalse(nc.is_node(t))
  for _, v in ipairs({{}, 1, "x", true, print, io.stdout}) do lu.assertFalse(nc.is_node(v)) end
  lu.assertFalse(nc.is_node(nil))
  lu.assertFalse(nc.is_node(setmetatable({}, {__name = "netcl.Node"})))
  local f = ag.tensor(nc.ones({1}))
  getmetatable(f).__close(f) -- what `local f <close>` does at the end of its block
  lu.assertTrue(nc.is_node(f))
end

os.exit(lu.LuaUnit.run())

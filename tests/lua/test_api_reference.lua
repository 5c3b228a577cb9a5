-- docs/lua-api.md cannot drift from the code: this suite enumerates what the Lua modules
-- actually export and fails when a public name is missing from the reference.
--
-- What is enumerated, by rule rather than by a hand list:
--   * the modules: lua/netcl/NAME.lua and lua/netcl/NAME/init.lua (files under a module's folder
--     are its implementation, reached through the module table), plus netcl itself;
--   * each module table's keys: functions and constants, sub-tables (walked the same way) and
--     classes (netcl.class); a name that starts with "_" is private;
--   * each class's public methods: its own functions less init (the constructor) and those an
--     ancestor defines, which are documented with the ancestor under its own name (the Optimizer
--     base of netcl.optim, for example, which no module exports);
--   * the methods and metamethods of the userdata types: Tensor, Node, Device, Tape. A Node
--     method that Tensors also have is documented with the Tensor method.
--
-- Where a name must appear: docs/lua-api.md has one "## `module`" section per module. A name is
-- documented when its section holds it in code, preceded by a backtick, "." or ":" and ending
-- at a non-identifier character (`nn.Linear`, `t:sum(`, `:fit`). A class method must appear in
-- the part of the section under a heading that names the class; a type's methods under a
-- heading that names the type.
local lu = require "luaunit"
local nc = require "netcl"
local class = require "netcl.class"
local H = require "helpers"

H.device()

local REFERENCE = "docs/lua-api.md"

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function sorted_keys(t)
  local r = {}
  for k in pairs(t) do
    if type(k) == "string" then r[#r + 1] = k end
  end
  table.sort(r)
  return r
end

local function public(name) return name:sub(1, 1) ~= "_" end

-- ---- the reference, split into sections -------------------------------------------------------
-- sections["netcl.nn"] = the text under "## `netcl.nn`" up to the next "## " heading.
local function split_sections(doc)
  local sections, current, lines = {}, nil, {}
  local function flush()
    if current then sections[current] = table.concat(lines, "\n") end
  end
  for line in (doc .. "\n"):gmatch("([^\n]*)\n") do
    local mod = line:match("^## `([%w_.]+)`")
    if mod or line:match("^## ") then
      flush()
      current, lines = mod, {}
    end
    lines[#lines + 1] = line
  end
  flush()
  return sections
end

-- The parts of text under every heading (### or deeper) that names word, each up to the next
-- heading of the same or a higher level.
local function subsections(text, word)
  local parts, lines = {}, {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  local pat = "%f[%w_]" .. word:gsub("%p", "%%%0") .. "%f[^%w_]"
  for i, line in ipairs(lines) do
    local hashes = line:match("^(###+) ")
    if hashes and line:find(pat) then
      local part = {line}
      for j = i + 1, #lines do
        local h = lines[j]:match("^(#+) ")
        if h and #h <= #hashes then break end
        part[#part + 1] = lines[j]
      end
      parts[#parts + 1] = table.concat(part, "\n")
    end
  end
  return table.concat(parts, "\n")
end

local function mentions(text, name)
  local pat = "[`.:]" .. name:gsub("%p", "%%%0") .. "[^%w_]"
  return text:find(pat) ~= nil
end

-- ---- what the code exports --------------------------------------------------------------------
-- Each entry: {section = "netcl.nn", heading = "Linear" or nil, name = "parameters"}.
local function module_names()
  local names = {"netcl"}
  local p = assert(io.popen("ls lua/netcl"))
  for entry in p:lines() do
    local file = entry:match("^([%w_]+)%.lua$")
    if file and file ~= "init" then names[#names + 1] = "netcl." .. file end
    local f = io.open("lua/netcl/" .. entry .. "/init.lua")
    if f then
      f:close()
      names[#names + 1] = "netcl." .. entry
    end
  end
  p:close()
  table.sort(names)
  return names
end

local function short_name(cls)
  return (tostring(rawget(cls, "__name") or "?"):match("([%w_]+)$"))
end

-- The ancestors of cls made by netcl.class, nearest first.
local function ancestors(cls)
  local out = {}
  local mt = getmetatable(cls)
  local c = mt and rawget(mt, "__index")
  while class.is_class(c) do
    out[#out + 1] = c
    mt = getmetatable(c)
    c = mt and rawget(mt, "__index")
  end
  return out
end

-- The methods documented with cls: its own functions, less init (the constructor) and anything
-- an ancestor defines (documented with that ancestor).
local function class_methods(cls)
  local out = {}
  local anc = ancestors(cls)
  for _, k in ipairs(sorted_keys(cls)) do
    local inherited = false
    for _, a in ipairs(anc) do
      if a[k] ~= nil then inherited = true end
    end
    if type(rawget(cls, k)) == "function" and public(k) and k ~= "init" and not inherited then
      out[#out + 1] = k
    end
  end
  return out
end

local function expected_entries()
  local entries = {}
  local function add(section, heading, name) entries[#entries + 1] = {section = section, heading = heading, name = name} end

  local modules = {}
  for _, name in ipairs(module_names()) do modules[name] = require(name) end
  local done_classes = {}
  local tensor = nc.zeros({1})
  local tensor_mt = getmetatable(tensor)
  local node = require("netcl.autograd").tensor(nc.zeros({1}))
  local node_mt = getmetatable(node)
  local seen = {[tensor_mt.methods] = true, [node_mt.methods] = true}

  -- a class is documented in the section of the module that exports it (its ancestors that no
  -- module exports, in the section of their first exported descendant)
  local home = {}
  local function find_homes(section, t, seen_tables)
    if seen_tables[t] then return end
    seen_tables[t] = true
    for _, k in ipairs(sorted_keys(t)) do
      local v = t[k]
      if public(k) and class.is_class(v) then home[v] = home[v] or section
      elseif public(k) and type(v) == "table" then find_homes(section, v, seen_tables) end
    end
  end
  for _, name in ipairs(module_names()) do find_homes(name, modules[name], {}) end

  local function walk_class(section, cls)
    if done_classes[cls] then return end
    done_classes[cls] = true
    home[cls] = home[cls] or section
    section = home[cls]
    local heading = short_name(cls)
    for _, m in ipairs(class_methods(cls)) do add(section, heading, m) end
    -- ancestors, exported or not, under their own headings
    for _, a in ipairs(ancestors(cls)) do walk_class(section, a) end
  end

  local function walk(section, t)
    if seen[t] then return end
    seen[t] = true
    for _, k in ipairs(sorted_keys(t)) do
      local v = t[k]
      if public(k) then
        if class.is_class(v) then
          add(section, nil, k)
          walk_class(section, v)
        elseif type(v) == "table" then
          add(section, nil, k)
          -- netcl.autograd re-exports core.autograd: one table, documented once, as the module
          walk(modules["netcl." .. k] and "netcl." .. k or section, v)
        else
          add(section, nil, k)
        end
      end
    end
  end
  for _, name in ipairs(module_names()) do walk(name, modules[name]) end

  -- userdata types
  local function walk_type(section, heading, mt, skip)
    local methods = mt.methods or (type(mt.__index) == "table" and mt.__index) or {}
    for _, k in ipairs(sorted_keys(methods)) do
      if public(k) and not (skip and skip[k]) then add(section, heading, k) end
    end
    for _, k in ipairs(sorted_keys(mt)) do
      if k:match("^__") and type(mt[k]) == "function" and k ~= "__gc" and k ~= "__index" and
         k ~= "__newindex" and k ~= "__index_number" and k ~= "__close" then
        add(section, heading, k)
      end
    end
  end
  walk_type("netcl", "Tensor", tensor_mt)
  walk_type("netcl.autograd", "Node", node_mt, tensor_mt.methods)
  walk_type("netcl", "Device", getmetatable(nc.device("cpu")))
  walk_type("netcl.autograd", "Tape", getmetatable(require("netcl.autograd").Tape()))
  return entries
end

-- ---- tests ------------------------------------------------------------------------------------
local function missing(doc, entries)
  local sections = split_sections(doc)
  local out = {}
  for _, e in ipairs(entries) do
    local text = sections[e.section]
    if not text then
      out[#out + 1] = "no section ## `" .. e.section .. "`"
    else
      if e.heading then text = subsections(text, e.heading) end
      if not mentions(text, e.name) then
        out[#out + 1] = e.section .. (e.heading and (" / " .. e.heading) or "") .. ": " .. e.name
      end
    end
  end
  -- one line per missing section, not one per name
  local uniq, seen = {}, {}
  for _, m in ipairs(out) do
    if not seen[m] then seen[m], uniq[#uniq + 1] = true, m end
  end
  return uniq
end

TestApiReference = {}

function TestApiReference:test_enumeration_finds_the_modules()
  local entries = expected_entries()
  -- the walk reaches every module, the classes' methods and the userdata types
  local by = {}
  for _, e in ipairs(entries) do by[e.section .. "/" .. (e.heading or "") .. "/" .. e.name] = true end
  for _, key in ipairs{"netcl//zeros", "netcl/Tensor/sum", "netcl/Tensor/__add", "netcl.autograd/Node/detach",
                       "netcl.autograd//no_grad", "netcl.nn/Module/parameters", "netcl.nn//Linear",
                       "netcl.optim/Optimizer/step", "netcl.data.transforms//Normalize",
                       "netcl.autograd/Tape/backward", "netcl.progress/Bar/update"} do
    -- netcl.data.transforms is a sub-table: its names belong to netcl.data's section
    key = key:gsub("^netcl%.data%.transforms", "netcl.data")
    lu.assertTrue(by[key], "the enumeration lacks " .. key)
  end
  lu.assertTrue(#entries > 500, "only " .. #entries .. " names enumerated")
end

function TestApiReference:test_every_public_name_is_documented()
  local m = missing(read(REFERENCE), expected_entries())
  lu.assertEquals(#m, 0, "missing from " .. REFERENCE .. " (" .. #m .. "):\n  " .. table.concat(m, "\n  "))
end

-- The check can fail: the reference with one entry removed is reported.
function TestApiReference:test_a_removed_entry_is_reported()
  local doc = read(REFERENCE)
  local cut = doc:gsub("`nc%.randperm%(", "`nc.RANDPERM("):gsub("t:randperm", "t:RANDPERM"):gsub("`randperm`", "`RANDPERM`")
  local m = missing(cut, expected_entries())
  lu.assertEquals(m, {"netcl: randperm"})
end

-- Every documented Tensor and Node field exists.
function TestApiReference:test_documented_fields_exist()
  local ag = require "netcl.autograd"
  local t = nc.zeros({2, 3})
  local n = ag.tensor(nc.zeros({2}), {requires_grad = true})
  for _, f in ipairs{"shape", "strides", "ndim", "dtype", "device"} do
    lu.assertNotNil(t[f], "t." .. f)
    lu.assertTrue(mentions(split_sections(read(REFERENCE))["netcl"], f), "t." .. f .. " undocumented")
  end
  for _, f in ipairs{"value", "requires_grad", "is_leaf", "shape", "ndim", "dtype", "device"} do
    lu.assertNotNil(n[f], "node." .. f)
    lu.assertTrue(mentions(split_sections(read(REFERENCE))["netcl.autograd"], f), "node." .. f .. " undocumented")
  end
end

-- ---- examples in the docs that print what the docs show ---------------------------------------
-- The first ```lua block after marker in path, and the plain ``` block right after it (the output
-- the docs show), or nil.
local function example(path, marker)
  local doc = read(path)
  local at = doc:find(marker, 1, true)
  assert(at, path .. " lacks " .. marker)
  local code, rest = doc:match("```lua\n(.-)\n```\n()", at)
  assert(code, path .. ": no lua block after " .. marker)
  return code, doc:match("^%s*```\n(.-)\n```", rest)
end

-- Runs code with print captured; returns the printed lines joined by newlines.
local function run(code, name, prelude)
  local lines = {}
  local env = setmetatable({print = function(...)
    local t = table.pack(...)
    for i = 1, t.n do t[i] = tostring(t[i]) end
    lines[#lines + 1] = table.concat(t, "\t")
  end}, {__index = _G})
  assert(load((prelude or "") .. code, "=" .. name, "t", env))()
  return table.concat(lines, "\n")
end

TestDocExamples = {}

-- README's first example trains; it prints the loss every 100 steps and the accuracy.
function TestDocExamples:test_readme()
  local code = example("README.md", "## A first example")
  local n = 0
  for _ in code:gmatch("[^\n]+") do n = n + 1 end
  lu.assertTrue(n <= 15, "the README example has " .. n .. " lines")
  local out = run(code, "README.md")
  local acc = tonumber(out:match("accuracy ([%d.]+)"))
  lu.assertNotNil(acc, out)
  lu.assertTrue(acc >= 0.95, out)
  local first, last = out:match("step 100  loss ([%d.]+)"), out:match("step 300  loss ([%d.]+)")
  lu.assertTrue(tonumber(last) < tonumber(first), out)
end

-- docs/nn.md's printing example prints exactly the tree shown under it.
function TestDocExamples:test_nn_printing()
  local code, shown = example("docs/nn.md", "## Printing")
  lu.assertNotNil(shown)
  lu.assertEquals(run(code, "docs/nn.md", 'local nn = require "netcl.nn" '), shown)
end

os.exit(lu.LuaUnit.run())

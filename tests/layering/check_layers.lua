-- The layering test: every #include of every file under runtime/ and bindings/ must follow the
-- arrows of tests/layering/layers.lua. Each file is judged by its own direct #include lines
-- (not transitively): quoted ones resolve against the including file's folder, then the include
-- directories of its target, as the compiler does; angle-bracket ones against the include
-- directories only. Comments are skipped; conditional includes count (either branch may build).
--
--   lua5.4 check_layers.lua [--root DIR] [--include-dirs runtime=D1:D2] [--include-dirs bindings=...]
--   lua5.4 check_layers.lua --selftest [same options]
--   lua5.4 check_layers.lua --arrows [same options]   (first lists every arrow between two layers)
--
-- Prints one line per violation, "file:line: layer A -> layer B (header) is forbidden", and exits
-- 1 if there is any, 0 otherwise, 2 on a usage or I/O error. --selftest plants forbidden
-- includes in an in-memory copy of the tree and exits 0 only if each is reported exactly (and a
-- commented-out include is not); violations already in the tree don't affect it.
-- Without --include-dirs, the include directories are those CMakeLists.txt gives the targets
-- today; ctest passes the targets' actual ones.
local script_dir = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = script_dir .. "/?.lua;" .. package.path
local layers = require "layers"

local function die(msg)
  io.stderr:write("check_layers: ", msg, "\n")
  os.exit(2)
end

local function normalize(path)
  local abs = path:sub(1, 1) == "/"
  local out = {}
  for part in path:gmatch("[^/]+") do
    if part == ".." and #out > 0 and out[#out] ~= ".." then
      out[#out] = nil
    elseif part ~= "." then
      out[#out + 1] = part
    end
  end
  return (abs and "/" or "") .. table.concat(out, "/")
end

local function shell_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- ---- the tree: files on disk, with an overlay of planted contents for the self-test ----------
local Tree = {}
Tree.__index = Tree

function Tree.new(root)
  local t = setmetatable({root = normalize(root), overlay = {}, exists_cache = {}, text = {}}, Tree)
  local p = io.popen("cd " .. shell_quote(t.root) .. " && find runtime bindings -type f " ..
                     "\\( -name '*.c' -o -name '*.h' -o -name '*.inc' \\) 2>/dev/null")
  t.files = {}
  for line in p:lines() do t.files[#t.files + 1] = line end
  p:close()
  if #t.files == 0 then die("no sources under " .. t.root .. "/runtime or bindings (wrong --root?)") end
  table.sort(t.files)
  return t
end

-- A copy of t whose file `rel` reads as `content` (a new file joins the list).
function Tree:with(rel, content)
  local c = setmetatable({root = self.root, overlay = {}, exists_cache = self.exists_cache,
                          text = self.text, files = {}}, Tree)
  for k, v in pairs(self.overlay) do c.overlay[k] = v end
  local known = false
  for i, f in ipairs(self.files) do
    c.files[i] = f
    known = known or f == rel
  end
  if not known then
    c.files[#c.files + 1] = rel
    table.sort(c.files)
  end
  c.overlay[rel] = content
  return c
end

function Tree:read(rel)
  if self.overlay[rel] then return self.overlay[rel] end
  if not self.text[rel] then
    local f = io.open(self.root .. "/" .. rel, "rb") or die("cannot read " .. rel)
    self.text[rel] = f:read("a")
    f:close()
  end
  return self.text[rel]
end

-- path: absolute and normalized. Returns the path relative to the root for a file in the tree,
-- the absolute path for one outside it, or nil when there is no such file.
function Tree:find(path)
  local rel = path:sub(1, #self.root + 1) == self.root .. "/" and path:sub(#self.root + 2) or nil
  if rel and self.overlay[rel] then return rel end
  local hit = self.exists_cache[path]
  if hit == nil then
    local f = io.open(path, "rb")
    hit = f ~= nil
    if f then f:close() end
    self.exists_cache[path] = hit
  end
  if not hit then return nil end
  return rel or path
end

-- ---- includes -----------------------------------------------------------------------------------
-- The source with comments blanked out (newlines kept, so line numbers stay), string and
-- character literals left intact.
local function strip_comments(src)
  local out, i, n = {}, 1, #src
  while i <= n do
    local c = src:sub(i, i)
    local two = src:sub(i, i + 1)
    if two == "/*" then
      local j = src:find("*/", i + 2, true) or n - 1
      out[#out + 1] = (src:sub(i, j + 1):gsub("[^\n]", " "))
      i = j + 2
    elseif two == "//" then
      local j = src:find("\n", i, true) or n + 1
      i = j
    elseif c == '"' or c == "'" then
      local j = i + 1
      while j <= n do
        local d = src:sub(j, j)
        if d == "\\" then
          j = j + 2
        elseif d == c or d == "\n" then
          break
        else
          j = j + 1
        end
      end
      out[#out + 1] = src:sub(i, j)
      i = j + 1
    else
      local j = src:find("[/\"']", i + 1) or n + 1
      out[#out + 1] = src:sub(i, j - 1)
      i = j
    end
  end
  return table.concat(out)
end

local function includes_of(src)
  local list, lineno = {}, 0
  for line in (strip_comments(src) .. "\n"):gmatch("([^\n]*)\n") do
    lineno = lineno + 1
    local open, name = line:match('^%s*#%s*include%s*([<"])([^>"]+)[>"]')
    if open then list[#list + 1] = {line = lineno, name = name, quoted = open == '"'} end
  end
  return list
end

-- Where an include resolves: a path relative to the root (in the tree), an absolute path (outside
-- it), or nil (found nowhere we know of: a system header, or a build error).
local function resolve(tree, from_rel, inc, dirs)
  local cands = {}
  if inc.name:sub(1, 1) == "/" then
    cands[1] = inc.name
  else
    if inc.quoted then cands[1] = tree.root .. "/" .. (from_rel:match("^(.*)/[^/]*$") or ".") end
    for _, d in ipairs(dirs) do cands[#cands + 1] = d end
    for i, d in ipairs(cands) do cands[i] = d .. "/" .. inc.name end
  end
  for _, c in ipairs(cands) do
    local hit = tree:find(normalize(c))
    if hit then return hit end
  end
  return nil
end

-- What an include names: its layer (a table); nil for a header outside every layer (system
-- headers, files outside runtime/ and bindings/); false for an unassigned runtime file (that file
-- is reported on its own). Second value: the resolved path, third: a problem to report instead.
local function header_layer(tree, resolved, inc)
  local base = inc.name:match("([^/]+)$")
  if layers.LUA_HEADERS[base] and (resolved == nil or resolved:sub(1, 1) == "/") then
    return layers.LUA, resolved
  end
  if resolved == nil then
    -- A header of bindings/ named from runtime/ would not compile; say what it is anyway.
    local rel = normalize("bindings/" .. inc.name)
    if tree:find(tree.root .. "/" .. rel) then
      resolved = rel
    elseif inc.quoted or inc.name:match("^netcl/") then
      return nil, nil, "it is found neither in the tree nor in the include directories " ..
                       "(fix the include, or pass the target's include directories with --include-dirs)"
    else
      return nil -- a system header
    end
  end
  if resolved:sub(1, 1) == "/" then
    if inc.name:match("^netcl/") then
      return nil, resolved, ("it resolves outside the source tree, to %s (an installed copy?)"):format(resolved)
    end
    return nil, resolved
  end
  local l = layers.layer_of(resolved)
  if l == nil then return false, resolved end
  return l or nil, resolved
end

local function display(resolved, inc, from_rel)
  if resolved == nil or resolved:sub(1, 1) == "/" then return inc.name end
  local here = from_rel:match("^(.*/)[^/]*$") or ""
  for _, prefix in ipairs({here, "runtime/include/", "runtime/", ""}) do
    if resolved == prefix .. inc.name then return inc.name end
  end
  return inc.name .. " = " .. resolved
end

-- All violations of the tree, sorted, as strings. With a table `arrows`, also collects every
-- include between two layers into it ("A -> B" -> {n, headers, forbidden}).
local function check(tree, include_dirs, arrows)
  local out = {}
  local function report(fmt, ...) out[#out + 1] = fmt:format(...) end
  local present = {}
  for _, rel in ipairs(tree.files) do
    local pub = rel:match("^runtime/include/(.+)$")
    if pub then present[pub] = true end
    local from, why = layers.layer_of(rel)
    if from == nil then
      report("%s:1: %s", rel, why)
    elseif from then
      local scope = rel:match("^bindings/") and "bindings" or "runtime"
      for _, inc in ipairs(includes_of(tree:read(rel))) do
        local resolved = resolve(tree, rel, inc, include_dirs[scope])
        local to, problem
        to, resolved, problem = header_layer(tree, resolved, inc)
        if problem then report("%s:%d: include of %s cannot be judged: %s", rel, inc.line, inc.name, problem) end
        if to and arrows and to.id ~= from.id then
          local key = layers.label(from) .. " -> " .. layers.label(to)
          local a = arrows[key] or {n = 0, headers = {}, forbidden = false}
          arrows[key] = a
          a.n = a.n + 1
          a.headers[display(resolved, inc, rel)] = true
          a.forbidden = a.forbidden or not layers.may_include(from, to)
        end
        if to and not layers.may_include(from, to) then
          local label = layers.label(to)
          if not to.public and to.kind ~= "lua" and to.kind ~= "bindings" and
             (from.public or (layers.MAY[from.kind][to.kind == "backend" and "backends" or to.kind])) then
            label = label .. " internal" -- the layer is allowed, its internal headers are not
          end
          report("%s:%d: %s%s -> %s (%s) is forbidden", rel, inc.line, layers.label(from),
                 from.public and " public header" or "", label, display(resolved, inc, rel))
        end
      end
    end
  end
  for pub in pairs(layers.PUBLIC_HEADERS) do
    if not present[pub] then
      report("tests/layering/layers.lua:1: PUBLIC_HEADERS lists %s, which is not in runtime/include: " ..
             "remove or rename its row", pub)
    end
  end
  table.sort(out, function(a, b)
    local fa, la = a:match("^([^:]*):(%d+):")
    local fb, lb = b:match("^([^:]*):(%d+):")
    if fa ~= fb then return fa < fb end
    return tonumber(la) < tonumber(lb)
  end)
  return out
end

-- ---- self-test ------------------------------------------------------------------------------
local function line_count(s)
  local n = select(2, s:gsub("\n", "\n"))
  if #s > 0 and s:sub(-1) ~= "\n" then n = n + 1 end
  return n
end

-- Each case appends one line to a file (so the tree's other line numbers stay put) or adds a new
-- file, and names the violation lines that must appear (with LINE for the planted line) beyond
-- those of the unmodified tree.
local SELFTEST = {
  {file = "runtime/core/tensor.c", add = '#include "netcl/elementwise.h"',
   expect = {"runtime/core/tensor.c:LINE: core -> ops (netcl/elementwise.h) is forbidden"}},
  {file = "runtime/core/tensor.c", add = "#include <netcl/autograd.h>",
   expect = {"runtime/core/tensor.c:LINE: core -> autograd (netcl/autograd.h) is forbidden"}},
  {file = "runtime/core/storage.c", add = '#include "../backend/cpu/cpu_backend.h"',
   expect = {"runtime/core/storage.c:LINE: core -> backend cpu (../backend/cpu/cpu_backend.h = " ..
             "runtime/backend/cpu/cpu_backend.h) is forbidden"}},
  {file = "runtime/backend/cpu/elementwise.c", add = '#include "ops/support.h"',
   expect = {"runtime/backend/cpu/elementwise.c:LINE: backend cpu -> ops (ops/support.h) is forbidden"}},
  {file = "runtime/backend/opencl/cl_reduce.c", add = '#include "netcl/autograd_ops.h"',
   expect = {"runtime/backend/opencl/cl_reduce.c:LINE: backend opencl -> autograd (netcl/autograd_ops.h) is forbidden"}},
  {file = "runtime/backend/registry.c", add = '#include "netcl/conv.h"',
   expect = {"runtime/backend/registry.c:LINE: backend dispatch -> ops (netcl/conv.h) is forbidden"}},
  {file = "runtime/ops/reduce.c", add = '#include "netcl/autograd.h"',
   expect = {"runtime/ops/reduce.c:LINE: ops -> autograd (netcl/autograd.h) is forbidden"}},
  {file = "runtime/ops/elementwise.c", add = "#include <lauxlib.h>",
   expect = {"runtime/ops/elementwise.c:LINE: ops -> Lua C API (lauxlib.h) is forbidden"}},
  {file = "runtime/autograd/tape.c", add = '#include "netcl/netcl.h"',
   expect = {"runtime/autograd/tape.c:LINE: autograd -> top (netcl/netcl.h) is forbidden"}},
  {file = "runtime/io/npy.c", add = '#include "../../bindings/l_common.h"',
   expect = {"runtime/io/npy.c:LINE: io -> bindings (../../bindings/l_common.h = bindings/l_common.h) is forbidden"}},
  {file = "runtime/data/batch.c", add = '#include "netcl/autograd.h"',
   expect = {"runtime/data/batch.c:LINE: data -> autograd (netcl/autograd.h) is forbidden"}},
  {file = "runtime/include/netcl/tensor.h", add = '#include "core/device_impl.h"',
   expect = {"runtime/include/netcl/tensor.h:LINE: core public header -> core internal " ..
             "(core/device_impl.h) is forbidden"}},
  {file = "bindings/l_tensor.c", add = '#include "../runtime/core/device_impl.h"',
   expect = {"bindings/l_tensor.c:LINE: bindings -> core internal (../runtime/core/device_impl.h = " ..
             "runtime/core/device_impl.h) is forbidden"}},
  {file = "runtime/core/tensor.c", add = '#include "planted_missing.h"',
   expect = {"runtime/core/tensor.c:LINE: include of planted_missing.h cannot be judged: it is found " ..
             "neither in the tree nor in the include directories (fix the include, or pass the " ..
             "target's include directories with --include-dirs)"}},
  {file = "runtime/ops/sort.c", add = '#include "l_common.h"', -- not on runtime's include path
   expect = {"runtime/ops/sort.c:LINE: ops -> bindings (l_common.h = bindings/l_common.h) is forbidden"}},
  {file = "runtime/core/dtype.c", add = '/* #include "netcl/autograd.h" */ // #include "netcl/ops.h"',
   expect = {}},
  {file = "runtime/include/netcl/planted.h", content = "#include \"tensor.h\"\n",
   expect = {"runtime/include/netcl/planted.h:1: public header netcl/planted.h has no layer: " ..
             "assign it a layer in PUBLIC_HEADERS of tests/layering/layers.lua"}},
  {file = "runtime/planted/x.c", content = "#include \"netcl/tensor.h\"\n",
   expect = {"runtime/planted/x.c:1: runtime/planted has no layer: assign it a layer in FOLDERS " ..
             "of tests/layering/layers.lua"}},
}

local function selftest(tree, include_dirs)
  local base = {}
  for _, v in ipairs(check(tree, include_dirs)) do base[v] = true end
  local failed = 0
  for _, case in ipairs(SELFTEST) do
    local content, line
    if case.content then
      content, line = case.content, 1
    else
      local orig = tree:read(case.file)
      if orig:sub(-1) ~= "\n" then orig = orig .. "\n" end
      content, line = orig .. case.add .. "\n", line_count(orig) + 1
    end
    local got = {}
    for _, v in ipairs(check(tree:with(case.file, content), include_dirs)) do
      if not base[v] then got[#got + 1] = v end
    end
    local want = {}
    for i, e in ipairs(case.expect) do want[i] = (e:gsub("LINE", tostring(line))) end
    local ok = #got == #want
    for i = 1, #want do ok = ok and got[i] == want[i] end
    print(("%s: %s %s"):format(ok and "ok" or "FAIL", case.file, case.add or "(new file)"))
    for _, v in ipairs(got) do print("    reported: " .. v) end
    if not ok then
      failed = failed + 1
      for _, v in ipairs(want) do print("    expected: " .. v) end
      if #want == 0 then print("    expected: nothing") end
    end
  end
  print(("check_layers self-test: %d of %d planted cases %s"):format(
    #SELFTEST - failed, #SELFTEST, failed == 0 and "detected as expected" or "right; FAILED"))
  return failed == 0
end

-- ---- main ---------------------------------------------------------------------------------------
local root = script_dir .. "/../.."
local dirs_arg = {}
local mode = "check"
local i = 1
while arg[i] do
  local a = arg[i]
  if a == "--root" then
    root, i = arg[i + 1] or die("--root needs a folder"), i + 1
  elseif a == "--include-dirs" then
    local v = arg[i + 1] or die("--include-dirs needs SCOPE=DIR:DIR...")
    local scope, list = v:match("^(%a+)=(.*)$")
    if scope ~= "runtime" and scope ~= "bindings" then die("--include-dirs: scope is runtime or bindings") end
    dirs_arg[scope] = list
    i = i + 1
  elseif a == "--selftest" then
    mode = "selftest"
  elseif a == "--arrows" then
    mode = "arrows"
  else
    die("unknown argument " .. a .. " (see the head of check_layers.lua)")
  end
  i = i + 1
end
if root:sub(1, 1) ~= "/" then root = os.getenv("PWD") .. "/" .. root end
root = normalize(root)

-- As CMakeLists.txt has them: netcl (runtime/) gets runtime/include and runtime; netcl_lua and
-- the programs on it (bindings/) get bindings and runtime/include. System folders are not needed:
-- a header not found in the tree is outside every layer (Lua's headers are known by name).
local include_dirs = {runtime = {root .. "/runtime/include", root .. "/runtime"},
                      bindings = {root .. "/bindings", root .. "/runtime/include"}}
for scope, list in pairs(dirs_arg) do
  include_dirs[scope] = {}
  for d in list:gmatch("[^:]+") do include_dirs[scope][#include_dirs[scope] + 1] = normalize(d) end
end

local tree = Tree.new(root)
if mode == "selftest" then os.exit(selftest(tree, include_dirs) and 0 or 1) end
local arrows = mode == "arrows" and {} or nil
local violations = check(tree, include_dirs, arrows)
if arrows then
  local keys = {}
  for k in pairs(arrows) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local hs = {}
    for h in pairs(arrows[k].headers) do hs[#hs + 1] = h end
    table.sort(hs)
    print(("%s%s: %d include(s): %s"):format(k, arrows[k].forbidden and " [FORBIDDEN]" or "",
                                             arrows[k].n, table.concat(hs, ", ")))
  end
  print()
end
for _, v in ipairs(violations) do print(v) end
if #violations > 0 then
  print(("check_layers: %d violation(s); the rules are in " ..
         "tests/layering/layers.lua"):format(#violations))
  os.exit(1)
end
print(("check_layers: %d files under runtime/ and bindings/ follow the layering"):format(#tree.files))

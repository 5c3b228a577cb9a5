-- The file-cycle checker: there is a cycle when file A uses a symbol defined in file B and B,
-- directly or through other files, uses one defined in A. It reads the object files of the build
-- with nm: an edge A -> B for each global symbol A leaves undefined (U, or weak undefined w/v)
-- and B defines (T D B R C G S V W u A), then reports every strongly connected component (Tarjan)
-- of more than one file, with one example symbol for each edge inside it. Only sources under
-- runtime/ and bindings/ take part (generated files, tests and system libraries do not).
-- Each edge is labelled with the layers of tests/layering/layers.lua; "against the layering"
-- marks a use the include rules would not allow (the edges to cut first).
--
--   lua5.4 check_cycles.lua BUILD_DIR [--targets netcl,netcl_lua,netcl_core,netcl-lua] [--root SRC]
--   lua5.4 check_cycles.lua --objects OBJ:OBJ:...   (what ctest passes: $<TARGET_OBJECTS:...>)
--   --all-symbols lists every symbol of each edge instead of one example
--   lua5.4 check_cycles.lua --selftest [--cc CC]
--
-- BUILD_DIR mode reads BUILD_DIR/CMakeFiles/<target>.dir/**.o for the targets named (default:
-- the library, the binding archive, the C module and netcl-lua), skipping objects whose source
-- is gone from SRC (stale objects of deleted files). An object's source is its path under
-- CMakeFiles/<target>.dir/ without ".o", relative to the folder of the CMakeLists.txt that made
-- the target (the source root for all four). Exit status: 0 no cycle, 1 cycles, 2 error (no
-- objects in scope, nm failed). --selftest compiles a few small C files into a temporary build
-- folder with cycles of two and three files (one through a data symbol), a file that only uses
-- the cycle, and a would-be cycle through a file out of scope, and exits 0 only if exactly the
-- two cycles are found.
local script_dir = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = script_dir .. "/?.lua;" .. package.path
local layers = require "layers"

local function fail(msg) error({msg = msg}, 0) end

local function shell_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local DEFINED = {A = true, B = true, C = true, D = true, G = true, R = true, S = true, T = true,
                 V = true, W = true, u = true}
local UNDEFINED = {U = true, w = true, v = true}

-- The source (relative to the source root) an object file was compiled from, or nil.
local function source_of(obj)
  return obj:match("/CMakeFiles/[^/]+%.dir/(.+)%.o$") or obj:match("^CMakeFiles/[^/]+%.dir/(.+)%.o$")
end

local function in_scope(src) return src:match("^runtime/") or src:match("^bindings/") end

-- {src -> {defs = {sym = true}, uses = {sym = true}}} for the objects given (a source built
-- into two targets counts once, with the union of its symbols).
local function read_symbols(objects)
  local files = {}
  local batch = {}
  local function run()
    if #batch == 0 then return end
    local quoted = {}
    for i, o in ipairs(batch) do quoted[i] = shell_quote(o) end
    local p = io.popen("nm -P -A " .. table.concat(quoted, " ") .. " 2>&1")
    local out = p:read("a")
    local ok = p:close()
    if not ok then fail("nm failed:\n" .. out) end
    for line in out:gmatch("[^\n]+") do
      local obj, sym, kind = line:match("^(.-%.o): (%S+) (%a)")
      if obj then
        local f = files[source_of(obj)]
        if DEFINED[kind] then
          f.defs[sym] = true
        elseif UNDEFINED[kind] then
          f.uses[sym] = true
        end
      end
    end
    batch = {}
  end
  for _, obj in ipairs(objects) do
    local src = source_of(obj)
    files[src] = files[src] or {defs = {}, uses = {}}
    batch[#batch + 1] = obj
    if #batch == 64 then run() end
  end
  run()
  return files
end

-- edges[a][b] = sorted list of the symbols a uses from b.
local function build_graph(files)
  local definer = {}
  for src, f in pairs(files) do
    for sym in pairs(f.defs) do
      definer[sym] = definer[sym] or {}
      table.insert(definer[sym], src)
    end
  end
  local edges = {}
  for src, f in pairs(files) do
    edges[src] = {}
    for sym in pairs(f.uses) do
      for _, b in ipairs(definer[sym] or {}) do
        if b ~= src then
          edges[src][b] = edges[src][b] or {}
          table.insert(edges[src][b], sym)
        end
      end
    end
    for _, syms in pairs(edges[src]) do table.sort(syms) end
  end
  return edges
end

-- Tarjan's strongly connected components of more than one node, each sorted, in sorted order.
local function components(edges)
  local nodes = {}
  for n in pairs(edges) do nodes[#nodes + 1] = n end
  table.sort(nodes)
  local index, low, on_stack, stack, counter, out = {}, {}, {}, {}, 0, {}
  local function connect(v)
    counter = counter + 1
    index[v], low[v] = counter, counter
    stack[#stack + 1] = v
    on_stack[v] = true
    local succ = {}
    for w in pairs(edges[v]) do succ[#succ + 1] = w end
    table.sort(succ)
    for _, w in ipairs(succ) do
      if not index[w] then
        connect(w)
        low[v] = math.min(low[v], low[w])
      elseif on_stack[w] then
        low[v] = math.min(low[v], index[w])
      end
    end
    if low[v] == index[v] then
      local comp = {}
      repeat
        local w = table.remove(stack)
        on_stack[w] = nil
        comp[#comp + 1] = w
      until w == v
      if #comp > 1 then
        table.sort(comp)
        out[#out + 1] = comp
      end
    end
  end
  for _, v in ipairs(nodes) do
    if not index[v] then connect(v) end
  end
  table.sort(out, function(a, b) return a[1] < b[1] end)
  return out
end

-- The cycles of the object files given: a list of {members = {...}, edges = {{from, to, syms}}}.
local function find_cycles(objects)
  local scoped = {}
  for _, o in ipairs(objects) do
    local src = source_of(o)
    if src and in_scope(src) then scoped[#scoped + 1] = o end
  end
  if #scoped == 0 then fail("no object files of sources under runtime/ or bindings/ (build first?)") end
  local files = read_symbols(scoped)
  local edges = build_graph(files)
  local cycles = {}
  for _, comp in ipairs(components(edges)) do
    local member = {}
    for _, m in ipairs(comp) do member[m] = true end
    local c = {members = comp, edges = {}}
    for _, a in ipairs(comp) do
      local tos = {}
      for b in pairs(edges[a]) do
        if member[b] then tos[#tos + 1] = b end
      end
      table.sort(tos)
      for _, b in ipairs(tos) do c.edges[#c.edges + 1] = {from = a, to = b, syms = edges[a][b]} end
    end
    cycles[#cycles + 1] = c
  end
  local n = 0
  for _ in pairs(files) do n = n + 1 end
  return cycles, n
end

-- The layers of an edge ("core -> backend dispatch") and whether the layering forbids it; nil for
-- files in no layer.
local function edge_layers(a, b)
  local la, lb = layers.layer_of(a), layers.layer_of(b)
  if not la or not lb then return nil end
  return layers.label(la) .. " -> " .. layers.label(lb), not layers.may_use(la, lb)
end

local function format_cycles(cycles, all_symbols)
  local lines = {}
  local function print(l) lines[#lines + 1] = l end
  for i, c in ipairs(cycles) do
    print(("cycle %d: %d files: %s"):format(i, #c.members, table.concat(c.members, " ")))
    local against = {}
    for _, e in ipairs(c.edges) do
      local syms = e.syms[1]
      if all_symbols then
        syms = table.concat(e.syms, ", ")
      elseif #e.syms > 1 then
        syms = syms .. (" (+%d more)"):format(#e.syms - 1)
      end
      local arrow, bad = edge_layers(e.from, e.to)
      local note = arrow and ("  [%s%s]"):format(arrow, bad and ": against the layering" or "") or ""
      print(("  %s -> %s: %s%s"):format(e.from, e.to, syms, note))
      if bad then against[#against + 1] = e end
    end
    if #against > 0 then
      -- What would be left of the cycle without the edges the layering forbids anyway.
      local cut, sub = {}, {}
      for _, e in ipairs(against) do cut[e.from .. "\0" .. e.to] = true end
      for _, m in ipairs(c.members) do sub[m] = {} end
      for _, e in ipairs(c.edges) do
        if not cut[e.from .. "\0" .. e.to] then sub[e.from][e.to] = e.syms end
      end
      local rest = components(sub)
      local parts = {}
      for _, r in ipairs(rest) do parts[#parts + 1] = "{" .. table.concat(r, " ") .. "}" end
      print(("  %d edge(s) against the layering; without them %s"):format(#against,
        #rest == 0 and "no cycle is left" or
        ("%d cycle(s) remain: %s"):format(#rest, table.concat(parts, " "))))
    end
  end
  return lines
end

-- ---- object lists -------------------------------------------------------------------------------
local function objects_of_build(build, targets, root)
  local out = {}
  for _, t in ipairs(targets) do
    local dir = build .. "/CMakeFiles/" .. t .. ".dir"
    local p = io.popen("find " .. shell_quote(dir) .. " -name '*.o' 2>/dev/null")
    for obj in p:lines() do
      local src = source_of(obj)
      if src and in_scope(src) then
        if root and not exists(root .. "/" .. src) then
          io.stderr:write(("check_cycles: skipping %s (stale: %s is gone)\n"):format(obj, src))
        else
          out[#out + 1] = obj
        end
      end
    end
    p:close()
  end
  table.sort(out)
  return out
end

-- ---- self-test ------------------------------------------------------------------------------
local FIXTURE = {
  -- three files in a cycle, one edge through a data symbol: a -> b -> c -> a
  ["runtime/selftest/a.c"] = "int b_fn(void);\nint a_fn(void) { return 1; }\nint a_calls(void) { return b_fn(); }\n",
  ["runtime/selftest/b.c"] = "extern int c_var;\nint b_fn(void) { return c_var; }\n",
  ["runtime/selftest/c.c"] = "int a_fn(void);\nint c_var = 3;\nint c_fn(void) { return a_fn(); }\n",
  -- uses the cycle, is not in it; would be in a cycle with the out-of-scope generated file
  ["runtime/selftest/d.c"] = "int a_fn(void);\nint g_fn(void);\nint d_fn(void) { return a_fn() + g_fn(); }\n",
  ["generated/g.c"] = "int d_fn(void);\nint g_fn(void) { return d_fn(); }\n",
  -- A calls B and B calls A
  ["bindings/p.c"] = "int q_fn(void);\nint p_fn(void) { return q_fn(); }\n",
  ["bindings/q.c"] = "int p_fn(void);\nint q_fn(void) { return p_fn(); }\n",
  -- across layers: core uses ops (a function, and a zero-initialized variable), and two core
  -- files use each other (the cycle left once the edges into ops are cut)
  ["runtime/core/st_core.c"] = "int st_op(void);\nint st_core2(void);\n" ..
                               "int st_core(void) { return st_op() + st_core2(); }\n",
  ["runtime/core/st_core2.c"] = "extern int st_flag;\nint st_core(void);\n" ..
                                "int st_core2(void) { return st_flag ? st_core() : 0; }\n",
  ["runtime/ops/st_op.c"] = "int st_core(void);\nint st_flag;\nint st_op(void) { return st_core(); }\n",
}
local EXPECTED = [[
cycle 1: 2 files: bindings/p.c bindings/q.c
  bindings/p.c -> bindings/q.c: q_fn  [bindings -> bindings]
  bindings/q.c -> bindings/p.c: p_fn  [bindings -> bindings]
cycle 2: 3 files: runtime/core/st_core.c runtime/core/st_core2.c runtime/ops/st_op.c
  runtime/core/st_core.c -> runtime/core/st_core2.c: st_core2  [core -> core]
  runtime/core/st_core.c -> runtime/ops/st_op.c: st_op  [core -> ops: against the layering]
  runtime/core/st_core2.c -> runtime/core/st_core.c: st_core  [core -> core]
  runtime/core/st_core2.c -> runtime/ops/st_op.c: st_flag  [core -> ops: against the layering]
  runtime/ops/st_op.c -> runtime/core/st_core.c: st_core  [ops -> core]
  2 edge(s) against the layering; without them 1 cycle(s) remain: {runtime/core/st_core.c runtime/core/st_core2.c}
cycle 3: 3 files: runtime/selftest/a.c runtime/selftest/b.c runtime/selftest/c.c
  runtime/selftest/a.c -> runtime/selftest/b.c: b_fn
  runtime/selftest/b.c -> runtime/selftest/c.c: c_var
  runtime/selftest/c.c -> runtime/selftest/a.c: a_fn
]]

local function selftest(cc)
  local p = io.popen("mktemp -d")
  local tmp = p:read("l")
  p:close()
  if not tmp or tmp == "" then fail("mktemp -d failed") end
  local objects = {}
  local ok_all = true
  local names = {}
  for src in pairs(FIXTURE) do names[#names + 1] = src end
  table.sort(names)
  for _, src in ipairs(names) do
    local c_path = tmp .. "/src/" .. src
    local o_path = tmp .. "/build/CMakeFiles/fixture.dir/" .. src .. ".o"
    os.execute("mkdir -p " .. shell_quote(c_path:match("^(.*)/")) .. " " .. shell_quote(o_path:match("^(.*)/")))
    local f = assert(io.open(c_path, "w"))
    f:write(FIXTURE[src])
    f:close()
    if not os.execute(("%s -c -O0 -o %s %s"):format(cc, shell_quote(o_path), shell_quote(c_path))) then
      ok_all = false
      print("self-test: cannot compile " .. src .. " with " .. cc)
    end
  end
  local cycles
  if ok_all then
    objects = objects_of_build(tmp .. "/build", {"fixture"}, tmp .. "/src")
    local ok, err = pcall(function() cycles = find_cycles(objects) end)
    if not ok then
      ok_all = false
      print("self-test: " .. (type(err) == "table" and err.msg or tostring(err)))
    end
  end
  os.execute("rm -rf " .. shell_quote(tmp))
  if not ok_all then return false end
  local got = table.concat(format_cycles(cycles), "\n") .. "\n"
  io.write(got)
  if got ~= EXPECTED then
    print("check_cycles self-test FAILED: expected\n" .. EXPECTED)
    return false
  end
  print(("check_cycles self-test: the 3 planted cycles found exactly, and nothing else (%d objects)"):format(#objects))
  return true
end

-- ---- main ---------------------------------------------------------------------------------------
local function main()
  local build, objects_arg, mode, root, all_symbols
  local targets = {"netcl", "netcl_lua", "netcl_core", "netcl-lua"}
  local cc = os.getenv("CC") or "cc"
  local i = 1
  while arg[i] do
    local a = arg[i]
    if a == "--objects" then
      objects_arg, i = arg[i + 1] or fail("--objects needs a list"), i + 1
    elseif a == "--targets" then
      targets = {}
      for t in (arg[i + 1] or fail("--targets needs a list")):gmatch("[^,]+") do targets[#targets + 1] = t end
      i = i + 1
    elseif a == "--root" then
      root, i = arg[i + 1] or fail("--root needs a folder"), i + 1
    elseif a == "--cc" then
      cc, i = arg[i + 1] or fail("--cc needs a compiler"), i + 1
    elseif a == "--selftest" then
      mode = "selftest"
    elseif a == "--all-symbols" then
      all_symbols = true
    elseif a:sub(1, 2) == "--" then
      fail("unknown option " .. a .. " (see the head of check_cycles.lua)")
    else
      build = a
    end
    i = i + 1
  end
  if mode == "selftest" then return selftest(cc) and 0 or 1 end
  local objects = {}
  if objects_arg then
    for o in objects_arg:gmatch("[^:;]+") do objects[#objects + 1] = o end
  elseif build then
    objects = objects_of_build(build, targets, root or (script_dir .. "/../.."))
  else
    fail("give a build folder, --objects or --selftest")
  end
  local cycles, n = find_cycles(objects)
  for _, l in ipairs(format_cycles(cycles, all_symbols)) do print(l) end
  if #cycles > 0 then
    local files = 0
    for _, c in ipairs(cycles) do files = files + #c.members end
    print(("check_cycles: %d cycle(s) among %d of %d files under runtime/ and bindings/"):format(
      #cycles, files, n))
    return 1
  end
  print(("check_cycles: no cycle among %d files under runtime/ and bindings/"):format(n))
  return 0
end

local ok, rc = pcall(main)
if not ok then
  io.stderr:write("check_cycles: ", type(rc) == "table" and rc.msg or tostring(rc), "\n")
  os.exit(2)
end
os.exit(rc)

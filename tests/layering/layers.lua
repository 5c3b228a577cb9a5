-- The layering policy of runtime/ and bindings/: which layer each file belongs to, and which
-- layers each layer may use. Both checkers read it: check_layers.lua (#include arrows) and
-- check_cycles.lua (symbol-level file cycles, whose edges it labels with these layers).
--
-- Editing it:
--  * a new public header runtime/include/netcl/X.h: add a row to PUBLIC_HEADERS (a header
--    missing from the table fails the test, so none slips through unassigned);
--  * a new folder under runtime/: add a row to FOLDERS (an unassigned folder fails too);
--    every folder under runtime/backend/ is a backend of its own (cpu/, opencl/, ...);
--  * a new allowed arrow: add the target layer to the source layer's row in MAY.
--
-- Layers, top to bottom:
--   bindings                 Lua C API glue and the netcl-lua CLI (bindings/)
--   top                      netcl/netcl.h, the umbrella: only bindings and code outside runtime/
--   autograd                 runtime/autograd/
--   io, text, data           utility layers beside autograd: they use ops and core
--   ops                      runtime/ops/ and the ops' public headers
--   dispatch                 runtime/backend/*.{c,h}: the backend contract (op table, descriptors)
--   backend/<name>           runtime/backend/<name>/: one backend each (cpu, opencl, ...)
--   core                     runtime/core/ and the core public headers
-- Internal headers (runtime/core/device_impl.h, runtime/ops/support.h, ...) belong to their
-- folder's layer. Headers outside the tree (libc, OpenCL, jansson, ...) belong to no layer and
-- may be included anywhere, except the Lua C API (layer lua): bindings only.
local M = {}

-- Public headers (path under runtime/include) -> layer.
M.PUBLIC_HEADERS = {
  -- core: devices, dtypes, tensors, storage, pools, status, Philox
  ["netcl/status.h"] = "core",
  ["netcl/dtype.h"] = "core",
  ["netcl/half.h"] = "core",
  ["netcl/device.h"] = "core",
  ["netcl/memory.h"] = "core",
  ["netcl/storage.h"] = "core",
  ["netcl/tensor.h"] = "core",
  ["netcl/random.h"] = "core", -- the Philox generator (runtime/core/random.c)
  ["netcl/threads.h"] = "core", -- the CPU thread pool (runtime/core/threads.c)
  -- backend dispatch: the contract between ops and backends (op ids, descriptor types)
  ["netcl/optable.h"] = "dispatch",
  ["netcl/op_desc.h"] = "dispatch",
  -- ops
  ["netcl/creation.h"] = "ops",
  ["netcl/copy.h"] = "ops",
  ["netcl/format.h"] = "ops",
  ["netcl/elementwise.h"] = "ops",
  ["netcl/reduce.h"] = "ops",
  ["netcl/index.h"] = "ops",
  ["netcl/join.h"] = "ops",
  ["netcl/sort.h"] = "ops",
  ["netcl/linalg.h"] = "ops",
  ["netcl/conv.h"] = "ops",
  ["netcl/pool.h"] = "ops",
  ["netcl/norm.h"] = "ops",
  ["netcl/embedding.h"] = "ops",
  ["netcl/loss.h"] = "ops",
  ["netcl/optim.h"] = "ops",
  ["netcl/table_ops.h"] = "ops", -- the ops declared by their op-table row
  ["netcl/op_sig.h"] = "dispatch", -- signatures in the op table
  -- autograd
  ["netcl/autograd.h"] = "autograd",
  ["netcl/autograd_ops.h"] = "autograd",
  -- utility layers
  ["netcl/bpe.h"] = "text",
  ["netcl/safetensors.h"] = "io",
  ["netcl/npy.h"] = "io",
  ["netcl/idx.h"] = "data",
  ["netcl/batch.h"] = "data",
  ["netcl/shuffle.h"] = "data",
  ["netcl/workers.h"] = "data",
  ["netcl/cifar.h"] = "data",
  ["netcl/dist.h"] = "dist", -- collectives between devices and processes (runtime/dist/)
  -- the umbrella
  ["netcl/netcl.h"] = "top",
}

-- Source folders (relative to the source root) -> layer. The longest matching prefix wins;
-- runtime/include is the home of the public headers above, and runtime/backend/<name>/ is the
-- backend <name>.
M.FOLDERS = {
  ["runtime/core"] = "core",
  ["runtime/backend"] = "dispatch", -- files directly in runtime/backend/
  ["runtime/ops"] = "ops",
  ["runtime/autograd"] = "autograd",
  ["runtime/io"] = "io",
  ["runtime/text"] = "text",
  ["runtime/data"] = "data",
  ["runtime/dist"] = "dist",
  ["bindings"] = "bindings",
}

-- Which layers each layer may include. A file may always include its own layer (its folder's
-- internal headers and its layer's public headers), except that one backend is not another.
-- "any": public and internal headers of that layer, and its functions and data;
-- "public": its public headers, and the functions they declare;
-- "types": its public headers, for their types and constants only: calling into that layer is
-- against the layering (check_cycles.lua flags such symbol edges; no row uses it today);
-- "backends": every backend/<name>. Whatever is not listed is forbidden. Beyond that table:
-- a public header may include public headers only (runtime/ is not installed), and nothing in
-- runtime/ may include the Lua C API or bindings/.
--
-- Arrows the issue [arch] forbids outright, all enforced here: core -> ops, autograd, dispatch,
-- any backend; ops -> autograd; backend -> autograd, -> anything in runtime/ops/; dispatch ->
-- ops, autograd; runtime -> Lua, -> bindings; runtime -> netcl.h. The rest follows from
-- "arrows only point down": ops and autograd reach a backend only through dispatch, backends
-- don't use each other, core and the backends use no utility layer, the utility layers use no
-- autograd, no backend directly, and among themselves only data -> io (dataset files are read
-- through io's file helpers), and bindings use the public API only (the binding archive is
-- built and installed against runtime/include alone).
local PUBLIC_OF_ALL = {core = "public", dispatch = "public", ops = "public", autograd = "public",
                       io = "public", text = "public", data = "public", dist = "public",
                       top = "public"}
M.MAY = {
  core = {},
  dispatch = {core = "any", backends = "any"}, -- the registry creates the backends
  backend = {core = "any", dispatch = "any"}, -- descriptor types live in dispatch (netcl/op_desc.h)
  ops = {core = "any", dispatch = "any"},
  autograd = {core = "any", dispatch = "any", ops = "any"},
  io = {core = "any", dispatch = "any", ops = "any"},
  text = {core = "any", dispatch = "any", ops = "any"},
  data = {core = "any", dispatch = "any", ops = "any", io = "any"},
  dist = {core = "any", dispatch = "any", ops = "any"}, -- collectives: host staging, MPI
  top = PUBLIC_OF_ALL,
  bindings = setmetatable({lua = "any"}, {__index = PUBLIC_OF_ALL}),
}

-- Every layer named above needs its row in MAY.
for _, t in ipairs({M.PUBLIC_HEADERS, M.FOLDERS}) do
  for what, id in pairs(t) do
    if not M.MAY[id] then error(("layers.lua: %s is in layer %q, which has no row in MAY"):format(what, id)) end
  end
end

-- Headers of the Lua C API, by file name.
M.LUA_HEADERS = {["lua.h"] = true, ["lauxlib.h"] = true, ["lualib.h"] = true,
                 ["luaconf.h"] = true, ["lua.hpp"] = true}

local LABELS = {core = "core", dispatch = "backend dispatch", ops = "ops", autograd = "autograd",
                io = "io", text = "text", data = "data", dist = "dist", bindings = "bindings",
                top = "top", lua = "Lua C API"}

-- A layer is a table {id = "core" | ... | "backend/cpu", kind = "backend" for backends else the
-- id, public = true for runtime/include headers}. nil, reason for a file in no layer's folder;
-- false for a file outside runtime/ and bindings/ (no layer, no rules).
function M.layer_of(rel)
  local pub = rel:match("^runtime/include/(.+)$")
  if pub then
    local id = M.PUBLIC_HEADERS[pub]
    if not id then
      return nil, ("public header %s has no layer: assign it a layer in PUBLIC_HEADERS of " ..
                   "tests/layering/layers.lua"):format(pub)
    end
    return {id = id, kind = id, public = true}
  end
  local backend = rel:match("^runtime/backend/([^/]+)/")
  if backend then return {id = "backend/" .. backend, kind = "backend", name = backend} end
  local best
  for folder, id in pairs(M.FOLDERS) do
    if rel:sub(1, #folder + 1) == folder .. "/" and (not best or #folder > #best) then best = folder end
  end
  if best then
    local id = M.FOLDERS[best]
    return {id = id, kind = id}
  end
  if rel:match("^runtime/") then
    local folder = rel:match("^(runtime/[^/]+)/") or rel
    return nil, ("%s has no layer: assign it a layer in FOLDERS of tests/layering/layers.lua"):format(folder)
  end
  return false
end

M.LUA = {id = "lua", kind = "lua"}

function M.label(layer)
  if layer.kind == "backend" then return "backend " .. layer.name end
  return LABELS[layer.id] or layer.id
end

-- true when a file of layer `from` may include a header of layer `to`; otherwise false.
function M.may_include(from, to)
  if from.public and not to.public and to.kind ~= "lua" then return false end
  if from.id == to.id then return true end
  local may = M.MAY[from.kind]
  local how = may[to.kind == "backend" and "backends" or to.kind]
  if how == nil then return false end
  return how == "any" or to.public == true
end

-- The same question for a symbol edge between two source files: may code of layer `from` use a
-- function or variable defined in layer `to`?
function M.may_use(from, to)
  if from.id == to.id then return true end
  local may = M.MAY[from.kind]
  local how = may[to.kind == "backend" and "backends" or to.kind]
  return how == "any" or how == "public"
end

return M

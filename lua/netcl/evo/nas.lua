-- Architecture search: evo.ArchSpace (a declarative space of layer stacks) and
-- evo.ArchitectureSearch (evolution with weight inheritance, a history, save and resume).
-- Every random choice is a draw from netcl's generator (nc.manual_seed), so a seed fixes the
-- search and a checkpoint (which stores the generator's state) resumes it exactly.
local nc = require "netcl"
local class = require "netcl.class"
local B = require "netcl.evo.base"

local M = {}

local CPU
local function uniform_index(n) -- 1 .. n
  CPU = CPU or nc.device("cpu")
  return nc.randint(0, n, {1}, {device = CPU}):item() + 1
end

-- ---- ArchSpace ---------------------------------------------------------------------------------
local ArchSpace = class("evo.ArchSpace")
M.ArchSpace = ArchSpace

local SPACE_OPTIONS = {depth = true, widths = true, kernel_sizes = true, activations = true}

local function choices(fname, what, v, kind)
  if v == nil then return nil end
  if type(v) ~= "table" or #v == 0 then error(string.format("%s: %s must be a non-empty list", fname, what), 4) end
  for i, c in ipairs(v) do
    if type(c) ~= kind or (kind == "number" and (c ~= math.floor(c) or c < 1)) then
      error(string.format("%s: %s[%d] must be a %s, got %s", fname, what, i,
        kind == "number" and "positive integer" or kind, tostring(c)), 4)
    end
  end
  return v
end

--- evo.ArchSpace{depth={min, max} or n, widths={...}, kernel_sizes={...}, activations={...}}:
-- an architecture is {depth = n, layers = {{width=, kernel_size=, activation=}, ...}} with one
-- entry per hidden layer and the fields of the choices given. build(arch) turns it into a model.
function ArchSpace:init(cfg)
  local fname = "evo.ArchSpace"
  B.options(fname, cfg, SPACE_OPTIONS)
  local d = cfg.depth or {1, 1}
  if type(d) == "number" then d = {d, d} end
  if type(d) ~= "table" or #d ~= 2 or math.type(d[1]) ~= "integer" or math.type(d[2]) ~= "integer"
      or d[1] < 1 or d[2] < d[1] then
    error(fname .. ": depth must be an integer >= 1 or a range {min, max}", 3)
  end
  self.depth = {d[1], d[2]}
  self.widths = choices(fname, "widths", cfg.widths, "number")
  self.kernel_sizes = choices(fname, "kernel_sizes", cfg.kernel_sizes, "number")
  self.activations = choices(fname, "activations", cfg.activations, "string")
  self._fields = {}
  for _, f in ipairs({"width", "kernel_size", "activation"}) do
    local list = self[f == "width" and "widths" or f == "kernel_size" and "kernel_sizes" or "activations"]
    if list then self._fields[#self._fields + 1] = {name = f, list = list} end
  end
  if #self._fields == 0 and d[1] == d[2] then
    error(fname .. ": the space has a single point (give widths=, kernel_sizes=, activations= or a depth range)", 3)
  end
end

function ArchSpace:_layer()
  local l = {}
  for _, f in ipairs(self._fields) do l[f.name] = f.list[uniform_index(#f.list)] end
  return l
end

--- space:sample() -> a uniformly drawn architecture.
function ArchSpace:sample()
  local lo, hi = self.depth[1], self.depth[2]
  local n = lo + uniform_index(hi - lo + 1) - 1
  local layers = {}
  for i = 1, n do layers[i] = self:_layer() end
  return {depth = n, layers = layers}
end

local function copy_arch(a)
  local layers = {}
  for i, l in ipairs(a.layers) do
    local c = {}
    for k, v in pairs(l) do c[k] = v end
    layers[i] = c
  end
  return {depth = a.depth, layers = layers}
end

--- space:mutate(arch) -> a new architecture that differs from arch in one choice: the depth
-- (layers added at the end or removed from it) or one field of one layer.
function ArchSpace:mutate(arch)
  local a = copy_arch(arch)
  local kinds = {}
  if self.depth[2] > self.depth[1] then kinds[#kinds + 1] = "depth" end
  for _, f in ipairs(self._fields) do
    if #f.list > 1 then kinds[#kinds + 1] = f end
  end
  if #kinds == 0 then return a end
  local kind = kinds[uniform_index(#kinds)]
  if kind == "depth" then
    local others = {}
    for n = self.depth[1], self.depth[2] do
      if n ~= a.depth then others[#others + 1] = n end
    end
    local n = others[uniform_index(#others)]
    for i = a.depth + 1, n do a.layers[i] = self:_layer() end
    for i = a.depth, n + 1, -1 do a.layers[i] = nil end
    a.depth = n
  else
    local i = uniform_index(a.depth)
    local others = {}
    for _, v in ipairs(kind.list) do
      if v ~= a.layers[i][kind.name] then others[#others + 1] = v end
    end
    a.layers[i][kind.name] = others[uniform_index(#others)]
  end
  return a
end

--- space:key(arch) -> a string naming the architecture ("32/relu-64/tanh").
function ArchSpace.key(_, arch)
  local parts = {}
  for i, l in ipairs(arch.layers) do
    local p = {}
    if l.width then p[#p + 1] = tostring(l.width) end
    if l.kernel_size then p[#p + 1] = "k" .. l.kernel_size end
    if l.activation then p[#p + 1] = l.activation end
    parts[i] = table.concat(p, "/")
  end
  return table.concat(parts, "-")
end

-- ---- ArchitectureSearch ------------------------------------------------------------------------
local Search = class("evo.ArchitectureSearch")
M.ArchitectureSearch = Search

local SEARCH_OPTIONS = {space = true, build = true, train = true, evaluate = true, population = true,
                        generations = true, inherit_weights = true, maximize = true, tournament = true,
                        checkpoint = true, resume = true, progress = true}

--- evo.ArchitectureSearch{space=, build=, train=, evaluate=, population=8, generations=5,
-- inherit_weights=true, maximize=true, tournament=2, checkpoint=, resume=false, progress=true}
-- build(arch) -> model; train(model, arch, info) trains it in place (info: {generation=,
-- parent= the parent's model or nil, inherited= names copied from it}); evaluate(model, arch)
-- -> score (higher is better unless maximize=false).
function Search:init(cfg)
  local fname = "evo.ArchitectureSearch"
  B.options(fname, cfg, SEARCH_OPTIONS)
  if not class.is_instance(cfg.space, ArchSpace) then error(fname .. ": space must be an evo.ArchSpace", 3) end
  for _, k in ipairs({"build", "train", "evaluate"}) do
    if type(cfg[k]) ~= "function" then error(string.format("%s: %s must be a function", fname, k), 3) end
  end
  self.space, self.build, self.train, self.evaluate = cfg.space, cfg.build, cfg.train, cfg.evaluate
  self.population = B.int(fname, "population", cfg.population or 8, 2, 3)
  self.generations = B.int(fname, "generations", cfg.generations or 5, 0, 3)
  self.tournament = B.int(fname, "tournament", cfg.tournament or 2, 1, 3)
  self.inherit_weights = cfg.inherit_weights ~= false
  self.maximize = cfg.maximize ~= false
  if cfg.checkpoint ~= nil and type(cfg.checkpoint) ~= "string" then
    error(fname .. ": checkpoint must be a path string", 3)
  end
  self.checkpoint, self.resume = cfg.checkpoint, cfg.resume and true or false
  if self.resume and not self.checkpoint then error(fname .. ": resume=true needs checkpoint=", 3) end
  self.progress = cfg.progress ~= false
  self.history = {}
  self.members = {}
  self.best = nil
end

local function better(self, a, b)
  if self.maximize then return a > b end
  return a < b
end

local function check_score(s, arch, space)
  if type(s) ~= "number" or s ~= s then
    error(string.format("evo.ArchitectureSearch: evaluate returned %s for %s (a number, not NaN, is needed)",
      tostring(s), space:key(arch)), 3)
  end
end

--- inherit(parent, child) -> names: copies every state-dict entry of parent whose name and
-- shape the child also has (the matching layers), bit for bit.
function M.inherit(parent, child)
  local psd = parent:state_dict()
  local names = {}
  for _, name in ipairs(child:state_dict_keys()) do
    local src = psd[name]
    local dst = child:state_dict()[name]
    if src and src.dtype == dst.dtype then
      local same = src.ndim == dst.ndim
      for d = 1, dst.ndim do same = same and src.shape[d] == dst.shape[d] end
      if same then
        dst:copy_(src)
        names[#names + 1] = name
      end
    end
  end
  return names
end

function Search:_member(arch, gen, parent)
  local model = self.build(arch)
  local info = {generation = gen, parent = parent and parent.model, inherited = {}}
  if parent and self.inherit_weights then info.inherited = M.inherit(parent.model, model) end
  self.train(model, arch, info)
  local score = self.evaluate(model, arch)
  check_score(score, arch, self.space)
  local m = {arch = arch, model = model, score = score, params = model:num_parameters(), id = #self.history + 1}
  self.history[#self.history + 1] = {generation = gen, arch = arch, key = self.space:key(arch), score = score,
                                     params = m.params, parent = parent and parent.id or nil,
                                     inherited = #info.inherited}
  if not self.best or better(self, score, self.best.score) then self.best = m end
  return m
end

function Search:_select()
  local best
  for _ = 1, self.tournament do
    local c = self.members[uniform_index(#self.members)]
    if not best or better(self, c.score, best.score) then best = c end
  end
  return best
end

-- (mu + lambda): the `population` best of parents and children, earlier ones first on ties.
function Search:_survivors(pool)
  local idx = {}
  for i = 1, #pool do idx[i] = i end
  table.sort(idx, function(a, b)
    local sa, sb = pool[a].score, pool[b].score
    if sa ~= sb then return better(self, sa, sb) end
    return a < b
  end)
  local out = {}
  for i = 1, math.min(self.population, #pool) do out[i] = pool[idx[i]] end
  return out
end

local STATE_KEY = "evo.nas"

function Search:save(path)
  local nio = require "netcl.io"
  local tensors, members = {}, {}
  for i, m in ipairs(self.members) do
    for name, t in pairs(m.model:state_dict()) do tensors[string.format("m%d.%s", i, name)] = t end
    members[i] = {id = m.id}
  end
  local rng = nc.get_rng_state()
  local state = {generation = self.generation, history = self.history, members = members,
                 best = self.best and self.best.id, rng = {string.format("%d", rng.seed), string.format("%d", rng.offset)},
                 bits = {}}
  -- scores go through JSON as the bits of the double, so a resumed search compares exactly
  for i, h in ipairs(self.history) do state.bits[i] = string.format("%q", h.score) end
  nio.save(tensors, path, {metadata = {[STATE_KEY] = nc._json.encode(state)}})
end

function Search:_load(path)
  local nio = require "netcl.io"
  local fname = "evo.ArchitectureSearch"
  local tensors, meta = nio.load(path)
  if not meta[STATE_KEY] then error(string.format("%s: %s is not an architecture search checkpoint", fname, path), 4) end
  local st = nc._json.decode(meta[STATE_KEY])
  self.history = st.history
  for i, h in ipairs(self.history) do
    h.score = load("return " .. st.bits[i])()
    h.generation = math.tointeger(h.generation) or h.generation
  end
  self.generation = math.tointeger(st.generation)
  self.members = {}
  for i, m in ipairs(st.members) do
    local h = self.history[math.tointeger(m.id)]
    local model = self.build(h.arch)
    local sd = {}
    local prefix = string.format("m%d.", i)
    for name, t in pairs(tensors) do
      if name:sub(1, #prefix) == prefix then sd[name:sub(#prefix + 1)] = t end
    end
    model:load_state_dict(sd)
    self.members[i] = {arch = h.arch, model = model, score = h.score, params = h.params, id = math.tointeger(m.id)}
  end
  self.best = nil
  for _, m in ipairs(self.members) do
    if not self.best or better(self, m.score, self.best.score) then self.best = m end
  end
  nc.set_rng_state({seed = math.tointeger(tonumber(st.rng[1])), offset = math.tointeger(tonumber(st.rng[2]))})
end

local function file_exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

--- search:run() -> best arch, history. history[i] = {generation=, arch=, key=, score=, params=,
-- parent= (index in history) or nil, inherited= number of state-dict entries copied}.
-- With checkpoint=, the state is saved after each generation; resume=true continues from it.
function Search:run()
  local bar
  if self.progress then
    bar = require("netcl.progress").bar {total = (self.generations + 1) * self.population, desc = "search"}
  end
  local start = 0
  if self.resume and file_exists(self.checkpoint) then
    self:_load(self.checkpoint)
    start = self.generation + 1
    if bar then bar:update((self.generation + 1) * self.population) end
  end
  local function report(m)
    if bar then
      bar:update(1, {gen = m.gen, best = self.best.score, params = self.best.params})
    end
  end
  for gen = start, self.generations do
    if gen == 0 then
      for _ = 1, self.population do
        local m = self:_member(self.space:sample(), 0, nil)
        self.members[#self.members + 1] = m
        report({gen = 0})
      end
    else
      local pool = {}
      for i, m in ipairs(self.members) do pool[i] = m end
      for _ = 1, self.population do
        local parent = self:_select()
        pool[#pool + 1] = self:_member(self.space:mutate(parent.arch), gen, parent)
        report({gen = gen})
      end
      self.members = self:_survivors(pool)
    end
    self.generation = gen
    if self.checkpoint then self:save(self.checkpoint) end
  end
  if bar then bar:close() end
  return self.best and self.best.arch, self.history
end

--- search:best_by_generation() -> array: the best score found up to each generation.
function Search:best_by_generation()
  local out, best = {}, nil
  for _, h in ipairs(self.history) do
    if not best or better(self, h.score, best) then best = h.score end
    out[h.generation + 1] = best
  end
  return out
end

return M

-- netcl.evo's common part: option checks, the ask/tell protocol (fitness checks, best-so-far,
-- evaluation counts), run(), and save/load of an optimizer's state (docs/evo.md).
--
-- Every optimizer keeps its population and state as device tensors; a generation is a fixed
-- number of tensor ops whatever the population size (no Lua loop over individuals). All draws
-- come from netcl's Philox generator (nc.manual_seed), so a seed gives the same populations on
-- every backend.
local nc = require "netcl"
local class = require "netcl.class"

local M = {}

local Base = class("evo.Optimizer")
M.Base = Base

local function sorted_keys(t)
  local names = {}
  for k in pairs(t) do names[#names + 1] = tostring(k) end
  table.sort(names)
  return table.concat(names, ", ")
end

--- options(fname, cfg, allowed, level) -> cfg: a table whose keys are all in allowed.
function M.options(fname, cfg, allowed, level)
  level = level or 4
  if type(cfg) ~= "table" then
    error(string.format("%s: expected a table of options {dim=, popsize=, ...}, got %s", fname, type(cfg)), level)
  end
  for k in pairs(cfg) do
    if not allowed[k] then
      error(string.format("%s: unknown option '%s' (options: %s)", fname, tostring(k), sorted_keys(allowed)), level)
    end
  end
  return cfg
end

function M.int(fname, what, v, min, level)
  if v == nil or math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v)) then
    error(string.format("%s: %s must be an integer, got %s", fname, what, tostring(v)), level or 4)
  end
  v = math.tointeger(v)
  if min and v < min then error(string.format("%s: %s must be >= %d, got %d", fname, what, min, v), level or 4) end
  return v
end

function M.number(fname, what, v, lo, hi, level)
  if type(v) ~= "number" or v ~= v then
    error(string.format("%s: %s must be a number, got %s", fname, what, tostring(v)), level or 4)
  end
  if (lo and v < lo) or (hi and v > hi) then
    error(string.format("%s: %s must be in [%s, %s], got %s", fname, what, lo and tostring(lo) or "-inf",
      hi and tostring(hi) or "inf", tostring(v)), level or 4)
  end
  return v
end

-- Fills the fields every optimizer has: dim, popsize (>= min_pop), device, dtype and the tensor
-- options used for every draw.
function Base:_common(fname, cfg, min_pop, default_pop)
  self._fname = fname
  self.dim = M.int(fname, "dim", cfg.dim, 1, 5)
  local p = cfg.popsize
  if p == nil then p = default_pop end
  if type(p) == "number" and p < min_pop then
    error(string.format("%s: popsize must be at least %d, got %s", fname, min_pop, tostring(p)), 5)
  end
  self.popsize = M.int(fname, "popsize", p, min_pop, 5)
  local dev = cfg.device
  if type(dev) == "string" then dev = nc.device(dev) end
  self.device = dev or nc.default_device()
  self.dtype = cfg.dtype or "float32"
  if self.dtype ~= "float32" and self.dtype ~= "float64" then
    error(fname .. ": dtype must be float32 or float64, got " .. tostring(self.dtype), 5)
  end
  self._topts = {device = self.device, dtype = self.dtype}
  self.generation, self.evals = 0, 0
  self.best_f = math.huge
  self.best_x = nil
end

-- A vector option (mean=): nil -> zeros, a number -> filled, a table or Tensor of dim numbers.
function Base:_vector(what, v, default)
  local fname, D = self._fname, self.dim
  if v == nil then v = default or 0 end
  if type(v) == "number" then return nc.full({D}, v, self._topts) end
  if type(v) == "table" then
    if #v ~= D then error(string.format("%s: %s must have %d numbers, got %d", fname, what, D, #v), 5) end
    return nc.tensor(v, self._topts)
  end
  if nc.is_tensor(v) then
    if v:numel() ~= D then
      error(string.format("%s: %s must have %d elements, got %d", fname, what, D, v:numel()), 5)
    end
    return v:reshape({D}):to(self.device):to(self.dtype):clone()
  end
  error(string.format("%s: %s must be a number, a table or a Tensor, got %s", fname, what, type(v)), 5)
end

-- bounds={lo, hi}: initial populations are uniform within them and new points are clamped.
function Base:_bounds(v)
  if v == nil then return nil end
  local fname = self._fname
  if type(v) ~= "table" or type(v[1]) ~= "number" or type(v[2]) ~= "number" or not (v[1] < v[2]) then
    error(fname .. ": bounds must be a pair of numbers {lo, hi} with lo < hi", 5)
  end
  return {v[1], v[2]}
end

-- [n, D] points: uniform in bounds, else mean + scale * N(0, 1).
function Base:_initial(n, mean, scale, bounds)
  if bounds then
    return nc.rand({n, self.dim}, self._topts) * (bounds[2] - bounds[1]) + bounds[1]
  end
  return nc.randn({n, self.dim}, self._topts) * scale + mean:view({1, self.dim})
end

function Base:_clamp(X, bounds)
  if bounds then return X:clamp(bounds[1], bounds[2]) end
  return X
end

--- The population to evaluate: a Tensor [popsize, dim] on the optimizer's device.
function Base:ask()
  local X = self:_ask()
  self._asked = X
  return X
end

-- Checks a fitness (a Tensor [P] or a Lua array of P numbers) and returns it as a Tensor of
-- the optimizer's dtype on its device.
function Base:_fitness(f)
  local fname, P = self._fname .. ":tell", self.popsize
  if type(f) == "table" and not nc.is_tensor(f) then
    if #f ~= P then error(string.format("%s: fitness must have %d values, got %d", fname, P, #f), 3) end
    f = nc.tensor(f, self._topts)
  end
  if not nc.is_tensor(f) then
    error(string.format("%s: fitness must be a Tensor [%d] (lower is better), got %s", fname, P, type(f)), 3)
  end
  if f.ndim ~= 1 or f.shape[1] ~= P then
    error(string.format("%s: fitness must have shape [%d] (one value per row of ask()), got [%s]", fname, P,
      table.concat(f.shape, ",")), 3)
  end
  if f.dtype ~= self.dtype or f.device ~= self.device then f = f:to(self.device):to(self.dtype) end
  local nan = f:isnan()
  if nan:any():item() then
    local _, i = nan:to("int32"):max(1)
    error(string.format("%s: fitness contains NaN (individual %d, 1-based); return +inf for points to reject",
      fname, i:item() + 1), 3)
  end
  return f
end

--- tell(fitness): fitness of the rows of the last ask() (Tensor [P], lower is better).
function Base:tell(f)
  if not self._asked then error(self._fname .. ":tell: call ask() first (tell follows each ask)", 2) end
  f = self:_fitness(f)
  local X = self._asked
  self._asked = nil
  local v, i = f:min(1)
  v = v:item()
  if v < self.best_f then
    self.best_f = v
    self.best_x = X[i:item() + 1]:clone()
  end
  self.evals = self.evals + self.popsize
  self:_tell(X, f)
  self.generation = self.generation + 1
end

--- run(f, {generations=, max_evals=, target=, callback=}) -> best_x, best_f. f(X) takes the
-- population [P, D] and returns its fitness [P]; stops after `generations` generations, after
-- `max_evals` evaluations, or once best_f <= target; callback(opt) after each generation
-- (returning true stops).
function Base:run(f, opts)
  local fname = self._fname .. ":run"
  if type(f) ~= "function" and not (getmetatable(f) or {}).__call then
    error(fname .. ": argument 1 must be a function X -> fitness, got " .. type(f), 2)
  end
  opts = M.options(fname, opts or {}, {generations = true, max_evals = true, target = true, callback = true}, 3)
  local gens = opts.generations and M.int(fname, "generations", opts.generations, 0, 3)
  local max_evals = opts.max_evals and M.int(fname, "max_evals", opts.max_evals, 1, 3)
  if not gens and not max_evals and opts.target == nil then
    error(fname .. ": give generations=, max_evals= or target= (it would never stop)", 2)
  end
  local g = 0
  while true do
    if gens and g >= gens then break end
    if max_evals and self.evals + self.popsize > max_evals then break end
    if opts.target and self.best_f <= opts.target then break end
    self:tell(f(self:ask()))
    g = g + 1
    if opts.callback and opts.callback(self) then break end
  end
  return self.best_x, self.best_f
end

-- ---- save / load ---------------------------------------------------------------------------
-- An optimizer's state is its tensors (self._state_tensors names them) and scalars
-- (self._state_scalars), plus the generator's state, so that a loaded run draws what the
-- uninterrupted run would have drawn.

local COMMON_SCALARS = {"generation", "evals", "best_f"}

function Base:save(path)
  local nio = require "netcl.io"
  local tensors, scalars = {}, {}
  for _, k in ipairs(self._state_tensors) do
    if self[k] ~= nil then tensors[k] = self[k] end
  end
  if self.best_x then tensors.best_x = self.best_x end
  for _, k in ipairs(COMMON_SCALARS) do scalars[k] = self[k] end
  for _, k in ipairs(self._state_scalars or {}) do scalars[k] = self[k] end
  if scalars.best_f == math.huge then scalars.best_f = "inf" end
  local rng = nc.get_rng_state()
  local meta = {
    ["evo.class"] = self._fname,
    ["evo.scalars"] = nc._json.encode(scalars),
    ["evo.rng"] = string.format("%d %d", rng.seed, rng.offset),
    ["evo.asked"] = self._asked and "1" or "0",
  }
  if self._asked then tensors._asked = self._asked end
  nio.save(tensors, path, {metadata = meta})
end

--- opt:load(path): restores a state saved by opt:save from an optimizer of the same class and
-- dim/popsize, and the random generator's state.
function Base:load(path)
  local nio = require "netcl.io"
  local fname = self._fname .. ":load"
  local tensors, meta = nio.load(path, {device = self.device})
  if meta["evo.class"] ~= self._fname then
    error(string.format("%s: %s holds the state of %s, not %s", fname, path, tostring(meta["evo.class"]),
      self._fname), 2)
  end
  local scalars = nc._json.decode(meta["evo.scalars"])
  if scalars.best_f == "inf" then scalars.best_f = math.huge end
  for k, v in pairs(scalars) do self[k] = v end
  for _, k in ipairs(self._state_tensors) do self[k] = tensors[k] end
  self.best_x = tensors.best_x
  self._asked = meta["evo.asked"] == "1" and tensors._asked or nil
  local seed, offset = meta["evo.rng"]:match("^(%-?%d+) (%-?%d+)$")
  nc.set_rng_state({seed = math.tointeger(tonumber(seed)), offset = math.tointeger(tonumber(offset))})
end

return M

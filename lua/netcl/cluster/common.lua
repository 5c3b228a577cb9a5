-- netcl.cluster's common part: option and point checks, the progress bar, squared row norms and
-- the row tile of the neighbour searches (docs/cluster.md).
local nc = require "netcl"
local class = require "netcl.class"
local progress = require "netcl.progress"

-- ---- argument checks --------------------------------------------------------------------------------
local function check_options(fname, opts, accepted)
  if opts == nil then return {} end
  if type(opts) ~= "table" then error(fname .. ": options must be a table, got " .. type(opts), 4) end
  local names = {}
  for k in pairs(accepted) do names[#names + 1] = k .. "=" end
  table.sort(names)
  for k in pairs(opts) do
    if not accepted[k] then
      error(string.format("%s: unknown option '%s' (accepted: {%s})", fname, tostring(k), table.concat(names, ", ")), 4)
    end
  end
  return opts
end

local function int_opt(fname, opts, key, default, min)
  local v = opts[key]
  if v == nil then v = default end
  if v == nil then error(string.format("%s: option %s= is required", fname, key), 4) end
  if math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v)) then
    error(string.format("%s: %s must be an integer, got %s", fname, key, tostring(v)), 4)
  end
  v = math.tointeger(v)
  if v < min then error(string.format("%s: %s must be >= %d, got %d", fname, key, min, v), 4) end
  return v
end

local function num_opt(fname, opts, key, default, min)
  local v = opts[key]
  if v == nil then v = default end
  if type(v) ~= "number" or v ~= v or v < min then
    error(string.format("%s: %s must be a number >= %g, got %s", fname, key, min, tostring(v)), 4)
  end
  return v
end

-- X: a float Tensor [N, D] with N >= min_n, D >= 1, finite values.
local function check_points(fname, X, min_n, what)
  if not nc.is_tensor(X) then error(fname .. ": X must be a Tensor [N, D], got " .. type(X), 3) end
  if #X.shape ~= 2 then error(string.format("%s: X must be a matrix [N, D], got %d dims", fname, #X.shape), 3) end
  if X.dtype ~= "float32" and X.dtype ~= "float64" then
    error(fname .. ": X must be float32 or float64, got " .. X.dtype, 3)
  end
  if X.shape[2] == 0 then error(fname .. ": X has no features (D = 0)", 3) end
  if X.shape[1] < min_n then
    error(string.format("%s: %s needs at least %d points, X has %d", fname, what, min_n, X.shape[1]), 3)
  end
  if X.shape[1] > 0 and (X:isnan():any():item() or X:isinf():any():item()) then
    error(fname .. ": X contains nan or inf", 3)
  end
end

local function check_fitted(fname, self, X)
  if not self.centroids then error(fname .. ": the model is not fitted (call fit first)", 3) end
  if not nc.is_tensor(X) then error(fname .. ": X must be a Tensor [N, D], got " .. type(X), 3) end
  if X.device ~= self.centroids.device then
    error(string.format("%s: X is on device %s but the model was fitted on %s (move X with X:to(...))", fname,
                        X.device.spec, self.centroids.device.spec), 3)
  end
  check_points(fname, X, 0, "")
  if X.shape[2] ~= self.centroids.shape[2] then
    error(string.format("%s: X has %d features but the model was fitted on %d", fname, X.shape[2],
                        self.centroids.shape[2]), 3)
  end
  if X.dtype ~= self.centroids.dtype then X = X:to(self.centroids.dtype) end
  return X
end

local function seeded(seed) if seed ~= nil then nc.manual_seed(seed) end end

-- verbose=: true (a progress bar on stdout) or anything with :write (plain lines to it).
local function verbose_opt(fname, opts)
  local v = opts.verbose
  if v == nil or v == false or v == true then return v or false end
  if class.field(v, "write") then return v end
  error(fname .. ": verbose must be a boolean or have a write method, got " .. type(v), 4)
end

local function open_bar(self, total)
  if not self.verbose then return nil end
  local desc = self.fname:match("[^.]+$")
  if self.verbose == true then return progress.bar{total = total, desc = desc} end
  return progress.bar{total = total, desc = desc, out = self.verbose, tty = false}
end

-- ---- shared steps -----------------------------------------------------------------------------------
-- Squared row norms [N].
local function sqnorms(X) return (X * X):sum(2) end

-- Rows per tile of a search against all N points (DBSCAN's neighbours, the spectral affinity).
local function db_tile(n) return math.max(64, math.min(n, math.floor(2 ^ 22 / math.max(n, 1)))) end

return {
  check_options = check_options,
  int_opt = int_opt,
  num_opt = num_opt,
  check_points = check_points,
  check_fitted = check_fitted,
  seeded = seeded,
  verbose_opt = verbose_opt,
  open_bar = open_bar,
  sqnorms = sqnorms,
  db_tile = db_tile,
}

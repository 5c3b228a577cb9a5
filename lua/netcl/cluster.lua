-- netcl.cluster: clustering on the device (docs/cluster.md). Points are a float Tensor [N, D];
-- the steps are the op-table ops kmeans_assign (nearest centroid, tiled, never an N x K
-- matrix) and kmeans_update (per-cluster sums and counts, deterministic).
local nc = require "netcl"
local class = require "netcl.class"

local ops = nc.nn_ops
local M = {}

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

-- ---- shared steps -----------------------------------------------------------------------------------
-- Squared row norms [N].
local function sqnorms(X) return (X * X):sum(2) end

-- Nearest centroid: labels, squared distance [N] (exact).
local function assign(X, C)
  local labels, dist = ops.kmeans_assign(X, C)
  local d1 = dist:select(2, 1)
  return labels, d1 * d1, dist
end

-- k-means++ (greedy, as scikit-learn: 2 + floor(ln k) candidates per step, the one that lowers the
-- potential most is kept). Candidates are drawn on the device from the cumulative potential.
local function kmeans_pp(X, k)
  local n = X.shape[1]
  local opts = {device = X.device, dtype = X.dtype}
  local trials = 2 + math.floor(math.log(k))
  local first = nc.randint(0, n, {1}, {device = X.device})
  local C = X:index_select(1, first)
  local centers = {C}
  local _, closest = assign(X, C)
  local xn = sqnorms(X)
  local pot = closest:sum():item()
  for _ = 2, k do
    local cands
    if pot > 0 then
      local cum = closest:to("float64"):cumsum(1)
      local r = nc.rand({trials}, {device = X.device, dtype = "float64"}) * cum[n]:item()
      cands = cum:view({n, 1}):lt(r:view({1, trials})):sum(1):clamp(0, n - 1)
    else
      cands = nc.randint(0, n, {trials}, {device = X.device})
    end
    local Y = X:index_select(1, cands)                                   -- [trials, D]
    local d = (xn:view({n, 1}) + sqnorms(Y):view({1, trials}) - 2 * X:matmul(Y:transpose(1, 2))):clamp(0, nil)
    local newpot = nc.minimum(d, closest:view({n, 1})):sum(1)         -- [trials]
    local best = newpot:argmin():item()
    pot = newpot[best + 1]:item()
    closest = nc.minimum(closest, d:select(2, best + 1))
    centers[#centers + 1] = Y:narrow(1, best + 1, 1)
  end
  local _ = opts
  return nc.cat(centers, 1):contiguous()
end

local function initial_centroids(fname, X, k, init)
  if nc.is_tensor(init) then
    if #init.shape ~= 2 or init.shape[1] ~= k or init.shape[2] ~= X.shape[2] then
      error(string.format("%s: init centroids must have shape [%d, %d]", fname, k, X.shape[2]), 4)
    end
    return init:to({device = X.device, dtype = X.dtype}):contiguous()
  elseif init == "k-means++" then
    return kmeans_pp(X, k)
  elseif init == "random" then
    return X:index_select(1, nc.randperm(X.shape[1], {device = X.device}):narrow(1, 1, k)):contiguous()
  end
  error(fname .. ": init must be 'k-means++', 'random' or a Tensor [k, D], got " .. tostring(init), 4)
end

-- Centroids from the sums and counts; an empty cluster takes the point farthest from its centroid
-- (the farthest one for the first empty cluster, the second farthest for the next, ...), as
-- scikit-learn does. Returns the centroids and whether any cluster was empty.
local function centroids_from(X, sums, counts, old, d2)
  local k = counts.shape[1]
  local empty = counts:eq(0)
  local nempty = empty:sum():item()
  local c = sums / counts:clamp(1, nil):to(sums.dtype):view({k, 1})
  if nempty == 0 then return c, false end
  c = c:where(counts:ne(0):view({k, 1}), old)
  local _, far = d2:topk(math.min(nempty, X.shape[1]))
  local rows = {}
  local flags = empty:tolist()
  local farl = far:tolist()
  local j = 1
  for i = 1, k do
    if flags[i] and farl[j] then
      rows[#rows + 1] = {i - 1, farl[j]}
      j = j + 1
    end
  end
  local ci = c:contiguous()
  for _, r in ipairs(rows) do ci:narrow(1, r[1] + 1, 1):copy_(X:narrow(1, r[2] + 1, 1)) end
  return ci, true
end

-- Half the distance from each centroid to its nearest other one [K] (Hamerly's s).
local function half_gaps(C)
  local k = C.shape[1]
  if k == 1 then return nc.full({1}, math.huge, {device = C.device, dtype = C.dtype}) end
  local cn = sqnorms(C)
  local d = (cn:view({k, 1}) + cn:view({1, k}) - 2 * C:matmul(C:transpose(1, 2))):clamp(0, nil)
  d = d:masked_fill(nc.eye(k, {device = C.device, dtype = "bool"}), math.huge)
  return d:min(2):sqrt() * 0.5
end

-- One k-means run from C: Lloyd's iterations, with Hamerly's bounds when `bounds` is set (the
-- same labels as plain Lloyd, fewer distance computations). Returns centroids, labels, inertia,
-- iterations.
local function lloyd(X, C, max_iter, tol_abs, use_bounds, spherical)
  local k = C.shape[1]
  local labels, d2, dist = assign(X, C)
  local n_iter = 0
  for it = 1, max_iter do
    n_iter = it
    local sums, counts = ops.kmeans_update(X, labels, k)
    local newC, relocated = centroids_from(X, sums, counts, C, d2)
    if spherical then newC = newC / (sqnorms(newC):sqrt():clamp(1e-30, nil)):view({k, 1}) end
    local shift = (newC - C):norm(2, {p = 2})
    local moved = (shift * shift):sum():item()
    C = newC
    if moved <= tol_abs then break end
    if use_bounds and not relocated then
      local moves = nc.stack({shift, half_gaps(C)}, 2):contiguous()
      labels, dist = ops.kmeans_assign(X, C, labels, dist, moves)
      d2 = dist:select(2, 1) * dist:select(2, 1)
    else
      labels, d2, dist = assign(X, C)
    end
  end
  labels, d2 = assign(X, C)
  return C, labels, d2:sum():item(), n_iter
end

-- scikit-learn's tolerance: tol times the mean variance of the features.
local function abs_tol(X, tol)
  if tol == 0 or X.shape[1] < 2 then return tol end
  return tol * X:var(1, {unbiased = false}):mean():item()
end

-- ---- KMeans -------------------------------------------------------------------------------------------
local KMEANS_OPTS = {k = true, init = true, n_init = true, max_iter = true, tol = true, seed = true,
                     algorithm = true}

local KMeans = class("netcl.cluster.KMeans")
M.KMeans = KMeans

local function kmeans_init(self, fname, opts, spherical)
  opts = check_options(fname, opts, KMEANS_OPTS)
  self.k = int_opt(fname, opts, "k", nil, 1)
  self.init = opts.init or "k-means++"
  self.n_init = int_opt(fname, opts, "n_init", 1, 1)
  self.max_iter = int_opt(fname, opts, "max_iter", 300, 1)
  self.tol = num_opt(fname, opts, "tol", 1e-4, 0)
  self.seed = opts.seed
  self.algorithm = opts.algorithm or "hamerly"
  if self.algorithm ~= "hamerly" and self.algorithm ~= "lloyd" then
    error(fname .. ": algorithm must be 'hamerly' or 'lloyd', got " .. tostring(self.algorithm), 3)
  end
  self.spherical = spherical
  self.fname = fname
end

function KMeans:init(opts) kmeans_init(self, "netcl.cluster.KMeans", opts, false) end

function KMeans:fit(X)
  local fname = self.fname .. ":fit"
  check_points(fname, X, self.k, string.format("k = %d", self.k))
  if self.spherical then X = X / sqnorms(X):sqrt():clamp(1e-30, nil):view({X.shape[1], 1}) end
  X = X:contiguous()
  seeded(self.seed)
  local tol_abs = abs_tol(X, self.tol)
  local best
  for _ = 1, self.n_init do
    local C = initial_centroids(fname, X, self.k, self.init)
    if self.spherical then C = C / sqnorms(C):sqrt():clamp(1e-30, nil):view({self.k, 1}) end
    local c, labels, inertia, n_iter = lloyd(X, C, self.max_iter, tol_abs, self.algorithm == "hamerly",
                                             self.spherical)
    if not best or inertia < best.inertia then
      best = {centroids = c, labels = labels, inertia = inertia, n_iter = n_iter}
    end
  end
  self.centroids, self.labels, self.n_iter = best.centroids, best.labels, best.n_iter
  -- spherical: the inertia is sum(1 - cos) = sum(|x - c|^2) / 2 over unit vectors
  self.inertia = self.spherical and best.inertia / 2 or best.inertia
  return self
end

function KMeans:predict(X)
  X = check_fitted(self.fname .. ":predict", self, X)
  if self.spherical then X = X / sqnorms(X):sqrt():clamp(1e-30, nil):view({X.shape[1], 1}) end
  return (ops.kmeans_assign(X, self.centroids))
end

function KMeans:fit_predict(X) return self:fit(X).labels end

-- ---- SphericalKMeans: k-means on the unit sphere (cosine similarity) ---------------------------------
local SphericalKMeans = class("netcl.cluster.SphericalKMeans", KMeans)
M.SphericalKMeans = SphericalKMeans
function SphericalKMeans:init(opts) kmeans_init(self, "netcl.cluster.SphericalKMeans", opts, true) end

-- ---- MiniBatchKMeans ------------------------------------------------------------------------------------
local MB_OPTS = {k = true, batch_size = true, max_iter = true, init = true, seed = true}
local MiniBatchKMeans = class("netcl.cluster.MiniBatchKMeans")
M.MiniBatchKMeans = MiniBatchKMeans

function MiniBatchKMeans:init(opts)
  local fname = "netcl.cluster.MiniBatchKMeans"
  opts = check_options(fname, opts, MB_OPTS)
  self.k = int_opt(fname, opts, "k", nil, 1)
  self.batch_size = int_opt(fname, opts, "batch_size", 1024, 1)
  self.max_iter = int_opt(fname, opts, "max_iter", 100, 1)
  self.init = opts.init or "k-means++"
  self.seed = opts.seed
  self.fname = fname
end

-- Each step: a batch drawn with replacement, its points assigned, and each centroid moved to the
-- running mean of every point it has been given (scikit-learn's per-centroid learning rate
-- 1 / count). max_iter passes over N points.
function MiniBatchKMeans:fit(X)
  local fname = self.fname .. ":fit"
  check_points(fname, X, self.k, string.format("k = %d", self.k))
  X = X:contiguous()
  seeded(self.seed)
  local n, k = X.shape[1], self.k
  local bs = math.min(self.batch_size, n)
  local C = initial_centroids(fname, X, k, self.init)
  local total = nc.zeros({k}, {device = X.device, dtype = X.dtype})
  local steps = self.max_iter * math.ceil(n / bs)
  for _ = 1, steps do
    local B = X:index_select(1, nc.randint(0, n, {bs}, {device = X.device}))
    local labels = ops.kmeans_assign(B, C)
    local sums, counts = ops.kmeans_update(B, labels, k)
    counts = counts:to(X.dtype)
    total = total + counts
    local w = total:clamp(1, nil):view({k, 1})
    C = C + (sums - C * counts:view({k, 1})) / w
  end
  self.centroids = C:contiguous()
  local labels, d2 = assign(X, self.centroids)
  self.labels, self.inertia, self.n_iter = labels, d2:sum():item(), steps
  return self
end

MiniBatchKMeans.predict = KMeans.predict
MiniBatchKMeans.fit_predict = KMeans.fit_predict

return M

-- netcl.cluster: clustering on the device (docs/cluster.md). Points are a float Tensor [N, D];
-- the steps are the op-table ops kmeans_assign (nearest centroid, tiled, never an N x K
-- matrix) and kmeans_update (per-cluster sums and counts, deterministic).
local nc = require "netcl"
local class = require "netcl.class"
local progress = require "netcl.progress"

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
local function lloyd(X, C, max_iter, tol_abs, use_bounds, spherical, bar)
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
    if bar then bar:update(1, {shift = moved}) end
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
                     algorithm = true, verbose = true}

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
  self.verbose = verbose_opt(fname, opts)
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
  local bar <close> = open_bar(self, self.max_iter * self.n_init)
  for _ = 1, self.n_init do
    local C = initial_centroids(fname, X, self.k, self.init)
    if self.spherical then C = C / sqnorms(C):sqrt():clamp(1e-30, nil):view({self.k, 1}) end
    local c, labels, inertia, n_iter = lloyd(X, C, self.max_iter, tol_abs, self.algorithm == "hamerly",
                                             self.spherical, bar)
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

-- ---- BalancedKMeans -----------------------------------------------------------------------------------
-- Lloyd's iterations whose assignment step is balanced: the capacities are N // k points per
-- cluster, one more for the first N % k clusters to fill up, so sizes end within 1 of N / k.
-- Each step solves the entropic transport between the points (mass 1/N each) and the clusters
-- (their capacities) by Sinkhorn's iterations in the log domain, tile by tile (the duals f [N] and
-- g [K]; each pass computes a tile's costs |x - c|^2 with one GEMM, updates the tile's f and merges
-- the tile's logsumexp into g's: memory O(N + K D) plus a tile, never N x K). The transport
-- prices g then order each point's n_candidates cheapest clusters by |x - c|^2 - g; the rounding to
-- exact capacities runs on the host: candidate pairs by increasing adjusted cost, each point to
-- the first of its candidates with room, and a point left over (all its candidates full) to the
-- nearest cluster with room.
local BAL_OPTS = {k = true, sinkhorn_iters = true, epsilon = true, max_iter = true, seed = true, init = true,
                  n_candidates = true}
local BalancedKMeans = class("netcl.cluster.BalancedKMeans")
M.BalancedKMeans = BalancedKMeans

function BalancedKMeans:init(opts)
  local fname = "netcl.cluster.BalancedKMeans"
  opts = check_options(fname, opts, BAL_OPTS)
  self.k = int_opt(fname, opts, "k", nil, 1)
  self.sinkhorn_iters = int_opt(fname, opts, "sinkhorn_iters", 50, 1)
  self.epsilon = num_opt(fname, opts, "epsilon", 0.05, 0)
  if not (self.epsilon > 0) then error(fname .. ": epsilon must be > 0", 3) end
  self.max_iter = int_opt(fname, opts, "max_iter", 30, 1)
  self.n_candidates = int_opt(fname, opts, "n_candidates", 4, 1)
  self.init = opts.init or "k-means++"
  self.seed = opts.seed
  self.fname = fname
end

-- Costs of a tile of rows against the centroids: [rows, K].
local function tile_costs(Xc, xnc, C, cn)
  return (xnc:view({Xc.shape[1], 1}) + cn:view({1, C.shape[1]}) - Xc:matmul(C:transpose(1, 2)) * 2):clamp(0, nil)
end

-- Sinkhorn's duals g [K] for the transport of the points onto capacities caps (Lua table).
local function sinkhorn_prices(self, X, xn, C, caps)
  local n, k = X.shape[1], C.shape[1]
  local cn = sqnorms(C)
  local topts = {device = X.device, dtype = X.dtype}
  -- epsilon relative to the mean cost over all pairs
  local mean_cost = xn:mean():item() + cn:mean():item() - 2 * (X:mean(1) * C:mean(1)):sum():item()
  local eps = self.epsilon * math.max(mean_cost, 1e-30)
  local logb = {}
  for j = 1, k do logb[j] = math.log(caps[j] / n) end
  logb = nc.tensor(logb, topts)
  local loga = math.log(1 / n)
  local g = nc.zeros({k}, topts)
  local tile = math.max(256, math.floor(2 ^ 20 / k))
  for _ = 1, self.sinkhorn_iters do
    local lse
    for r0 = 1, n, tile do
      local rows = math.min(tile, n - r0 + 1)
      local Cc = tile_costs(X:narrow(1, r0, rows), xn:narrow(1, r0, rows), C, cn)
      local f = ((g:view({1, k}) - Cc) / eps):logsumexp(2) * -eps + eps * loga      -- [rows]
      local t = ((f:view({rows, 1}) - Cc) / eps):logsumexp(1)                       -- [K]
      lse = lse and nc.stack({lse, t}, 1):logsumexp(1) or t
    end
    g = (logb - lse) * eps
  end
  return g
end

-- Exact balanced labels from the prices g (host rounding; see above).
local function balanced_round(self, X, xn, C, g, caps)
  local n, k = X.shape[1], C.shape[1]
  local r = math.min(self.n_candidates, k)
  local cn = sqnorms(C)
  local tile = math.max(256, math.floor(2 ^ 20 / k))
  local vals, idxs = {}, {}
  for r0 = 1, n, tile do
    local rows = math.min(tile, n - r0 + 1)
    local adj = tile_costs(X:narrow(1, r0, rows), xn:narrow(1, r0, rows), C, cn) - g:view({1, k})
    local v, i = adj:topk(r, 2, {largest = false})
    vals[#vals + 1], idxs[#idxs + 1] = v, i
  end
  local V, I = nc.cat(vals, 1):to("float64"):tolist(), nc.cat(idxs, 1):tolist()
  local pairs_ = {}
  for i = 1, n do
    for c = 1, r do pairs_[#pairs_ + 1] = {V[i][c], i, I[i][c]} end
  end
  table.sort(pairs_, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    if a[2] ~= b[2] then return a[2] < b[2] end
    return a[3] < b[3]
  end)
  local labels, size = {}, {}
  for j = 0, k - 1 do size[j] = 0 end
  for _, p in ipairs(pairs_) do
    local i, j = p[2], p[3]
    if labels[i] == nil and size[j] < caps[j + 1] then labels[i], size[j] = j, size[j] + 1 end
  end
  -- leftovers: the nearest cluster with room
  local left = {}
  for i = 1, n do if labels[i] == nil then left[#left + 1] = i - 1 end end
  if #left > 0 then
    local L = X:index_select(1, nc.tensor(left, {dtype = "int64", device = X.device}))
    local D = tile_costs(L, sqnorms(L), C, cn):to("float64"):tolist()
    for q, i0 in ipairs(left) do
      local best, bj = math.huge, nil
      for j = 0, k - 1 do
        if size[j] < caps[j + 1] and D[q][j + 1] < best then best, bj = D[q][j + 1], j end
      end
      labels[i0 + 1], size[bj] = bj, size[bj] + 1
    end
  end
  return nc.tensor(labels, {dtype = "int64", device = X.device})
end

function BalancedKMeans:fit(X)
  local fname = self.fname .. ":fit"
  check_points(fname, X, self.k, string.format("k = %d", self.k))
  X = X:contiguous()
  seeded(self.seed)
  local n, k = X.shape[1], self.k
  local caps = {}
  for j = 1, k do caps[j] = n // k + (j <= n % k and 1 or 0) end
  local xn = sqnorms(X)
  local C = initial_centroids(fname, X, k, self.init)
  local labels, it = nil, 0
  for i = 1, self.max_iter do
    it = i
    local g = sinkhorn_prices(self, X, xn, C, caps)
    local new = balanced_round(self, X, xn, C, g, caps)
    local sums, counts = ops.kmeans_update(X, new, k)
    C = (sums / counts:clamp(1, nil):to(X.dtype):view({k, 1})):contiguous()
    local same = labels and new:eq(labels):all():item()
    labels = new
    if same then break end
  end
  local own = C:index_select(1, labels)
  self.centroids, self.labels, self.n_iter = C, labels, it
  self.inertia = ((X - own) * (X - own)):sum():item()
  return self
end

-- predict: the nearest centroid (new points are not balanced).
BalancedKMeans.predict = KMeans.predict
BalancedKMeans.fit_predict = KMeans.fit_predict

-- ---- GaussianMixture --------------------------------------------------------------------------------
-- EM with full or diagonal covariances. The E-step runs over X in tiles of rows: per tile the log
-- densities [rows, K] (one GEMM against the stacked inverse Cholesky factors), the
-- responsibilities, and their sufficient statistics (counts, sums, second moments about the
-- previous means) are accumulated, so memory is O(N + K D^2) plus one tile; N x K only from
-- predict_proba. The covariances get reg_covar added to their diagonal. Initialisation as
-- scikit-learn's default: responsibilities from a KMeans fit.
local GMM_OPTS = {k = true, covariance = true, max_iter = true, tol = true, reg_covar = true, seed = true,
                  n_init = true, verbose = true}
local GaussianMixture = class("netcl.cluster.GaussianMixture")
M.GaussianMixture = GaussianMixture
local LOG2PI = math.log(2 * math.pi)

function GaussianMixture:init(opts)
  local fname = "netcl.cluster.GaussianMixture"
  opts = check_options(fname, opts, GMM_OPTS)
  self.k = int_opt(fname, opts, "k", nil, 1)
  self.covariance = opts.covariance or "full"
  if self.covariance ~= "full" and self.covariance ~= "diag" then
    error(fname .. ": covariance must be 'full' or 'diag', got " .. tostring(self.covariance), 3)
  end
  self.max_iter = int_opt(fname, opts, "max_iter", 100, 1)
  self.tol = num_opt(fname, opts, "tol", 1e-3, 0)
  self.reg_covar = num_opt(fname, opts, "reg_covar", 1e-6, 0)
  self.n_init = int_opt(fname, opts, "n_init", 1, 1)
  self.seed = opts.seed
  self.verbose = verbose_opt(fname, opts)
  self.fname = fname
end

-- Lower Cholesky factor of a symmetric positive definite matrix (Lua table of rows), its inverse and
-- the log of its determinant (of the matrix).
local function cholesky_inverse(fname, A, d)
  local L = {}
  for i = 1, d do L[i] = {} for j = 1, d do L[i][j] = 0 end end
  for j = 1, d do
    local s = A[j][j]
    for p = 1, j - 1 do s = s - L[j][p] * L[j][p] end
    if not (s > 0) then
      error(fname .. ": a covariance is not positive definite (raise reg_covar)", 4)
    end
    L[j][j] = math.sqrt(s)
    for i = j + 1, d do
      local t = A[i][j]
      for p = 1, j - 1 do t = t - L[i][p] * L[j][p] end
      L[i][j] = t / L[j][j]
    end
  end
  local Inv, logdet = {}, 0
  for i = 1, d do
    Inv[i] = {}
    for j = 1, d do Inv[i][j] = 0 end
    logdet = logdet + 2 * math.log(L[i][i])
  end
  for j = 1, d do -- forward substitution, column j of L^-1
    for i = j, d do
      local t = i == j and 1 or 0
      for p = j, i - 1 do t = t - L[i][p] * Inv[p][j] end
      Inv[i][j] = t / L[i][i]
    end
  end
  return Inv, logdet
end

-- Precomputed per-component terms for the log densities: W [K*D, D] (rows of the inverse factors),
-- bias [K, D] (W mu), const [K] (log weight - log det / 2 - D log(2 pi) / 2); diag: W = 1 / sigma.
local function gmm_prepare(self, fname)
  local k, d = self.k, self.means.shape[2]
  local topts = {device = self.means.device, dtype = self.means.dtype}
  local logw = self.weights:log():tolist()
  if self.covariance == "diag" then
    local prec = self.covariances:rsqrt()                                        -- [K, D]
    local logdet = self.covariances:log():sum(2):tolist()
    local const = {}
    for j = 1, k do const[j] = logw[j] - 0.5 * logdet[j] - 0.5 * d * LOG2PI end
    return {prec = prec, bias = self.means * prec, const = nc.tensor(const, topts)}
  end
  local covs = self.covariances:to("float64"):tolist()
  local rows, const = {}, {}
  for j = 1, k do
    local inv, logdet = cholesky_inverse(fname, covs[j], d)
    for i = 1, d do rows[#rows + 1] = inv[i] end
    const[j] = logw[j] - 0.5 * logdet - 0.5 * d * LOG2PI
  end
  local W = nc.tensor(rows, topts)                                               -- [K*D, D]
  local bias = self.means:view({k, 1, d}):matmul(W:view({k, d, d}):transpose(2, 3)):view({k, d})
  return {W = W, bias = bias, const = nc.tensor(const, topts)}
end

-- Weighted log densities log(w_k N(x | mu_k, Sigma_k)) of the rows of Xc: [rows, K].
local function gmm_logp(self, P, Xc)
  local n, k, d = Xc.shape[1], self.k, Xc.shape[2]
  local q
  if self.covariance == "diag" then
    local Y = Xc:view({n, 1, d}) * P.prec:view({1, k, d}) - P.bias:view({1, k, d})
    q = (Y * Y):sum(3)
  else
    local Y = Xc:matmul(P.W:transpose(1, 2)):view({n, k, d}) - P.bias:view({1, k, d})
    q = (Y * Y):sum(3)
  end
  return P.const:view({1, k}) - q * 0.5
end

local function gmm_tile(self, X)
  return math.max(256, math.floor(2 ^ 22 / (self.k * X.shape[2] * (self.covariance == "full" and 2 or 1))))
end

-- One E-step over X in tiles: the mean log-likelihood and the statistics about the current means.
local function gmm_estep(self, X, fname)
  local n, k, d = X.shape[1], self.k, X.shape[2]
  local P = gmm_prepare(self, fname)
  local tile = gmm_tile(self, X)
  local topts = {device = X.device, dtype = X.dtype}
  local nk, s1 = nc.zeros({k}, topts), nc.zeros({k, d}, topts)
  local s2 = self.covariance == "full" and nc.zeros({k, d, d}, topts) or nc.zeros({k, d}, topts)
  local ll = 0
  for r0 = 1, n, tile do
    local Xc = X:narrow(1, r0, math.min(tile, n - r0 + 1))
    local rows = Xc.shape[1]
    local lp = gmm_logp(self, P, Xc)
    local lse = lp:logsumexp(2)
    ll = ll + lse:sum():item()
    local r = (lp - lse:view({rows, 1})):exp()                                   -- [rows, K]
    nk = nk + r:sum(1)
    s1 = s1 + r:transpose(1, 2):matmul(Xc)
    local Z = Xc:view({1, rows, d}) - self.means:view({k, 1, d})                 -- [K, rows, D]
    local Zr = Z * r:transpose(1, 2):contiguous():view({k, rows, 1})
    if self.covariance == "full" then
      s2 = s2 + Zr:transpose(2, 3):bmm(Z)
    else
      s2 = s2 + (Zr * Z):sum(2)
    end
  end
  return ll / n, nk, s1, s2
end

local function gmm_mstep(self, n, nk, s1, s2)
  local k, d = self.k, s1.shape[2]
  local eps = self.means.dtype == "float32" and 1.2e-7 or 2.3e-16
  nk = nk + 10 * eps
  local mu = s1 / nk:view({k, 1})
  local diff = mu - self.means
  local cov
  if self.covariance == "full" then
    cov = s2 / nk:view({k, 1, 1}) - diff:view({k, d, 1}):bmm(diff:view({k, 1, d}))
    cov = cov + nc.eye(d, {device = mu.device, dtype = mu.dtype}):view({1, d, d}) * self.reg_covar
  else
    cov = s2 / nk:view({k, 1}) - diff * diff + self.reg_covar
  end
  self.means, self.covariances, self.weights = mu:contiguous(), cov:contiguous(), nk / n
end

function GaussianMixture:fit(X)
  local fname = self.fname .. ":fit"
  check_points(fname, X, self.k, string.format("k = %d", self.k))
  X = X:contiguous()
  seeded(self.seed)
  local n, k, d = X.shape[1], self.k, X.shape[2]
  local best
  local bar <close> = open_bar(self, self.max_iter * self.n_init)
  for _ = 1, self.n_init do
    -- initial responsibilities: a KMeans fit's hard labels
    local km = KMeans{k = k}:fit(X)
    local sums, counts = ops.kmeans_update(X, km.labels, k)
    local cnt = counts:to(X.dtype)
    self.means = km.centroids
    local s2
    if self.covariance == "full" then
      s2 = nc.zeros({k, d, d}, {device = X.device, dtype = X.dtype})
      for j = 0, k - 1 do
        local mask = km.labels:eq(j):to(X.dtype):view({n, 1})
        local Z = (X - self.means:narrow(1, j + 1, 1)) * mask
        s2:select(1, j + 1):copy_(Z:transpose(1, 2):matmul(Z))
      end
    else
      local oh = nc.one_hot(km.labels, k):to(X.dtype)
      local c = self.means  -- second moments about the centroids, as the E-step's
      s2 = oh:transpose(1, 2):matmul(X * X) - sums * c * 2 + c * c * cnt:view({k, 1})
    end
    gmm_mstep(self, n, cnt, sums, s2)
    local history, prev = {}, -math.huge
    local n_iter, converged = 0, false
    for it = 1, self.max_iter do
      n_iter = it
      local ll, nk, s1, s2i = gmm_estep(self, X, fname)
      history[#history + 1] = ll
      if bar then bar:update(1, {log_likelihood = ll}) end
      gmm_mstep(self, n, nk, s1, s2i)
      if math.abs(ll - prev) < self.tol then converged = true break end
      prev = ll
    end
    local final = gmm_estep(self, X, fname)
    if not best or final > best.ll then
      best = {ll = final, means = self.means, covariances = self.covariances, weights = self.weights,
              history = history, n_iter = n_iter, converged = converged}
    end
  end
  self.means, self.covariances, self.weights = best.means, best.covariances, best.weights
  self.log_likelihood, self.log_likelihoods = best.ll, best.history
  self.n_iter, self.converged = best.n_iter, best.converged
  self.labels = self:predict(X)
  return self
end

local function gmm_check(self, fname, X)
  if not self.means then error(fname .. ": the model is not fitted (call fit first)", 3) end
  local saved = self.centroids
  self.centroids = self.means
  local ok, res = pcall(check_fitted, fname, self, X)
  self.centroids = saved
  if not ok then error(res, 3) end
  return res
end

-- Over tiles of X: fn(logp of the tile [rows, K], first row).
local function gmm_over(self, X, fname, fn)
  local P = gmm_prepare(self, fname)
  local tile = gmm_tile(self, X)
  for r0 = 1, X.shape[1], tile do fn(gmm_logp(self, P, X:narrow(1, r0, math.min(tile, X.shape[1] - r0 + 1))), r0) end
end

-- Mean log-likelihood of X under the model.
function GaussianMixture:score(X)
  local fname = self.fname .. ":score"
  X = gmm_check(self, fname, X)
  local total = 0
  gmm_over(self, X, fname, function(lp) total = total + lp:logsumexp(2):sum():item() end)
  return total / X.shape[1]
end

function GaussianMixture:predict(X)
  local fname = self.fname .. ":predict"
  X = gmm_check(self, fname, X)
  local parts = {}
  gmm_over(self, X, fname, function(lp) parts[#parts + 1] = lp:argmax(2) end)
  return #parts == 1 and parts[1] or nc.cat(parts, 1)
end

-- Responsibilities [N, K] (the only N x K result, made only here).
function GaussianMixture:predict_proba(X)
  local fname = self.fname .. ":predict_proba"
  X = gmm_check(self, fname, X)
  local parts = {}
  gmm_over(self, X, fname, function(lp) parts[#parts + 1] = (lp - lp:logsumexp(2, {keepdim = true})):exp() end)
  return #parts == 1 and parts[1] or nc.cat(parts, 1)
end

function GaussianMixture:fit_predict(X) return self:fit(X).labels end

-- ---- DBSCAN ------------------------------------------------------------------------------------------
-- The neighbour search runs in tiles of rows against all points (|x|^2 - 2 x.y + |y|^2 <= eps^2,
-- tile x N at a time, never N x N): one pass counts neighbours (the point itself included, as
-- scikit-learn) to find the core points; then the clusters are the connected components of the
-- core points, found by passes that give each core point the smallest label among its core
-- neighbours, each followed by pointer jumping (label = label[label]) until nothing changes; a
-- border point takes the label of its nearest core neighbour; the rest are noise (-1). Labels are
-- renumbered 0, 1, ... in the order of each cluster's first point.
local DBSCAN_OPTS = {eps = true, min_samples = true}
local DBSCAN = class("netcl.cluster.DBSCAN")
M.DBSCAN = DBSCAN

function DBSCAN:init(opts)
  local fname = "netcl.cluster.DBSCAN"
  opts = check_options(fname, opts, DBSCAN_OPTS)
  self.eps = num_opt(fname, opts, "eps", 0.5, 0)
  if not (self.eps > 0) then error(fname .. ": eps must be > 0", 3) end
  self.min_samples = int_opt(fname, opts, "min_samples", 5, 1)
  self.fname = fname
end

local function db_tile(n) return math.max(64, math.min(n, math.floor(2 ^ 22 / math.max(n, 1)))) end

-- fn(within [rows, N] bool, d2 [rows, N], first row) over tiles of X's rows.
local function neighbour_tiles(X, xn, eps2, fn)
  local n = X.shape[1]
  local tile = db_tile(n)
  local xt = X:transpose(1, 2)
  for r0 = 1, n, tile do
    local rows = math.min(tile, n - r0 + 1)
    local Xc = X:narrow(1, r0, rows)
    local d2 = xn:narrow(1, r0, rows):view({rows, 1}) + xn:view({1, n}) - Xc:matmul(xt) * 2
    fn(d2:le(eps2), d2, r0, rows)
  end
end

function DBSCAN:fit(X)
  local fname = self.fname .. ":fit"
  check_points(fname, X, 1, "DBSCAN")
  X = X:contiguous()
  local n = X.shape[1]
  local xn = sqnorms(X)
  local eps2 = self.eps * self.eps
  local counts = {}
  neighbour_tiles(X, xn, eps2, function(w) counts[#counts + 1] = w:sum(2) end)
  local ncount = nc.cat(counts, 1)
  local core, notcore = ncount:ge(self.min_samples), ncount:lt(self.min_samples)   -- [N] bool
  local big = n
  local idx = nc.arange(n, {dtype = "int64", device = X.device})
  local label = idx:masked_fill(notcore, big)                                 -- core: itself, else n
  local notcorerow = notcore:view({1, n})
  local rounds = 0
  while true do
    rounds = rounds + 1
    local parts = {}
    neighbour_tiles(X, xn, eps2, function(_, d2, r0, rows)
      local cand = label:view({1, n}):expand({rows, n}):masked_fill(d2:gt(eps2) + notcorerow, big)
      parts[#parts + 1] = nc.minimum(cand:min(2), label:narrow(1, r0, rows))
    end)
    local new = nc.cat(parts, 1)
    -- pointer jumping: a label is a core point's index; follow it to that point's label
    for _ = 1, 64 do
      local jumped = nc.where(core, new:clamp(0, n - 1), big)
      jumped = nc.where(core, new:index_select(1, jumped:clamp(0, n - 1)), big)
      if jumped:eq(new):all():item() then break end
      new = jumped
    end
    if new:eq(label):all():item() then break end
    label = new
  end
  -- border points: the label of the nearest core neighbour
  local parts = {}
  neighbour_tiles(X, xn, eps2, function(_, d2)
    local dd = d2:masked_fill(d2:gt(eps2) + notcorerow, math.huge)
    local best, at = dd:min(2)
    parts[#parts + 1] = label:index_select(1, at):masked_fill(best:eq(math.huge), -1)
  end)
  local raw = nc.where(core, label, nc.cat(parts, 1)):tolist()
  local map, nextid, out = {}, 0, {}
  for i = 1, n do
    local r = raw[i]
    if r < 0 then out[i] = -1
    else
      if not map[r] then map[r], nextid = nextid, nextid + 1 end
      out[i] = map[r]
    end
  end
  self.labels = nc.tensor(out, {dtype = "int64", device = X.device})
  self.core = core
  self.n_clusters, self.n_iter = nextid, rounds
  return self
end

function DBSCAN:fit_predict(X) return self:fit(X).labels end

function DBSCAN:predict()
  error(self.fname .. ":predict: not supported: DBSCAN labels only the points it was fitted on (use fit_predict)", 2)
end

-- ---- dense symmetric eigen-decomposition on the host (cyclic Jacobi), for the small matrices of LOBPCG's
-- Rayleigh-Ritz step. A: Lua table of rows; returns eigenvalues (ascending) and eigenvectors (columns).
local function jacobi_eigh(A, n)
  local a, v = {}, {}
  for i = 1, n do
    a[i], v[i] = {}, {}
    for j = 1, n do a[i][j], v[i][j] = (A[i][j] + A[j][i]) / 2, i == j and 1 or 0 end
  end
  for _ = 1, 100 do
    local off = 0
    for i = 1, n do for j = i + 1, n do off = off + a[i][j] * a[i][j] end end
    if off < 1e-30 then break end
    for p = 1, n - 1 do
      for q = p + 1, n do
        if math.abs(a[p][q]) > 1e-300 then
          local theta = (a[q][q] - a[p][p]) / (2 * a[p][q])
          local t = (theta >= 0 and 1 or -1) / (math.abs(theta) + math.sqrt(theta * theta + 1))
          local c = 1 / math.sqrt(t * t + 1)
          local sn = t * c
          for k = 1, n do
            local akp, akq = a[k][p], a[k][q]
            a[k][p], a[k][q] = c * akp - sn * akq, sn * akp + c * akq
          end
          for k = 1, n do
            local apk, aqk = a[p][k], a[q][k]
            a[p][k], a[q][k] = c * apk - sn * aqk, sn * apk + c * aqk
          end
          for k = 1, n do
            local vkp, vkq = v[k][p], v[k][q]
            v[k][p], v[k][q] = c * vkp - sn * vkq, sn * vkp + c * vkq
          end
        end
      end
    end
  end
  local order = {}
  for i = 1, n do order[i] = i end
  table.sort(order, function(x, y) return a[x][x] < a[y][y] end)
  local w, vec = {}, {}
  for i = 1, n do vec[i] = {} end
  for c, o in ipairs(order) do
    w[c] = a[o][o]
    for i = 1, n do vec[i][c] = v[i][o] end
  end
  return w, vec
end
M._eigh = jacobi_eigh

-- Orthonormal basis of the columns of S (with AS = op(S) carried along): through the eigenvectors
-- of the Gram matrix, dropping directions below 1e-10 of the largest (converged residuals).
local function orthonormalize_once(S, AS)
  local g = S:transpose(1, 2):matmul(S):to("float64"):tolist()
  local m = S.shape[2]
  local w, V = jacobi_eigh(g, m)
  local cols = {}
  for c = 1, m do
    if w[c] > 1e-10 * w[m] then
      local col = {}
      for i = 1, m do col[i] = V[i][c] / math.sqrt(w[c]) end
      cols[#cols + 1] = col
    end
  end
  local T = nc.tensor(cols, {device = S.device, dtype = S.dtype}):transpose(1, 2)   -- [m, r]
  return S:matmul(T), AS and AS:matmul(T)
end

-- Twice: the Gram route squares the condition number, and a second pass restores orthogonality.
local function orthonormalize(S, AS)
  S, AS = orthonormalize_once(S, AS)
  return orthonormalize_once(S, AS)
end

-- LOBPCG (Knyazev 2001) for the m largest eigenpairs of the symmetric operator op ([N, m] -> [N, m])
-- on the device: the block X, residuals R and search directions P, Rayleigh-Ritz on [X, R, P] on
-- the host (3m x 3m). Returns eigenvalues (descending, Lua table), eigenvectors [N, m], iterations.
function M.lobpcg(op, X, opts)
  opts = opts or {}
  local max_iter, tol = opts.max_iter or 200, opts.tol or 1e-6
  local m = X.shape[2]
  local nconv = opts.nconv or m
  local AX
  X, AX = orthonormalize(X, op(X))
  local P, AP
  local lambda, it = nil, 0
  for i = 1, max_iter do
    it = i
    local S, AS
    if lambda then
      local L = nc.tensor(lambda, {device = X.device, dtype = X.dtype}):view({1, m})
      local R = AX - X * L
      local rn = R:narrow(2, 1, nconv):norm(1, {p = 2}):max():item()
      if rn < tol then break end
      -- unit columns, so that small residuals are not taken for dependent directions
      local rs = R:norm(1, {p = 2, keepdim = true}):clamp(1e-300, nil)
      R = R / rs
      local parts, aparts = {X, R}, {AX, op(R)}
      if P then
        local ps = P:norm(1, {p = 2, keepdim = true}):clamp(1e-300, nil)
        parts[3], aparts[3] = P / ps, AP / ps
      end
      S, AS = orthonormalize(nc.cat(parts, 2), nc.cat(aparts, 2))
    else
      S, AS = X, AX
    end
    local Hm = S:transpose(1, 2):matmul(AS):to("float64"):tolist()
    local r = S.shape[2]
    local w, V = jacobi_eigh(Hm, r)
    local cols, vals = {}, {}
    for c = 1, m do
      vals[c] = w[r - c + 1]
      local col = {}
      for j = 1, r do col[j] = V[j][r - c + 1] end
      cols[c] = col
    end
    local Cm = nc.tensor(cols, {device = X.device, dtype = X.dtype}):transpose(1, 2)   -- [r, m]
    local Xn = S:matmul(Cm)
    if r > m then -- P: the part of the new block outside the old X
      local Cp = Cm:clone()
      Cp:narrow(1, 1, m):fill_(0)
      P, AP = S:matmul(Cp), AS:matmul(Cp)
    end
    X, AX, lambda = Xn, op(Xn), vals  -- AX afresh: combinations of AS drift from op(X)
  end
  return lambda, X, it
end

-- ---- SpectralClustering -----------------------------------------------------------------------------
-- Affinity "rbf" (exp(-gamma |x - y|^2), applied matrix-free: tiles of rows x N inside each
-- product, never N x N) or "knn" (symmetrized 0/1 graph of the n_neighbors nearest points, O(N k),
-- found in tiles). The k leading eigenvectors of D^-1/2 A D^-1/2 (the smallest of the normalized
-- Laplacian I - D^-1/2 A D^-1/2) come from LOBPCG on the device; their rows, normalized, are
-- clustered by KMeans.
local SC_OPTS = {k = true, affinity = true, n_neighbors = true, gamma = true, seed = true, n_init = true}
local SpectralClustering = class("netcl.cluster.SpectralClustering")
M.SpectralClustering = SpectralClustering

function SpectralClustering:init(opts)
  local fname = "netcl.cluster.SpectralClustering"
  opts = check_options(fname, opts, SC_OPTS)
  self.k = int_opt(fname, opts, "k", nil, 1)
  self.affinity = opts.affinity or "rbf"
  if self.affinity ~= "rbf" and self.affinity ~= "knn" then
    error(fname .. ": affinity must be 'rbf' or 'knn', got " .. tostring(self.affinity), 3)
  end
  self.n_neighbors = int_opt(fname, opts, "n_neighbors", 10, 1)
  self.gamma = num_opt(fname, opts, "gamma", 1.0, 0)
  self.n_init = int_opt(fname, opts, "n_init", 10, 1)
  self.seed = opts.seed
  self.fname = fname
end

-- The affinity operator V -> A V ([N, m] -> [N, m]).
local function affinity_operator(self, X)
  local n = X.shape[1]
  local xn = sqnorms(X)
  local tile = db_tile(n)
  local xt = X:transpose(1, 2)
  if self.affinity == "rbf" then
    return function(V)
      local parts = {}
      for r0 = 1, n, tile do
        local rows = math.min(tile, n - r0 + 1)
        local d2 = (xn:narrow(1, r0, rows):view({rows, 1}) + xn:view({1, n}) - X:narrow(1, r0, rows):matmul(xt) * 2):clamp(0, nil)
        parts[#parts + 1] = (d2 * -self.gamma):exp():matmul(V)
      end
      return #parts == 1 and parts[1] or nc.cat(parts, 1)
    end
  end
  local kn = math.min(self.n_neighbors, n - 1)
  if kn < 1 then error(self.fname .. ":fit: the knn affinity needs at least 2 points", 4) end
  local idxs = {}
  for r0 = 1, n, tile do
    local rows = math.min(tile, n - r0 + 1)
    local d2 = xn:narrow(1, r0, rows):view({rows, 1}) + xn:view({1, n}) - X:narrow(1, r0, rows):matmul(xt) * 2
    local _, nb = d2:topk(kn + 1, 2, {largest = false})   -- the point itself comes first
    idxs[#idxs + 1] = nb:narrow(2, 2, kn)
  end
  local idx = nc.cat(idxs, 1):contiguous()                    -- [N, kn]
  local flat = idx:view({n * kn})
  local rowof = nc.arange(n, {dtype = "int64", device = X.device}):view({n, 1}):expand({n, kn}):contiguous():view({n * kn})
  -- A = (W + W^T) / 2 with W_ij = 1 for j among i's neighbours: W V gathers, W^T V sums by
  -- neighbour (kmeans_update's deterministic per-label sums).
  return function(V)
    local m = V.shape[2]
    local wv = V:index_select(1, flat):view({n, kn, m}):sum(2)
    local wtv = ops.kmeans_update(V:index_select(1, rowof), flat, n)
    return (wv + wtv) * 0.5
  end
end

function SpectralClustering:fit(X)
  local fname = self.fname .. ":fit"
  check_points(fname, X, self.k, string.format("k = %d", self.k))
  X = X:contiguous()
  seeded(self.seed)
  local n, k = X.shape[1], self.k
  local A = affinity_operator(self, X)
  local deg = A(nc.ones({n, 1}, {device = X.device, dtype = X.dtype})):view({n})
  if deg:min():item() <= 0 then error(fname .. ": a point has no affinity to any other (raise gamma's scale or n_neighbors)", 2) end
  local dis = deg:rsqrt():view({n, 1})
  local op = function(V) return A(V * dis) * dis end
  local m = math.min(n, 2 * k + 2)  -- a wider block converges faster when the gaps are small
  local V0 = nc.randn({n, m}, {device = X.device, dtype = X.dtype})
  local vals, vecs, it = M.lobpcg(op, V0, {max_iter = 300, tol = 1e-4, nconv = k})
  self.eigenvalues = {}
  for i = 1, k do self.eigenvalues[i] = 1 - vals[i] end      -- of the normalized Laplacian
  local E = vecs:narrow(2, 1, k) * dis                        -- D^-1/2 scaling, as a random-walk embedding
  E = E / sqnorms(E):sqrt():clamp(1e-30, nil):view({n, 1})
  local km = KMeans{k = k, n_init = self.n_init}:fit(E:contiguous())
  self.labels, self.embedding, self.n_iter = km.labels, E, it
  return self
end

function SpectralClustering:fit_predict(X) return self:fit(X).labels end

function SpectralClustering:predict()
  error(self.fname .. ":predict: not supported: spectral clustering has no out-of-sample extension (use fit_predict)", 2)
end

return M

-- netcl.cluster's k-means family: KMeans (Lloyd's iterations, Hamerly's bounds), SphericalKMeans,
-- MiniBatchKMeans and BalancedKMeans, on the op-table ops kmeans_assign and kmeans_update
-- (docs/cluster.md).
local nc = require "netcl"
local class = require "netcl.class"

local common = require "netcl.cluster.common"
local check_options = common.check_options
local int_opt = common.int_opt
local num_opt = common.num_opt
local check_points = common.check_points
local check_fitted = common.check_fitted
local seeded = common.seeded
local verbose_opt = common.verbose_opt
local open_bar = common.open_bar
local sqnorms = common.sqnorms

local ops = nc.nn_ops
local M = {}

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

return M

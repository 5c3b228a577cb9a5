-- netcl.cluster.SpectralClustering: normalized spectral clustering, eigenvectors by LOBPCG
-- (docs/cluster.md).
local nc = require "netcl"
local class = require "netcl.class"

local common = require "netcl.cluster.common"
local check_options = common.check_options
local int_opt = common.int_opt
local num_opt = common.num_opt
local check_points = common.check_points
local seeded = common.seeded
local sqnorms = common.sqnorms
local db_tile = common.db_tile
local KMeans = require("netcl.cluster.kmeans").KMeans
local lobpcg = require("netcl.cluster.lobpcg").lobpcg

local ops = nc.nn_ops
local M = {}

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
  local vals, vecs, it = lobpcg(op, V0, {max_iter = 300, tol = 1e-4, nconv = k})
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

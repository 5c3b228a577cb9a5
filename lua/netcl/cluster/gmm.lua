-- netcl.cluster.GaussianMixture: EM with full or diagonal covariances (docs/cluster.md).
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
local KMeans = require("netcl.cluster.kmeans").KMeans

local ops = nc.nn_ops
local M = {}

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

return M

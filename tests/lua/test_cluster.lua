-- netcl.cluster on the device under test: the k-means ops against brute force, blobs recovered
-- up to a permutation of labels, Hamerly's bounds giving Lloyd's result, the empty-cluster
-- strategy, deterministic sums, bad input; against scikit-learn when python3 has it (skipped with
-- a message otherwise).
local lu = require "luaunit"
local nc = require "netcl"
local cluster = require "netcl.cluster"
local nio = require "netcl.io"
local H = require "helpers"

local dev = H.device()
local ops = nc.nn_ops
local cpu = nc.device("cpu")

-- k blobs of `per` points in d dims around centres 10 apart on average; labels 0 .. k-1 in turn.
local function blobs(k, per, d, spread, seed)
  nc.manual_seed(seed or 7)
  local C = nc.randn({k, d}, {device = cpu}) * 10
  local idx = {}
  for i = 1, k * per do idx[i] = (i - 1) % k end
  local truth = nc.tensor(idx, {dtype = "int64", device = cpu})
  local X = C:index_select(1, truth) + nc.randn({k * per, d}, {device = cpu}) * (spread or 0.5)
  return X:to(dev), idx
end

-- The labels equal `truth` up to a permutation of the label values.
local function same_partition(labels, truth, k)
  local got = labels:tolist()
  local map, used = {}, {}
  for i, t in ipairs(truth) do
    local g = got[i]
    if map[t] == nil then
      if used[g] then return false end
      map[t], used[g] = g, true
    elseif map[t] ~= g then
      return false
    end
  end
  local n = 0
  for _ in pairs(map) do n = n + 1 end
  return n == k
end

TestKmeansOps = {}

function TestKmeansOps:test_assign_brute_force()
  nc.manual_seed(1)
  local n, d, k = 300, 5, 11
  local X, C = nc.randn({n, d}, {dtype = "float64"}), nc.randn({k, d}, {dtype = "float64"})
  local labels, dist = ops.kmeans_assign(X, C)
  local D = ((X:view({n, 1, d}) - C:view({1, k, d})) ^ 2):sum(3)
  local sorted = D:sort(2)
  local _, best = D:min(2)
  H.assert_close(labels, best, nil, "labels")
  H.assert_close(dist:select(2, 1), sorted:select(2, 1):sqrt(), 1e-9, "nearest")
  H.assert_close(dist:select(2, 2), sorted:select(2, 2):sqrt(), 1e-9, "second")
  -- one centroid: the second distance is inf
  local _, d1 = ops.kmeans_assign(X, C:narrow(1, 1, 1))
  lu.assertEquals(d1:select(2, 2):min():item(), math.huge)
end

function TestKmeansOps:test_update_sums_counts_deterministic()
  nc.manual_seed(2)
  local n, d, k = 5000, 3, 7
  local X = nc.randn({n, d})
  local l = nc.randint(-1, k, {n})   -- -1: left out
  local s, c = ops.kmeans_update(X, l, k)
  local keep = l:ge(0)
  local oh = nc.one_hot(l:masked_fill(l:lt(0), 0), k):to("float64") * keep:to("float64"):view({n, 1})
  H.assert_close(s:to("float64"), oh:transpose(1, 2):matmul(X:to("float64")), 1e-4, "sums")
  H.assert_close(c, oh:sum(1):to("int64"), nil, "counts")
  local s2 = ops.kmeans_update(X, l, k)
  lu.assertEquals(s2:bytes(), s:bytes())
end

function TestKmeansOps:test_bounds_give_plain_labels()
  nc.manual_seed(3)
  local n, d, k = 4000, 6, 25
  local X, C = nc.randn({n, d}), nc.randn({k, d})
  local l, dist = ops.kmeans_assign(X, C)
  local C2 = C + nc.randn({k, d}) * 0.1
  local shift = (C2 - C):norm(2, {p = 2})
  local cn = (C2 * C2):sum(2)
  local g = (cn:view({k, 1}) + cn:view({1, k}) - C2:matmul(C2:transpose(1, 2)) * 2):clamp(0, nil)
  g = g:masked_fill(nc.eye(k, {dtype = "bool"}), math.huge):min(2):sqrt() * 0.5
  local l2, b2 = ops.kmeans_assign(X, C2, l, dist, nc.stack({shift, g}, 2))
  local l3, d3 = ops.kmeans_assign(X, C2)
  H.assert_close(l2, l3, nil, "labels")
  lu.assertTrue((b2:select(2, 1) - d3:select(2, 1)):min():item() > -1e-4, "upper bounds")
  lu.assertTrue((d3:select(2, 2) - b2:select(2, 2)):min():item() > -1e-4, "lower bounds")
  H.assert_error(function() ops.kmeans_assign(X, C2, l) end, "netcl.kmeans_assign", "go together")
end

TestKMeans = {}

function TestKMeans:test_blobs_recovered()
  local X, truth = blobs(6, 50, 4)
  for _, alg in ipairs({"lloyd", "hamerly"}) do
    local m = cluster.KMeans{k = 6, seed = 3, n_init = 4, algorithm = alg}:fit(X)
    lu.assertTrue(same_partition(m.labels, truth, 6), alg)
    lu.assertEquals(m.centroids.shape, {6, 4})
    lu.assertTrue(m.n_iter >= 1 and m.inertia > 0)
    H.assert_close(m:predict(X), m.labels, nil, "predict")
  end
  local mb = cluster.MiniBatchKMeans{k = 6, batch_size = 64, max_iter = 5, seed = 3}
  lu.assertTrue(same_partition(mb:fit_predict(X), truth, 6), "minibatch")
  local rnd = cluster.KMeans{k = 6, init = "random", n_init = 5, seed = 1}:fit(X)
  lu.assertTrue(same_partition(rnd.labels, truth, 6), "random init")
end

function TestKMeans:test_spherical_directions()
  -- three directions, points at random radii: Euclidean k-means splits by radius, cosine does not
  nc.manual_seed(4)
  local dirs = nc.tensor({{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, {device = cpu})
  local idx = {}
  for i = 1, 150 do idx[i] = (i - 1) % 3 end
  local r = nc.rand({150, 1}, {device = cpu}) * 20 + 0.5
  local X = ((dirs:index_select(1, nc.tensor(idx, {dtype = "int64", device = cpu})) + nc.randn({150, 3}, {device = cpu}) * 0.05) * r):to(dev)
  local m = cluster.SphericalKMeans{k = 3, seed = 1, n_init = 3}:fit(X)
  lu.assertTrue(same_partition(m.labels, idx, 3))
  lu.assertTrue(m.inertia >= 0 and m.inertia < 150 * 0.02)
  H.assert_close(m.centroids:norm(2, {p = 2}), {1, 1, 1}, 1e-5, "unit centroids")
end

function TestKMeans:test_hamerly_equals_lloyd()
  nc.manual_seed(5)
  local X = nc.randn({3000, 8})
  local init = X:narrow(1, 1, 40):clone()
  local a = cluster.KMeans{k = 40, init = init, max_iter = 30, tol = 0, algorithm = "lloyd"}:fit(X)
  local b = cluster.KMeans{k = 40, init = init, max_iter = 30, tol = 0, algorithm = "hamerly"}:fit(X)
  lu.assertEquals(b.n_iter, a.n_iter)
  H.assert_close(b.labels, a.labels, nil, "labels")
  H.assert_close(b.centroids, a.centroids, 1e-5, "centroids")
  lu.assertAlmostEquals(b.inertia, a.inertia, 1e-5 * a.inertia)
end

function TestKMeans:test_verbose_progress()
  local X = blobs(3, 20, 2)
  local lines = {}
  local out = {write = function(_, ...) for _, v in ipairs({...}) do lines[#lines + 1] = v end end}
  cluster.KMeans{k = 3, seed = 1, verbose = out}:fit(X)
  local text = table.concat(lines)
  lu.assertStrContains(text, "KMeans")
  lu.assertStrContains(text, "shift=")
  lines = {}
  cluster.GaussianMixture{k = 3, seed = 1, verbose = out}:fit(X)
  lu.assertStrContains(table.concat(lines), "log_likelihood=")
  H.assert_error(function() cluster.KMeans{k = 2, verbose = 3} end, "verbose must be a boolean")
end

function TestKMeans:test_empty_cluster_relocated()
  local X = blobs(3, 40, 2)
  -- a centroid far from every point gets no point: it moves to the point farthest from its centroid
  local init = nc.tensor({{0, 0}, {1, 1}, {1000, 1000}}, {dtype = X.dtype}):to(dev)
  local m = cluster.KMeans{k = 3, init = init, max_iter = 50}:fit(X)
  local _, counts = ops.kmeans_update(X, m.labels, 3)
  lu.assertTrue(counts:min():item() > 0, "no cluster left empty")
  lu.assertTrue(m.centroids:abs():max():item() < 100, "the far centroid moved")
end

function TestKMeans:test_bad_input()
  local X = blobs(2, 5, 3)
  H.assert_error(function() cluster.KMeans{k = 11}:fit(X) end, "KMeans:fit", "k = 11 needs at least 11 points, X has 10")
  local bad = X:clone()
  bad:narrow(1, 2, 1):fill_(0 / 0)
  H.assert_error(function() cluster.KMeans{k = 2}:fit(bad) end, "KMeans:fit", "nan")
  H.assert_error(function() cluster.KMeans{k = 2}:fit(nc.empty({10, 0})) end, "D = 0")
  H.assert_error(function() cluster.KMeans{k = 2}:fit(nc.zeros({10})) end, "matrix [N, D]")
  H.assert_error(function() cluster.KMeans{k = 2, n_inits = 3} end, "unknown option 'n_inits'", "n_init=")
  H.assert_error(function() cluster.KMeans{} end, "k= is required")
  H.assert_error(function() cluster.KMeans{k = 2}:predict(X) end, "not fitted")
  local m = cluster.KMeans{k = 2, seed = 1}:fit(X)
  H.assert_error(function() m:predict(nc.zeros({3, 4}, {dtype = X.dtype})) end, "4 features", "fitted on 3")
  H.assert_error(function() ops.kmeans_assign(X, nc.zeros({0, 3})) end, "at least one centroid")
  -- X on another device than the fitted model
  local other
  for _, d in ipairs(nc.devices()) do
    if d ~= dev then other = d break end
  end
  if other then
    H.assert_error(function() m:predict(X:to(other)) end, "KMeans:predict", "was fitted on " .. dev.spec)
    H.assert_error(function() ops.kmeans_assign(X, m.centroids:to(other)) end, "another device")
  else
    print("SKIP part: no second device here: the device-mismatch errors were not checked")
  end
end

-- ---- scikit-learn --------------------------------------------------------------------------------
local function sklearn_python() return H.python("sklearn", "numpy") end

function TestKMeans:test_sklearn_inertia()
  local py = sklearn_python()
  if not py then
    lu.skip("scikit-learn is not installed for python3 (Debian: python3-sklearn): the comparison did not run")
  end
  nc.manual_seed(11)
  local X = nc.randn({2000, 5}, {dtype = "float64"}):to(dev)
  local init = X:narrow(1, 1, 8):clone()
  local dir = H.tmpdir()
  nio.save_npy(X:to(cpu), dir .. "/x.npy")
  nio.save_npy(init:to(cpu), dir .. "/c.npy")
  local script = dir .. "/km.py"
  local f = assert(io.open(script, "w"))
  f:write([[
import sys, numpy as np
from sklearn.cluster import KMeans
X, C = np.load(sys.argv[1] + "/x.npy"), np.load(sys.argv[1] + "/c.npy")
a = KMeans(8, init=C, n_init=1, tol=1e-4, random_state=0).fit(X)
b = KMeans(8, init="k-means++", n_init=3, random_state=0).fit(X)
print(repr(a.inertia_), repr(b.inertia_))
]])
  f:close()
  local p = io.popen(py .. " " .. script .. " " .. dir)
  local out = p:read("a")
  p:close()
  local same_init, pp = out:match("(%S+)%s+(%S+)")
  assert(same_init, "python3 output: " .. out)
  local mine = cluster.KMeans{k = 8, init = init, tol = 1e-4}:fit(X)
  lu.assertTrue(math.abs(mine.inertia - tonumber(same_init)) <= 0.01 * tonumber(same_init),
                string.format("same initial centroids: %g vs sklearn %g", mine.inertia, tonumber(same_init)))
  local pp_mine = cluster.KMeans{k = 8, n_init = 3, seed = 1}:fit(X)
  lu.assertTrue(pp_mine.inertia <= 1.01 * tonumber(pp),
                string.format("k-means++: %g vs sklearn %g", pp_mine.inertia, tonumber(pp)))
  os.remove(dir .. "/x.npy") os.remove(dir .. "/c.npy") os.remove(script) os.remove(dir)
end

TestBalancedKMeans = {}

function TestBalancedKMeans:test_sizes_within_one()
  -- imbalanced blobs (40, 110, 251 points): every cluster ends with 133 or 134
  nc.manual_seed(61)
  local C = nc.tensor({{0, 0}, {6, 0}, {0, 6}}, {device = cpu})
  local parts = {}
  for j, size in ipairs({40, 110, 251}) do
    parts[j] = C:narrow(1, j, 1):expand({size, 2}) + nc.randn({size, 2}, {device = cpu})
  end
  local X = nc.cat(parts, 1):to(dev)
  for _, k in ipairs({3, 7}) do
    local m = cluster.BalancedKMeans{k = k, seed = 1}:fit(X)
    local _, counts = ops.kmeans_update(X, m.labels, k)
    lu.assertTrue(counts:min():item() >= 401 // k and counts:max():item() <= 401 // k + 1,
                  "k = " .. k .. ": sizes " .. table.concat(counts:tolist(), " "))
    lu.assertEquals(m.centroids.shape, {k, 2})
  end
  -- equal blobs: the balanced partition is the blobs
  local Y, truth = blobs(4, 30, 3)
  lu.assertTrue(same_partition(cluster.BalancedKMeans{k = 4, seed = 2}:fit_predict(Y), truth, 4))
  H.assert_error(function() cluster.BalancedKMeans{k = 2, epsilon = 0} end, "epsilon must be > 0")
end

TestGaussianMixture = {}

-- three anisotropic blobs (float64 on the device under test)
local function gmm_data()
  nc.manual_seed(21)
  local n = 900
  local idx = {}
  for i = 1, n do idx[i] = (i - 1) % 3 end
  local own = nc.tensor(idx, {dtype = "int64", device = cpu})
  local C = nc.tensor({{0, 0, 0}, {8, 1, -2}, {-3, 9, 4}}, {dtype = "float64", device = cpu})
  local mix = nc.tensor({{1, 0.5, 0}, {0, 0.7, 0.2}, {0.1, 0, 0.4}}, {dtype = "float64", device = cpu})
  local X = C:index_select(1, own) + nc.randn({n, 3}, {dtype = "float64", device = cpu}):matmul(mix)
  return X:to(dev), idx
end

function TestGaussianMixture:test_em_monotone_and_partition()
  local X, truth = gmm_data()
  for _, cov in ipairs({"full", "diag"}) do
    local g = cluster.GaussianMixture{k = 3, covariance = cov, seed = 2, tol = 0, max_iter = 15}:fit(X)
    local h = g.log_likelihoods
    lu.assertEquals(#h, 15)
    for i = 2, #h do lu.assertTrue(h[i] >= h[i - 1] - 1e-9, cov .. ": log-likelihood fell at iteration " .. i) end
    lu.assertTrue(same_partition(g.labels, truth, 3), cov)
    lu.assertAlmostEquals(g:score(X), g.log_likelihood, 1e-9)
    local p = g:predict_proba(X)
    lu.assertEquals(p.shape, {900, 3})
    H.assert_close(p:sum(2), nc.ones({900}, {dtype = "float64"}), 1e-9, "responsibilities")
    lu.assertAlmostEquals(g.weights:sum():item(), 1, 1e-9)
    lu.assertEquals(g.covariances.shape, cov == "full" and {3, 3, 3} or {3, 3})
  end
  H.assert_error(function() cluster.GaussianMixture{k = 2, covariance = "tied"} end, "'full' or 'diag'")
  H.assert_error(function() cluster.GaussianMixture{k = 2}:score(X) end, "not fitted")
end

function TestGaussianMixture:test_sklearn_log_likelihood()
  local py = sklearn_python()
  if not py then
    lu.skip("scikit-learn is not installed for python3 (Debian: python3-sklearn): the comparison did not run")
  end
  local X = gmm_data()
  local dir = H.tmpdir()
  nio.save_npy(X:to(cpu), dir .. "/x.npy")
  local p = io.popen(py .. " -c \"import sys, numpy as np; from sklearn.mixture import GaussianMixture as G; "
    .. "X = np.load(sys.argv[1]); print(*[repr(G(3, covariance_type=c, random_state=0).fit(X).score(X)) "
    .. "for c in ('full', 'diag')])\" " .. dir .. "/x.npy")
  local out = p:read("a")
  p:close()
  os.remove(dir .. "/x.npy") os.remove(dir)
  local full, diag = out:match("(%S+)%s+(%S+)")
  assert(full, "python3 output: " .. out)
  for cov, ref in pairs({full = tonumber(full), diag = tonumber(diag)}) do
    local mine = cluster.GaussianMixture{k = 3, covariance = cov, seed = 1}:fit(X):score(X)
    lu.assertTrue(math.abs(mine - ref) <= 0.01 * math.abs(ref), string.format("%s: %g vs sklearn %g", cov, mine, ref))
  end
end

TestDBSCAN = {}

-- two concentric rings (radii 1 and 3) or two interleaved moons, n points; labels of the truth.
local function shapes(kind, n, seed)
  nc.manual_seed(seed or 31)
  local half = n // 2
  local t = nc.rand({n}, {device = cpu, dtype = "float64"}) * math.pi
  local X
  if kind == "rings" then
    t = t * 2
    local r = nc.cat({nc.full({half}, 1, {device = cpu}), nc.full({n - half}, 3, {device = cpu})}, 1):to("float64")
    X = nc.stack({t:cos() * r, t:sin() * r}, 2)
  else
    local a = nc.stack({t:narrow(1, 1, half):cos(), t:narrow(1, 1, half):sin()}, 2)
    local tb = t:narrow(1, half + 1, n - half)
    local b = nc.stack({-tb:cos() + 1, -tb:sin() + 0.5}, 2)
    X = nc.cat({a, b}, 1)
  end
  X = X + nc.randn({n, 2}, {device = cpu, dtype = "float64"}) * 0.04
  local truth = {}
  for i = 1, n do truth[i] = i <= half and 0 or 1 end
  return X:to(dev), truth
end

function TestDBSCAN:test_rings_and_moons()
  for _, kind in ipairs({"rings", "moons"}) do
    local X, truth = shapes(kind, 400)
    local m = cluster.DBSCAN{eps = kind == "rings" and 0.7 or 0.2, min_samples = 4}:fit(X)
    lu.assertEquals(m.n_clusters, 2, kind)
    lu.assertEquals(m.labels:eq(-1):sum():item(), 0, kind .. ": no noise")
    lu.assertTrue(same_partition(m.labels, truth, 2), kind)
  end
  -- a far point is noise
  local X = nc.cat({shapes("rings", 200), nc.tensor({{50, 50}}, {dtype = "float64"})}, 1)
  local l = cluster.DBSCAN{eps = 0.6, min_samples = 3}:fit_predict(X)
  lu.assertEquals(l[201]:item(), -1)
  H.assert_error(function() cluster.DBSCAN{eps = 0.5}:predict(X) end, "not supported")
  H.assert_error(function() cluster.DBSCAN{eps = 0} end, "eps must be")
end

function TestDBSCAN:test_sklearn()
  local py = sklearn_python()
  if not py then
    lu.skip("scikit-learn is not installed for python3 (Debian: python3-sklearn): the comparison did not run")
  end
  -- blobs with sparse edges: core, border and noise points all occur
  nc.manual_seed(41)
  local X = (nc.randn({300, 2}, {device = cpu, dtype = "float64"}) * nc.tensor({1, 0.6}, {dtype = "float64", device = cpu})
    + nc.randint(0, 3, {300, 1}, {device = cpu}):to("float64") * 4)
  local eps, ms = 0.3, 5
  local dir = H.tmpdir()
  nio.save_npy(X, dir .. "/x.npy")
  local p = io.popen(py .. " -c \"import sys, numpy as np; from sklearn.cluster import DBSCAN; "
    .. "m = DBSCAN(eps=0.3, min_samples=5).fit(np.load(sys.argv[1])); core = np.zeros(len(m.labels_), int); "
    .. "core[m.core_sample_indices_] = 1; print(' '.join(map(str, m.labels_))); print(' '.join(map(str, core)))\" "
    .. dir .. "/x.npy")
  local out = p:read("a")
  p:close()
  os.remove(dir .. "/x.npy") os.remove(dir)
  local lines = {}
  for line in out:gmatch("[^\n]+") do
    local row = {}
    for v in line:gmatch("%S+") do row[#row + 1] = tonumber(v) end
    lines[#lines + 1] = row
  end
  assert(#lines == 2 and #lines[1] == 300, "python3 output: " .. out)
  local sk, skcore = lines[1], lines[2]
  local m = cluster.DBSCAN{eps = eps, min_samples = ms}:fit(X:to(dev))
  local mine, core = m.labels:tolist(), m.core:tolist()
  local pts = X:tolist()
  local map, back = {}, {}
  local nborder = 0
  for i = 1, 300 do
    lu.assertEquals(core[i], skcore[i] == 1, "core point " .. i)
    lu.assertEquals(mine[i] == -1, sk[i] == -1, "noise " .. i)
    if core[i] then -- core points: the same partition
      if map[sk[i]] == nil then
        lu.assertNil(back[mine[i]], "two sklearn clusters share a label")
        map[sk[i]], back[mine[i]] = mine[i], sk[i]
      end
      lu.assertEquals(mine[i], map[sk[i]], "core point " .. i)
    end
  end
  for i = 1, 300 do
    if not core[i] and mine[i] ~= -1 then -- border: the cluster of some core point within eps
      nborder = nborder + 1
      local ok = false
      for j = 1, 300 do
        local dx, dy = pts[i][1] - pts[j][1], pts[i][2] - pts[j][2]
        if core[j] and mine[j] == mine[i] and dx * dx + dy * dy <= eps * eps then ok = true break end
      end
      lu.assertTrue(ok, "border point " .. i)
    end
  end
  lu.assertTrue(nborder > 0, "the data have border points")
end

TestSpectral = {}

function TestSpectral:test_lobpcg_matches_dense()
  -- normalized RBF affinity of 40 points: the 4 largest eigenvalues of D^-1/2 A D^-1/2
  nc.manual_seed(51)
  local n = 40
  local X = nc.randn({n, 2}, {dtype = "float64"})
  local d2 = ((X:view({n, 1, 2}) - X:view({1, n, 2})) ^ 2):sum(3)
  local A = (d2 * -0.5):exp()
  local dis = A:sum(2):rsqrt()
  local Mx = A * dis:view({n, 1}) * dis:view({1, n})
  local w = cluster._eigh(Mx:tolist(), n)   -- dense reference: cyclic Jacobi on the whole matrix
  local vals, vecs = cluster.lobpcg(function(V) return Mx:matmul(V) end, nc.randn({n, 6}, {dtype = "float64"}),
                                    {tol = 1e-9, max_iter = 500, nconv = 4})
  for i = 1, 4 do lu.assertAlmostEquals(vals[i], w[n - i + 1], 1e-8) end
  local V = vecs:narrow(2, 1, 4)
  local res = Mx:matmul(V) - V * nc.tensor({vals[1], vals[2], vals[3], vals[4]}, {dtype = "float64"}):view({1, 4})
  lu.assertTrue(res:abs():max():item() < 1e-7)
  -- the Jacobi reference itself: a matrix with known eigenvalues (Q diag Q^T)
  local ew = cluster._eigh({{2, 1, 0}, {1, 2, 0}, {0, 0, 5}}, 3)
  lu.assertAlmostEquals(ew[1], 1, 1e-12) lu.assertAlmostEquals(ew[2], 3, 1e-12) lu.assertAlmostEquals(ew[3], 5, 1e-12)
end

function TestSpectral:test_rings_and_moons()
  for _, kind in ipairs({"rings", "moons"}) do
    local X, truth = shapes(kind, 300)
    for _, aff in ipairs({"rbf", "knn"}) do
      local m = cluster.SpectralClustering{k = 2, affinity = aff, gamma = kind == "rings" and 2 or 20, n_neighbors = 8,
                                           n_init = 2, seed = 1}:fit(X)
      lu.assertTrue(same_partition(m.labels, truth, 2), kind .. " " .. aff)
      lu.assertTrue(m.eigenvalues[1] < 1e-3, "a connected component's eigenvalue is 0")
    end
  end
  H.assert_error(function() cluster.SpectralClustering{k = 2}:predict(nc.zeros({2, 2})) end, "not supported")
  H.assert_error(function() cluster.SpectralClustering{k = 2, affinity = "cosine"} end, "'rbf' or 'knn'")
end

os.exit(lu.LuaUnit.run())

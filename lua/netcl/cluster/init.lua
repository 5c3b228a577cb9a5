-- netcl.cluster: clustering on the device (docs/cluster.md). Points are a float Tensor [N, D];
-- the steps are the op-table ops kmeans_assign (nearest centroid, tiled, never an N x K
-- matrix) and kmeans_update (per-cluster sums and counts, deterministic).
--
-- One file per concept: common.lua (checks, shared steps), kmeans.lua (KMeans, SphericalKMeans,
-- MiniBatchKMeans, BalancedKMeans), gmm.lua, dbscan.lua, lobpcg.lua (and the dense Jacobi
-- eigensolver), spectral.lua.
local M = {}

local kmeans = require "netcl.cluster.kmeans"
M.KMeans = kmeans.KMeans
M.SphericalKMeans = kmeans.SphericalKMeans
M.MiniBatchKMeans = kmeans.MiniBatchKMeans
M.BalancedKMeans = kmeans.BalancedKMeans
M.GaussianMixture = require("netcl.cluster.gmm").GaussianMixture
M.DBSCAN = require("netcl.cluster.dbscan").DBSCAN

local lobpcg = require "netcl.cluster.lobpcg"
M._eigh = lobpcg._eigh
M.lobpcg = lobpcg.lobpcg

M.SpectralClustering = require("netcl.cluster.spectral").SpectralClustering

return M

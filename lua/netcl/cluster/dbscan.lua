-- netcl.cluster.DBSCAN: density-based clustering, neighbours found in tiles (docs/cluster.md).
local nc = require "netcl"
local class = require "netcl.class"

local common = require "netcl.cluster.common"
local check_options = common.check_options
local int_opt = common.int_opt
local num_opt = common.num_opt
local check_points = common.check_points
local sqnorms = common.sqnorms
local db_tile = common.db_tile

local M = {}

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

return M

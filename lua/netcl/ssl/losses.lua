-- netcl.ssl.losses: the self-supervised losses as functions of embeddings (docs/ssl.md), each
-- composed of differentiable ops, so it takes Nodes (recorded on the active tape) or Tensors,
-- [N, D], float32 or float64. Definitions follow the papers and their reference code; "mean"
-- is over the batch.
local nc = require "netcl"
local ag = require "netcl.autograd"

local is_node, is_tensor = nc.is_node, nc.is_tensor

local M = {}

-- Options tables are strict: unknown keys are errors naming the accepted ones.
local function options(fname, opts, defaults, level)
  level = (level or 2) + 1
  if opts == nil then opts = {} end
  if type(opts) ~= "table" then error(string.format("%s: options must be a table, got %s", fname, type(opts)), level) end
  local keys = {}
  for k in pairs(defaults) do keys[#keys + 1] = k .. "=" end
  table.sort(keys)
  local out = {}
  for k, v in pairs(opts) do
    if defaults[k] == nil then
      error(string.format("%s: unknown option '%s' (accepted: {%s})", fname, tostring(k), table.concat(keys, ", ")), level)
    end
    if type(v) ~= type(defaults[k]) then
      error(string.format("%s: option '%s' must be a %s, got %s", fname, k, type(defaults[k]), type(v)), level)
    end
  end
  for k, d in pairs(defaults) do
    if opts[k] == nil then out[k] = d else out[k] = opts[k] end
  end
  return out
end
M._options = options

local function check_2d(fname, what, z, level)
  if not (is_node(z) or is_tensor(z)) then
    error(string.format("%s: %s must be a Node or a Tensor, got %s", fname, what, type(z)), level + 1)
  end
  if #z.shape ~= 2 then
    error(string.format("%s: %s must be [N, D], got [%s]", fname, what, table.concat(z.shape, ", ")), level + 1)
  end
  if z.dtype ~= "float32" and z.dtype ~= "float64" then
    error(string.format("%s: %s must be float32 or float64, got %s", fname, what, z.dtype), level + 1)
  end
end

local function check_pair(fname, a, b, na, nb)
  check_2d(fname, na, a, 3)
  check_2d(fname, nb, b, 3)
  if a.shape[1] ~= b.shape[1] or a.shape[2] ~= b.shape[2] then
    error(string.format("%s: %s [%s] and %s [%s] must have the same shape", fname, na, table.concat(a.shape, ", "),
      nb, table.concat(b.shape, ", ")), 3)
  end
end

local function value(x) return is_node(x) and x.value or x end
local function detach(x) return is_node(x) and x:detach() or x end

--- ssl.losses.normalize(z) -> z / max(||z||, 1e-12) row by row (torch's F.normalize, dim 2).
function M.normalize(z)
  return z / (z * z):sum(2, {keepdim = true}):clamp(1e-24):sqrt()
end

-- The D x D identity on z's device and dtype, and its complement.
local function eye(z, d)
  local e = nc.eye(d, d, {dtype = z.dtype, device = z.device})
  return e, 1 - e
end

--- ssl.losses.nt_xent(z1, z2, {temperature=0.5}): SimCLR's normalized-temperature cross entropy.
-- The 2N embeddings are L2-normalized; row i's positive is its other view, its negatives the
-- other 2N - 2 rows; the loss is the mean over all 2N rows (both directions).
function M.nt_xent(z1, z2, opts)
  local fname = "ssl.losses.nt_xent"
  check_pair(fname, z1, z2, "z1", "z2")
  local o = options(fname, opts, {temperature = 0.5})
  if not (o.temperature > 0) then error(fname .. ": temperature must be positive", 2) end
  local n = z1.shape[1]
  if n < 2 then error(fname .. ": needs at least 2 samples (the negatives are the other samples)", 2) end
  local z = M.normalize(ag.cat({z1, z2}, 1))
  local logits = z:matmul(z:transpose(1, 2)) / o.temperature
  -- a row's own similarity is out of its softmax: -1e9 underflows exp to 0 in float32 and float64
  local self_mask = nc.eye(2 * n, 2 * n, {device = z1.device}):gt(0)
  logits = logits:masked_fill(self_mask, -1e9)
  local idx = nc.arange(n, {dtype = "int64", device = z1.device})
  local targets = nc.cat({idx + n, idx}, 1) -- row i's other view: i + N, then i - N
  return ag.cross_entropy(logits, targets)
end
M.info_nce = M.nt_xent

--- ssl.losses.byol(p, z): mean of 2 - 2 cos(p, z) (BYOL); z is detached (the target branch).
function M.byol(p, z)
  check_pair("ssl.losses.byol", p, z, "p", "z")
  return (2 - 2 * ag.cosine_similarity(p, detach(z), {dim = 2})):mean()
end

--- ssl.losses.simsiam(p, z): mean of -cos(p, z) (SimSiam's D); z is detached (stop-gradient).
function M.simsiam(p, z)
  check_pair("ssl.losses.simsiam", p, z, "p", "z")
  return -ag.cosine_similarity(p, detach(z), {dim = 2}):mean()
end

-- z standardized per dimension over the batch: biased variance, eps inside the square root
-- (BatchNorm1d without affine, in training mode).
local function standardize(z, eps)
  local c = z - z:mean(1, {keepdim = true})
  return c / ((c * c):mean(1, {keepdim = true}) + eps):sqrt()
end

--- ssl.losses.barlow_twins(z1, z2, {lambda=0.0051}): C = z1n^T z2n / N over the standardized
-- embeddings; sum_i (1 - C_ii)^2 + lambda sum_{i != j} C_ij^2.
function M.barlow_twins(z1, z2, opts)
  local fname = "ssl.losses.barlow_twins"
  check_pair(fname, z1, z2, "z1", "z2")
  local o = options(fname, opts, {lambda = 0.0051})
  local n, d = z1.shape[1], z1.shape[2]
  if n < 2 then error(fname .. ": needs at least 2 samples (embeddings are standardized over the batch)", 2) end
  local c = standardize(z1, 1e-5):transpose(1, 2):matmul(standardize(z2, 1e-5)) / n
  local on, off = eye(z1, d)
  local diag = (c - 1) * on
  return (diag * diag):sum() + o.lambda * (c * c * off):sum()
end

--- ssl.losses.vicreg(z1, z2, {sim=25, var=25, cov=1, eps=1e-4}): as VICReg's reference code:
-- sim * mse(z1, z2) + var * (mean relu(1 - std(z1)) + mean relu(1 - std(z2))) / 2
-- + cov * (sum of squared off-diagonal covariances of z1, and of z2) / D, with the unbiased
-- variance and covariance and std = sqrt(var + eps).
function M.vicreg(z1, z2, opts)
  local fname = "ssl.losses.vicreg"
  check_pair(fname, z1, z2, "z1", "z2")
  local o = options(fname, opts, {sim = 25, var = 25, cov = 1, eps = 1e-4})
  local n, d = z1.shape[1], z1.shape[2]
  if n < 2 then error(fname .. ": needs at least 2 samples (variance and covariance over the batch)", 2) end
  local diff = z1 - z2
  local repr = (diff * diff):mean()
  local _, off = eye(z1, d)
  local std_loss, cov_loss = 0, 0
  for _, z in ipairs({z1, z2}) do
    local c = z - z:mean(1, {keepdim = true})
    local std = ((c * c):sum(1) / (n - 1) + o.eps):sqrt()
    std_loss = std_loss + ag.relu(1 - std):mean() / 2
    local cov = c:transpose(1, 2):matmul(c) / (n - 1)
    cov_loss = cov_loss + (cov * cov * off):sum() / d
  end
  return o.sim * repr + o.var * std_loss + o.cov * cov_loss
end

--- ssl.losses.dino(student, teacher, center, {student_temp=0.1, teacher_temp=0.04}): the
-- cross entropy between the teacher's centered, sharpened distribution
-- softmax((teacher - center) / teacher_temp) (detached) and the student's
-- log_softmax(student / student_temp), summed over D, mean over N. center: [D] or [1, D].
function M.dino(student, teacher, center, opts)
  local fname = "ssl.losses.dino"
  check_pair(fname, student, teacher, "student", "teacher")
  local o = options(fname, opts, {student_temp = 0.1, teacher_temp = 0.04})
  if not (o.student_temp > 0 and o.teacher_temp > 0) then error(fname .. ": temperatures must be positive", 2) end
  center = value(center)
  if not is_tensor(center) or center:numel() ~= student.shape[2] then
    error(string.format("%s: center must be a Tensor of %d elements", fname, student.shape[2]), 2)
  end
  local t = ag.no_grad(function()
    return nc.softmax((value(teacher) - center:reshape({1, -1})) / o.teacher_temp, 2)
  end)
  return -(t * ag.log_softmax(student / o.student_temp, 2)):sum(2):mean()
end

--- ssl.losses.sinkhorn(scores, {epsilon=0.05, iters=3}) -> Tensor [N, K]: SwAV's equal-partition
-- codes from prototype scores [N, K] (no gradient): Q = exp(scores / epsilon), normalized to sum
-- 1, then iters rounds of making each prototype's row sum 1/K and each sample's column sum 1/N;
-- the result is scaled so each sample's codes sum to 1. (The global maximum is subtracted before
-- exp, which the normalization cancels.)
function M.sinkhorn(scores, opts)
  local fname = "ssl.losses.sinkhorn"
  check_2d(fname, "scores", scores, 2)
  local o = options(fname, opts, {epsilon = 0.05, iters = 3})
  return ag.no_grad(function()
    local s = value(scores)
    local n, k = s.shape[1], s.shape[2]
    local q = ((s - s:max()) / o.epsilon):exp():transpose(1, 2)
    q = q / q:sum()
    for _ = 1, o.iters do
      q = q / q:sum(2, {keepdim = true}) / k
      q = q / q:sum(1, {keepdim = true}) / n
    end
    return (q * n):transpose(1, 2):contiguous()
  end)
end

--- ssl.losses.swapped_prediction(scores1, scores2, q1, q2, {temperature=0.1}): SwAV's loss for
-- given codes: -(mean sum q1 log_softmax(scores2 / t) + mean sum q2 log_softmax(scores1 / t)) / 2.
function M.swapped_prediction(scores1, scores2, q1, q2, opts)
  local fname = "ssl.losses.swapped_prediction"
  check_pair(fname, scores1, scores2, "scores1", "scores2")
  local o = options(fname, opts, {temperature = 0.1})
  q1, q2 = value(q1), value(q2)
  local function ce(q, s) return (q * ag.log_softmax(s / o.temperature, 2)):sum(2):mean() end
  return -(ce(q1, scores2) + ce(q2, scores1)) / 2
end

--- ssl.losses.swav(scores1, scores2, {temperature=0.1, sinkhorn_iters=3, epsilon=0.05}): each
-- view's codes from Sinkhorn-Knopp on its own scores (no gradient), predicted from the other
-- view's scores (swapped_prediction).
function M.swav(scores1, scores2, opts)
  local fname = "ssl.losses.swav"
  check_pair(fname, scores1, scores2, "scores1", "scores2")
  local o = options(fname, opts, {temperature = 0.1, sinkhorn_iters = 3, epsilon = 0.05})
  local sk = {epsilon = o.epsilon, iters = o.sinkhorn_iters}
  local q1, q2 = M.sinkhorn(scores1, sk), M.sinkhorn(scores2, sk)
  return M.swapped_prediction(scores1, scores2, q1, q2, {temperature = o.temperature})
end

return M

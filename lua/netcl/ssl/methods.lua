-- netcl.ssl's eight methods (SimCLR, MoCo v2, BYOL, SimSiam, Barlow Twins, VICReg, SwAV, DINO) as
-- nn.Modules that wrap an encoder with their heads and give method:loss(view1, view2); their
-- base class ssl.Method (docs/ssl.md).
local nc = require "netcl"
local ag = require "netcl.autograd"
local nn = require "netcl.nn"
local class = require "netcl.class"
local losses = require "netcl.ssl.losses"
local common = require "netcl.ssl.common"
local ema = require "netcl.ssl.ema"

local value, read_opts = common.value, common.read_opts

local M = {}

-- ---- heads ---------------------------------------------------------------------------------------
-- The encoder's output size: feature_dim= or the encoder's own feature_dim / out_features field.
local function feature_dim(fname, o, level)
  local d = o.feature_dim or class.field(o.encoder, "feature_dim") or class.field(o.encoder, "out_features")
  if math.type(d) ~= "integer" or d < 1 then
    error(fname .. ": the encoder's output size is unknown: give feature_dim= (or set encoder.feature_dim)", level + 1)
  end
  return d
end

-- Where the encoder's parameters live: heads are made there, in that dtype.
local function placement(encoder)
  local ps = encoder:parameters()
  if #ps == 0 then return {} end
  return {device = ps[1].device, dtype = ps[1].dtype}
end

-- Linear layers of sizes dims[1] -> dims[2] -> ... with BatchNorm1d and ReLU between them (and
-- after the last one when bn_last).
local function mlp(dims, where, bn_last)
  local layers = {}
  for i = 1, #dims - 1 do
    layers[#layers + 1] = nn.Linear(dims[i], dims[i + 1], where)
    if i < #dims - 1 then
      layers[#layers + 1] = nn.BatchNorm1d(dims[i + 1], where)
      layers[#layers + 1] = nn.ReLU()
    elseif bn_last then
      layers[#layers + 1] = nn.BatchNorm1d(dims[i + 1], {device = where.device, dtype = where.dtype, affine = false})
    end
  end
  return nn.Sequential(table.unpack(layers))
end

-- ---- the methods ------------------------------------------------------------------------------------------
local Method = nn.Module:extend("ssl.Method")
M.Method = Method

--- method:parameters(): the parameters the optimizer trains (the online branch; target and
-- teacher networks follow by momentum and are left out).
function Method:parameters()
  local out, seen = {}, {}
  for _, name in ipairs(self.trained) do
    for _, p in ipairs(nn.Module.parameters(self[name])) do
      if not seen[p] then seen[p] = true; out[#out + 1] = p end
    end
  end
  return out
end

--- method:embed(x) -> Tensor [N, d]: the embeddings the loss compares (projector outputs), with
-- no gradient; for the collapse check (per-dimension std of the L2-normalized embeddings).
function Method:embed(x)
  return ag.no_grad(function() return value(self:project(x)) end)
end

function Method:project(x) return self.projector(self.encoder(x)) end

--- method:after_step(): what follows each optimizer step (momentum updates, queues, centers).
function Method:after_step() end

-- The momentum branch: deep copies of the online modules named in `names`, their parameters
-- and the online ones each in one flat buffer, so update_target is one kernel launch.
local function momentum_branch(self, names)
  local online, target = {}, {}
  for i, name in ipairs(names) do
    online[i] = self[name]
    local copy = self[name]:deepcopy()
    self["target_" .. name] = copy
    target[i] = copy
  end
  self._online_flat = ema.flatten_parameters(online)
  self._target_flat = ema.flatten_parameters(target)
end

--- method:update_target(): target = momentum target + (1 - momentum) online, over all the
-- target's parameters in one launch.
function Method:update_target()
  if not self._target_flat then error(getmetatable(self).__name .. ".update_target: this method has no target network", 2) end
  ag.no_grad(function() ema.ema_update(self._target_flat, self._online_flat, self.momentum) end)
end

local function target_project(self, x)
  return ag.no_grad(function() return value(self.target_projector(self.target_encoder(x))) end)
end

-- SimCLR ----------------------------------------------------------------------------------------------------
local SimCLR = Method:extend("ssl.SimCLR")
M.SimCLR = SimCLR

--- ssl.SimCLR{encoder=, proj_dim=128, temperature=0.5, hidden=, feature_dim=}
function SimCLR:init(opts)
  local o = read_opts("ssl.SimCLR", opts, {encoder = {"module"}, proj_dim = {"integer", 128},
    temperature = {"positive", 0.5}, hidden = {"integer", optional = true},
    feature_dim = {"integer", optional = true}}, 3)
  local f = feature_dim("ssl.SimCLR", o, 3)
  self.encoder = o.encoder
  self.projector = mlp({f, o.hidden or f, o.proj_dim}, placement(o.encoder))
  self.temperature = o.temperature
  self.trained = {"encoder", "projector"}
end

function SimCLR:loss(v1, v2)
  return losses.nt_xent(self:project(v1), self:project(v2), {temperature = self.temperature})
end

-- MoCo v2 ---------------------------------------------------------------------------------------------------
local MoCo = Method:extend("ssl.MoCo")
M.MoCo = MoCo

--- ssl.MoCo{encoder=, queue_size=4096, momentum=0.99, temperature=0.2, proj_dim=128, hidden=,
-- feature_dim=}: MoCo v2 (MLP head), symmetrized: each view's query against the other view's
-- key (from the momentum encoder) and the queue of past keys.
function MoCo:init(opts)
  local o = read_opts("ssl.MoCo", opts, {encoder = {"module"}, queue_size = {"integer", 4096},
    momentum = {"unit", 0.99}, temperature = {"positive", 0.2}, proj_dim = {"integer", 128},
    hidden = {"integer", optional = true}, feature_dim = {"integer", optional = true}}, 3)
  local f = feature_dim("ssl.MoCo", o, 3)
  local where = placement(o.encoder)
  self.encoder = o.encoder
  self.projector = mlp({f, o.hidden or f, o.proj_dim}, where)
  self.momentum, self.temperature = o.momentum, o.temperature
  self.trained = {"encoder", "projector"}
  momentum_branch(self, {"encoder", "projector"})
  -- the queue starts as random unit vectors, as in the reference code
  self:register_buffer("queue", losses.normalize(nc.randn({o.queue_size, o.proj_dim}, where)))
  self:register_buffer("queue_ptr", nc.tensor(0, {dtype = "int64", device = where.device}))
end

function MoCo:loss(v1, v2)
  local q1, q2 = losses.normalize(self:project(v1)), losses.normalize(self:project(v2))
  local k1, k2 = losses.normalize(target_project(self, v1)), losses.normalize(target_project(self, v2))
  local function contrast(q, k)
    local pos = (q * k):sum(2, {keepdim = true})
    local neg = q:matmul(self.queue:transpose(1, 2))
    local logits = ag.cat({pos, neg}, 2) / self.temperature
    return ag.cross_entropy(logits, nc.zeros({q.shape[1]}, {dtype = "int64", device = q.device}))
  end
  -- the keys join the queue after the step (the queue is a saved input of this loss's backward)
  self._pending = nc.cat({k1, k2}, 1)
  return (contrast(q1, k2) + contrast(q2, k1)) / 2
end

function MoCo:after_step()
  self:update_target()
  local k = self._pending
  if not k then return end
  self._pending = nil
  local size, n = self.queue.shape[1], k.shape[1]
  if n > size then k, n = k:narrow(1, n - size + 1, size), size end
  local ptr = self.queue_ptr:item()
  local first = math.min(n, size - ptr)
  self.queue:narrow(1, ptr + 1, first):copy_(k:narrow(1, 1, first))
  if first < n then self.queue:narrow(1, 1, n - first):copy_(k:narrow(1, first + 1, n - first)) end
  self.queue_ptr:fill_((ptr + n) % size)
end

-- BYOL ------------------------------------------------------------------------------------------------------
local BYOL = Method:extend("ssl.BYOL")
M.BYOL = BYOL

--- ssl.BYOL{encoder=, momentum=0.99, proj_dim=128, hidden=, feature_dim=}: online encoder,
-- projector and predictor; the target (encoder and projector) follows by EMA.
function BYOL:init(opts)
  local o = read_opts("ssl.BYOL", opts, {encoder = {"module"}, momentum = {"unit", 0.99},
    proj_dim = {"integer", 128}, hidden = {"integer", optional = true}, feature_dim = {"integer", optional = true}}, 3)
  local f = feature_dim("ssl.BYOL", o, 3)
  local where, h = placement(o.encoder), o.hidden or 2 * f
  self.encoder = o.encoder
  self.projector = mlp({f, h, o.proj_dim}, where)
  self.predictor = mlp({o.proj_dim, h, o.proj_dim}, where)
  self.momentum = o.momentum
  self.trained = {"encoder", "projector", "predictor"}
  momentum_branch(self, {"encoder", "projector"})
end

function BYOL:loss(v1, v2)
  local p1, p2 = self.predictor(self:project(v1)), self.predictor(self:project(v2))
  local t1, t2 = target_project(self, v1), target_project(self, v2)
  return (losses.byol(p1, t2) + losses.byol(p2, t1)) / 2
end

function BYOL:after_step() self:update_target() end

-- SimSiam ---------------------------------------------------------------------------------------------------
local SimSiam = Method:extend("ssl.SimSiam")
M.SimSiam = SimSiam

--- ssl.SimSiam{encoder=, proj_dim=128, pred_hidden=, feature_dim=}: projector (BN on its
-- output) and predictor; the stop-gradient is in ssl.losses.simsiam.
function SimSiam:init(opts)
  local o = read_opts("ssl.SimSiam", opts, {encoder = {"module"}, proj_dim = {"integer", 128},
    pred_hidden = {"integer", optional = true}, feature_dim = {"integer", optional = true}}, 3)
  local f = feature_dim("ssl.SimSiam", o, 3)
  local where = placement(o.encoder)
  self.encoder = o.encoder
  self.projector = mlp({f, f, o.proj_dim}, where, true)
  self.predictor = mlp({o.proj_dim, o.pred_hidden or math.max(o.proj_dim // 4, 8), o.proj_dim}, where)
  self.trained = {"encoder", "projector", "predictor"}
end

function SimSiam:loss(v1, v2)
  local z1, z2 = self:project(v1), self:project(v2)
  return (losses.simsiam(self.predictor(z1), z2) + losses.simsiam(self.predictor(z2), z1)) / 2
end

-- Barlow Twins ----------------------------------------------------------------------------------------------
local BarlowTwins = Method:extend("ssl.BarlowTwins")
M.BarlowTwins = BarlowTwins

--- ssl.BarlowTwins{encoder=, lambda=0.0051, proj_dim=128, hidden=, feature_dim=}
function BarlowTwins:init(opts)
  local o = read_opts("ssl.BarlowTwins", opts, {encoder = {"module"}, lambda = {"number", 0.0051},
    proj_dim = {"integer", 128}, hidden = {"integer", optional = true}, feature_dim = {"integer", optional = true}}, 3)
  local f = feature_dim("ssl.BarlowTwins", o, 3)
  self.encoder = o.encoder
  self.projector = mlp({f, o.hidden or o.proj_dim, o.proj_dim}, placement(o.encoder))
  self.lambda = o.lambda
  self.trained = {"encoder", "projector"}
end

function BarlowTwins:loss(v1, v2)
  return losses.barlow_twins(self:project(v1), self:project(v2), {lambda = self.lambda})
end

-- VICReg ----------------------------------------------------------------------------------------------------
local VICReg = Method:extend("ssl.VICReg")
M.VICReg = VICReg

--- ssl.VICReg{encoder=, sim=25, var=25, cov=1, proj_dim=128, hidden=, feature_dim=}
function VICReg:init(opts)
  local o = read_opts("ssl.VICReg", opts, {encoder = {"module"}, sim = {"number", 25}, var = {"number", 25},
    cov = {"number", 1}, proj_dim = {"integer", 128}, hidden = {"integer", optional = true},
    feature_dim = {"integer", optional = true}}, 3)
  local f = feature_dim("ssl.VICReg", o, 3)
  self.encoder = o.encoder
  self.projector = mlp({f, o.hidden or o.proj_dim, o.proj_dim}, placement(o.encoder))
  self.weights = {sim = o.sim, var = o.var, cov = o.cov}
  self.trained = {"encoder", "projector"}
end

function VICReg:loss(v1, v2)
  local w = self.weights
  return losses.vicreg(self:project(v1), self:project(v2), {sim = w.sim, var = w.var, cov = w.cov})
end

-- SwAV ------------------------------------------------------------------------------------------------------
local SwAV = Method:extend("ssl.SwAV")
M.SwAV = SwAV

--- ssl.SwAV{encoder=, n_prototypes=100, temperature=0.1, epsilon=0.05, sinkhorn_iters=3,
-- proj_dim=128, hidden=, feature_dim=}: L2-normalized projections scored against L2-normalized
-- prototypes (a bias-free Linear, renormalized after every step); codes by Sinkhorn-Knopp.
function SwAV:init(opts)
  local o = read_opts("ssl.SwAV", opts, {encoder = {"module"}, n_prototypes = {"integer", 100},
    temperature = {"positive", 0.1}, epsilon = {"positive", 0.05}, sinkhorn_iters = {"integer", 3},
    proj_dim = {"integer", 128}, hidden = {"integer", optional = true}, feature_dim = {"integer", optional = true}}, 3)
  local f = feature_dim("ssl.SwAV", o, 3)
  local where = placement(o.encoder)
  self.encoder = o.encoder
  self.projector = mlp({f, o.hidden or f, o.proj_dim}, where)
  self.prototypes = nn.Linear(o.proj_dim, o.n_prototypes, {bias = false, device = where.device, dtype = where.dtype})
  self.opts = {temperature = o.temperature, epsilon = o.epsilon, sinkhorn_iters = o.sinkhorn_iters}
  self.trained = {"encoder", "projector", "prototypes"}
  self:after_step()
end

function SwAV:project(x) return losses.normalize(self.projector(self.encoder(x))) end

function SwAV:loss(v1, v2)
  return losses.swav(self.prototypes(self:project(v1)), self.prototypes(self:project(v2)), self.opts)
end

function SwAV:after_step()
  local w = self.prototypes.weight
  ag.no_grad(function() w.value:copy_(losses.normalize(w.value)) end)
end

-- DINO ------------------------------------------------------------------------------------------------------
local DINO = Method:extend("ssl.DINO")
M.DINO = DINO

--- ssl.DINO{encoder=, out_dim=256, teacher_temp=0.04, student_temp=0.1, center_momentum=0.9,
-- momentum=0.99, hidden=, bottleneck=64, feature_dim=}: student = encoder and head (MLP,
-- L2-normalized bottleneck, bias-free Linear to out_dim); the teacher is its EMA; the teacher's
-- outputs are centered (center: an EMA of their batch means) and sharpened.
function DINO:init(opts)
  local o = read_opts("ssl.DINO", opts, {encoder = {"module"}, out_dim = {"integer", 256},
    teacher_temp = {"positive", 0.04}, student_temp = {"positive", 0.1}, center_momentum = {"unit", 0.9},
    momentum = {"unit", 0.99}, hidden = {"integer", optional = true}, bottleneck = {"integer", 64},
    feature_dim = {"integer", optional = true}}, 3)
  local f = feature_dim("ssl.DINO", o, 3)
  local where = placement(o.encoder)
  self.encoder = o.encoder
  self.projector = mlp({f, o.hidden or 2 * f, o.bottleneck}, where)
  self.head = nn.Linear(o.bottleneck, o.out_dim, {bias = false, device = where.device, dtype = where.dtype})
  self.momentum, self.center_momentum = o.momentum, o.center_momentum
  self.temps = {teacher_temp = o.teacher_temp, student_temp = o.student_temp}
  self.trained = {"encoder", "projector", "head"}
  momentum_branch(self, {"encoder", "projector", "head"})
  self:register_buffer("center", nc.zeros({1, o.out_dim}, where))
end

function DINO:project(x) return losses.normalize(self.projector(self.encoder(x))) end

local function dino_out(self, x) return self.head(self:project(x)) end

function DINO:loss(v1, v2)
  local s1, s2 = dino_out(self, v1), dino_out(self, v2)
  local t1, t2 = ag.no_grad(function()
    local function teacher(x)
      return value(self.target_head(losses.normalize(self.target_projector(self.target_encoder(x)))))
    end
    return teacher(v1), teacher(v2)
  end)
  self._pending = nc.cat({t1, t2}, 1):mean(1, {keepdim = true})
  return (losses.dino(s1, t2, self.center, self.temps) + losses.dino(s2, t1, self.center, self.temps)) / 2
end

function DINO:after_step()
  self:update_target()
  if self._pending then
    ag.no_grad(function() ema.ema_update(self.center, self._pending, self.center_momentum) end)
    self._pending = nil
  end
end


return M

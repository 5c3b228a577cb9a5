-- netcl.ssl: self-supervised pretraining (docs/ssl.md). Eight methods (SimCLR, MoCo v2, BYOL,
-- SimSiam, Barlow Twins, VICReg, SwAV, DINO) as nn.Modules that wrap an encoder with their heads
-- and give method:loss(view1, view2); ssl.Trainer runs the pretraining loop on two random views
-- of each batch; ssl.linear_probe measures an encoder by a linear classifier on its frozen
-- features. The losses' functional forms are ssl.losses (netcl/ssl/losses.lua).
local nc = require "netcl"
local ag = require "netcl.autograd"
local nn = require "netcl.nn"
local optim = require "netcl.optim"
local nio = require "netcl.io"
local progress = require "netcl.progress"
local class = require "netcl.class"
local losses = require "netcl.ssl.losses"
local views = require "netcl.ssl.views"

local is_node = nc.is_node

local M = {losses = losses, views = views}

local function value(x) return is_node(x) and x.value or x end

-- ---- options -------------------------------------------------------------------------------------
-- spec: key -> {kind, default} with kind "number", "integer", "positive", "unit" ([0, 1]),
-- "boolean", "module", "any"; default nil = required.
local function read_opts(fname, opts, spec, level)
  level = level + 1
  if type(opts) ~= "table" then error(string.format("%s: expected an options table, got %s", fname, type(opts)), level) end
  local keys = {}
  for k in pairs(spec) do keys[#keys + 1] = k .. "=" end
  table.sort(keys)
  for k in pairs(opts) do
    if spec[k] == nil then
      error(string.format("%s: unknown option '%s' (accepted: {%s})", fname, tostring(k), table.concat(keys, ", ")), level)
    end
  end
  local out = {}
  for k, s in pairs(spec) do
    local v = opts[k]
    if v == nil then v = s[2] end
    local kind = s[1]
    if v == nil and not s.optional then error(string.format("%s: option '%s' is required", fname, k), level) end
    if v ~= nil then
      local ok = true
      if kind == "number" then ok = type(v) == "number"
      elseif kind == "positive" then ok = type(v) == "number" and v > 0
      elseif kind == "integer" then ok = math.type(v) == "integer" and v > 0
      elseif kind == "unit" then ok = type(v) == "number" and v >= 0 and v <= 1
      elseif kind == "boolean" then ok = type(v) == "boolean"
      elseif kind == "module" then ok = class.is_instance(v, nn.Module)
      elseif kind == "string" then ok = type(v) == "string" end
      if not ok then
        local want = ({number = "a number", positive = "a positive number", integer = "a positive integer",
                       unit = "a number in [0, 1]", boolean = "a boolean", module = "an nn.Module",
                       string = "a string"})[kind] or kind
        error(string.format("%s: option '%s' must be %s, got %s", fname, k, want, tostring(v)), level)
      end
    end
    out[k] = v
  end
  return out
end

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

-- ---- flat parameters and the momentum update -----------------------------------------------------------
--- ssl.flatten_parameters(modules) -> flat Tensor, params: every parameter of the modules (each
-- once, in order) becomes a view of one new contiguous buffer holding its values, so one
-- ema_update launch covers them all. The Nodes keep their identity; build optimizers after this
-- (and move modules to their device before: m:to() replaces the views).
function M.flatten_parameters(modules)
  local params, seen = {}, {}
  for _, m in ipairs(modules) do
    for _, p in ipairs(m:parameters()) do
      if not seen[p] then seen[p] = true; params[#params + 1] = p end
    end
  end
  if #params == 0 then error("ssl.flatten_parameters: the modules have no parameters", 2) end
  local total = 0
  for _, p in ipairs(params) do
    if p.dtype ~= params[1].dtype or p.device ~= params[1].device then
      error("ssl.flatten_parameters: parameters differ in dtype or device", 2)
    end
    total = total + p.value:numel()
  end
  local flat = nc.zeros({total}, {dtype = params[1].dtype, device = params[1].device})
  local off = 0
  ag.no_grad(function()
    for _, p in ipairs(params) do
      local n = p.value:numel()
      if n > 0 then
        local v = flat:narrow(1, off + 1, n):view(p.shape)
        v:copy_(p.value)
        p.value = v
      end
      off = off + n
    end
  end)
  return flat, params
end

--- ssl.ema_update(target, online, momentum): target = momentum target + (1 - momentum) online,
-- in place, one fused kernel launch (nc.nn_ops.ema_update); Tensors or Nodes of one shape.
function M.ema_update(target, online, momentum)
  return nc.nn_ops.ema_update(value(target), value(online), {momentum = momentum})
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
  self._online_flat = M.flatten_parameters(online)
  self._target_flat = M.flatten_parameters(target)
end

--- method:update_target(): target = momentum target + (1 - momentum) online, over all the
-- target's parameters in one launch.
function Method:update_target()
  if not self._target_flat then error(getmetatable(self).__name .. ".update_target: this method has no target network", 2) end
  ag.no_grad(function() M.ema_update(self._target_flat, self._online_flat, self.momentum) end)
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
    ag.no_grad(function() M.ema_update(self.center, self._pending, self.center_momentum) end)
    self._pending = nil
  end
end

-- ---- the trainer ------------------------------------------------------------------------------------------
local Trainer = class("ssl.Trainer")
M.Trainer = Trainer

--- ssl.Trainer{method=, loader=, optimizer=, augment=ssl.views.default(), epochs=,
-- checkpoint=, resume=false, seed=1, scheduler=, progress=true, stop_after=, log=}:
-- trainer:fit() -> history {loss = {per epoch}, seconds = {...}}. Each batch (the loader's first
-- value; labels are ignored) gives two views, augment(x) twice; the loss is recorded, the
-- optimizer steps (and the scheduler, per step), then method:after_step() (momentum updates,
-- queue, center). Each epoch reseeds the generator from (seed, epoch) and sets the loader's
-- epoch, so with `checkpoint` (written after every epoch: method, optimizer, scheduler,
-- history) a run resumed with resume=true continues exactly as an uninterrupted one.
function Trainer:init(opts)
  local fname = "ssl.Trainer"
  local o = read_opts(fname, opts, {method = {"module"}, loader = {"any"}, optimizer = {"any"},
    augment = {"any", optional = true}, epochs = {"integer"}, checkpoint = {"string", optional = true},
    resume = {"boolean", false}, seed = {"integer", 1}, scheduler = {"any", optional = true},
    progress = {"boolean", true}, stop_after = {"integer", optional = true}, log = {"any", optional = true}}, 3)
  if not class.is_instance(o.method, Method) then error(fname .. ": method must be an ssl method (ssl.SimCLR, ...)", 3) end
  if not class.field(o.loader, "iter") then error(fname .. ": loader must have iter() (a data.DataLoader)", 3) end
  if not class.field(o.optimizer, "step") then error(fname .. ": optimizer must be an optimizer (optim.Adam, ...)", 3) end
  local aug = o.augment or views.default()
  if type(aug) ~= "function" and not (getmetatable(aug) or {}).__call then
    error(fname .. ": augment must be callable (a view maker: augment(x) -> a view of x)", 3)
  end
  if o.resume and not o.checkpoint then error(fname .. ": resume=true needs checkpoint=", 3) end
  for k, v in pairs(o) do self[k] = v end
  self.augment = aug
  self.history = {loss = {}, seconds = {}}
end

local function file_exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

function Trainer:fit()
  local method, opt, loader = self.method, self.optimizer, self.loader
  local done = 0
  if self.resume and file_exists(self.checkpoint) then
    local extra = nio.load_model(method, self.checkpoint, {optimizer = opt})
    if type(extra) ~= "table" or type(extra.history) ~= "table" then
      error("ssl.Trainer.fit: " .. self.checkpoint .. " was not written by ssl.Trainer", 2)
    end
    self.history = extra.history
    done = #self.history.loss
    if self.scheduler and extra.scheduler then self.scheduler:load_state_dict(extra.scheduler) end
    if self.log then self.log(string.format("resumed from %s after epoch %d", self.checkpoint, done)) end
  end
  local last = math.min(self.epochs, self.stop_after or self.epochs)
  method:train()
  for epoch = done + 1, last do
    nc.manual_seed(self.seed * 1000 + epoch)
    if class.field(loader, "epoch") ~= nil then loader.epoch = epoch - 1 end
    local start = nc.clock()
    local total = class.field(loader, "len") and loader:len() or nil
    local bar <close> = progress.bar{total = total, desc = string.format("epoch %d/%d", epoch, self.epochs),
      out = not self.progress and {write = function() end, flush = function() end} or nil}
    local sum, window, steps, shown = nil, nil, 0, nil
    for x in loader:iter() do
      local v1, v2 = self.augment(x), self.augment(x)
      local tape = ag.Tape()
      local loss = tape:record(function() return method:loss(v1, v2) end)
      opt:zero_grad()
      tape:backward(loss)
      opt:step()
      if self.scheduler then self.scheduler:step() end
      method:after_step()
      local l = loss.value
      sum = sum and sum + l or l
      window = window and window + l or l
      steps = steps + 1
      if steps % 10 == 0 then shown = window:item() / 10; window = nil end
      bar:update(1, shown and {loss = string.format("%.4f", shown)} or nil)
    end
    bar:close()
    if steps == 0 then error("ssl.Trainer.fit: the loader gave no batches", 2) end
    local mean = sum:item() / steps
    if mean ~= mean then error(string.format("ssl.Trainer.fit: the loss is nan in epoch %d", epoch), 2) end
    self.history.loss[epoch] = mean
    self.history.seconds[epoch] = nc.clock() - start
    if self.log then
      self.log(string.format("epoch %d: loss %.4f (%.1fs)", epoch, mean, self.history.seconds[epoch]))
    end
    if self.checkpoint then
      nio.save_model(method, self.checkpoint, {optimizer = opt, extra = {history = self.history, epoch = epoch,
        scheduler = self.scheduler and self.scheduler:state_dict() or nil}})
    end
  end
  return self.history
end

-- ---- evaluation ----------------------------------------------------------------------------------------------
--- ssl.features(encoder, loader) -> features [M, F], labels [M]: the encoder's outputs in eval
-- mode without gradients, over the loader's (x, y) batches.
function M.features(encoder, loader)
  local was = encoder.training
  encoder:eval()
  local fs, ys = {}, {}
  ag.no_grad(function()
    for x, y in loader:iter() do
      fs[#fs + 1] = value(encoder(x))
      ys[#ys + 1] = y
    end
  end)
  encoder:train(was)
  if #fs == 0 then error("ssl.features: the loader gave no batches", 2) end
  local f = #fs == 1 and fs[1] or nc.cat(fs, 1)
  return f:reshape({f.shape[1], -1}), #ys == 1 and ys[1] or nc.cat(ys, 1)
end

--- ssl.embedding_std(z) -> the mean over dimensions of the per-dimension std (over the batch)
-- of the L2-normalized rows of z [N, d]; about 1/sqrt(d) for embeddings spread over the sphere,
-- 0 for collapsed ones (SimSiam's measure).
function M.embedding_std(z)
  z = losses.normalize(value(z))
  return z:std(1, {unbiased = false}):mean():item()
end

--- ssl.linear_probe(encoder, train_loader, test_loader, {epochs=30, lr=0.01, batch_size=256,
-- weight_decay=0, seed=1}) -> test accuracy, {train_accuracy=, classes=, features=}: a linear
-- classifier (nn.Linear, Adam) on the frozen encoder's features, standardized with the training
-- features' per-dimension mean and std. The loaders give (x, labels), int64 classes from 0.
function M.linear_probe(encoder, train_loader, test_loader, opts)
  local fname = "ssl.linear_probe"
  if not class.is_instance(encoder, nn.Module) and type(encoder) ~= "function" then
    error(fname .. ": encoder must be an nn.Module", 2)
  end
  local o = read_opts(fname, opts or {}, {epochs = {"integer", 30}, lr = {"positive", 0.01},
    batch_size = {"integer", 256}, weight_decay = {"number", 0}, seed = {"integer", 1}}, 2)
  local xtr, ytr = M.features(encoder, train_loader)
  local xte, yte = M.features(encoder, test_loader)
  local mean = xtr:mean(1, {keepdim = true})
  local std = xtr:std(1, {keepdim = true, unbiased = false}) + 1e-6
  xtr, xte = (xtr - mean) / std, (xte - mean) / std
  local classes = math.max(ytr:max():item(), yte:max():item()) + 1
  nc.manual_seed(o.seed)
  local clf = nn.Linear(xtr.shape[2], classes, {device = xtr.device, dtype = xtr.dtype})
  local adam = optim.Adam(clf:parameters(), {lr = o.lr, weight_decay = o.weight_decay})
  local sched = optim.CosineAnnealingLR(adam, {T_max = o.epochs})
  local n = xtr.shape[1]
  for _ = 1, o.epochs do
    local perm = nc.randperm(n, {device = xtr.device})
    for s = 1, n, o.batch_size do
      local idx = perm:narrow(1, s, math.min(o.batch_size, n - s + 1))
      local tape = ag.Tape()
      local loss = tape:record(function()
        return ag.cross_entropy(clf(xtr:index_select(1, idx)), ytr:index_select(1, idx))
      end)
      adam:zero_grad()
      tape:backward(loss)
      adam:step()
    end
    sched:step()
  end
  local function accuracy(x, y)
    return ag.no_grad(function() return value(clf(x)):argmax(2):eq(y):sum():item() / y.shape[1] end)
  end
  return accuracy(xte, yte), {train_accuracy = accuracy(xtr, ytr), classes = classes, features = xtr.shape[2]}
end

return M

-- Normalization layers: BatchNorm1d, BatchNorm2d (batch statistics in training, running
-- statistics in evaluation) and LayerNorm. Buffer names and shapes are PyTorch's
-- (running_mean, running_var, num_batches_tracked), so checkpoints move between the two.
local nc = require "netcl"
local ag = require "netcl.autograd"
local Module = require("netcl.nn.module").Module
local U = require "netcl.nn.util"

local M = {}

local BatchNorm = Module:extend("BatchNorm")

-- BatchNorm1d(num_features, opts), BatchNorm2d(num_features, opts); opts: {eps=1e-5,
-- momentum=0.1, affine=true, track_running_stats=true, device=, dtype=}. momentum=false gives
-- PyTorch's momentum=None: a cumulative average over the batches seen.
function BatchNorm:init(num_features, opts)
  local fname = "nn." .. getmetatable(self).__name
  opts = U.options(fname, opts, {eps = true, momentum = true, affine = true, track_running_stats = true,
                                 device = true, dtype = true})
  self.num_features = U.int(fname, "num_features", num_features, 1)
  self.eps = U.number(fname, "eps", opts.eps or 1e-5, 0)
  if opts.momentum == false then
    self.momentum = false
  else
    self.momentum = U.number(fname, "momentum", opts.momentum or 0.1, 0, 1)
  end
  self.affine = U.bool(fname, "affine", opts.affine, true)
  self.track_running_stats = U.bool(fname, "track_running_stats", opts.track_running_stats, true)
  local topts = U.tensor_opts(opts)
  if self.affine then
    self.weight = ag.param(nc.ones({num_features}, topts))
    self.bias = ag.param(nc.zeros({num_features}, topts))
  end
  if self.track_running_stats then
    self:register_buffer("running_mean", nc.zeros({num_features}, topts))
    self:register_buffer("running_var", nc.ones({num_features}, topts))
    self:register_buffer("num_batches_tracked", nc.tensor(0, {dtype = "int64", device = topts.device}))
  end
end

function BatchNorm:forward(x)
  local fname = "nn." .. getmetatable(self).__name
  local nd = x.ndim
  if not self._ndims[nd] then
    error(string.format("%s: expected a %s input, got shape %s", fname, self._ndims_text, U.shape_str(x.shape)), 3)
  end
  if x.shape[2] ~= self.num_features then
    error(string.format("%s: expected %d channels (dim 2), got shape %s", fname, self.num_features,
      U.shape_str(x.shape)), 3)
  end
  local momentum = self.momentum
  if self.training and self.track_running_stats then
    self.num_batches_tracked:add_(1)
    if momentum == false then momentum = 1 / self.num_batches_tracked:item() end
  end
  -- Batch statistics in training, and always when no running statistics are kept.
  local use_batch = self.training or not self.track_running_stats
  local rm, rv
  if self.track_running_stats then rm, rv = self.running_mean, self.running_var end
  return ag.batch_norm(x, rm, rv, self.weight, self.bias, {training = use_batch, momentum = momentum or 0,
                                                           eps = self.eps})
end

function BatchNorm:extra_repr()
  local s = string.format("%d, eps=%g, momentum=%s", self.num_features, self.eps,
    self.momentum == false and "cumulative" or string.format("%g", self.momentum))
  if not self.affine then s = s .. ", affine=false" end
  if not self.track_running_stats then s = s .. ", track_running_stats=false" end
  return s
end

--- nn.BatchNorm1d(num_features, {eps=1e-5, momentum=0.1, affine=true, track_running_stats=true})
M.BatchNorm1d = BatchNorm:extend("BatchNorm1d")
M.BatchNorm1d._ndims = {[2] = true, [3] = true}
M.BatchNorm1d._ndims_text = "2-D [N, C] or 3-D [N, C, L]"

--- nn.BatchNorm2d(num_features, {eps=1e-5, momentum=0.1, affine=true, track_running_stats=true})
M.BatchNorm2d = BatchNorm:extend("BatchNorm2d")
M.BatchNorm2d._ndims = {[4] = true}
M.BatchNorm2d._ndims_text = "4-D [N, C, H, W]"

M.LayerNorm = Module:extend("LayerNorm")

--- nn.LayerNorm(normalized_shape, {eps=1e-5, elementwise_affine=true, bias=true}):
-- normalizes over the trailing dims given by normalized_shape (an integer or a shape).
function M.LayerNorm:init(normalized_shape, opts)
  local fname = "nn.LayerNorm"
  opts = U.options(fname, opts, {eps = true, elementwise_affine = true, bias = true, device = true, dtype = true})
  local shape = type(normalized_shape) == "table" and normalized_shape or {normalized_shape}
  if #shape == 0 then error(fname .. ": normalized_shape must not be empty", 3) end
  local copy = {}
  for i, d in ipairs(shape) do copy[i] = U.int(fname, "normalized_shape", d, 1) end
  self.normalized_shape = copy
  self.eps = U.number(fname, "eps", opts.eps or 1e-5, 0)
  self.elementwise_affine = U.bool(fname, "elementwise_affine", opts.elementwise_affine, true)
  local topts = U.tensor_opts(opts)
  if self.elementwise_affine then
    self.weight = ag.param(nc.ones(copy, topts))
    if U.bool(fname, "bias", opts.bias, true) then self.bias = ag.param(nc.zeros(copy, topts)) end
  end
end

function M.LayerNorm:forward(x)
  return ag.layer_norm(x, self.normalized_shape, self.weight, self.bias, {eps = self.eps})
end

function M.LayerNorm:extra_repr()
  return string.format("%s, eps=%g%s", U.shape_str(self.normalized_shape), self.eps,
    self.elementwise_affine and "" or ", elementwise_affine=false")
end

M.GroupNorm = Module:extend("GroupNorm")

--- nn.GroupNorm(num_groups, num_channels, {eps=1e-5, affine=true}): normalizes each sample's
-- channels in num_groups groups (num_groups divides num_channels) over [N, C, ...] inputs, then
-- scales and shifts per channel (weight ones, bias zeros), as torch.nn.GroupNorm.
function M.GroupNorm:init(num_groups, num_channels, opts)
  local fname = "nn.GroupNorm"
  opts = U.options(fname, opts, {eps = true, affine = true, device = true, dtype = true})
  self.num_groups = U.int(fname, "num_groups", num_groups, 1)
  self.num_channels = U.int(fname, "num_channels", num_channels, 1)
  if self.num_channels % self.num_groups ~= 0 then
    error(string.format("%s: num_groups %d does not divide num_channels %d", fname, self.num_groups,
      self.num_channels), 3)
  end
  self.eps = U.number(fname, "eps", opts.eps or 1e-5, 0)
  self.affine = U.bool(fname, "affine", opts.affine, true)
  local topts = U.tensor_opts(opts)
  if self.affine then
    self.weight = ag.param(nc.ones({self.num_channels}, topts))
    self.bias = ag.param(nc.zeros({self.num_channels}, topts))
  end
end

function M.GroupNorm:forward(x)
  return ag.group_norm(x, self.num_groups, self.weight, self.bias, {eps = self.eps})
end

function M.GroupNorm:extra_repr()
  return string.format("%d, %d, eps=%g%s", self.num_groups, self.num_channels, self.eps,
    self.affine and "" or ", affine=false")
end

return M

-- Loss modules: objects holding the options of the functional losses in netcl.autograd.
local nc = require "netcl"
local ag = require "netcl.autograd"
local Module = require("netcl.nn.module").Module
local U = require "netcl.nn.util"

local M = {}

local REDUCTIONS = {mean = true, sum = true, none = true}

local function reduction(fname, r)
  r = r or "mean"
  if not REDUCTIONS[r] then
    error(string.format("%s: reduction must be \"mean\", \"sum\" or \"none\", got %s", fname, tostring(r)), 4)
  end
  return r
end

M.CrossEntropyLoss = Module:extend("CrossEntropyLoss")

--- nn.CrossEntropyLoss({reduction="mean", label_smoothing=0, ignore_index=-100}):
-- loss(logits [N, C], targets [N] int64 class indices, 0-based).
function M.CrossEntropyLoss:init(opts)
  local fname = "nn.CrossEntropyLoss"
  opts = U.options(fname, opts, {reduction = true, label_smoothing = true, ignore_index = true})
  self.reduction = reduction(fname, opts.reduction)
  self.label_smoothing = U.number(fname, "label_smoothing", opts.label_smoothing or 0, 0, 1)
  self.ignore_index = U.int(fname, "ignore_index", opts.ignore_index or -100)
end

function M.CrossEntropyLoss:forward(logits, targets)
  return ag.cross_entropy(logits, targets, {reduction = self.reduction, label_smoothing = self.label_smoothing,
                                            ignore_index = self.ignore_index})
end

function M.CrossEntropyLoss:extra_repr()
  local s = "reduction=" .. self.reduction
  if self.label_smoothing ~= 0 then s = s .. string.format(", label_smoothing=%g", self.label_smoothing) end
  return s
end

local function pair_loss(name, op)
  local cls = Module:extend(name)
  cls.init = function(self, opts)
    opts = U.options("nn." .. name, opts, {reduction = true})
    self.reduction = reduction("nn." .. name, opts.reduction)
  end
  cls.forward = function(self, input, target) return op(input, target, {reduction = self.reduction}) end
  cls.extra_repr = function(self) return "reduction=" .. self.reduction end
  M[name] = cls
end

--- nn.MSELoss({reduction=}), nn.L1Loss({reduction=}), nn.BCEWithLogitsLoss({reduction=}):
-- loss(input, target) with target shaped like input.
-- (Dispatch wrappers: an error of the op names the line that called the loss.)
pair_loss("MSELoss", nc._wrapper(function(a, b, o) return ag.mse_loss(a, b, o) end))
pair_loss("L1Loss", nc._wrapper(function(a, b, o) return ag.l1_loss(a, b, o) end))
pair_loss("BCEWithLogitsLoss", nc._wrapper(function(a, b, o) return ag.bce_with_logits(a, b, o) end))

return M

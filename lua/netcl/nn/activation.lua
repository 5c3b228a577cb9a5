-- Activation layers: stateless wrappers over the differentiable elementwise and activation ops.
local ag = require "netcl.autograd"
local Module = require("netcl.nn.module").Module
local U = require "netcl.nn.util"

local M = {}

local function simple(name, op)
  local cls = Module:extend(name)
  function cls:init(...)
    if select("#", ...) > 0 then error(string.format("nn.%s: takes no arguments", name), 3) end
  end
  function cls:forward(x) return op(x) end
  M[name] = cls
end

simple("ReLU", function(x) return ag.relu(x) end)
simple("SiLU", function(x) return ag.silu(x) end)
simple("Sigmoid", function(x) return ag.sigmoid(x) end)
simple("Tanh", function(x) return ag.tanh(x) end)
simple("Mish", function(x) return ag.mish(x) end) -- x tanh(softplus(x))

-- A number argument of an activation, checked from init (level 4: the caller of the class):
-- finite, as the C ops require.
local function finite(fname, what, v)
  if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then
    error(string.format("%s: %s must be a finite number, got %s", fname, what, tostring(v)), 4)
  end
  return v
end

M.LeakyReLU = Module:extend("LeakyReLU")

--- nn.LeakyReLU(negative_slope=0.01): x for x > 0, else negative_slope * x.
function M.LeakyReLU:init(negative_slope)
  self.negative_slope = finite("nn.LeakyReLU", "negative_slope", negative_slope or 0.01)
end

function M.LeakyReLU:forward(x) return ag.leaky_relu(x, {negative_slope = self.negative_slope}) end

function M.LeakyReLU:extra_repr() return string.format("negative_slope=%g", self.negative_slope) end

M.ELU = Module:extend("ELU")

--- nn.ELU(alpha=1.0), or nn.ELU({alpha=}): x for x > 0, else alpha * (exp(x) - 1).
function M.ELU:init(alpha)
  if type(alpha) == "table" then alpha = U.options("nn.ELU", alpha, {alpha = true}).alpha end
  self.alpha = finite("nn.ELU", "alpha", alpha or 1.0)
end

function M.ELU:forward(x) return ag.elu(x, {alpha = self.alpha}) end

function M.ELU:extra_repr() return string.format("alpha=%g", self.alpha) end

M.Softplus = Module:extend("Softplus")

--- nn.Softplus({beta=1, threshold=20}): log(1 + exp(beta * x)) / beta, and x itself where
-- beta * x > threshold.
function M.Softplus:init(opts)
  local fname = "nn.Softplus"
  opts = U.options(fname, opts, {beta = true, threshold = true})
  self.beta = finite(fname, "beta", opts.beta or 1)
  if self.beta == 0 then error(fname .. ": beta must not be 0", 3) end
  self.threshold = finite(fname, "threshold", opts.threshold or 20)
end

function M.Softplus:forward(x) return ag.softplus(x, {beta = self.beta, threshold = self.threshold}) end

function M.Softplus:extra_repr() return string.format("beta=%g, threshold=%g", self.beta, self.threshold) end

M.GELU = Module:extend("GELU")

--- nn.GELU({approximate="none"|"tanh"})
function M.GELU:init(opts)
  opts = U.options("nn.GELU", opts, {approximate = true})
  local a = opts.approximate or "none"
  if a ~= "none" and a ~= "tanh" then
    error(string.format("nn.GELU: approximate must be \"none\" or \"tanh\", got %s", tostring(a)), 3)
  end
  self.approximate = a
end

function M.GELU:forward(x)
  if self.approximate == "tanh" then return ag.gelu(x, {approximate = "tanh"}) end
  return ag.gelu(x)
end

function M.GELU:extra_repr() return self.approximate == "tanh" and "approximate=tanh" or "" end

local function softmax_class(name, op)
  local cls = Module:extend(name)
  cls.init = function(self, dim)
    if dim == nil then
      error(string.format("nn.%s: needs the dim to normalize over (1-based; -1 for the last)", name), 3)
    end
    self.dim = U.int("nn." .. name, "dim", dim)
  end
  cls.forward = function(self, x) return op(x, self.dim) end
  cls.extra_repr = function(self) return "dim=" .. self.dim end
  M[name] = cls
end

--- nn.Softmax(dim), nn.LogSoftmax(dim): dim is 1-based, negative from the end.
softmax_class("Softmax", function(x, d) return ag.softmax(x, d) end)
softmax_class("LogSoftmax", function(x, d) return ag.log_softmax(x, d) end)

return M

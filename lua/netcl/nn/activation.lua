-- Activation layers: stateless wrappers over the differentiable elementwise ops.
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

M.LeakyReLU = Module:extend("LeakyReLU")

--- nn.LeakyReLU(negative_slope=0.01)
function M.LeakyReLU:init(negative_slope)
  self.negative_slope = U.number("nn.LeakyReLU", "negative_slope", negative_slope or 0.01)
end

-- relu(x) - a*relu(-x) is x for x > 0 and a*x otherwise, for any slope a.
function M.LeakyReLU:forward(x)
  return ag.relu(x) - ag.relu(-x) * self.negative_slope
end

function M.LeakyReLU:extra_repr() return string.format("negative_slope=%g", self.negative_slope) end

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

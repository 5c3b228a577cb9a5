-- nn.Linear: y = x W^T + b, with W [out, in] as in PyTorch.
local ag = require "netcl.autograd"
local Module = require("netcl.nn.module").Module
local U = require "netcl.nn.util"

local Linear = Module:extend("Linear")

--- nn.Linear(in_features, out_features, {bias=true, device=, dtype=}). Initialized as PyTorch
-- does: kaiming_uniform(a=sqrt(5)) on the weight, which reduces to U(-1/sqrt(in), 1/sqrt(in)),
-- and the same bound for the bias.
function Linear:init(in_features, out_features, opts)
  local fname = "nn.Linear"
  opts = U.options(fname, opts, {bias = true, device = true, dtype = true})
  self.in_features = U.int(fname, "in_features", in_features, 0)
  self.out_features = U.int(fname, "out_features", out_features, 0)
  local topts = U.tensor_opts(opts)
  local bound = in_features > 0 and 1 / math.sqrt(in_features) or 0
  self.weight = ag.param(U.uniform({out_features, in_features}, bound, topts))
  if U.bool(fname, "bias", opts.bias, true) then
    self.bias = ag.param(U.uniform({out_features}, bound, topts))
  end
end

function Linear:forward(x)
  return ag.linear(x, self.weight, self.bias)
end

function Linear:extra_repr()
  return string.format("%d -> %d%s", self.in_features, self.out_features, self.bias and "" or ", bias=false")
end

return Linear

-- netcl.nn: modules, layers and losses (docs/nn.md). Layers are Lua classes
-- over the differentiable ops of netcl.autograd; parameters are leaf Nodes.
local module = require "netcl.nn.module"

local nn = {Module = module.Module, is_module = module.is_module}

local function merge(t)
  for k, v in pairs(t) do nn[k] = v end
end

nn.Linear = require "netcl.nn.linear"
nn.Conv2d = require "netcl.nn.conv"
merge(require "netcl.nn.norm")
merge(require "netcl.nn.activation")
merge(require "netcl.nn.pooling")
merge(require "netcl.nn.layers")
merge(require "netcl.nn.loss")
merge(require "netcl.nn.containers")

return nn

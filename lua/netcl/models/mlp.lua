-- models.MLP: Linear layers with an activation between them, as a Sequential, so the
-- state-dict names are PyTorch's for nn.Sequential(Linear, ReLU, Linear, ...): "0.weight",
-- "2.weight", ...
local nn = require "netcl.nn"

local MLP = nn.Sequential:extend("MLP")
MLP._label = "models.MLP"

local ACTIVATIONS = {relu = nn.ReLU, gelu = nn.GELU, silu = nn.SiLU, tanh = nn.Tanh, sigmoid = nn.Sigmoid}

--- models.MLP{sizes={784, 256, 10}, activation="relu", dropout=0, bias=true}: sizes are the
-- widths from input to output (at least two); dropout > 0 adds an nn.Dropout after each hidden
-- activation.
function MLP:init(cfg)
  local fname = "models.MLP"
  if type(cfg) ~= "table" then error(fname .. ": expected a table {sizes={...}}, got " .. type(cfg), 3) end
  for k in pairs(cfg) do
    if k ~= "sizes" and k ~= "activation" and k ~= "dropout" and k ~= "bias" and k ~= "device" then
      error(string.format("%s: unknown option '%s' (options: activation, bias, device, dropout, sizes)", fname,
        tostring(k)), 3)
    end
  end
  local sizes = cfg.sizes
  if type(sizes) ~= "table" or #sizes < 2 then error(fname .. ": sizes must list at least two widths", 3) end
  local act_name = cfg.activation or "relu"
  local Act = ACTIVATIONS[act_name]
  if not Act then
    error(string.format("%s: activation must be one of relu, gelu, silu, tanh, sigmoid, got %s", fname,
      tostring(act_name)), 3)
  end
  local p = cfg.dropout or 0
  if type(p) ~= "number" or p < 0 or p >= 1 then error(fname .. ": dropout must be a number in [0, 1)", 3) end
  for i = 1, #sizes - 1 do
    self:append(nn.Linear(sizes[i], sizes[i + 1], {bias = cfg.bias, device = cfg.device}))
    if i < #sizes - 1 then
      self:append(Act())
      if p > 0 then self:append(nn.Dropout(p)) end
    end
  end
  self.sizes = sizes
end

-- Inputs with more than two dims (images [N, C, H, W]) are flattened to [N, features].
function MLP:forward(x)
  if x.ndim > 2 then x = x:flatten(2) end
  return nn.Sequential.forward(self, x)
end

function MLP:extra_repr() return "sizes={" .. table.concat(self.sizes, ", ") .. "}" end

return MLP

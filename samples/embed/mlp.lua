-- A two-layer perceptron for the embedding sample (host.c). The host runs this file with a
-- configuration table and gets back the model: forward(x, out) writes the logits of x into
-- out, both being tensors the host made over its own memory.
local nc = require "netcl"

local cfg = assert(..., "mlp.lua: run me with a configuration table {inputs=, hidden=, outputs=, seed=}")
local dev = nc.device("cpu")
nc.manual_seed(cfg.seed)
local W1 = nc.randn({cfg.hidden, cfg.inputs}, {device = dev})   -- [out, in], as nn.Linear
local b1 = nc.randn({cfg.hidden}, {device = dev})
local W2 = nc.randn({cfg.outputs, cfg.hidden}, {device = dev})
local b2 = nc.randn({cfg.outputs}, {device = dev})

local M = {}

-- The model in float64 (host.c checks it against the same model in C, in double precision):
-- nc.linear is x W^T + b, as nn.Linear; the result is copied into the host's buffer, converted
-- to its dtype.
function M.forward(x, out)
  assert(x.ndim == 2 and x.shape[2] == cfg.inputs, "forward: x must be [batch, " .. cfg.inputs .. "]")
  local h = nc.linear(x:double(), W1:double(), b1:double()):relu()
  out:copy_(nc.linear(h, W2:double(), b2:double()))
end

function M.parameters() return W1, b1, W2, b2 end

return M

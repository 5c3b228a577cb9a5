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

-- y = W x + b for each row of xs (Lua arrays).
local function linear(xs, W, b)
  local ys = {}
  for r, x in ipairs(xs) do
    local y = {}
    for o, w in ipairs(W) do
      local s = b[o]
      for i, v in ipairs(x) do s = s + w[i] * v end
      y[o] = s
    end
    ys[r] = y
  end
  return ys
end

local M = {}

-- The arithmetic runs over t:tolist() values: the tensor ops this needs (matmul, relu)
-- are not in the C core yet. Reading and writing the host's buffers is the point here.
function M.forward(x, out)
  assert(x.ndim == 2 and x.shape[2] == cfg.inputs, "forward: x must be [batch, " .. cfg.inputs .. "]")
  local h = linear(x:tolist(), W1:tolist(), b1:tolist())
  for _, row in ipairs(h) do
    for i, v in ipairs(row) do row[i] = math.max(v, 0) end   -- ReLU
  end
  local y = linear(h, W2:tolist(), b2:tolist())
  out:copy_(nc.tensor(y, {device = out.device, dtype = out.dtype}))
end

function M.parameters() return W1, b1, W2, b2 end

return M

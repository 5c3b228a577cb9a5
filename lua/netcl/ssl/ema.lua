-- netcl.ssl.flatten_parameters and netcl.ssl.ema_update: one flat buffer per group of modules,
-- so a momentum (EMA) update is one kernel launch (docs/ssl.md).
local nc = require "netcl"
local ag = require "netcl.autograd"
local value = require("netcl.ssl.common").value

local M = {}

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

return M

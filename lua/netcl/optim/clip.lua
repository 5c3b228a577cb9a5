-- optim.clip_grad_norm(params, max_norm) -> total_norm, as torch.nn.utils.clip_grad_norm_: the
-- L2 norm of all gradients together, and when max_norm / (total + 1e-6) < 1 every gradient is
-- scaled in place by that factor. One reduction pass over the gradients and one read-back
-- (netcl/optim.h nc_clip_grad_norm); parameters without a gradient are skipped.
local nc = require "netcl"
local Optimizer = require "netcl.optim.optimizer"

local FNAME = "netcl.optim.clip_grad_norm"

return function(params, max_norm)
  params = Optimizer.param_list(FNAME, params, 1, 3)
  if type(max_norm) ~= "number" then
    error(string.format("%s: argument 2: max_norm must be a number, got %s", FNAME, type(max_norm)), 2)
  end
  if not (max_norm >= 0) then error(string.format("%s: max_norm must be >= 0, got %s", FNAME, max_norm), 2) end
  local grads = {}
  for i, p in ipairs(params) do
    if not Optimizer.param_value(p) then
      error(string.format("%s: parameter %d is not a parameter (a Node or a table with a Tensor 'value'), got %s",
        FNAME, i, type(p)), 2)
    end
    local g = p.grad
    if g ~= nil then
      if g.dtype ~= "float32" and g.dtype ~= "float64" then
        error(string.format("%s: the gradient of parameter %d is %s; gradients must be float32 or float64", FNAME, i,
          g.dtype), 2)
      end
      grads[#grads + 1] = g
    end
  end
  local ok, total = pcall(nc._optim.clip_grad_norm, grads, max_norm)
  if not ok then error(FNAME .. ": " .. tostring(total):gsub("^[^\n]-netcl%.optim: clip_grad_norm: ", "", 1), 2) end
  return total
end

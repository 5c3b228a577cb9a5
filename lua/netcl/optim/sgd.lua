-- optim.SGD(params, {lr=, momentum=0, dampening=0, weight_decay=0, nesterov=false}): stochastic
-- gradient descent with momentum and Nesterov momentum, as torch.optim.SGD. One fused kernel
-- per parameter (netcl/optim.h nc_sgd_step).
local nc = require "netcl"
local Optimizer = require "netcl.optim.optimizer"

local C = nc._optim

return Optimizer.class {
  name = "SGD",
  defaults = {lr = Optimizer.REQUIRED, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false},
  check = function(o, fail)
    Optimizer.nonneg(o, "momentum", fail)
    Optimizer.nonneg(o, "dampening", fail)
    Optimizer.nonneg(o, "weight_decay", fail)
    if o.nesterov and (o.momentum <= 0 or o.dampening ~= 0) then
      fail("nesterov momentum requires momentum > 0 and zero dampening")
    end
  end,
  -- The momentum buffer starts as a copy of the first update's direction (PyTorch's clone), so a
  -- parameter without one simply starts there; nothing is required.
  state = function() return {} end,
  all_state = {"momentum_buffer"},
  update = function(value, grad, st, o, rounded)
    local buf, first = nil, false
    if o.momentum ~= 0 then
      buf = st.momentum_buffer
      if buf == nil then
        buf = C.state_new(value)
        st.momentum_buffer = buf
        first = true
      end
    end
    C.sgd_step(value, grad, buf, first, o, rounded)
    return rounded ~= nil
  end,
}

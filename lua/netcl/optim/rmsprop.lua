-- optim.RMSprop(params, {lr=, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=false}),
-- as torch.optim.RMSprop. One fused kernel per parameter (netcl/optim.h nc_rmsprop_step).
local nc = require "netcl"
local Optimizer = require "netcl.optim.optimizer"

local C = nc._optim

local function needed(o)
  local names = {"square_avg"}
  if o.momentum > 0 then names[#names + 1] = "momentum_buffer" end
  if o.centered then names[#names + 1] = "grad_avg" end
  return names
end

return Optimizer.class {
  name = "RMSprop",
  defaults = {lr = Optimizer.REQUIRED, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0, centered = false},
  check = function(o, fail)
    for _, k in ipairs({"alpha", "eps", "momentum", "weight_decay"}) do Optimizer.nonneg(o, k, fail) end
  end,
  state = needed,
  all_state = {"square_avg", "momentum_buffer", "grad_avg"},
  counts_steps = true,
  update = function(value, grad, st, o, rounded)
    for _, name in ipairs(needed(o)) do
      if st[name] == nil then st[name] = C.state_new(value) end
    end
    C.rmsprop_step(value, grad, st.square_avg, o.centered and st.grad_avg or nil,
      o.momentum > 0 and st.momentum_buffer or nil, o, rounded)
    st.step = st.step + 1
    return rounded ~= nil
  end,
}

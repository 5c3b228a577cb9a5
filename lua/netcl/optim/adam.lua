-- optim.Adam(params, {lr=, betas={0.9, 0.999}, eps=1e-8, weight_decay=0, amsgrad=false}) and
-- optim.AdamW (the same with decoupled weight decay, default 0.01), as torch.optim.Adam and
-- torch.optim.AdamW. One fused kernel per parameter (netcl/optim.h nc_adam_step).
local nc = require "netcl"
local Optimizer = require "netcl.optim.optimizer"

local C = nc._optim

local function needed(o)
  if o.amsgrad then return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"} end
  return {"exp_avg", "exp_avg_sq"}
end

local function check(o, fail)
  Optimizer.nonneg(o, "eps", fail)
  Optimizer.nonneg(o, "weight_decay", fail)
  local b = o.betas
  if #b ~= 2 or type(b[1]) ~= "number" or type(b[2]) ~= "number" then
    fail("betas must be a table of two numbers, e.g. {0.9, 0.999}")
  end
  for i = 1, 2 do
    if not (b[i] >= 0 and b[i] < 1) then fail("invalid beta parameter at index %d: %s (must be in [0, 1))", i, b[i]) end
  end
end

local function define(name, decoupled, weight_decay)
  return Optimizer.class {
    name = name,
    defaults = {lr = Optimizer.REQUIRED, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = weight_decay,
                amsgrad = false},
    check = check,
    state = needed,
    all_state = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    counts_steps = true,
    update = function(value, grad, st, o, rounded)
      for _, n in ipairs(needed(o)) do
        if st[n] == nil then st[n] = C.state_new(value) end
      end
      C.adam_step(value, grad, st.exp_avg, st.exp_avg_sq, o.amsgrad and st.max_exp_avg_sq or nil, st.step + 1,
        decoupled, o, rounded)
      st.step = st.step + 1
      return rounded ~= nil
    end,
  }
end

return {Adam = define("Adam", false, 0), AdamW = define("AdamW", true, 0.01)}

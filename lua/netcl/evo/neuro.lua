-- Neuroevolution helpers: a module's parameters as one row of a population, and the forward
-- pass of a whole population of MLPs that share an architecture, one batched product per
-- Linear layer.
local nc = require "netcl"
local nn = require "netcl.nn"
local class = require "netcl.class"

local M = {}

local function check_module(fname, m)
  if not nn.is_module(m) then error(fname .. ": argument 1 must be an nn.Module, got " .. type(m), 3) end
end

--- evo.num_params(module) -> the number of scalars in its parameters (the row length).
function M.num_params(m)
  check_module("evo.num_params", m)
  return m:num_parameters()
end

--- evo.flatten(module) -> Tensor [D]: the parameters in m:parameters() order, each flattened
-- row-major, concatenated (a copy, on the module's device).
function M.flatten(m)
  check_module("evo.flatten", m)
  local parts = {}
  for i, p in ipairs(m:parameters()) do parts[i] = p.value:reshape({p.value:numel()}) end
  if #parts == 0 then error("evo.flatten: the module has no parameters", 2) end
  return nc.cat(parts, 1)
end

--- evo.unflatten(module, row): copies row (a Tensor of D elements, e.g. X[i]) into the
-- module's parameters, in the order flatten uses. Returns the module.
function M.unflatten(m, row)
  local fname = "evo.unflatten"
  check_module(fname, m)
  if not nc.is_tensor(row) then error(fname .. ": argument 2 must be a Tensor [D], got " .. type(row), 2) end
  local D = m:num_parameters()
  if row:numel() ~= D then
    error(string.format("%s: the module has %d parameters, the row %d elements", fname, D, row:numel()), 2)
  end
  row = row:reshape({D})
  local off = 1
  for _, p in ipairs(m:parameters()) do
    local n = p.value:numel()
    p.value:copy_(row:narrow(1, off, n):view(p.value.shape))
    off = off + n
  end
  return m
end

-- Layers a population forward runs: Linear, and layers without parameters that act on each
-- element (or, for Flatten, on the features of each sample).
local ELEMENTWISE = {ReLU = true, Tanh = true, Sigmoid = true, SiLU = true, GELU = true, Mish = true, ELU = true,
                     LeakyReLU = true, Softplus = true, Identity = true}

local function layers_of(fname, m)
  local out = {}
  local function walk(mod)
    local name = getmetatable(mod).__name
    if name == "Linear" then
      out[#out + 1] = {kind = "linear", m = mod}
    elseif ELEMENTWISE[name] then
      out[#out + 1] = {kind = "act", m = mod}
    elseif name == "Flatten" or name == "Dropout" then
      out[#out + 1] = {kind = name == "Flatten" and "flatten" or "skip", m = mod}
    elseif class.is_instance(mod, nn.Sequential) then
      for _, c in ipairs(mod:children()) do walk(c) end
    else
      error(string.format("%s: supports Sequential models (models.MLP) of Linear and elementwise layers; got %s",
        fname, tostring(name)), 4)
    end
  end
  walk(m)
  return out
end

--- evo.population_forward(model, population, x) -> Tensor [P, N, out]: the outputs of P copies
-- of model, copy i with the parameters of population row i (evo.flatten's layout), on x: a
-- batch [N, ...] shared by all (flattened to [N, features]) or one batch per copy [P, N, in].
-- Each Linear is one batched product: [P, N, in] x [P, in, out] (a shared batch's first layer
-- is one product of the stacked weights [P out, in] with the batch [in, N]). Dropout is skipped (the forward of eval mode).
function M.population_forward(model, pop, x)
  local fname = "evo.population_forward"
  check_module(fname, model)
  if not nc.is_tensor(pop) or pop.ndim ~= 2 then
    error(fname .. ": argument 2 must be a population Tensor [P, D]", 2)
  end
  if not nc.is_tensor(x) then error(fname .. ": argument 3 must be a Tensor (the inputs)", 2) end
  local P, D = pop.shape[1], pop.shape[2]
  local want = model:num_parameters()
  if D ~= want then
    error(string.format("%s: the model has %d parameters, the population rows %d", fname, want, D), 2)
  end
  local layers = layers_of(fname, model)
  local shared = true
  local h = x
  if x.ndim == 3 and x.shape[1] == P and #layers > 0 then
    shared = false
  elseif x.ndim >= 2 then
    h = x.ndim > 2 and x:flatten(2) or x
  else
    error(fname .. ": inputs must be [N, features...] or [P, N, in]", 2)
  end
  local off = 1
  for _, l in ipairs(layers) do
    if l.kind == "linear" then
      local lin = l.m
      local nin, nout = lin.in_features, lin.out_features
      local feat = h.shape[h.ndim]
      if feat ~= nin then
        error(string.format("%s: a Linear(%d, %d) got %d features", fname, nin, nout, feat), 2)
      end
      -- population slices: weight [P, out, in], bias [P, out]
      -- views of the population (no copy): weight [P, out, in], bias [P, 1, out]
      local W = pop:narrow(2, off, nout * nin):view({P, nout, nin})
      off = off + nout * nin
      local b
      if lin.bias then
        b = pop:narrow(2, off, nout):view({P, 1, nout})
        off = off + nout
      end
      if shared then
        local N = h.shape[1]
        -- every copy's weight stacked: [P out, in] x [in, N] -> [P, out, N] -> [P, N, out]
        h = W:reshape({P * nout, nin}):matmul(h:transpose(1, 2)):view({P, nout, N}):transpose(2, 3)
        shared = false
      else
        h = nc.bmm(h, W:transpose(2, 3))
      end
      if b then h = h + b end
    elseif l.kind == "act" then
      h = l.m(h)
    elseif l.kind == "flatten" then
      if not shared then error(fname .. ": Flatten is supported only before the first Linear", 2) end
    end
  end
  if shared then error(fname .. ": the model has no Linear layer", 2) end
  return h:contiguous()
end

return M

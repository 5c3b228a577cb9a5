-- Neuroevolution: evaluating a population of P = 1024 MLPs 784-32-10 (ReLU) on one batch of 256
-- images, as evo.population_forward does it (one product per Linear for the whole population)
-- against a loop of P single forwards (evo.unflatten of the row into the model, then
-- model(x)), on the CPU backend and on each OpenCL device. Times are the best of 3 rounds;
-- the ratio is the loop's time over the batched time (higher: the batched forward is faster).
-- The two outputs are compared as well. NETCL_BENCH_EVO_P=... changes P.
local nc = require "netcl"
local ag = require "netcl.autograd"
local models = require "netcl.models"
local evo = require "netcl.evo"
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/../lua/helpers.lua")

local P = tonumber(os.getenv("NETCL_BENCH_EVO_P") or "") or 1024
local N, ROUNDS = 256, 3

local function best_s(fn, dev) return H.best_time(dev, ROUNDS, fn) end

for _, dev in ipairs(nc.devices()) do
  nc.set_default_device(dev)
  nc.manual_seed(1)
  local model = models.MLP{sizes = {784, 32, 10}}
  local D = evo.num_params(model)
  local pop = nc.randn({P, D}) * 0.05
  local x = nc.rand({N, 1, 28, 28})
  local out
  local batched = best_s(function() out = evo.population_forward(model, pop, x) end, dev)
  local last
  local loop = best_s(function()
    ag.no_grad(function()
      for i = 1, P do
        evo.unflatten(model, pop[i])
        last = model(x)
      end
    end)
  end, dev)
  last = nc.is_node(last) and last.value or last
  local diff = (out[P] - last):abs():max():item()
  print(string.format('{"bench":"evo_population_forward","P":%d,"N":%d,"sizes":"784-32-10","device":"%s",' ..
    '"batched_s":%.4f,"loop_s":%.4f,"ratio":%.2f,"max_abs_diff":%.2g}', P, N, dev.name, batched, loop,
    loop / batched, diff))
end

-- netcl.evo: evolution strategies, neuroevolution and architecture search, with populations
-- as device tensors [P, D] (docs/evo.md).
local M = {}

M.GA = require "netcl.evo.ga"
M.ES = require "netcl.evo.es"
M.OpenAIES = require "netcl.evo.openaies"
M.DE = require "netcl.evo.de"
M.SepCMAES = require "netcl.evo.sepcmaes"

local neuro = require "netcl.evo.neuro"
M.flatten = neuro.flatten
M.unflatten = neuro.unflatten
M.num_params = neuro.num_params
M.population_forward = neuro.population_forward

local nas = require "netcl.evo.nas"
M.ArchSpace = nas.ArchSpace
M.ArchitectureSearch = nas.ArchitectureSearch

--- Test functions (rows of X [P, D] -> [P]), minimum 0 at the origin (Rosenbrock: at ones).
M.functions = {}
function M.functions.sphere(X) return (X * X):sum(2) end
function M.functions.rastrigin(X)
  local D = X.shape[2]
  return (X * X - ((X * (2 * math.pi)):cos()) * 10):sum(2) + 10 * D
end
function M.functions.rosenbrock(X)
  local D = X.shape[2]
  local a, b = X:narrow(2, 1, D - 1), X:narrow(2, 2, D - 1)
  local t = b - a * a
  local s = 1 - a
  return (t * t * 100 + s * s):sum(2)
end

return M

-- netcl.evo's long run (ctest label "slow"): SepCMAES on the 30-D Rosenbrock function, f < 1e-6
-- within 500k evaluations (fixed seed; the figure reached is printed for docs/evo.md).
local lu = require "luaunit"
local nc = require "netcl"
local evo = require "netcl.evo"
local H = require "helpers"

H.device()

TestSlow = {}
function TestSlow:test_sepcmaes_rosenbrock_30()
  nc.manual_seed(1)
  local es = evo.SepCMAES{dim = 30, sigma = 0.5}
  local t0 = nc.clock()
  local x, f = es:run(evo.functions.rosenbrock, {max_evals = 500000, target = 1e-6})
  print(string.format("\nSepCMAES rosenbrock D=30: f = %.4g after %d evaluations (%d generations, %.1f s)", f,
    es.evals, es.generation, nc.clock() - t0))
  lu.assertTrue(f < 1e-6, "f = " .. f)
  lu.assertTrue(es.evals <= 500000)
  -- the minimum is at (1, ..., 1)
  H.assert_close(x, nc.ones({30}), 1e-2, "x near the optimum")
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

-- The five optimizers of netcl.evo on the Rastrigin function (docs/evo.md).
--
--   netcl-lua samples/evo_rastrigin.lua [--dim 10] [--evals 100000] [--seed 1] [--device SPEC]
--
-- f(x) = 10 D + sum(x_i^2 - 10 cos(2 pi x_i)) has a local minimum near every integer point and
-- its global minimum 0 at the origin. Each optimizer runs until f < 1e-3 or --evals
-- evaluations, with its population on the device; the table shows what each reached.
local nc = require "netcl"
local evo = require "netcl.evo"
local progress = require "netcl.progress"

local USAGE = [[
usage: netcl-lua samples/evo_rastrigin.lua [options]
  --dim N        dimension (default 10)
  --evals N      evaluation budget per optimizer (default 100000)
  --seed N       seed (default 1)
  --device SPEC  cpu | gpu | opencl | opencl:P:D (default: the default device)
  --help         this text]]

local function fail(msg)
  io.stderr:write("evo_rastrigin: ", msg, "\n")
  os.exit(2)
end

local function parse_args(argv)
  local o = {dim = 10, evals = 100000, seed = 1}
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if a == "--help" or a == "-h" then
      print(USAGE)
      os.exit(0)
    elseif a == "--dim" or a == "--evals" or a == "--seed" or a == "--device" then
      local v = argv[i + 1]
      if v == nil then fail(a .. " needs a value\n" .. USAGE) end
      if a == "--device" then
        o.device = v
      else
        local n = math.tointeger(tonumber(v))
        if not n or n <= 0 then fail(string.format("%s must be a positive integer, got '%s'", a, v)) end
        o[a:sub(3)] = n
      end
      i = i + 2
    else
      fail("unknown argument '" .. a .. "'\n" .. USAGE)
    end
  end
  return o
end

local o = parse_args(arg or {})
if o.device then nc.set_default_device(nc.device(o.device)) end
local D = o.dim
local B = {-5.12, 5.12}
local optimizers = {
  {"GA", {popsize = 100, mutation_sigma = 0.5, sigma_decay = 0.98, bounds = B}},
  {"ES", {popsize = 100, sigma = 1, bounds = B}},
  {"OpenAIES", {popsize = 100, sigma = 0.5, lr = 0.1, mean = 3, sigma_decay = 0.99, lr_decay = 0.99}},
  {"DE", {popsize = 50, F = 0.5, CR = 0.1, bounds = B}},
  {"SepCMAES", {popsize = 100, sigma = 2, mean = 3}},
}

print(string.format("Rastrigin, D = %d, budget %d evaluations, device %s", D, o.evals, nc.default_device().spec))
local rows = {}
for _, spec in ipairs(optimizers) do
  local name, cfg = spec[1], spec[2]
  cfg.dim = D
  nc.manual_seed(o.seed)
  local es = evo[name](cfg)
  local bar <close> = progress.bar{total = o.evals, desc = name}
  local t0 = nc.clock()
  local _, best = es:run(evo.functions.rastrigin, {max_evals = o.evals, target = 1e-3, callback = function(e)
    bar:update(e.popsize, {best = string.format("%.4g", e.best_f)})
  end})
  bar:close()
  rows[#rows + 1] = string.format("%-9s %10d %12.4g %8.2fs", name, es.evals, best, nc.clock() - t0)
end
print(string.format("%-9s %10s %12s %9s", "optimizer", "evals", "best f", "time"))
for _, r in ipairs(rows) do print(r) end

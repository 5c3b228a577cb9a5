-- samples/evo_rastrigin.lua and samples/nas_fashion_mnist.lua end to end, quickly: the table of
-- each optimizer, and the search on a tiny synthetic dataset in the Fashion-MNIST file layout
-- (history, chart, checkpoint, and --resume ending where an uninterrupted run ends).
local lu = require "luaunit"
local H = require "helpers"

local dev = H.device()
local exe = H.netcl_lua()

local sh, write_split = H.sh, H.write_fashion_split

TestSampleEvo = {}

function TestSampleEvo:test_rastrigin()
  local out, code = sh(string.format("%s samples/evo_rastrigin.lua --dim 4 --evals 3000 --device %s", exe, dev.spec))
  lu.assertEquals(code, 0, out)
  for _, name in ipairs({"GA", "ES", "OpenAIES", "DE", "SepCMAES"}) do
    local evals, best = out:match("\n" .. name .. " +(%d+) +(%S+) ")
    lu.assertNotNil(evals, name .. " row in:\n" .. out)
    lu.assertTrue(tonumber(evals) <= 3000)
    lu.assertTrue(tonumber(best) >= 0 and tonumber(best) < 40, out)
  end
  local _, bad = sh(exe .. " samples/evo_rastrigin.lua --dim 0")
  lu.assertEquals(bad, 2)
end

function TestSampleEvo:test_nas()
  local dir = H.tmpdir()
  write_split(dir, "train", 48, 3)
  write_split(dir, "t10k", 24, 5)
  local function run(ckpt, gens, extra)
    return sh(string.format("%s samples/nas_fashion_mnist.lua --data %s --population 2 --generations %d " ..
      "--batch-size 16 --test-size 24 --checkpoint %s --device %s %s", exe, dir, gens, ckpt, dev.spec, extra or ""))
  end
  local full, code = run(dir .. "/full.netcl", 2)
  lu.assertEquals(code, 0, full)
  lu.assertStrContains(full, "search: 6/6")
  local best = full:match("\nbest: (.-)\n")
  lu.assertNotNil(best, full)
  local svg = assert(io.open(dir .. "/full.svg")):read("a")
  lu.assertStrContains(svg, "<svg")
  lu.assertStrContains(svg, "best test accuracy")
  -- six history rows: generations 0, 1, 2 with two candidates each
  local n = 0
  for _ in full:gmatch("\n[012] +[%w/-]+ +%d+ +[%d.]+%% %d+") do n = n + 1 end
  lu.assertEquals(n, 6, full)
  local part
  part, code = run(dir .. "/part.netcl", 1)
  lu.assertEquals(code, 0, part)
  local resumed
  resumed, code = run(dir .. "/part.netcl", 2, "--resume")
  lu.assertEquals(code, 0, resumed)
  lu.assertEquals(resumed:match("\nbest: (.-) %("), full:match("\nbest: (.-) %("))
  lu.assertEquals(resumed:match("\ngen.-\nbest"), full:match("\ngen.-\nbest"))
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

-- samples/evo_rastrigin.lua and samples/nas_fashion_mnist.lua end to end, quickly: the table of
-- each optimizer, and the search on a tiny synthetic dataset in the Fashion-MNIST file layout
-- (history, chart, checkpoint, and --resume ending where an uninterrupted run ends).
local lu = require "luaunit"
local H = require "helpers"

local dev = H.device()
local exe = H.netcl_lua()

local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  local ok, _, code = p:close()
  return out, ok and 0 or code
end

-- idx files: a big-endian header (magic 0x08 = uint8, then the number of dims) and the bytes.
local function write_idx(path, dims, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(string.pack(">I4", 0x0800 + #dims))
  for _, d in ipairs(dims) do f:write(string.pack(">I4", d)) end
  f:write(bytes)
  f:close()
end

local function write_split(dir, prefix, n, seed)
  local pixels, labels = {}, {}
  for i = 1, n do
    local label = (i * 7 + seed) % 10
    labels[i] = string.char(label)
    local img = {}
    for k = 1, 784 do
      seed = (seed * 1103515245 + 12345) % 2147483648
      img[k] = string.char((seed >> 16) % 64 + label * 19)
    end
    pixels[i] = table.concat(img)
  end
  write_idx(dir .. "/" .. prefix .. "-images-idx3-ubyte", {n, 28, 28}, table.concat(pixels))
  write_idx(dir .. "/" .. prefix .. "-labels-idx1-ubyte", {n}, table.concat(labels))
end

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

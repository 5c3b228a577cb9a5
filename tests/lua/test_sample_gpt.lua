-- samples/gpt_tiny.lua end to end on a small synthetic text with tiny settings: byte and BPE tokens, the
-- evaluation lines, samples, the checkpoint (model, optimizer, history), the tokenizer file and the chart, and
-- --resume continuing exactly where an uninterrupted run would be.
local lu = require "luaunit"
local nc = require "netcl"
local nio = require "netcl.io"
local H = require "helpers"

H.device()
local exe = H.netcl_lua()
local SAMPLE = "samples/gpt_tiny.lua"

local sh = H.sh

-- Sentences from a small grammar, so there is structure to learn.
local dir = H.tmpdir()
do
  local seed = 7
  local function pick(list)
    seed = (seed * 1103515245 + 12345) % 2147483648
    return list[(seed >> 16) % #list + 1]
  end
  local subj, verb, obj = {"the cat", "a dog", "my tensor", "the kernel"}, {"sees", "copies", "likes", "runs"},
                          {"the queue.", "a buffer.", "every row.", "the device."}
  local lines = {}
  for i = 1, 300 do lines[i] = pick(subj) .. " " .. pick(verb) .. " " .. pick(obj) end
  local f = assert(io.open(dir .. "/corpus.txt", "w"))
  f:write(table.concat(lines, "\n"), "\n")
  f:close()
end

local TINY = "--dim 32 --layers 1 --heads 2 --kv-heads 1 --seq 16 --batch 4 --eval-every 5 --sample-every 5 " ..
             "--sample-tokens 8 --seed 3"

local function run(args)
  return sh(string.format("%s %s --text %s/corpus.txt %s %s", exe, SAMPLE, dir, TINY, args))
end

-- "step 10: train loss 1.2345, held-out loss 1.3456 nats/token" -> 1.2345, 1.3456
local function step_line(out, step)
  local a, b = out:match("step " .. step .. ": train loss ([%d.]+), held%-out loss ([%d.]+) nats/token")
  return tonumber(a), tonumber(b)
end

TestGptSample = {}

function TestGptSample:test_bytes_train_checkpoint_chart_and_resume()
  local straight = dir .. "/straight.netcl"
  local out, code = run("--tokens bytes --steps 10 --checkpoint " .. straight)
  lu.assertEquals(code, 0, out)
  local _, h5 = step_line(out, 5)
  local t10, h10 = step_line(out, 10)
  lu.assertNotNil(h5, out)
  lu.assertNotNil(h10, out)
  lu.assertStrContains(out, "byte")
  lu.assertStrContains(out, "sample at step 5: ")
  lu.assertStrContains(out, "unigram entropy")
  local tensors, meta = nio.load(straight)
  lu.assertNotNil(tensors["layers.0.attention.wq.weight"])
  lu.assertNotNil(meta[nio.OPTIM_KEY], "no optimizer state")
  local extra = nc._json.decode(meta[nio.EXTRA_KEY])
  lu.assertEquals(extra.step, 10)
  lu.assertAlmostEquals(extra.history.heldout[2], h10, 1e-4)
  local svg = assert(io.open(dir .. "/straight.svg")):read("a")
  lu.assertStrContains(svg, "<svg")
  lu.assertStrContains(svg, "unigram entropy")
  -- stopped after 5 steps, then resumed to 10: the same losses as the uninterrupted run
  local split = dir .. "/split.netcl"
  out, code = run("--tokens bytes --steps 10 --stop-after 5 --checkpoint " .. split)
  lu.assertEquals(code, 0, out)
  local _, r5 = step_line(out, 5)
  lu.assertAlmostEquals(r5, h5, 2e-4)
  lu.assertNil(step_line(out, 10))
  out, code = run("--tokens bytes --steps 10 --resume --checkpoint " .. split)
  lu.assertEquals(code, 0, out)
  lu.assertStrContains(out, "resumed from " .. split .. " after step 5")
  local rt10, r10 = step_line(out, 10)
  lu.assertAlmostEquals(r10, h10, 2e-4)
  lu.assertAlmostEquals(rt10, t10, 2e-4)
end

function TestGptSample:test_bpe_tokens()
  local ck = dir .. "/bpe.netcl"
  local out, code = run("--tokens bpe --vocab 300 --steps 5 --checkpoint " .. ck)
  lu.assertEquals(code, 0, out)
  lu.assertStrContains(out, "bpe tokens (vocabulary 300")
  lu.assertNotNil(io.open(ck .. ".bpe"), "no tokenizer file")
  local _, h = step_line(out, 5)
  lu.assertNotNil(h, out)
  lu.assertStrContains(out, "held-out loss")
  -- the saved tokenizer loads back
  out, code = run("--tokenizer " .. ck .. ".bpe --steps 5 --checkpoint " .. dir .. "/bpe2.netcl")
  lu.assertEquals(code, 0, out)
  local _, h2 = step_line(out, 5)
  lu.assertAlmostEquals(h2, h, 2e-4)
end

function TestGptSample:test_bad_arguments()
  local out, code = run("--steps 0")
  lu.assertEquals(code, 2)
  lu.assertStrContains(out, "--steps must be a positive integer")
  out, code = run("--tokens words")
  lu.assertEquals(code, 2)
  lu.assertStrContains(out, "--tokens must be bpe or bytes")
  out, code = run("--kv-heads 3 --heads 2")
  lu.assertEquals(code, 2)
  lu.assertStrContains(out, "--kv-heads must divide --heads")
  out, code = sh(exe .. " " .. SAMPLE .. " --text " .. dir .. "/missing.txt")
  lu.assertEquals(code, 2)
  lu.assertStrContains(out, "cannot read")
  out, code = sh(exe .. " " .. SAMPLE .. " --help")
  lu.assertEquals(code, 0)
  lu.assertStrContains(out, "--resume")
end

local rc = lu.LuaUnit.run()
os.execute("rm -rf '" .. dir .. "'")
os.exit(rc)

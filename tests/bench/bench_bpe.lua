-- Tokenizer benchmarks: BPE training time (vocab 4096 on a few MB) and encode/decode throughput
-- on several MB. Prints one JSON object per line. Not run by ctest.
--   netcl-lua tests/bench/bench_bpe.lua [encode_mb=8] [train_mb=4]
-- The corpus is local text: the licences in /usr/share/common-licenses and the copyright files
-- under /usr/share/doc, concatenated (repeated if there is too little).
local nc = require "netcl"
local text = require "netcl.text"

local encode_mb = tonumber(arg and arg[1]) or 8
local train_mb = tonumber(arg and arg[2]) or 4

local function files()
  local list = {}
  local p = io.popen("find /usr/share/common-licenses /usr/share/doc -type f " ..
                     "\\( -path '/usr/share/common-licenses/*' -o -name copyright \\) 2>/dev/null | sort")
  for line in p:lines() do list[#list + 1] = line end
  p:close()
  return list
end

local function corpus(bytes)
  local parts, n = {}, 0
  local list = files()
  assert(#list > 0, "bench_bpe: no text found under /usr/share/common-licenses or /usr/share/doc")
  while n < bytes do
    for _, path in ipairs(list) do
      local f = io.open(path, "rb")
      if f then
        local d = f:read("a")
        f:close()
        parts[#parts + 1] = d
        n = n + #d
        if n >= bytes then break end
      end
    end
  end
  return table.concat(parts):sub(1, bytes)
end

local function json(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  local out = {}
  for _, k in ipairs(keys) do
    local v = t[k]
    local s = type(v) == "string" and ("%q"):format(v) or (math.type(v) == "float" and ("%.4g"):format(v)) or tostring(v)
    out[#out + 1] = ("%q: %s"):format(k, s)
  end
  print("{" .. table.concat(out, ", ") .. "}")
end

local MB = 1024 * 1024
local train_text = corpus(math.floor(train_mb * MB))
local encode_text = corpus(math.floor(encode_mb * MB))

-- Timings are the best of `runs` runs: the minimum is the figure least disturbed by other load
-- on the machine.
local runs = 3
local function best(f)
  local t, r = math.huge, nil
  for _ = 1, runs do
    local t0 = nc.clock()
    r = f()
    t = math.min(t, nc.clock() - t0)
  end
  return t, r
end

-- Training: the whole corpus as one text, as train_file would read it.
local tok
for _, pattern in ipairs({"cl100k", "gpt2"}) do
  local dt, t = best(function()
    return text.BPETokenizer.train({train_text}, {vocab_size = 4096, pattern = pattern,
                                                  special_tokens = {"<|endoftext|>"}})
  end)
  json{bench = "bpe_train", pattern = pattern, corpus_mb = #train_text / MB, vocab_size = t:vocab_size(),
       seconds = dt, runs = runs}
  if pattern == "cl100k" then tok = t end
end

-- Encoding: a fresh copy (empty chunk cache) once, then the same tokenizer again (warm cache).
-- The figures include building the Lua array of ids.
local path = os.tmpname()
tok:save(path)
local fresh = text.BPETokenizer.load(path)
os.remove(path)
local t0 = nc.clock()
local ids = fresh:encode(encode_text)
local cold = nc.clock() - t0
json{bench = "bpe_encode", cache = "cold", mb = #encode_text / MB, seconds = cold, mb_per_s = #encode_text / MB / cold,
     tokens = #ids, bytes_per_token = #encode_text / #ids, runs = 1}
local warm = best(function() return fresh:encode(encode_text) end)
json{bench = "bpe_encode", cache = "warm", mb = #encode_text / MB, seconds = warm, mb_per_s = #encode_text / MB / warm,
     tokens = #ids, runs = runs}
local dt, back = best(function() return fresh:decode(ids) end)
assert(back == encode_text, "bench_bpe: decode(encode(text)) differs from the text")
json{bench = "bpe_decode", mb = #back / MB, seconds = dt, mb_per_s = #back / MB / dt, runs = runs}

-- A small GPT (models.GPT) trained on a text file: the transformer sample (docs/transformer.md).
--
--   netcl-lua samples/gpt_tiny.lua [--text FILE] [--tokens bpe|bytes] [--steps 600] [--checkpoint PATH] [--resume]
--
-- The text (default: the project's own docs/*.md) is tokenized with a BPE tokenizer trained on it
-- (saved beside the checkpoint, or loaded with --tokenizer) or as bytes, split 90/10 into training and
-- held-out tokens, and the model learns to predict the next token on random windows. Every --eval-every
-- steps it prints the held-out loss (nats per token) and saves a checkpoint and a loss chart (PATH.svg);
-- every --sample-every steps it prints a generated sample. At the end it prints the held-out loss next to
-- the corpus's unigram entropy (what a model that ignores context can reach).
local nc = require "netcl"
local ag = require "netcl.autograd"
local optim = require "netcl.optim"
local models = require "netcl.models"
local text = require "netcl.text"
local nio = require "netcl.io"
local progress = require "netcl.progress"
local plot = require "netcl.plot"

local USAGE = [[
usage: netcl-lua samples/gpt_tiny.lua [options]
  --text FILE         training text (default: the project's docs/*.md, concatenated)
  --tokens KIND       bpe (default) or bytes
  --vocab N           BPE vocabulary size when the tokenizer is trained here (default 512)
  --tokenizer PATH    load this BPE tokenizer (tok:save format) instead of training one
  --dim N             model width (default 128)
  --layers N          decoder blocks (default 4)
  --heads N           attention heads (default 4)
  --kv-heads N        key/value heads, dividing --heads (default 2)
  --seq N             context length in tokens (default 64)
  --batch N           windows per step (default 16)
  --steps N           training steps in all, counting those of a resumed run (default 600)
  --lr X              AdamW's learning rate, decayed to 0 along a cosine (default 0.003)
  --eval-every N      steps between held-out evaluations, checkpoints and chart updates (default 100)
  --sample-every N    steps between printed samples (default 200; 0: only at the end)
  --sample-tokens N   tokens per sample (default 80)
  --device SPEC       cpu | gpu | opencl | opencl:P:D (default: the default device)
  --checkpoint PATH   checkpoint file (default gpt_tiny.netcl); chart PATH.svg, tokenizer PATH.bpe
  --resume            continue from the checkpoint
  --stop-after N      stop after step N (the schedule still spans --steps; continue with --resume)
  --seed N            seed for initialization, windows and sampling (default 1)
  --help              this text]]

local function fail(msg)
  io.stderr:write("gpt_tiny: ", msg, "\n")
  os.exit(2)
end

-- Options: name -> {field, kind} with kind "int" (positive), "num" (positive), "str", "choice" or "flag".
local OPTIONS = {
  ["--text"] = {"text", "str"}, ["--tokens"] = {"tokens", "choice", {bpe = true, bytes = true}},
  ["--vocab"] = {"vocab", "int"}, ["--tokenizer"] = {"tokenizer", "str"}, ["--dim"] = {"dim", "int"},
  ["--layers"] = {"layers", "int"}, ["--heads"] = {"heads", "int"}, ["--kv-heads"] = {"kv_heads", "int"},
  ["--seq"] = {"seq", "int"}, ["--batch"] = {"batch", "int"}, ["--steps"] = {"steps", "int"},
  ["--lr"] = {"lr", "num"}, ["--eval-every"] = {"eval_every", "int"}, ["--sample-every"] = {"sample_every", "int0"},
  ["--sample-tokens"] = {"sample_tokens", "int"}, ["--device"] = {"device", "str"},
  ["--checkpoint"] = {"checkpoint", "str"}, ["--resume"] = {"resume", "flag"}, ["--stop-after"] = {"stop_after", "int"},
  ["--seed"] = {"seed", "int"},
}

local function parse_args(argv)
  local o = {tokens = "bpe", vocab = 512, dim = 128, layers = 4, heads = 4, kv_heads = 2, seq = 64, batch = 16,
             steps = 600, lr = 0.003, eval_every = 100, sample_every = 200, sample_tokens = 80,
             checkpoint = "gpt_tiny.netcl", seed = 1}
  local i = 1
  while i <= #argv do
    local a = argv[i]
    local key, inline = a:match("^(%-%-[%w-]+)=(.*)$")
    key = key or a
    local spec = OPTIONS[key]
    if key == "--help" or key == "-h" then
      print(USAGE)
      os.exit(0)
    elseif not spec then
      fail("unknown argument '" .. a .. "'\n" .. USAGE)
    elseif spec[2] == "flag" then
      o[spec[1]] = true
    else
      local v = inline
      if not v then
        i = i + 1
        v = argv[i]
      end
      if v == nil then fail(key .. " needs a value\n" .. USAGE) end
      if spec[2] == "str" then
        o[spec[1]] = v
      elseif spec[2] == "choice" then
        if not spec[3][v] then fail(string.format("%s must be bpe or bytes, got '%s'", key, v)) end
        o[spec[1]] = v
      else
        local n = tonumber(v)
        local ok = n and (spec[2] == "num" and n > 0 or math.type(n) == "integer" and (n > 0 or spec[2] == "int0" and n == 0))
        if not ok then fail(string.format("%s must be a positive %s, got '%s'", key, spec[2] == "num" and "number" or "integer", v)) end
        o[spec[1]] = n
      end
    end
    i = i + 1
  end
  if o.heads % o.kv_heads ~= 0 then fail("--kv-heads must divide --heads") end
  if o.dim % o.heads ~= 0 or (o.dim // o.heads) % 2 ~= 0 then fail("--dim / --heads must be an even integer") end
  return o
end

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- The project's docs/*.md, found beside this script, in name order.
local function default_corpus()
  local script = (arg and arg[0]) or "samples/gpt_tiny.lua"
  local root = script:match("^(.*)/samples/[^/]*$") or (script:match("^samples/") and ".") or ".."
  local p = io.popen("ls '" .. root .. "/docs/'*.md 2>/dev/null")
  local names = {}
  for line in p:lines() do names[#names + 1] = line end
  p:close()
  local parts = {}
  for _, n in ipairs(names) do parts[#parts + 1] = read_file(n) end
  if #parts == 0 then return nil end
  return table.concat(parts, "\n"), root .. "/docs/*.md (" .. #parts .. " files)"
end

-- The tokenizer: bytes, a loaded BPE file, or a BPE tokenizer trained on the text's lines.
local function make_tokenizer(o, corpus)
  if o.tokens == "bytes" then
    return {vocab = 256, encode = function(s) return {s:byte(1, -1)} end,
            decode = function(ids) local c = {} for i, v in ipairs(ids) do c[i] = string.char(v) end return table.concat(c) end}
  end
  local path, tok = o.tokenizer or (o.checkpoint .. ".bpe"), nil
  if o.tokenizer or (o.resume and read_file(path)) then
    local ok, t = pcall(text.BPETokenizer.load, path)
    if not ok then fail("cannot load the tokenizer " .. path .. ": " .. tostring(t)) end
    tok = t
  else
    local lines = {}
    for line in corpus:gmatch("[^\n]*\n?") do if #line > 0 then lines[#lines + 1] = line end end
    tok = text.BPETokenizer.train(lines, {vocab_size = o.vocab})
    tok:save(path)
  end
  return {vocab = tok:vocab_size(), encode = function(s) return tok:encode(s) end,
          decode = function(ids) return tok:decode(ids) end, path = path}
end

-- Unigram entropy of a token list, in nats.
local function unigram_entropy(ids)
  local count = {}
  for _, v in ipairs(ids) do count[v] = (count[v] or 0) + 1 end
  local h, n = 0, #ids
  for _, c in pairs(count) do h = h - c / n * math.log(c / n) end
  return h
end

-- Mean cross-entropy (nats per token) over consecutive held-out windows.
local function heldout_loss(model, held, seq, batch)
  local n = (held:numel() - 1) // seq
  if n < 1 then fail("the held-out part is shorter than one window; use a longer text or a smaller --seq") end
  local total, count = 0, 0
  model:eval()
  ag.no_grad(function()
    for w0 = 0, n - 1, batch do
      local w = math.min(batch, n - w0)
      local x = held:narrow(1, w0 * seq + 1, w * seq):reshape({w, seq})
      local y = held:narrow(1, w0 * seq + 2, w * seq):reshape({w, seq})
      local logits = model(x).value
      local l = ag.cross_entropy(logits:reshape({-1, logits.shape[3]}), y:reshape({-1}), {reduction = "sum"})
      total = total + (nc.is_node(l) and l.value or l):item()
      count = count + w * seq
    end
  end)
  model:train()
  return total / count
end

local function save_chart(path, history, entropy)
  local steps = {}
  for i, s in ipairs(history.step) do steps[i] = s end
  local flat = {}
  for i = 1, #steps do flat[i] = entropy end
  plot.save(path, plot.line{title = "gpt_tiny", xlabel = "step", ylabel = "nats per token",
    series = {{name = "train", x = steps, y = history.train}, {name = "held-out", x = steps, y = history.heldout},
              {name = "unigram entropy", x = steps, y = flat, dash = true}}})
end

local function main(argv)
  local o = parse_args(argv)
  if o.device then nc.set_default_device(nc.device(o.device)) end
  local dev = nc.default_device()
  local corpus, source
  if o.text then
    corpus, source = read_file(o.text), o.text
    if not corpus then fail("cannot read " .. o.text) end
  else
    corpus, source = default_corpus()
    if not corpus then fail("no --text given and the project's docs/ was not found") end
  end
  local probe = io.open(o.checkpoint .. ".probe", "w")
  if not probe then fail("cannot write " .. o.checkpoint .. " (does its directory exist?)") end
  probe:close()
  os.remove(o.checkpoint .. ".probe")

  local t0 = nc.clock()
  local tok = make_tokenizer(o, corpus)
  local ids = tok.encode(corpus)
  local entropy = unigram_entropy(ids)
  local split = math.floor(#ids * 0.9)
  local all = nc.tensor(ids, {dtype = "int64", device = dev})
  local train, held = all:narrow(1, 1, split), all:narrow(1, split + 1, #ids - split)
  if split < o.seq + 2 then fail("the text is too short for --seq " .. o.seq) end
  print(string.format("%s: %d bytes -> %d %s tokens (vocabulary %d%s; %.1fs), unigram entropy %.3f nats/token; device %s",
    source, #corpus, #ids, o.tokens, tok.vocab, tok.path and ", " .. tok.path or "", nc.clock() - t0, entropy, dev.spec))

  nc.manual_seed(o.seed)
  local model = models.GPT{vocab_size = tok.vocab, dim = o.dim, n_layers = o.layers, n_heads = o.heads,
                           n_kv_heads = o.kv_heads, max_seq = math.max(o.seq, o.sample_tokens + 8)}
  local opt = optim.AdamW(model:parameters(), {lr = o.lr, weight_decay = 0.01})
  local sched = optim.CosineAnnealingLR(opt, {T_max = o.steps})
  local history = {step = {}, train = {}, heldout = {}, seconds = 0}
  local done = 0
  if o.resume then
    local ok, extra = pcall(nio.load_model, model, o.checkpoint, {optimizer = opt})
    if not ok then fail("cannot resume: " .. tostring(extra)) end
    if type(extra) ~= "table" or type(extra.history) ~= "table" then
      fail(o.checkpoint .. " has no training history: it was not written by this sample")
    end
    history, done = extra.history, extra.step
    sched:load_state_dict(extra.scheduler)
    print(string.format("resumed from %s after step %d (held-out loss %.4f)", o.checkpoint, done,
      history.heldout[#history.heldout] or 0 / 0))
  end
  print(string.format("models.GPT: %d parameters (dim %d, %d layers, %d heads, %d kv heads, context %d); AdamW lr %g, "
    .. "cosine over %d steps, batch %d", model:num_parameters(), o.dim, o.layers, o.heads, o.kv_heads, o.seq, o.lr,
    o.steps, o.batch))

  local chart = o.checkpoint:gsub("%.netcl$", "") .. ".svg"
  local prompt_len = math.min(8, #ids - split)
  local prompt = {}
  for i = 1, prompt_len do prompt[i] = ids[split + i] end
  local function show_sample(step, bar)
    local out = model:generate(prompt, {max_new_tokens = o.sample_tokens, temperature = 0.8, top_k = 40,
                                        seed = o.seed * 7919 + step})
    local s = tok.decode(out):gsub("[%c]", " ")
    local line = string.format("sample at step %d: %s", step, s)
    if bar then bar:log(line) else print(line) end
  end

  local last = math.min(o.steps, o.stop_after or o.steps)
  local bar <close> = progress.bar{total = last - done, desc = "training"}
  local start, window, wsteps = nc.clock(), nil, 0
  local offsets_max = split - o.seq - 1
  for step = done + 1, last do
    -- the windows of a step are a function of (seed, step), so a resumed run sees the same ones
    nc.manual_seed(o.seed * 1000003 + step)
    local starts = nc.randint(0, offsets_max + 1, {o.batch, 1}, {dtype = "int64", device = dev})
    local idx = (starts + nc.arange(0, o.seq, 1, {dtype = "int64", device = dev})):reshape({-1})
    local x = train:index_select(1, idx):reshape({o.batch, o.seq})
    local y = train:index_select(1, idx + 1):reshape({o.batch, o.seq})
    local tape = ag.Tape()
    local loss = tape:record(function()
      local logits = model(x)
      return ag.cross_entropy(logits:reshape({-1, tok.vocab}), y:reshape({-1}))
    end)
    opt:zero_grad()
    tape:backward(loss)
    optim.clip_grad_norm(model:parameters(), 1.0)
    opt:step()
    sched:step()
    window = window and window + loss.value or loss.value
    wsteps = wsteps + 1
    bar:update(1, step % 10 == 0 and {loss = string.format("%.3f", window:item() / wsteps)} or nil)
    if step % o.eval_every == 0 or step == last then
      local train_loss = window:item() / wsteps
      window, wsteps = nil, 0
      local h = heldout_loss(model, held, o.seq, o.batch)
      history.step[#history.step + 1] = step
      history.train[#history.train + 1] = train_loss
      history.heldout[#history.heldout + 1] = h
      history.seconds = history.seconds + (nc.clock() - start)
      start = nc.clock()
      bar:log(string.format("step %d: train loss %.4f, held-out loss %.4f nats/token", step, train_loss, h))
      nio.save_model(model, o.checkpoint, {optimizer = opt, extra = {history = history, step = step,
        scheduler = sched:state_dict()}})
      save_chart(chart, history, entropy)
    end
    if o.sample_every > 0 and step % o.sample_every == 0 and step ~= last then show_sample(step, bar) end
  end
  bar:close()
  if #history.heldout > 0 then
    show_sample(last)
    local h = history.heldout[#history.heldout]
    print(string.format("held-out loss %.4f nats/token, unigram entropy %.4f nats/token: %.1f%% below (%.1fs of "
      .. "training, %d steps); checkpoint %s, chart %s", h, entropy, 100 * (1 - h / entropy), history.seconds, last,
      o.checkpoint, chart))
  end
end

main(arg or {...})

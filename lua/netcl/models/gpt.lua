-- models.GPT: a decoder-only transformer in Meta's Llama layout (docs/transformer.md): token embedding,
-- N pre-norm DecoderBlocks with rotary attention, a final RMSNorm and a linear head (tied to the embedding
-- or not), and generate() that decodes through a KVCache.
local nc = require "netcl"
local ag = require "netcl.autograd"
local nn = require "netcl.nn"
local tf = require "netcl.transformer"
local U = require "netcl.nn.util"

local GPT = nn.Module:extend("GPT")
GPT._label = "models.GPT"

local OPTIONS = {vocab_size = true, dim = true, n_layers = true, n_heads = true, n_kv_heads = true, max_seq = true,
                 ffn_hidden = true, tied = true, qk_norm = true, eps = true, rope_theta = true, device = true,
                 dtype = true}

--- models.GPT{vocab_size=, dim=, n_layers=, n_heads=, n_kv_heads=n_heads, max_seq=, ffn_hidden=ceil(8 dim / 3),
-- tied=false, qk_norm=false, eps=1e-5, rope_theta=10000, device=, dtype=}. State-dict names:
-- tok_embeddings.weight, layers.N.attention.wq/wk/wv/wo.weight, layers.N.attention_norm.weight,
-- layers.N.feed_forward.w1/w2/w3.weight, layers.N.ffn_norm.weight, norm.weight, output.weight (absent when
-- tied: the head is the embedding matrix).
function GPT:init(cfg)
  local fname = "models.GPT"
  cfg = U.options(fname, cfg, OPTIONS)
  self.vocab_size = U.int(fname, "vocab_size", cfg.vocab_size, 1)
  self.dim = U.int(fname, "dim", cfg.dim, 1)
  self.n_layers = U.int(fname, "n_layers", cfg.n_layers, 1)
  self.n_heads = U.int(fname, "n_heads", cfg.n_heads, 1)
  self.n_kv_heads = U.int(fname, "n_kv_heads", cfg.n_kv_heads or cfg.n_heads, 1)
  self.max_seq = U.int(fname, "max_seq", cfg.max_seq, 1)
  self.tied = U.bool(fname, "tied", cfg.tied, false)
  self.eps = U.number(fname, "eps", cfg.eps or 1e-5, 0)
  local topts = {device = cfg.device, dtype = cfg.dtype}
  self.tok_embeddings = nn.Embedding(self.vocab_size, self.dim, topts)
  local blocks = {}
  for i = 1, self.n_layers do
    blocks[i] = tf.DecoderBlock{dim = self.dim, n_heads = self.n_heads, n_kv_heads = self.n_kv_heads,
                                ffn_hidden = cfg.ffn_hidden, qk_norm = cfg.qk_norm, eps = self.eps,
                                rope_theta = cfg.rope_theta, device = cfg.device, dtype = cfg.dtype}
  end
  self.layers = nn.ModuleList(blocks)
  self.norm = tf.RMSNorm(self.dim, {eps = self.eps, device = cfg.device, dtype = cfg.dtype})
  if not self.tied then self.output = nn.Linear(self.dim, self.vocab_size, {bias = false, device = cfg.device,
                                                                            dtype = cfg.dtype}) end
  self.head_dim = self.dim // self.n_heads
end

--- gpt(ids [B, T] (integer Tensor, 0-based token ids), {start_pos=0, cache=}) -> logits [B, T, vocab_size]
function GPT:forward(ids, opts)
  opts = opts or {}
  local t = (nc.is_node(ids) and ids.value or ids).shape[2]
  if (opts.start_pos or 0) + t > self.max_seq then
    error(string.format("models.GPT: positions up to %d are past max_seq %d", (opts.start_pos or 0) + t, self.max_seq), 2)
  end
  local h = self.tok_embeddings(ids)
  for i = 1, self.n_layers do
    h = self.layers[i](h, {start_pos = opts.start_pos, cache = opts.cache, layer = i})
  end
  h = self.norm(h)
  if self.tied then return ag.linear(h, self.tok_embeddings.weight) end
  return self.output(h)
end

--- gpt:new_cache(batch, max_seq=self.max_seq) -> a KVCache for this model on its device.
function GPT:new_cache(batch, max_seq)
  local w = self.tok_embeddings.weight.value
  return tf.KVCache{batch = batch, max_seq = max_seq or self.max_seq, n_kv_heads = self.n_kv_heads,
                    head_dim = self.head_dim, n_layers = self.n_layers, device = w.device, dtype = w.dtype}
end

-- A small seeded generator (xorshift64*), so that sampling does not touch the global random state.
local function rng(seed)
  local s = seed ~= 0 and seed or 0x9E3779B97F4A7C15
  return function()
    s = s ~ (s >> 12)
    s = s ~ (s << 25)
    s = s ~ (s >> 27)
    return ((s * 0x2545F4914F6CDD1D) >> 11) / 9007199254740992.0 -- 53 bits in [0, 1)
  end
end

-- The next token from one row of logits (a Lua list): greedy at temperature 0, else a draw from the
-- softmax of logits / temperature restricted to the top_k largest and to the smallest set whose
-- probability reaches top_p.
local function sample(logits, o, rand)
  local n = #logits
  if o.temperature == 0 then
    local best = 1
    for i = 2, n do if logits[i] > logits[best] then best = i end end
    return best - 1
  end
  local idx = {}
  for i = 1, n do idx[i] = i end
  table.sort(idx, function(a, b) return logits[a] > logits[b] end)
  local keep = o.top_k and math.min(o.top_k, n) or n
  local m, p, total = logits[idx[1]], {}, 0
  for r = 1, keep do
    p[r] = math.exp((logits[idx[r]] - m) / o.temperature)
    total = total + p[r]
  end
  if o.top_p and o.top_p < 1 then
    local acc = 0
    for r = 1, keep do
      acc = acc + p[r] / total
      if acc >= o.top_p then keep = r break end
    end
    total = 0
    for r = 1, keep do total = total + p[r] end
  end
  local u, acc = rand() * total, 0
  for r = 1, keep do
    acc = acc + p[r]
    if u < acc then return idx[r] - 1 end
  end
  return idx[keep] - 1
end

--- gpt:generate(prompt_ids, {max_new_tokens=32, temperature=1, top_k=, top_p=1, seed=0}) -> ids: the prompt
-- (a Lua list of 0-based token ids, or an integer Tensor [B, T]) followed by the new tokens, of the same
-- kind. The prompt runs once, then one token at a time through a KVCache; temperature 0 is greedy.
function GPT:generate(prompt, opts)
  local fname = "models.GPT:generate"
  opts = U.options(fname, opts, {max_new_tokens = true, temperature = true, top_k = true, top_p = true, seed = true})
  local o = {max_new = U.int(fname, "max_new_tokens", opts.max_new_tokens or 32, 0),
             temperature = U.number(fname, "temperature", opts.temperature or 1, 0),
             top_k = opts.top_k and U.int(fname, "top_k", opts.top_k, 1),
             top_p = U.number(fname, "top_p", opts.top_p or 1, 0, 1),
             seed = U.int(fname, "seed", opts.seed or 0)}
  local dev = self.tok_embeddings.weight.value.device
  local as_list = type(prompt) == "table"
  local ids = as_list and nc.tensor({prompt}, {dtype = "int64", device = dev}) or prompt:to({device = dev, dtype = "int64"})
  if ids.ndim ~= 2 or ids.shape[2] < 1 then error(fname .. ": the prompt must hold at least one token", 2) end
  local b, t0 = ids.shape[1], ids.shape[2]
  if t0 + o.max_new > self.max_seq then
    error(string.format("%s: %d prompt tokens + %d new ones are past max_seq %d", fname, t0, o.max_new, self.max_seq), 2)
  end
  local rows = {}
  local rand = rng(o.seed)
  local was_training = self.training
  self:eval()
  ag.no_grad(function()
    local cache = self:new_cache(b, t0 + o.max_new)
    local logits = self:forward(ids, {cache = cache, start_pos = 0})
    local pos = t0
    local cur = ids:tolist()
    for r = 1, b do rows[r] = cur[r] end
    for _ = 1, o.max_new do
      local lv = nc.is_node(logits) and logits.value or logits
      local last = lv:select(2, lv.shape[2]):to("float64"):tolist()
      local nxt = {}
      for r = 1, b do
        nxt[r] = {sample(last[r], o, rand)}
        rows[r][#rows[r] + 1] = nxt[r][1]
      end
      if #rows[1] >= t0 + o.max_new then break end
      logits = self:forward(nc.tensor(nxt, {dtype = "int64", device = dev}), {cache = cache, start_pos = pos})
      pos = pos + 1
    end
  end)
  self:train(was_training)
  if as_list then return rows[1] end
  return nc.tensor(rows, {dtype = "int64", device = dev})
end

function GPT:extra_repr()
  return string.format("vocab_size=%d, dim=%d, n_layers=%d, n_heads=%d, n_kv_heads=%d, max_seq=%d%s", self.vocab_size,
    self.dim, self.n_layers, self.n_heads, self.n_kv_heads, self.max_seq, self.tied and ", tied" or "")
end

return GPT

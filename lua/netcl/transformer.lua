-- netcl.transformer: the parts of a decoder-only transformer (docs/transformer.md): RMSNorm, rotary
-- embeddings, rotary multi-head attention with grouped-query heads and an optional QK-norm, the
-- SwiGLU feed-forward, the pre-norm decoder block and the key/value cache used for decoding.
-- Parameter names follow Meta's Llama reference (attention.wq/wk/wv/wo, attention_norm,
-- feed_forward.w1/w2/w3, ffn_norm), so checkpoints move to and from PyTorch.
local nc = require "netcl"
local ag = require "netcl.autograd"
local nn = require "netcl.nn"
local Module = nn.Module
local U = require "netcl.nn.util"

local M = {}

local function value(x) return nc.is_node(x) and x.value or x end

--- tf.flash_attention(q, k, v, {causal=true, scale=}): fused attention over [B, H, T, Dh] (the op).
M.flash_attention = ag.flash_attention

--- tf.rope(x, positions, {theta=10000}): rotary embedding of x [..., T, Dh] at the given positions
-- (a Tensor of integers, or a Lua list).
function M.rope(x, positions, opts)
  if type(positions) == "table" then
    positions = nc.tensor(positions, {dtype = "int64", device = value(x).device})
  end
  return ag.rope(x, positions, opts)
end

-- ---- RMSNorm --------------------------------------------------------------------------------------
M.RMSNorm = Module:extend("RMSNorm")

--- tf.RMSNorm(dim, {eps=1e-6, device=, dtype=}): x / sqrt(mean(x^2) + eps) * weight over the last
-- dim (weight starts at ones), through the fused rms_norm op.
function M.RMSNorm:init(dim, opts)
  local fname = "transformer.RMSNorm"
  opts = U.options(fname, opts, {eps = true, device = true, dtype = true})
  self.dim = U.int(fname, "dim", dim, 1)
  self.eps = U.number(fname, "eps", opts.eps or 1e-6, 0)
  self.weight = ag.param(nc.ones({dim}, U.tensor_opts(opts)))
end

function M.RMSNorm:forward(x) return ag.rms_norm(x, {self.dim}, self.weight, {eps = self.eps}) end

function M.RMSNorm:extra_repr() return string.format("%d, eps=%g", self.dim, self.eps) end

-- ---- SwiGLU -----------------------------------------------------------------------------------------
--- tf.SwiGLU(dim, hidden): nn.SwiGLU (w2(silu(w1 x) * w3 x), no biases).
M.SwiGLU = nn.SwiGLU

-- ---- KVCache ----------------------------------------------------------------------------------------
M.KVCache = require("netcl.class")("KVCache")

--- tf.KVCache{batch=, max_seq=, n_kv_heads=, head_dim=, n_layers=, device=, dtype=}: per layer, keys and
-- values [batch, n_kv_heads, max_seq, head_dim] (rotated keys), filled by RotaryAttention at start_pos.
function M.KVCache:init(cfg)
  local fname = "transformer.KVCache"
  cfg = U.options(fname, cfg, {batch = true, max_seq = true, n_kv_heads = true, head_dim = true, n_layers = true,
                               device = true, dtype = true})
  self.batch = U.int(fname, "batch", cfg.batch, 1)
  self.max_seq = U.int(fname, "max_seq", cfg.max_seq, 1)
  self.n_kv_heads = U.int(fname, "n_kv_heads", cfg.n_kv_heads, 1)
  self.head_dim = U.int(fname, "head_dim", cfg.head_dim, 1)
  self.n_layers = U.int(fname, "n_layers", cfg.n_layers, 1)
  local topts = U.tensor_opts(cfg)
  local shape = {self.batch, self.n_kv_heads, self.max_seq, self.head_dim}
  self.k, self.v = {}, {}
  for l = 1, self.n_layers do
    self.k[l], self.v[l] = nc.zeros(shape, topts), nc.zeros(shape, topts)
  end
end

--- cache:update(layer, start_pos, k, v) -> keys, values: stores k and v [B, Hkv, T, Dh] at positions
-- start_pos .. start_pos + T - 1 of layer (1-based) and returns the cached ones up to there.
function M.KVCache:update(layer, start_pos, k, v)
  k, v = value(k), value(v)
  local t = k.shape[3]
  if layer < 1 or layer > self.n_layers then
    error(string.format("KVCache: layer %d is out of range 1..%d", layer, self.n_layers), 2)
  end
  if k.shape[1] ~= self.batch or k.shape[2] ~= self.n_kv_heads or k.shape[4] ~= self.head_dim then
    error(string.format("KVCache: keys of shape %s do not fit a cache of [%d, %d, %d, %d]", U.shape_str(k.shape),
      self.batch, self.n_kv_heads, self.max_seq, self.head_dim), 2)
  end
  if start_pos < 0 or start_pos + t > self.max_seq then
    error(string.format("KVCache: positions %d..%d are past max_seq %d", start_pos, start_pos + t - 1, self.max_seq), 2)
  end
  self.k[layer]:narrow(3, start_pos + 1, t):copy_(k)
  self.v[layer]:narrow(3, start_pos + 1, t):copy_(v)
  return self.k[layer]:narrow(3, 1, start_pos + t), self.v[layer]:narrow(3, 1, start_pos + t)
end

-- ---- RotaryAttention --------------------------------------------------------------------------------
M.RotaryAttention = Module:extend("RotaryAttention")

--- tf.RotaryAttention{dim=, n_heads=, n_kv_heads=n_heads, qk_norm=true, rope_theta=10000, causal=true,
-- eps=1e-6, device=, dtype=}: wq [dim, dim], wk and wv [n_kv_heads * head_dim, dim], wo [dim, dim]
-- (no biases); queries and keys get an RMSNorm over head_dim (q_norm, k_norm) when qk_norm is set,
-- then the rotary embedding; the heads attend with flash_attention.
function M.RotaryAttention:init(cfg)
  local fname = "transformer.RotaryAttention"
  cfg = U.options(fname, cfg, {dim = true, n_heads = true, n_kv_heads = true, qk_norm = true, rope_theta = true,
                               causal = true, eps = true, device = true, dtype = true})
  self.dim = U.int(fname, "dim", cfg.dim, 1)
  self.n_heads = U.int(fname, "n_heads", cfg.n_heads, 1)
  self.n_kv_heads = U.int(fname, "n_kv_heads", cfg.n_kv_heads or cfg.n_heads, 1)
  if self.dim % self.n_heads ~= 0 then
    error(string.format("%s: n_heads (%d) must divide dim (%d)", fname, self.n_heads, self.dim), 3)
  end
  if self.n_heads % self.n_kv_heads ~= 0 then
    error(string.format("%s: n_kv_heads (%d) must divide n_heads (%d)", fname, self.n_kv_heads, self.n_heads), 3)
  end
  self.head_dim = self.dim // self.n_heads
  if self.head_dim % 2 ~= 0 then
    error(string.format("%s: the head dimension dim / n_heads must be even, got %d", fname, self.head_dim), 3)
  end
  self.qk_norm = U.bool(fname, "qk_norm", cfg.qk_norm, true)
  self.rope_theta = U.number(fname, "rope_theta", cfg.rope_theta or 10000, 0)
  self.causal = U.bool(fname, "causal", cfg.causal, true)
  local lopts = {bias = false, device = cfg.device, dtype = cfg.dtype}
  self.wq = nn.Linear(self.dim, self.n_heads * self.head_dim, lopts)
  self.wk = nn.Linear(self.dim, self.n_kv_heads * self.head_dim, lopts)
  self.wv = nn.Linear(self.dim, self.n_kv_heads * self.head_dim, lopts)
  self.wo = nn.Linear(self.n_heads * self.head_dim, self.dim, lopts)
  if self.qk_norm then
    local nopts = {eps = cfg.eps, device = cfg.device, dtype = cfg.dtype}
    self.q_norm = M.RMSNorm(self.head_dim, nopts)
    self.k_norm = M.RMSNorm(self.head_dim, nopts)
  end
end

--- attn(x [B, T, dim], {start_pos=0, cache=, layer=}) -> [B, T, dim]. With a cache, the keys and values
-- of these T positions are stored in it (layer `layer`) and the queries attend to every cached position
-- up to theirs.
function M.RotaryAttention:forward(x, opts)
  opts = opts or {}
  local shape = value(x).shape
  local b, t = shape[1], shape[2]
  local start = opts.start_pos or 0
  local hd = self.head_dim
  local q = self.wq(x):reshape({b, t, self.n_heads, hd})
  local k = self.wk(x):reshape({b, t, self.n_kv_heads, hd})
  local v = self.wv(x):reshape({b, t, self.n_kv_heads, hd})
  if self.qk_norm then q, k = self.q_norm(q), self.k_norm(k) end
  local pos = nc.arange(start, start + t, 1, {dtype = "int64", device = value(x).device})
  q = ag.rope(q:transpose(2, 3), pos, {theta = self.rope_theta})
  k = ag.rope(k:transpose(2, 3), pos, {theta = self.rope_theta})
  v = v:transpose(2, 3)
  if opts.cache then k, v = opts.cache:update(opts.layer or 1, start, k, v) end
  local o = ag.flash_attention(q, k, v, {causal = self.causal})
  return self.wo(o:transpose(2, 3):reshape({b, t, self.n_heads * hd}))
end

function M.RotaryAttention:extra_repr()
  return string.format("dim=%d, n_heads=%d, n_kv_heads=%d, qk_norm=%s, rope_theta=%g, causal=%s", self.dim,
    self.n_heads, self.n_kv_heads, tostring(self.qk_norm), self.rope_theta, tostring(self.causal))
end

-- ---- DecoderBlock -----------------------------------------------------------------------------------
M.DecoderBlock = Module:extend("DecoderBlock")

--- tf.DecoderBlock{dim=, n_heads=, n_kv_heads=, ffn_hidden=, qk_norm=false, eps=1e-6, rope_theta=10000,
-- causal=true, device=, dtype=}: h = x + attention(attention_norm(x)); out = h + feed_forward(ffn_norm(h)).
-- ffn_hidden defaults to ceil(8 dim / 3).
function M.DecoderBlock:init(cfg)
  local fname = "transformer.DecoderBlock"
  cfg = U.options(fname, cfg, {dim = true, n_heads = true, n_kv_heads = true, ffn_hidden = true, qk_norm = true,
                               eps = true, rope_theta = true, causal = true, device = true, dtype = true})
  local dim = U.int(fname, "dim", cfg.dim, 1)
  local hidden = U.int(fname, "ffn_hidden", cfg.ffn_hidden or (8 * dim + 2) // 3, 1)
  local nopts = {eps = cfg.eps, device = cfg.device, dtype = cfg.dtype}
  self.attention_norm = M.RMSNorm(dim, nopts)
  self.attention = M.RotaryAttention{dim = dim, n_heads = cfg.n_heads, n_kv_heads = cfg.n_kv_heads,
                                     qk_norm = U.bool(fname, "qk_norm", cfg.qk_norm, false), eps = cfg.eps,
                                     rope_theta = cfg.rope_theta, causal = cfg.causal, device = cfg.device,
                                     dtype = cfg.dtype}
  self.ffn_norm = M.RMSNorm(dim, nopts)
  self.feed_forward = nn.SwiGLU(dim, hidden, {device = cfg.device, dtype = cfg.dtype})
end

--- block(x [B, T, dim], {start_pos=, cache=, layer=}) -> [B, T, dim]
function M.DecoderBlock:forward(x, opts)
  local h = x + self.attention(self.attention_norm(x), opts)
  return h + self.feed_forward(self.ffn_norm(h))
end

return M

-- netcl.transformer and models.GPT: RMSNorm against its formula, RotaryAttention against attention written with
-- ops (grouped-query, QK-norm), incremental decoding through the KVCache against recomputing the whole sequence
-- (to 1e-4), generate (seeded, greedy, top_k, top_p, tensor prompts), tied heads, the Llama state-dict names,
-- a few training steps that lower the loss, and the errors.
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local optim = require "netcl.optim"
local tf = require "netcl.transformer"
local models = require "netcl.models"
local H = require "helpers"

local dev = H.device()
local cpu = nc.device("cpu")
local F = dev.fp64 and "float64" or "float32"
local TOL = F == "float64" and 1e-10 or 1e-4

local function val(x) return nc.is_node(x) and x.value or x end

TestTransformer = {}

function TestTransformer:test_rmsnorm_formula()
  nc.manual_seed(1)
  local norm = tf.RMSNorm(6, {eps = 1e-3, dtype = F})
  norm.weight.value = nc.randn({6}, {dtype = F})
  local x = nc.randn({2, 3, 6}, {dtype = F})
  local want = x * ((x * x):mean(3, {keepdim = true}) + 1e-3):rsqrt() * norm.weight.value
  H.assert_close(val(norm(x)):to(cpu), want:to(cpu), TOL, "rmsnorm")
end

-- RotaryAttention written with ops: rope on [B, H, T, Dh], heads repeated, masked softmax.
local function reference_attention(a, x)
  local b, t = x.shape[1], x.shape[2]
  local hd, h, hkv = a.head_dim, a.n_heads, a.n_kv_heads
  local function heads(lin, n) return val(lin(x)):reshape({b, t, n, hd}) end
  local q, k, v = heads(a.wq, h), heads(a.wk, hkv), heads(a.wv, hkv)
  if a.qk_norm then q, k = val(a.q_norm(q)), val(a.k_norm(k)) end
  local pos = {}
  for i = 1, t do pos[i] = i - 1 end
  q = tf.rope(q:transpose(2, 3), pos, {theta = a.rope_theta})
  k = tf.rope(k:transpose(2, 3), pos, {theta = a.rope_theta})
  local function rep(z) return z:unsqueeze(3):expand({b, hkv, h // hkv, t, hd}):reshape({b, h, t, hd}) end
  local s = q:matmul(rep(k):transpose(3, 4)) / math.sqrt(hd)
  local mask = {}
  for i = 1, t do for j = 1, t do mask[#mask + 1] = j > i and -math.huge or 0 end end
  s = s + nc.tensor(mask, {shape = {t, t}, dtype = F})
  local o = s:softmax(4):matmul(rep(v:transpose(2, 3)))
  return val(a.wo(o:transpose(2, 3):reshape({b, t, h * hd})))
end

function TestTransformer:test_rotary_attention_matches_ops()
  for _, qk in ipairs({false, true}) do
    nc.manual_seed(2)
    local a = tf.RotaryAttention{dim = 24, n_heads = 4, n_kv_heads = 2, qk_norm = qk, rope_theta = 500, dtype = F}
    if qk then a.q_norm.weight.value = nc.randn({6}, {dtype = F}) end
    local x = nc.randn({2, 5, 24}, {dtype = F})
    local got = ag.no_grad(function() return val(a(x)) end)
    H.assert_close(got:to(cpu), reference_attention(a, x):to(cpu), TOL * 10, "qk_norm " .. tostring(qk))
  end
end

local function small_gpt(opts)
  local cfg = {vocab_size = 29, dim = 32, n_layers = 2, n_heads = 4, n_kv_heads = 2, max_seq = 24, ffn_hidden = 48}
  for k, v in pairs(opts or {}) do cfg[k] = v end
  return models.GPT(cfg)
end

function TestTransformer:test_incremental_decoding_equals_full_recomputation()
  nc.manual_seed(3)
  local g = small_gpt{qk_norm = true}
  local ids = nc.randint(0, 29, {2, 13}, {dtype = "int64"})
  ag.no_grad(function()
    local full = val(g(ids)):to(cpu)
    local cache = g:new_cache(2)
    local prompt = 5
    local parts = {val(g(ids:narrow(2, 1, prompt), {cache = cache, start_pos = 0})):to(cpu)}
    for p = prompt, 12 do
      parts[#parts + 1] = val(g(ids:narrow(2, p + 1, 1), {cache = cache, start_pos = p})):to(cpu)
    end
    local inc = nc.cat(parts, 2)
    H.assert_close(inc, full, 1e-4, "cached logits")
  end)
end

function TestTransformer:test_generate()
  nc.manual_seed(4)
  local g = small_gpt()
  local a = g:generate({1, 2, 3}, {max_new_tokens = 8, temperature = 0.9, top_k = 5, top_p = 0.9, seed = 11})
  local b = g:generate({1, 2, 3}, {max_new_tokens = 8, temperature = 0.9, top_k = 5, top_p = 0.9, seed = 11})
  lu.assertEquals(#a, 11)
  lu.assertEquals(a, b)
  lu.assertEquals({a[1], a[2], a[3]}, {1, 2, 3})
  for i = 4, 11 do lu.assertTrue(a[i] >= 0 and a[i] < 29) end
  -- greedy equals top_k = 1, and equals the argmax of a full recomputation at every step
  local greedy = g:generate({5, 6}, {max_new_tokens = 6, temperature = 0})
  lu.assertEquals(g:generate({5, 6}, {max_new_tokens = 6, top_k = 1, seed = 3}), greedy)
  ag.no_grad(function()
    for i = 3, #greedy do
      local prefix = {}
      for j = 1, i - 1 do prefix[j] = greedy[j] end
      local logits = val(g(nc.tensor({prefix}, {dtype = "int64"}))):select(2, i - 1):select(1, 1)
      lu.assertEquals(logits:argmax():item(), greedy[i])
    end
  end)
  -- a tensor prompt gives a tensor, one row per sequence
  local t = g:generate(nc.tensor({{1, 2}, {3, 4}}, {dtype = "int64"}), {max_new_tokens = 3, temperature = 0})
  lu.assertEquals(t.shape, {2, 5})
  lu.assertEquals(t:tolist()[1], g:generate({1, 2}, {max_new_tokens = 3, temperature = 0}))
end

function TestTransformer:test_state_dict_names_and_tied_head()
  local g = small_gpt{n_layers = 1}
  local keys = g:state_dict_keys()
  table.sort(keys)
  lu.assertEquals(keys, {"layers.0.attention.wk.weight", "layers.0.attention.wo.weight", "layers.0.attention.wq.weight",
                         "layers.0.attention.wv.weight", "layers.0.attention_norm.weight",
                         "layers.0.feed_forward.w1.weight", "layers.0.feed_forward.w2.weight",
                         "layers.0.feed_forward.w3.weight", "layers.0.ffn_norm.weight", "norm.weight", "output.weight",
                         "tok_embeddings.weight"})
  local tied = small_gpt{n_layers = 1, tied = true}
  lu.assertNil(tied.output)
  lu.assertEquals(#tied:state_dict_keys(), 11)
  local ids = nc.tensor({{1, 2, 3}}, {dtype = "int64"})
  local tape = ag.Tape()
  local loss = tape:record(function() return tied(ids):sum() end)
  tape:backward(loss)
  lu.assertNotNil(tied.tok_embeddings.weight.grad)
end

function TestTransformer:test_training_lowers_the_loss()
  nc.manual_seed(5)
  local g = small_gpt()
  local opt = optim.AdamW(g:parameters(), {lr = 1e-2})
  local ids = nc.randint(0, 29, {4, 12}, {dtype = "int64"})
  local x, y = ids:narrow(2, 1, 11), ids:narrow(2, 2, 11)
  local first, last
  for step = 1, 15 do
    opt:zero_grad()
    local tape = ag.Tape()
    local loss = tape:record(function() return ag.cross_entropy(g(x):reshape({-1, 29}), y:reshape({-1})) end)
    tape:backward(loss)
    opt:step()
    local l = loss.value:item()
    first = first or l
    last = l
  end
  lu.assertTrue(last < 0.5 * first, string.format("loss %.3f -> %.3f", first, last))
end

function TestTransformer:test_errors()
  H.assert_error(function() tf.RotaryAttention{dim = 24, n_heads = 4, n_kv_heads = 3} end, "must divide n_heads")
  H.assert_error(function() tf.RotaryAttention{dim = 24, n_heads = 5} end, "must divide dim")
  H.assert_error(function() tf.RotaryAttention{dim = 24, n_heads = 8} end, "must be even")
  H.assert_error(function() tf.DecoderBlock{dim = 8, n_heads = 2, ffn = 3} end, "unknown option 'ffn'")
  H.assert_error(function() small_gpt{vocab = 3} end, "unknown option 'vocab'")
  local g = small_gpt()
  H.assert_error(function() g:generate({1}, {max_new_tokens = 40}) end, "past max_seq")
  H.assert_error(function() g:generate({1}, {topk = 3}) end, "unknown option 'topk'")
  H.assert_error(function() g:generate({}, {}) end, "at least one token")
  local cache = tf.KVCache{batch = 1, max_seq = 4, n_kv_heads = 2, head_dim = 8, n_layers = 1}
  H.assert_error(function() cache:update(1, 3, nc.zeros({1, 2, 2, 8}), nc.zeros({1, 2, 2, 8})) end, "past max_seq 4")
  H.assert_error(function() cache:update(1, 0, nc.zeros({1, 3, 2, 8}), nc.zeros({1, 3, 2, 8})) end, "do not fit")
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

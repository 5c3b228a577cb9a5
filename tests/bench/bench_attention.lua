-- Attention and GPT-tiny training, in one run:
--
-- * attention: causal forward + backward (gradients of q, k and v) of flash_attention and of the naive
--   softmax(q k^T / sqrt(d)) v composed of ops, float32, head_dim 64: time (best of a few calls after a
--   warm-up, each ended by a device sync) and extra memory (the device pool's peak minus what the inputs
--   hold; each configuration runs in a child process so the peak is its own). On a GPU: every B in 1, 4
--   with every H in 8, 16, at T 512/1024/2048/4096/8192, naive up to 2048. On the CPU (slow): B 1, H 8,
--   T 128/512/2048 (4096 flash), naive up to 2048. NETCL_BENCH_B / _H / _T ("128,512") override. The
--   ratio is flash's time over the naive one's of the same run (lower is better), and over PyTorch's
--   scaled_dot_product_attention (fp32, TF32 off, is_causal) on the same GPU when torch has CUDA and SDPA
--   (all configurations in one Python process, printed beside netcl's: sdpa_s, sdpa_extra_mb,
--   ratio_sdpa); without them (torch 1.13, or no CUDA) those columns are left out.
-- The device: the default one (NETCL_DEVICE=opencl:1:0, or run.lua --device opencl:1:0).
-- * gpt_tiny step: models.GPT (vocab 1024, dim 256, 4 layers, 4 heads, T 128, ffn_hidden 683), batch 32 on
--   a GPU and 8 on the CPU (NETCL_BENCH_GPT_B), one AdamW training step; tokens/s against the same model in
--   PyTorch (on CUDA for a GPU, else on the CPU with the same thread count), ratio = netcl / PyTorch (higher
--   is better). PyTorch is skipped with a message when python3-torch is missing.
local nc = require "netcl"
-- The Python that has the reference (tests/lua/helpers.lua: NETCL_PYTHON, python3, /usr/bin/python3).
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/../lua/helpers.lua")
local PY = H.python("torch") or "python3"
local ag = require "netcl.autograd"

local dev = nc.default_device()
local SELF = debug.getinfo(1, "S").source:gsub("^@", "")
local EXE = arg and arg[-1] or "netcl-lua"

local function list(env, default)
  local s = os.getenv(env)
  if not s then return default end
  local r = {}
  for v in s:gmatch("%d+") do r[#r + 1] = tonumber(v) end
  return r
end

local function best_s(fn, reps) return H.best_time(dev, reps, fn) end

local function naive(q, k, v)
  local t, d = q.shape[3], q.shape[4]
  local ar = nc.arange(0, t, 1, {device = dev})
  local mask = nc.where(ar:reshape({1, t}):gt(ar:reshape({t, 1})), -math.huge, 0.0)
  return (q:matmul(k:transpose(3, 4)) * (1 / math.sqrt(d)) + mask):softmax(4):matmul(v)
end

-- One configuration (in a child process): prints "seconds extra_bytes".
local one = os.getenv("NETCL_BENCH_ATT_ONE")
if one then
  local impl, b, h, t, d = one:match("^(%a+) (%d+) (%d+) (%d+) (%d+)$")
  b, h, t, d = tonumber(b), tonumber(h), tonumber(t), tonumber(d)
  nc.manual_seed(1)
  local q, k, v = nc.randn({b, h, t, d}, {device = dev}), nc.randn({b, h, t, d}, {device = dev}),
                  nc.randn({b, h, t, d}, {device = dev})
  local g = nc.randn({b, h, t, d}, {device = dev})
  dev:sync()
  local base = nc.memory_stats(dev).in_use
  local f = impl == "flash" and function(a, bb, c) return ag.flash_attention(a, bb, c, {causal = true}) end or naive
  local s = best_s(function()
    local pq, pk, pv = ag.param(q), ag.param(k), ag.param(v)
    local tape = ag.Tape()
    local out = tape:record(function() return f(pq, pk, pv) end)
    tape:backward(out, g)
  end, t >= 2048 and 2 or 5)
  io.write(string.format("%.6f %d\n", s, nc.memory_stats(dev).peak - base))
  return
end

local BS = list("NETCL_BENCH_B", dev.is_gpu and {1, 4} or {1})
local HS = list("NETCL_BENCH_H", dev.is_gpu and {8, 16} or {8})
local D = 64
local TS = list("NETCL_BENCH_T", dev.is_gpu and {512, 1024, 2048, 4096, 8192} or {128, 512, 2048, 4096})
local NAIVE_MAX = 2048

local function child(impl, B, Hh, t)
  local p = io.popen(string.format("NETCL_BENCH_ATT_ONE='%s %d %d %d %d' NETCL_DEVICE='%s' '%s' '%s' 2>&1", impl, B, Hh,
    t, D, dev.spec, EXE, SELF))
  local out = p:read("a")
  p:close()
  local s, m = out:match("([%d.]+) (%-?%d+)")
  if not s then io.stderr:write("bench_attention: " .. impl .. " T " .. t .. " failed: " .. out .. "\n") end
  return tonumber(s), tonumber(m)
end

-- PyTorch: SDPA on CUDA (fp32, TF32 off) and the GPT-tiny training step; "none" without torch.
local function torch_run(mode, args)
  return H.python_output(PY, ([==[
import sys, time, math
import torch
import torch.nn.functional as F
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
gpu = %s and torch.cuda.is_available()
dev = "cuda" if gpu else "cpu"
if not gpu: torch.set_num_threads(%d)
def sync():
    if gpu: torch.cuda.synchronize()
def best(fn, reps):
    fn(); sync()
    r = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter(); fn(); sync()
        r = min(r, time.perf_counter() - t0)
    return r
mode, a = sys.argv[1], [int(x) for x in sys.argv[2:]]
if mode == "sdpa":  # a: d, then (b, h, t) per configuration; one line "b h t device seconds bytes" each
    if not gpu or not hasattr(F, "scaled_dot_product_attention"):
        print("none"); sys.exit(0)
    d = a[0]
    for i in range(1, len(a), 3):
        b, h, t = a[i:i + 3]
        q, k, v = (torch.randn(b, h, t, d, device=dev, requires_grad=True) for _ in range(3))
        g = torch.randn(b, h, t, d, device=dev)
        def step():
            q.grad = k.grad = v.grad = None
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            o.backward(g)
        sync()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        s = best(step, 3 if t >= 2048 else 5)
        print(b, h, t, dev, s, torch.cuda.max_memory_allocated() - base, flush=True)
        del q, k, v, g
        torch.cuda.empty_cache()
else:
    V, dim, L, H, T, hidden, B = a
    hd = dim // H
    class Block(torch.nn.Module):
        def __init__(s):
            super().__init__()
            s.wq, s.wk, s.wv, s.wo = (torch.nn.Linear(dim, dim, bias=False) for _ in range(4))
            s.w1, s.w3 = torch.nn.Linear(dim, hidden, bias=False), torch.nn.Linear(dim, hidden, bias=False)
            s.w2 = torch.nn.Linear(hidden, dim, bias=False)
            s.n1, s.n2 = torch.nn.Parameter(torch.ones(dim)), torch.nn.Parameter(torch.ones(dim))
        def norm(s, x, w):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
        def rope(s, x, c, sn):
            x0, x1 = x[..., 0::2], x[..., 1::2]
            return torch.stack([x0 * c - x1 * sn, x0 * sn + x1 * c], -1).flatten(-2)
        def forward(s, x, c, sn, mask):
            b, t, _ = x.shape
            y = s.norm(x, s.n1)
            q = s.rope(s.wq(y).view(b, t, H, hd).transpose(1, 2), c, sn)
            k = s.rope(s.wk(y).view(b, t, H, hd).transpose(1, 2), c, sn)
            v = s.wv(y).view(b, t, H, hd).transpose(1, 2)
            if hasattr(F, "scaled_dot_product_attention"):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                o = torch.softmax(q @ k.transpose(2, 3) / math.sqrt(hd) + mask, -1) @ v
            x = x + s.wo(o.transpose(1, 2).reshape(b, t, dim))
            y = s.norm(x, s.n2)
            return x + s.w2(F.silu(s.w1(y)) * s.w3(y))
    class GPT(torch.nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = torch.nn.Embedding(V, dim)
            s.layers = torch.nn.ModuleList([Block() for _ in range(L)])
            s.nf = torch.nn.Parameter(torch.ones(dim))
            s.out = torch.nn.Linear(dim, V, bias=False)
        def forward(s, ids, c, sn, mask):
            x = s.emb(ids)
            for l in s.layers:
                x = l(x, c, sn, mask)
            x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * s.nf
            return s.out(x)
    m = GPT().to(dev)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    inv = 10000 ** (-torch.arange(0, hd, 2, dtype=torch.float32) / hd)
    ang = torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]
    c, sn = torch.cos(ang).to(dev), torch.sin(ang).to(dev)
    mask = torch.full((T, T), float("-inf"), device=dev).triu(1)
    ids = torch.randint(0, V, (B, T + 1), device=dev)
    def step():
        opt.zero_grad()
        logits = m(ids[:, :-1], c, sn, mask)
        F.cross_entropy(logits.reshape(-1, V), ids[:, 1:].reshape(-1)).backward()
        opt.step()
    print(dev, best(step, 5))
]==]):format(dev.is_gpu and "True" or "False", dev.compute_units), mode .. " " .. table.concat(args, " "))
end

local have_torch = os.execute(PY .. " -c 'import torch' >/dev/null 2>&1")
if not have_torch then io.stderr:write("bench_attention: python3-torch not found; no PyTorch reference\n") end

-- PyTorch SDPA for every configuration first (one process: CUDA starts once), keyed "b h t".
local sdpa = {}
if have_torch and dev.is_gpu then
  local args = {D}
  for _, b in ipairs(BS) do
    for _, hh in ipairs(HS) do
      for _, t in ipairs(TS) do args[#args + 1] = string.format("%d %d %d", b, hh, t) end
    end
  end
  local out = torch_run("sdpa", args)
  for b, hh, t, tdev, ts, tm in out:gmatch("(%d+) (%d+) (%d+) (%S+) (%S+) (%S+)") do
    sdpa[b .. " " .. hh .. " " .. t] = {dev = tdev, s = tonumber(ts), m = tonumber(tm)}
  end
  if not next(sdpa) then io.stderr:write("bench_attention: no PyTorch SDPA on CUDA here; no SDPA reference\n") end
end

for _, B in ipairs(BS) do
  for _, Hh in ipairs(HS) do
    for _, t in ipairs(TS) do
      local fs, fm = child("flash", B, Hh, t)
      local line = string.format('{"bench":"attention","device":"%s","B":%d,"H":%d,"T":%d,"D":%d', dev.spec, B, Hh, t, D)
      if fs then line = line .. string.format(',"flash_s":%.5f,"flash_extra_mb":%.1f', fs, fm / 2 ^ 20) end
      if t <= NAIVE_MAX then
        local ns, nm = child("naive", B, Hh, t)
        if ns then
          line = line .. string.format(',"naive_s":%.5f,"naive_extra_mb":%.1f', ns, nm / 2 ^ 20)
          if fs then line = line .. string.format(',"ratio_naive":%.3f', fs / ns) end
        end
      end
      local r = sdpa[B .. " " .. Hh .. " " .. t]
      if r and fs then
        line = line .. string.format(',"torch_device":"%s","sdpa_s":%.5f,"sdpa_extra_mb":%.1f,"ratio_sdpa":%.3f', r.dev,
          r.s, r.m / 2 ^ 20, fs / r.s)
      end
      print(line .. "}")
    end
  end
end

-- ---- GPT-tiny training step ----------------------------------------------------------------------------
do
  local models = require "netcl.models"
  local optim = require "netcl.optim"
  local V, DIM, L, H, T, HID = 1024, 256, 4, 4, 128, 683
  local GB = list("NETCL_BENCH_GPT_B", {dev.is_gpu and 32 or 8})[1]
  nc.manual_seed(1)
  local m = models.GPT{vocab_size = V, dim = DIM, n_layers = L, n_heads = H, max_seq = T, ffn_hidden = HID,
                       device = dev}
  local opt = optim.AdamW(m:parameters(), {lr = 1e-3})
  local ids = nc.randint(0, V, {GB, T + 1}, {dtype = "int64", device = dev})
  local x, y = ids:narrow(2, 1, T), ids:narrow(2, 2, T)
  local s = best_s(function()
    opt:zero_grad()
    local tape = ag.Tape()
    local loss = tape:record(function() return ag.cross_entropy(m(x):reshape({-1, V}), y:reshape({-1})) end)
    tape:backward(loss)
    opt:step()
  end, 5)
  local line = string.format('{"bench":"gpt_tiny_step","device":"%s","batch":%d,"T":%d,"netcl_s":%.4f,"netcl_tok_s":%.0f',
    dev.spec, GB, T, s, GB * T / s)
  if have_torch then
    local r = torch_run("gpt", {V, DIM, L, H, T, HID, GB})
    local tdev, ts = r:match("^(%S+) (%S+)")
    if ts then
      ts = tonumber(ts)
      line = line .. string.format(',"torch_device":"%s","torch_s":%.4f,"torch_tok_s":%.0f,"ratio":%.3f', tdev, ts,
        GB * T / ts, ts / s)
    end
  end
  print(line .. "}")
end

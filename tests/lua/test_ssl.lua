-- netcl.ssl's machinery: the fused momentum update (against its formula, over flat parameter
-- buffers), deep copies, the eight methods on a tiny encoder (a finite loss, gradients only where
-- the optimizer trains), MoCo's queue, DINO's center, the default views, the trainer's exact
-- resume, and the linear probe on data with a known answer.
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local nn = require "netcl.nn"
local optim = require "netcl.optim"
local data = require "netcl.data"
local ssl = require "netcl.ssl"
local H = require "helpers"

local dev = H.device()

local function tiny_encoder()
  local enc = nn.Sequential(nn.Conv2d(1, 4, 3, {padding = 1, device = dev}), nn.BatchNorm2d(4, {device = dev}),
    nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten())
  enc.feature_dim = 16
  return enc
end

TestSSL = {}

function TestSSL:test_ema_update_formula()
  local t = nc.tensor({1, 2, 3, -4, 0.5}, {dtype = "float64", device = dev})
  local o = nc.tensor({0, 10, -3, 4, 0.25}, {dtype = "float64", device = dev})
  local r = nc.nn_ops.ema_update(t, o, {momentum = 0.9})
  local want = {}
  for i, v in ipairs({1, 2, 3, -4, 0.5}) do want[i] = 0.9 * v + (1 - 0.9) * ({0, 10, -3, 4, 0.25})[i] end
  H.assert_close(t, want, 1e-15, "in place")
  H.assert_close(r, want, 1e-15, "returned")
  nc.nn_ops.ema_update(t, o, {momentum = 0})
  H.assert_close(t, o, 0, "momentum 0 copies")
  nc.nn_ops.ema_update(t, nc.zeros({5}, {dtype = "float64", device = dev}), {momentum = 1})
  H.assert_close(t, o, 0, "momentum 1 keeps")
  -- online in another layout; default momentum 0.99
  local t2 = nc.zeros({2, 3}, {device = dev})
  nc.nn_ops.ema_update(t2, nc.ones({3, 2}, {device = dev}):transpose(1, 2))
  H.assert_close(t2, {{0.01, 0.01, 0.01}, {0.01, 0.01, 0.01}}, 1e-6, "strided online")
  H.assert_error(function() nc.nn_ops.ema_update(nc.zeros({3, 2}, {device = dev}):transpose(1, 2), nc.zeros({2, 3}, {device = dev})) end,
    "netcl.ema_update", "target must be contiguous")
  H.assert_error(function() nc.nn_ops.ema_update(nc.zeros({3}, {device = dev}), nc.zeros({4}, {device = dev})) end, "shape")
  H.assert_error(function() nc.nn_ops.ema_update(nc.zeros({3}, {device = dev}), nc.zeros({3}, {dtype = "float64", device = dev})) end, "online is float64 but target is float32")
  H.assert_error(function() nc.nn_ops.ema_update(nc.zeros({3}, {device = dev}), nc.zeros({3}, {device = dev}), {momentum = 1.5}) end,
    "momentum must be in [0, 1]")
  H.assert_error(function() nc.nn_ops.ema_update(nc.zeros({3}, {device = dev}), nc.zeros({3}, {device = dev}), {m = 1}) end,
    "unknown option 'm'")
end

-- Every parameter of a momentum encoder moves in the one update of its flat buffer.
function TestSSL:test_flat_parameters_and_deepcopy()
  nc.manual_seed(3)
  local enc = tiny_encoder()
  local copy = enc:deepcopy()
  lu.assertEquals(copy.feature_dim, 16)
  lu.assertEquals(copy:state_dict_keys(), enc:state_dict_keys())
  for name, t in pairs(enc:state_dict()) do H.assert_close(copy:state_dict()[name], t, 0, name) end
  copy[1].weight.value:fill_(5)
  lu.assertTrue(enc[1].weight.value:ne(5):all():item(), "the copy shares nothing")
  local before = {}
  for i, p in ipairs(enc:parameters()) do before[i] = p.value:clone() end
  local flat, params = ssl.flatten_parameters({enc})
  lu.assertEquals(#params, #enc:parameters())
  lu.assertEquals(flat:numel(), enc:num_parameters())
  for i, p in ipairs(enc:parameters()) do H.assert_close(p.value, before[i], 0, "values kept") end
  local target = nc.zeros({flat:numel()}, {device = dev})
  ssl.ema_update(flat, target, 0.5)
  for i, p in ipairs(enc:parameters()) do H.assert_close(p.value, before[i] * 0.5, 1e-6, "param " .. i) end
end

local METHODS = {
  {"SimCLR", {proj_dim = 8}}, {"MoCo", {proj_dim = 8, queue_size = 24}}, {"BYOL", {proj_dim = 8}},
  {"SimSiam", {proj_dim = 8}}, {"BarlowTwins", {proj_dim = 8}}, {"VICReg", {proj_dim = 8}},
  {"SwAV", {proj_dim = 8, n_prototypes = 6}}, {"DINO", {out_dim = 10, bottleneck = 8}},
}

local function make(name, extra)
  local o = {encoder = tiny_encoder()}
  for k, v in pairs(extra) do o[k] = v end
  return ssl[name](o)
end

-- One step of each method: a finite loss, a gradient for every trained parameter, none for
-- target networks (which the optimizer never sees), and the momentum update moving the target.
function TestSSL:test_methods_step()
  for _, spec in ipairs(METHODS) do
    nc.manual_seed(5)
    local m = make(spec[1], spec[2])
    local x = nc.randn({12, 1, 6, 6}, {device = dev})
    local tape = ag.Tape()
    local loss = tape:record(function() return m:loss(x, x * 0.9 + 0.1) end)
    local v = loss:item()
    lu.assertTrue(v == v and math.abs(v) < 1e6, spec[1] .. ": loss " .. v)
    tape:backward(loss)
    local trained = {}
    for _, p in ipairs(m:parameters()) do
      trained[p] = true
      lu.assertNotNil(p.grad, spec[1] .. ": a trained parameter without gradient")
    end
    local n_all = 0
    for name, p in m:named_parameters() do
      n_all = n_all + 1
      if not trained[p] then
        lu.assertStrContains(name, "target_", false, spec[1] .. ": " .. name .. " is neither trained nor a target")
        lu.assertNil(p.grad, spec[1] .. ": target " .. name .. " got a gradient")
      end
    end
    if m.target_encoder then
      lu.assertTrue(n_all > #m:parameters())
      local before = m.target_encoder[1].weight.value:clone()
      m.encoder[1].weight.value:add_(1)
      m:after_step()
      H.assert_close(m.target_encoder[1].weight.value, before + (1 - m.momentum), 1e-5, spec[1] .. " EMA")
    else
      m:after_step()
    end
    local z = m:embed(x)
    lu.assertEquals(z.shape[1], 12)
  end
end

function TestSSL:test_moco_queue()
  nc.manual_seed(2)
  local m = make("MoCo", {proj_dim = 4, queue_size = 10})
  local x = nc.randn({4, 1, 6, 6}, {device = dev})
  for step = 1, 3 do
    local tape = ag.Tape()
    local loss = tape:record(function() return m:loss(x, x) end)
    tape:backward(loss)
    local keys = m._pending:clone()
    m:after_step()
    -- 8 keys per step into a queue of 10: positions (8 (step - 1) + i - 1) mod 10
    for i = 1, 8 do
      local pos = (8 * (step - 1) + i - 1) % 10
      H.assert_close(m.queue:select(1, pos + 1), keys:select(1, i), 0, "step " .. step .. " key " .. i)
    end
    lu.assertEquals(m.queue_ptr:item(), (8 * step) % 10)
  end
end

function TestSSL:test_dino_center()
  nc.manual_seed(4)
  local m = make("DINO", {out_dim = 6, bottleneck = 4, center_momentum = 0.8})
  local x = nc.randn({5, 1, 6, 6}, {device = dev})
  local tape = ag.Tape()
  local loss = tape:record(function() return m:loss(x, x) end)
  tape:backward(loss)
  local mean = m._pending:clone()
  local c0 = m.center:clone()
  m:after_step()
  H.assert_close(m.center, c0 * 0.8 + mean * 0.2, 1e-6, "center")
end

function TestSSL:test_views()
  nc.manual_seed(9)
  local x = nc.arange(2 * 36, {dtype = "float32", device = dev}):view({2, 1, 6, 6})
  local v = ssl.views.Views{contrast = 0, brightness = 0, noise = 0, min_scale = 1, flip = false}
  H.assert_close(v(x), x, 0, "scale 1, no flip: the image itself")
  local f = ssl.views.Views{contrast = 0, brightness = 0, noise = 0, min_scale = 1}
  local rev = nc.tensor({5, 4, 3, 2, 1, 0}, {dtype = "int64", device = dev})
  local seen = {}
  for _ = 1, 6 do
    local y = f(x)
    for s = 1, 2 do
      local img, out = x:select(1, s), y:select(1, s)
      local same, mirrored = out:eq(img):all():item(), out:eq(img:index_select(3, rev)):all():item()
      lu.assertTrue(same or mirrored, "each sample is itself or mirrored")
      seen[same] = true
    end
  end
  lu.assertTrue(seen[true] and seen[false], "both happen")
  local d = ssl.views.default()(x)
  lu.assertEquals(d.shape, {2, 1, 6, 6})
  lu.assertFalse(d:eq(x):all():item())
  H.assert_error(function() ssl.views.Views{scale = 1} end, "unknown option 'scale'", "min_scale=")
  H.assert_error(function() v(nc.zeros({3, 3})) end, "[N, C, H, W]")
end

-- Two epochs straight, or one, a checkpoint and a resumed second: the same state to the bit.
function TestSSL:test_trainer_resume_exact()
  local dir = H.tmpdir()
  local images = nc.randn({24, 1, 6, 6}, {device = dev})
  local function run(stop_after, resume)
    nc.manual_seed(7)
    local m = make("MoCo", {proj_dim = 4, queue_size = 20})
    local opt = optim.Adam(m:parameters(), {lr = 0.01})
    local loader = data.DataLoader(data.TensorDataset(images), {batch_size = 8, shuffle = true, seed = 3})
    local t = ssl.Trainer{method = m, loader = loader, optimizer = opt, epochs = 2, progress = false,
      checkpoint = dir .. "/ck.netcl", resume = resume, stop_after = stop_after,
      scheduler = optim.CosineAnnealingLR(opt, {T_max = 6})}
    local h = t:fit()
    return m, h
  end
  local straight, h1 = run(nil, false)
  os.remove(dir .. "/ck.netcl")
  run(1, false)
  local resumed, h2 = run(nil, true)
  lu.assertEquals(#h2.loss, 2)
  lu.assertEquals(h2.loss, h1.loss)
  local a, b = straight:state_dict(), resumed:state_dict()
  for name, t in pairs(a) do H.assert_close(b[name], t, 0, name) end
  os.execute("rm -rf '" .. dir .. "'")
  H.assert_error(function() ssl.Trainer{method = straight, loader = {}, optimizer = {}, epochs = 1} end, "loader must have iter()")
  H.assert_error(function() ssl.Trainer{method = straight, epochs = 1, loader = data.DataLoader(data.TensorDataset(images)),
    optimizer = optim.Adam(straight:parameters(), {lr = 0.1}), resume = true} end, "resume=true needs checkpoint=")
  H.assert_error(function() ssl.SimCLR{encoder = nn.Flatten()} end, "give feature_dim=")
  H.assert_error(function() ssl.BYOL{encoder = tiny_encoder(), momentum = 2} end, "option 'momentum' must be a number in [0, 1]")
  H.assert_error(function() ssl.SimCLR{encoder = tiny_encoder(), tau = 1} end, "unknown option 'tau'", "temperature=")
end

-- A feature where the classes are linearly separable: the probe finds them; with labels that
-- are noise it stays near chance.
function TestSSL:test_linear_probe()
  nc.manual_seed(1)
  local n = 600
  local y = nc.randint(0, 3, {n}, {dtype = "int64", device = dev})
  local centers = nc.tensor({{3, 0, 0, 0}, {0, 3, 0, 0}, {0, 0, 3, 0}}, {device = dev})
  local x = centers:index_select(1, y) + nc.randn({n, 4}, {device = dev}) * 0.5
  local enc = nn.Flatten()
  local function loaders(labels)
    local tr = data.DataLoader(data.TensorDataset(x:narrow(1, 1, 400), labels:narrow(1, 1, 400)), {batch_size = 100})
    local te = data.DataLoader(data.TensorDataset(x:narrow(1, 401, 200), labels:narrow(1, 401, 200)), {batch_size = 100})
    return tr, te
  end
  local tr, te = loaders(y)
  local acc, info = ssl.linear_probe(enc, tr, te, {epochs = 20, lr = 0.05})
  lu.assertTrue(acc > 0.97, "separable: " .. acc)
  lu.assertEquals(info.classes, 3)
  local noise = nc.randint(0, 3, {n}, {dtype = "int64", device = dev})
  tr, te = loaders(noise)
  acc = ssl.linear_probe(enc, tr, te, {epochs = 20, lr = 0.05})
  lu.assertTrue(acc < 0.5, "noise labels: " .. acc)
  lu.assertAlmostEquals(ssl.embedding_std(nc.ones({5, 4}, {device = dev})), 0, 1e-6)
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

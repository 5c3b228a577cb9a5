-- netcl.ssl.losses against their papers' formulas computed here in plain Lua (float64, tiny
-- inputs, to 1e-10), gradchecked (float64 central differences), their stop-gradients checked,
-- and compared with a PyTorch transcription of the same formulas when python3 has torch
-- (skipped with a message otherwise).
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local ssl = require "netcl.ssl"
local H = require "helpers"

local L = ssl.losses
local dev = H.device()

-- ---- tiny inputs, as Lua tables and as float64 Tensors ---------------------------------------------
local function mat(n, d, seed, scale)
  local m = {}
  for i = 1, n do
    m[i] = {}
    for j = 1, d do m[i][j] = scale * math.sin(seed * 1.7 + i * 2.3 + j * j * 0.9) + 0.1 * j end
  end
  return m
end
local function T(m) return nc.tensor(m, {dtype = "float64", device = dev}) end

local N, D = 5, 4
local A, B = mat(N, D, 1, 1.0), mat(N, D, 2, 0.6)

-- ---- the formulas in plain Lua ------------------------------------------------------------------------
local function dot(a, b) local s = 0 for j = 1, #a do s = s + a[j] * b[j] end return s end
local function unit(a) local r = math.sqrt(dot(a, a)) local o = {} for j = 1, #a do o[j] = a[j] / r end return o end
local function cos(a, b) return dot(a, b) / math.sqrt(dot(a, a) * dot(b, b)) end
local function log_softmax(row, t)
  local m = -math.huge
  for _, v in ipairs(row) do m = math.max(m, v / t) end
  local s = 0
  for _, v in ipairs(row) do s = s + math.exp(v / t - m) end
  local o = {}
  for j, v in ipairs(row) do o[j] = v / t - m - math.log(s) end
  return o
end

local REF = {}
function REF.nt_xent(a, b, t)
  local z = {}
  for i = 1, #a do z[i] = unit(a[i]) end
  for i = 1, #b do z[#a + i] = unit(b[i]) end
  local n2, loss = #z, 0
  for i = 1, n2 do
    local pos = (i - 1 + #a) % n2 + 1
    local den = 0
    for k = 1, n2 do if k ~= i then den = den + math.exp(dot(z[i], z[k]) / t) end end
    loss = loss - math.log(math.exp(dot(z[i], z[pos]) / t) / den)
  end
  return loss / n2
end
function REF.byol(p, z)
  local s = 0
  for i = 1, #p do s = s + 2 - 2 * cos(p[i], z[i]) end
  return s / #p
end
function REF.simsiam(p, z)
  local s = 0
  for i = 1, #p do s = s - cos(p[i], z[i]) end
  return s / #p
end
local function columns(z)
  local n, d, mean, c = #z, #z[1], {}, {}
  for j = 1, d do
    local s = 0
    for i = 1, n do s = s + z[i][j] end
    mean[j] = s / n
  end
  for i = 1, n do c[i] = {} for j = 1, d do c[i][j] = z[i][j] - mean[j] end end
  return c
end
function REF.barlow_twins(a, b, lambda)
  local n, d = #a, #a[1]
  local function std(z)
    local c = columns(z)
    for j = 1, d do
      local v = 0
      for i = 1, n do v = v + c[i][j] ^ 2 end
      local s = math.sqrt(v / n + 1e-5)
      for i = 1, n do c[i][j] = c[i][j] / s end
    end
    return c
  end
  local x, y, loss = std(a), std(b), 0
  for i = 1, d do
    for j = 1, d do
      local cij = 0
      for k = 1, n do cij = cij + x[k][i] * y[k][j] end
      cij = cij / n
      if i == j then loss = loss + (1 - cij) ^ 2 else loss = loss + lambda * cij ^ 2 end
    end
  end
  return loss
end
function REF.vicreg(a, b, sim, var, cov, eps)
  local n, d = #a, #a[1]
  local repr = 0
  for i = 1, n do for j = 1, d do repr = repr + (a[i][j] - b[i][j]) ^ 2 end end
  repr = repr / (n * d)
  local std_loss, cov_loss = 0, 0
  for _, z in ipairs({a, b}) do
    local c = columns(z)
    local s = 0
    for j = 1, d do
      local v = 0
      for i = 1, n do v = v + c[i][j] ^ 2 end
      s = s + math.max(0, 1 - math.sqrt(v / (n - 1) + eps))
    end
    std_loss = std_loss + s / d / 2
    for p = 1, d do
      for q = 1, d do
        if p ~= q then
          local cv = 0
          for i = 1, n do cv = cv + c[i][p] * c[i][q] end
          cov_loss = cov_loss + (cv / (n - 1)) ^ 2 / d
        end
      end
    end
  end
  return sim * repr + var * std_loss + cov * cov_loss
end
function REF.dino(s, t, center, st, tt)
  local loss = 0
  for i = 1, #s do
    local tc = {}
    for j = 1, #t[i] do tc[j] = t[i][j] - center[j] end
    local lt, ls = log_softmax(tc, tt), log_softmax(s[i], st)
    for j = 1, #lt do loss = loss - math.exp(lt[j]) * ls[j] end
  end
  return loss / #s
end
function REF.sinkhorn(s, eps, iters)
  local n, k = #s, #s[1]
  local q, total = {}, 0 -- q[p][i]: prototype p, sample i
  for p = 1, k do
    q[p] = {}
    for i = 1, n do q[p][i] = math.exp(s[i][p] / eps) total = total + q[p][i] end
  end
  for p = 1, k do for i = 1, n do q[p][i] = q[p][i] / total end end
  for _ = 1, iters do
    for p = 1, k do
      local r = 0
      for i = 1, n do r = r + q[p][i] end
      for i = 1, n do q[p][i] = q[p][i] / r / k end
    end
    for i = 1, n do
      local c = 0
      for p = 1, k do c = c + q[p][i] end
      for p = 1, k do q[p][i] = q[p][i] / c / n end
    end
  end
  local out = {}
  for i = 1, n do out[i] = {} for p = 1, k do out[i][p] = q[p][i] * n end end
  return out
end
function REF.swav(s1, s2, t, eps, iters)
  local q1, q2 = REF.sinkhorn(s1, eps, iters), REF.sinkhorn(s2, eps, iters)
  local loss = 0
  for i = 1, #s1 do
    local l2, l1 = log_softmax(s2[i], t), log_softmax(s1[i], t)
    for p = 1, #l1 do loss = loss - (q1[i][p] * l2[p] + q2[i][p] * l1[p]) / 2 end
  end
  return loss / #s1
end

local CENTER = {0.05, -0.1, 0.2, 0.0}

-- ---- values -------------------------------------------------------------------------------------------
TestSSLLosses = {}

local function close(got, want, what)
  local g = type(got) == "number" and got or got:item()
  lu.assertTrue(math.abs(g - want) <= 1e-10 * math.max(1, math.abs(want)),
    string.format("%s: %.17g vs the formula's %.17g", what, g, want))
end

function TestSSLLosses:test_values_against_the_formulas()
  local a, b = T(A), T(B)
  close(L.nt_xent(a, b), REF.nt_xent(A, B, 0.5), "nt_xent")
  close(L.nt_xent(a, b, {temperature = 0.1}), REF.nt_xent(A, B, 0.1), "nt_xent t=0.1")
  lu.assertIs(L.info_nce, L.nt_xent)
  close(L.byol(a, b), REF.byol(A, B), "byol")
  close(L.simsiam(a, b), REF.simsiam(A, B), "simsiam")
  close(L.barlow_twins(a, b), REF.barlow_twins(A, B, 0.0051), "barlow_twins")
  close(L.barlow_twins(a, b, {lambda = 0.5}), REF.barlow_twins(A, B, 0.5), "barlow_twins lambda=0.5")
  close(L.vicreg(a, b), REF.vicreg(A, B, 25, 25, 1, 1e-4), "vicreg")
  close(L.vicreg(a, b, {sim = 1, var = 2, cov = 3, eps = 0.01}), REF.vicreg(A, B, 1, 2, 3, 0.01), "vicreg weights")
  local center = nc.tensor(CENTER, {dtype = "float64", device = dev})
  close(L.dino(a, b, center), REF.dino(A, B, CENTER, 0.1, 0.04), "dino")
  close(L.dino(a, b, center, {student_temp = 0.3, teacher_temp = 0.07}), REF.dino(A, B, CENTER, 0.3, 0.07), "dino temps")
  H.assert_close(L.sinkhorn(a), REF.sinkhorn(A, 0.05, 3), 1e-10, "sinkhorn")
  H.assert_close(L.sinkhorn(a, {epsilon = 0.5, iters = 5}), REF.sinkhorn(A, 0.5, 5), 1e-10, "sinkhorn eps=0.5")
  close(L.swav(a, b), REF.swav(A, B, 0.1, 0.05, 3), "swav")
  close(L.swav(a, b, {temperature = 0.2, sinkhorn_iters = 1, epsilon = 0.3}), REF.swav(A, B, 0.2, 0.3, 1), "swav opts")
end

-- The sum of each sample's codes is 1 and each prototype gets N/K of the mass after the last
-- (column) step: equal partition up to the row constraint's remaining error.
function TestSSLLosses:test_sinkhorn_partition()
  local q = L.sinkhorn(T(A), {iters = 50, epsilon = 0.5})
  H.assert_close(q:sum(2), {1, 1, 1, 1, 1}, 1e-12, "per sample")
  H.assert_close(q:sum(1), {N / D, N / D, N / D, N / D}, 1e-6, "per prototype")
end

function TestSSLLosses:test_float32()
  local a, b = T(A):to("float32"), T(B):to("float32")
  lu.assertEquals(L.nt_xent(a, b).dtype, "float32")
  lu.assertTrue(math.abs(L.nt_xent(a, b):item() - REF.nt_xent(A, B, 0.5)) < 1e-5)
  lu.assertTrue(math.abs(L.vicreg(a, b):item() - REF.vicreg(A, B, 25, 25, 1, 1e-4)) < 1e-4)
end

-- ---- gradients ------------------------------------------------------------------------------------------
function TestSSLLosses:test_gradcheck()
  local a, b = ag.param(T(A)), ag.param(T(B))
  local center = T({CENTER})
  local q1, q2 = L.sinkhorn(T(A)), L.sinkhorn(T(B))
  local cases = {
    {"nt_xent", function(x, y) return L.nt_xent(x, y, {temperature = 0.3}) end, {a, b}},
    {"barlow_twins", function(x, y) return L.barlow_twins(x, y, {lambda = 0.3}) end, {a, b}},
    {"vicreg", function(x, y) return L.vicreg(x, y, {sim = 1, var = 2, cov = 3}) end, {a, b}},
    -- the detached branch is a constant here: its values do not move the loss through a gradient
    {"byol", L.byol, {a, T(B)}},
    {"simsiam", L.simsiam, {a, T(B)}},
    {"dino", function(s, t) return L.dino(s, t, center, {teacher_temp = 0.3, student_temp = 0.5}) end, {a, T(B)}},
    {"swapped_prediction", function(x, y) return L.swapped_prediction(x, y, q1, q2, {temperature = 0.5}) end, {a, b}},
  }
  for _, c in ipairs(cases) do
    local ok, err = pcall(ag.gradcheck, c[2], c[3])
    lu.assertTrue(ok, c[1] .. ": " .. tostring(err))
  end
end

local function grads(fn, ...)
  local ins = {...}
  local tape = ag.Tape()
  local loss = tape:record(function() return fn(table.unpack(ins)) end)
  tape:backward(loss)
  return loss
end

-- byol/simsiam's target and dino's teacher get no gradient; swav's gradient is that of the
-- swapped prediction with the codes held fixed.
function TestSSLLosses:test_stop_gradient()
  for _, name in ipairs({"byol", "simsiam"}) do
    local p, z = ag.param(T(A)), ag.param(T(B))
    grads(L[name], p, z)
    lu.assertNotNil(p.grad, name .. ": p has a gradient")
    lu.assertNil(z.grad, name .. ": z is detached")
  end
  local s, t = ag.param(T(A)), ag.param(T(B))
  grads(function(x, y) return L.dino(x, y, T({CENTER})) end, s, t)
  lu.assertNotNil(s.grad)
  lu.assertNil(t.grad, "dino: the teacher is detached")

  local s1, s2 = ag.param(T(A)), ag.param(T(B))
  grads(L.swav, s1, s2)
  local f1, f2 = ag.param(T(A)), ag.param(T(B))
  local q1, q2 = L.sinkhorn(T(A)), L.sinkhorn(T(B))
  grads(function(x, y) return L.swapped_prediction(x, y, q1, q2) end, f1, f2)
  H.assert_close(s1.grad, f1.grad, 1e-12, "swav ds1")
  H.assert_close(s2.grad, f2.grad, 1e-12, "swav ds2")
end

function TestSSLLosses:test_errors()
  local a = T(A)
  H.assert_error(function() L.nt_xent(a, T(mat(3, D, 1, 1))) end, "ssl.losses.nt_xent", "same shape")
  H.assert_error(function() L.nt_xent(a, a, {temp = 1}) end, "unknown option 'temp'", "temperature=")
  H.assert_error(function() L.nt_xent(a, a, {temperature = -1}) end, "temperature must be positive")
  H.assert_error(function() L.byol(a:view({-1}), a:view({-1})) end, "ssl.losses.byol", "must be [N, D]")
  H.assert_error(function() L.barlow_twins(a, a:to("int64")) end, "float32 or float64")
  H.assert_error(function() L.dino(a, a, nc.zeros({3}, {dtype = "float64"})) end, "center must be a Tensor of 4")
  H.assert_error(function() L.vicreg(a:narrow(1, 1, 1), a:narrow(1, 1, 1)) end, "at least 2 samples")
end

-- ---- PyTorch -------------------------------------------------------------------------------------------------
-- The same formulas transcribed into torch (float64), from their reference implementations.
local TORCH = [[
import sys, torch
import torch.nn.functional as F
def mat(s, n, d): return torch.tensor([float(v) for v in s.split(',')], dtype=torch.float64).view(n, d)
n, d = int(sys.argv[1]), int(sys.argv[2])
a, b = mat(sys.argv[3], n, d), mat(sys.argv[4], n, d)
center = torch.tensor([float(v) for v in sys.argv[5].split(',')], dtype=torch.float64)
def nt_xent(z1, z2, t):
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    sim = z @ z.t() / t
    sim.fill_diagonal_(float('-inf'))
    target = (torch.arange(2 * n) + n) % (2 * n)
    return F.cross_entropy(sim, target)
def off_diagonal(x): return x.flatten()[:-1].view(d - 1, d + 1)[:, 1:].flatten()
def barlow(z1, z2, lam):
    bn = torch.nn.BatchNorm1d(d, affine=False).double()
    c = bn(z1).T @ bn(z2) / n
    return torch.diagonal(c).add(-1).pow(2).sum() + lam * off_diagonal(c).pow(2).sum()
def vicreg(x, y, sim=25, var=25, cov=1):
    repr_loss = F.mse_loss(x, y)
    x = x - x.mean(dim=0); y = y - y.mean(dim=0)
    std_x = torch.sqrt(x.var(dim=0) + 0.0001); std_y = torch.sqrt(y.var(dim=0) + 0.0001)
    std_loss = torch.mean(F.relu(1 - std_x)) / 2 + torch.mean(F.relu(1 - std_y)) / 2
    cov_x = (x.T @ x) / (n - 1); cov_y = (y.T @ y) / (n - 1)
    cov_loss = off_diagonal(cov_x).pow(2).sum() / d + off_diagonal(cov_y).pow(2).sum() / d
    return sim * repr_loss + var * std_loss + cov * cov_loss
def byol(p, z): return (2 - 2 * (F.normalize(p, dim=-1) * F.normalize(z, dim=-1)).sum(dim=-1)).mean()
def simsiam(p, z): return -F.cosine_similarity(p, z.detach(), dim=-1).mean()
def dino(s, t, c, st=0.1, tt=0.04):
    q = F.softmax((t - c) / tt, dim=-1)
    return torch.sum(-q * F.log_softmax(s / st, dim=-1), dim=-1).mean()
@torch.no_grad()
def sinkhorn(out, eps=0.05, iters=3):
    Q = torch.exp(out / eps).t(); B = Q.shape[1]; K = Q.shape[0]
    Q /= torch.sum(Q)
    for it in range(iters):
        Q /= torch.sum(Q, dim=1, keepdim=True); Q /= K
        Q /= torch.sum(Q, dim=0, keepdim=True); Q /= B
    Q *= B
    return Q.t()
def swav(s1, s2, t=0.1):
    q1, q2 = sinkhorn(s1), sinkhorn(s2)
    l = -torch.mean(torch.sum(q1 * F.log_softmax(s2 / t, dim=1), dim=1))
    l += -torch.mean(torch.sum(q2 * F.log_softmax(s1 / t, dim=1), dim=1))
    return l / 2
outs = [nt_xent(a, b, 0.5), barlow(a, b, 0.0051), vicreg(a, b), byol(a, b), simsiam(a, b), dino(a, b, center), swav(a, b)]
print(','.join(repr(float(v)) for v in outs))
]]

local function torch_python() return H.python("torch") end

function TestSSLLosses:test_pytorch()
  local py = torch_python()
  if not py then
    lu.skip("PyTorch is not installed for python3 (Debian: python3-torch): the comparison with a torch transcription did not run")
  end
  local function csv(m)
    local v = {}
    for _, x in ipairs(H.flat(m)) do v[#v + 1] = string.format("%.17g", x) end
    return table.concat(v, ",")
  end
  local tmp = os.tmpname()
  local f = assert(io.open(tmp, "w"))
  f:write(TORCH)
  f:close()
  local p = io.popen(string.format("%s %s %d %d %s %s %s 2>&1", py, tmp, N, D, csv(A), csv(B), csv(CENTER)))
  local out = p:read("a")
  p:close()
  os.remove(tmp)
  local want = {}
  for v in out:gmatch("[^,\n]+") do want[#want + 1] = tonumber(v) end
  lu.assertEquals(#want, 7, "python3 output: " .. out)
  local a, b = T(A), T(B)
  local mine = {L.nt_xent(a, b), L.barlow_twins(a, b), L.vicreg(a, b), L.byol(a, b), L.simsiam(a, b),
                L.dino(a, b, T(CENTER)), L.swav(a, b)}
  for k, got in ipairs(mine) do close(got, want[k], "torch value " .. k) end
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))

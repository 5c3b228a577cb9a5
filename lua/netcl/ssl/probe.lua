-- netcl.ssl's evaluation: ssl.features, ssl.embedding_std and ssl.linear_probe (a linear
-- classifier on an encoder's frozen features) (docs/ssl.md).
local nc = require "netcl"
local ag = require "netcl.autograd"
local nn = require "netcl.nn"
local optim = require "netcl.optim"
local class = require "netcl.class"
local losses = require "netcl.ssl.losses"
local common = require "netcl.ssl.common"

local value, read_opts = common.value, common.read_opts

local M = {}

-- ---- evaluation ----------------------------------------------------------------------------------------------
--- ssl.features(encoder, loader) -> features [M, F], labels [M]: the encoder's outputs in eval
-- mode without gradients, over the loader's (x, y) batches.
function M.features(encoder, loader)
  local was = encoder.training
  encoder:eval()
  local fs, ys = {}, {}
  ag.no_grad(function()
    for x, y in loader:iter() do
      fs[#fs + 1] = value(encoder(x))
      ys[#ys + 1] = y
    end
  end)
  encoder:train(was)
  if #fs == 0 then error("ssl.features: the loader gave no batches", 2) end
  local f = #fs == 1 and fs[1] or nc.cat(fs, 1)
  return f:reshape({f.shape[1], -1}), #ys == 1 and ys[1] or nc.cat(ys, 1)
end

--- ssl.embedding_std(z) -> the mean over dimensions of the per-dimension std (over the batch)
-- of the L2-normalized rows of z [N, d]; about 1/sqrt(d) for embeddings spread over the sphere,
-- 0 for collapsed ones (SimSiam's measure).
function M.embedding_std(z)
  z = losses.normalize(value(z))
  return z:std(1, {unbiased = false}):mean():item()
end

--- ssl.linear_probe(encoder, train_loader, test_loader, {epochs=30, lr=0.01, batch_size=256,
-- weight_decay=0, seed=1}) -> test accuracy, {train_accuracy=, classes=, features=}: a linear
-- classifier (nn.Linear, Adam) on the frozen encoder's features, standardized with the training
-- features' per-dimension mean and std. The loaders give (x, labels), int64 classes from 0.
function M.linear_probe(encoder, train_loader, test_loader, opts)
  local fname = "ssl.linear_probe"
  if not class.is_instance(encoder, nn.Module) and type(encoder) ~= "function" then
    error(fname .. ": encoder must be an nn.Module", 2)
  end
  local o = read_opts(fname, opts or {}, {epochs = {"integer", 30}, lr = {"positive", 0.01},
    batch_size = {"integer", 256}, weight_decay = {"number", 0}, seed = {"integer", 1}}, 2)
  local xtr, ytr = M.features(encoder, train_loader)
  local xte, yte = M.features(encoder, test_loader)
  local mean = xtr:mean(1, {keepdim = true})
  local std = xtr:std(1, {keepdim = true, unbiased = false}) + 1e-6
  xtr, xte = (xtr - mean) / std, (xte - mean) / std
  local classes = math.max(ytr:max():item(), yte:max():item()) + 1
  nc.manual_seed(o.seed)
  local clf = nn.Linear(xtr.shape[2], classes, {device = xtr.device, dtype = xtr.dtype})
  local adam = optim.Adam(clf:parameters(), {lr = o.lr, weight_decay = o.weight_decay})
  local sched = optim.CosineAnnealingLR(adam, {T_max = o.epochs})
  local n = xtr.shape[1]
  for _ = 1, o.epochs do
    local perm = nc.randperm(n, {device = xtr.device})
    for s = 1, n, o.batch_size do
      local idx = perm:narrow(1, s, math.min(o.batch_size, n - s + 1))
      local tape = ag.Tape()
      local loss = tape:record(function()
        return ag.cross_entropy(clf(xtr:index_select(1, idx)), ytr:index_select(1, idx))
      end)
      adam:zero_grad()
      tape:backward(loss)
      adam:step()
    end
    sched:step()
  end
  local function accuracy(x, y)
    return ag.no_grad(function() return value(clf(x)):argmax(2):eq(y):sum():item() / y.shape[1] end)
  end
  return accuracy(xte, yte), {train_accuracy = accuracy(xtr, ytr), classes = classes, features = xtr.shape[2]}
end

return M

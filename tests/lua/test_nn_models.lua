-- netcl.models: ResNet18's state-dict names, shapes and parameter counts against torchvision's
-- resnet18 (the table below is written out from torchvision's layout, not from the model code),
-- MLP's layout, and a few SGD steps of ResNet18-cifar on the CPU backend and on the device under
-- test, which must agree.
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local nn = require "netcl.nn"
local optim = require "netcl.optim"
local models = require "netcl.models"
local H = require "helpers"

local dev = H.device()
local cpu = nc.device("cpu")

-- torchvision.models.resnet18's state_dict, in order, for a stem and a class count.
local function torchvision_resnet18(stem, classes)
  local entries = {}
  local function add(name, shape) entries[#entries + 1] = {name, shape} end
  local function bn(prefix, c)
    add(prefix .. ".weight", {c})
    add(prefix .. ".bias", {c})
    add(prefix .. ".running_mean", {c})
    add(prefix .. ".running_var", {c})
    add(prefix .. ".num_batches_tracked", {})
  end
  if stem == "imagenet" then add("conv1.weight", {64, 3, 7, 7}) else add("conv1.weight", {64, 3, 3, 3}) end
  bn("bn1", 64)
  local cin = 64
  for layer, c in ipairs({64, 128, 256, 512}) do
    for block = 0, 1 do
      local p = string.format("layer%d.%d", layer, block)
      local bin = block == 0 and cin or c
      add(p .. ".conv1.weight", {c, bin, 3, 3})
      bn(p .. ".bn1", c)
      add(p .. ".conv2.weight", {c, c, 3, 3})
      bn(p .. ".bn2", c)
      if block == 0 and layer > 1 then
        add(p .. ".downsample.0.weight", {c, cin, 1, 1})
        bn(p .. ".downsample.1", c)
      end
    end
    cin = c
  end
  add("fc.weight", {classes, 512})
  add("fc.bias", {classes})
  return entries
end

local function numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end

local function check_layout(model, expected)
  local keys = model:state_dict_keys()
  local sd = model:state_dict()
  lu.assertEquals(#keys, #expected)
  local params = 0
  for i, e in ipairs(expected) do
    lu.assertEquals(keys[i], e[1], "entry " .. i)
    lu.assertEquals(sd[e[1]].shape, e[2], e[1])
    local buffer = e[1]:find("running_") or e[1]:find("num_batches_tracked")
    if buffer then
      lu.assertEquals(sd[e[1]].dtype, e[1]:find("num_batches") and "int64" or "float32", e[1])
    else
      params = params + numel(e[2])
    end
  end
  lu.assertEquals(model:num_parameters(), params)
  return params
end

-- One cifar model for the layout and init tests (making an 11M-parameter model takes a while).
local cifar
local function cifar_model()
  if not cifar then
    nc.manual_seed(0)
    cifar = models.ResNet18{num_classes = 10, stem = "cifar"}
  end
  return cifar
end

TestResNet = {}

function TestResNet:test_imagenet_layout_matches_torchvision()
  nc.manual_seed(0)
  local m = models.ResNet18() -- the defaults: 1000 classes, imagenet stem
  lu.assertEquals(check_layout(m, torchvision_resnet18("imagenet", 1000)), 11689512)
  lu.assertEquals(#m:parameters(), 62)
  lu.assertEquals(m.maxpool.kernel_size, {3, 3})
  lu.assertEquals(m.conv1.stride, {2, 2})
end

function TestResNet:test_cifar_layout_matches_torchvision()
  local m = cifar_model()
  -- By hand from the imagenet count: conv1 is 64*3*3*3 = 1728 instead of 64*3*7*7 = 9408
  -- (-7680), fc is 512*10 + 10 = 5130 instead of 512*1000 + 1000 = 513000 (-507870).
  local expect = 11689512 - (9408 - 1728) - (513000 - 5130)
  lu.assertEquals(expect, 11173962)
  lu.assertEquals(check_layout(m, torchvision_resnet18("cifar", 10)), expect)
  lu.assertNil(m.maxpool)
  lu.assertEquals(m.conv1.stride, {1, 1})
  lu.assertStrContains(tostring(m), "ResNet18(stem=cifar, num_classes=10)  11,173,962 params")
end

function TestResNet:test_init_follows_torchvision()
  local m = cifar_model()
  -- kaiming_normal(fan_out, relu): std sqrt(2 / (out * k * k))
  local w = m.layer3[1].conv2.weight.value
  local std = w:std():item()
  local expect = math.sqrt(2 / (256 * 9))
  lu.assertTrue(math.abs(std - expect) < 0.02 * expect, string.format("std %g, expected %g", std, expect))
  H.assert_close(m.bn1.weight.value, nc.ones({64}), 0)
  H.assert_close(m.bn1.bias.value, nc.zeros({64}), 0)
  H.assert_close(m.layer1[1].bn2.running_var, nc.ones({64}), 0)
end

function TestResNet:test_options()
  H.assert_error(function() models.ResNet18{stem = "tiny"} end, 'stem must be "imagenet" or "cifar"')
  H.assert_error(function() models.ResNet18{classes = 10} end, "unknown option 'classes'")
  H.assert_error(function() models.ResNet18{num_classes = 0} end, "num_classes must be a positive integer")
end

-- Three SGD steps of ResNet18-cifar on `device` from a fixed seed: the losses, and the model.
local function train_steps(device)
  nc.manual_seed(7)
  local m = models.ResNet18{num_classes = 10, stem = "cifar", device = device}
  local x = nc.randn({2, 3, 32, 32}, {device = device})
  local y = nc.tensor({3, 8}, {dtype = "int64", device = device})
  local opt = optim.SGD(m:parameters(), {lr = 0.01, momentum = 0.9})
  local crit = nn.CrossEntropyLoss()
  local losses = {}
  for step = 1, 3 do
    local tape = ag.Tape()
    local loss = tape:record(function() return crit(m(x), y) end)
    opt:zero_grad()
    tape:backward(loss)
    if step == 1 then
      for name, p in m:named_parameters() do
        lu.assertNotNil(p.grad, name .. " got no gradient")
        lu.assertEquals(p.grad.device, device, name)
      end
    end
    opt:step()
    losses[step] = loss:item()
  end
  m:eval()
  local logits = ag.no_grad(function() return m(x).value end)
  return losses, m, logits
end

function TestResNet:test_cifar_train_steps_agree_with_cpu()
  local losses, m, logits = train_steps(dev)
  for i, l in ipairs(losses) do lu.assertTrue(l == l and l > 0, "loss " .. i .. " = " .. l) end
  lu.assertTrue(losses[3] < losses[1], string.format("loss did not go down: %g -> %g", losses[1], losses[3]))
  lu.assertEquals(m.bn1.num_batches_tracked:item(), 3)
  lu.assertEquals(logits.shape, {2, 10})
  if dev == cpu then return end
  -- the device under test against the CPU backend, in the same process, from the same seed
  local ref_losses, ref_model, ref_logits = train_steps(cpu)
  for i = 1, 3 do
    lu.assertTrue(math.abs(losses[i] - ref_losses[i]) <= 1e-4,
      string.format("step %d: loss %.7f on %s, %.7f on cpu", i, losses[i], dev.spec, ref_losses[i]))
  end
  H.assert_close(logits:to(cpu), ref_logits, 1e-3, "eval logits")
  H.assert_close(m.layer4[2].bn2.running_mean:to(cpu), ref_model.layer4[2].bn2.running_mean, 1e-3, "running mean")
end

TestMLP = {}

function TestMLP:test_layout_and_forward()
  nc.manual_seed(0)
  local m = models.MLP{sizes = {784, 256, 10}}
  lu.assertEquals(m:state_dict_keys(), {"0.weight", "0.bias", "2.weight", "2.bias"})
  lu.assertEquals(m:num_parameters(), 784 * 256 + 256 + 256 * 10 + 10)
  -- images are flattened
  lu.assertEquals(m(nc.randn({3, 1, 28, 28})).shape, {3, 10})
  local d = models.MLP{sizes = {4, 8, 8, 2}, activation = "gelu", dropout = 0.1}
  local kinds = {}
  for i, c in ipairs(d:children()) do kinds[i] = getmetatable(c).__name end
  lu.assertEquals(kinds, {"Linear", "GELU", "Dropout", "Linear", "GELU", "Dropout", "Linear"})
  H.assert_error(function() models.MLP{sizes = {4}} end, "sizes must list at least two widths")
  H.assert_error(function() models.MLP{sizes = {4, 2}, activation = "swish"} end, "activation must be one of")
  H.assert_error(function() m(nc.randn({3, 100})) end, "models.MLP: child 1 (Linear): ")
end

os.exit(lu.LuaUnit.run())

-- models.ResNet18: torchvision's resnet18 (BasicBlock, [2, 2, 2, 2]) with the same parameter
-- and buffer names, shapes and initialization, and a choice of stem: "imagenet" (7x7/2 conv and a
-- 3x3/2 max-pool) or "cifar" (3x3/1 conv, no max-pool) for 32x32 inputs.
local nc = require "netcl"
local nn = require "netcl.nn"

local M = {}

-- torchvision: kaiming_normal_(mode="fan_out", nonlinearity="relu") on every conv.
local function conv(cin, cout, k, stride, padding, device)
  local c = nn.Conv2d(cin, cout, k, {stride = stride, padding = padding, bias = false, device = device})
  local std = math.sqrt(2 / (cout * k * k))
  c.weight.value:copy_(nc.randn(c.weight.shape, {device = c.weight.device}):mul_(std))
  return c
end

local BasicBlock = nn.Module:extend("BasicBlock")
M.BasicBlock = BasicBlock

function BasicBlock:init(cin, cout, stride, device)
  self.conv1 = conv(cin, cout, 3, stride, 1, device)
  self.bn1 = nn.BatchNorm2d(cout, {device = device})
  self.relu = nn.ReLU()
  self.conv2 = conv(cout, cout, 3, 1, 1, device)
  self.bn2 = nn.BatchNorm2d(cout, {device = device})
  if stride ~= 1 or cin ~= cout then
    self.downsample = nn.Sequential(conv(cin, cout, 1, stride, 0, device), nn.BatchNorm2d(cout, {device = device}))
  end
end

function BasicBlock:forward(x)
  local out = self.relu(self.bn1(self.conv1(x)))
  out = self.bn2(self.conv2(out))
  local identity = self.downsample and self.downsample(x) or x
  return self.relu(out + identity)
end

local ResNet = nn.Module:extend("ResNet18")
M.ResNet18 = ResNet

--- models.ResNet18{num_classes=1000, stem="imagenet"|"cifar", in_channels=3, device=}
function ResNet:init(cfg)
  local fname = "models.ResNet18"
  cfg = cfg or {}
  if type(cfg) ~= "table" then error(fname .. ": expected an options table, got " .. type(cfg), 3) end
  for k in pairs(cfg) do
    if k ~= "num_classes" and k ~= "stem" and k ~= "in_channels" and k ~= "device" then
      error(string.format("%s: unknown option '%s' (options: device, in_channels, num_classes, stem)", fname,
        tostring(k)), 3)
    end
  end
  local classes = cfg.num_classes or 1000
  if math.type(classes) ~= "integer" or classes < 1 then
    error(fname .. ": num_classes must be a positive integer, got " .. tostring(classes), 3)
  end
  local stem = cfg.stem or "imagenet"
  if stem ~= "imagenet" and stem ~= "cifar" then
    error(string.format('%s: stem must be "imagenet" or "cifar", got %s', fname, tostring(stem)), 3)
  end
  local device = cfg.device
  if type(device) == "string" then device = nc.device(device) end
  self.stem = stem
  self.num_classes = classes
  local cin = cfg.in_channels or 3
  if stem == "imagenet" then
    self.conv1 = conv(cin, 64, 7, 2, 3, device)
  else
    self.conv1 = conv(cin, 64, 3, 1, 1, device)
  end
  self.bn1 = nn.BatchNorm2d(64, {device = device})
  self.relu = nn.ReLU()
  if stem == "imagenet" then self.maxpool = nn.MaxPool2d(3, {stride = 2, padding = 1}) end
  local width = 64
  for i, w in ipairs({64, 128, 256, 512}) do
    local stride = i == 1 and 1 or 2
    self["layer" .. i] = nn.Sequential(BasicBlock(width, w, stride, device), BasicBlock(w, w, 1, device))
    width = w
  end
  self.avgpool = nn.AdaptiveAvgPool2d(1)
  self.fc = nn.Linear(512, classes, {device = device})
end

function ResNet:forward(x)
  x = self.relu(self.bn1(self.conv1(x)))
  if self.maxpool then x = self.maxpool(x) end
  x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
  return self.fc(self.avgpool(x):flatten(2))
end

function ResNet:extra_repr() return string.format("stem=%s, num_classes=%d", self.stem, self.num_classes) end

return M

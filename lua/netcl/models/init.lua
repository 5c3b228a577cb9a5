-- netcl.models: ready-made networks built from netcl.nn (docs/nn.md).
local resnet = require "netcl.models.resnet"

return {
  MLP = require "netcl.models.mlp",
  ResNet18 = resnet.ResNet18,
  BasicBlock = resnet.BasicBlock,
  GPT = require "netcl.models.gpt",
}

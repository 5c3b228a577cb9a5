-- netcl.optim: optimizers (each update one fused kernel per parameter tensor), learning-rate
-- schedulers and gradient clipping, following torch.optim's definitions. docs/optim.md.
local adam = require "netcl.optim.adam"

return {
  SGD = require "netcl.optim.sgd",
  RMSprop = require "netcl.optim.rmsprop",
  Adam = adam.Adam,
  AdamW = adam.AdamW,
  CosineAnnealingLR = require "netcl.optim.cosine_annealing",
  WarmupCosine = require "netcl.optim.warmup_cosine",
  ReduceLROnPlateau = require "netcl.optim.reduce_on_plateau",
  clip_grad_norm = require "netcl.optim.clip",
}

-- netcl.ssl: self-supervised pretraining (docs/ssl.md). Eight methods (SimCLR, MoCo v2, BYOL,
-- SimSiam, Barlow Twins, VICReg, SwAV, DINO) as nn.Modules that wrap an encoder with their heads
-- and give method:loss(view1, view2); ssl.Trainer runs the pretraining loop on two random views
-- of each batch; ssl.linear_probe measures an encoder by a linear classifier on its frozen
-- features. The losses' functional forms are ssl.losses (netcl/ssl/losses.lua).
--
-- One file per concept: common.lua (options), ema.lua (flat parameters, the momentum update),
-- methods.lua, trainer.lua, probe.lua (evaluation), losses.lua, views.lua.
local losses = require "netcl.ssl.losses"
local views = require "netcl.ssl.views"
local ema = require "netcl.ssl.ema"
local methods = require "netcl.ssl.methods"
local probe = require "netcl.ssl.probe"

local M = {losses = losses, views = views}

M.flatten_parameters = ema.flatten_parameters
M.ema_update = ema.ema_update

M.Method = methods.Method
M.SimCLR = methods.SimCLR
M.MoCo = methods.MoCo
M.BYOL = methods.BYOL
M.SimSiam = methods.SimSiam
M.BarlowTwins = methods.BarlowTwins
M.VICReg = methods.VICReg
M.SwAV = methods.SwAV
M.DINO = methods.DINO

M.Trainer = require("netcl.ssl.trainer").Trainer

M.features = probe.features
M.embedding_std = probe.embedding_std
M.linear_probe = probe.linear_probe

return M

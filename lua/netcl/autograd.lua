-- netcl.autograd: nodes, tapes and differentiable ops (API.md "netcl.autograd").
local core = require "netcl.core"

local ag = {}
for k, v in pairs(core.autograd) do ag[k] = v end

return ag

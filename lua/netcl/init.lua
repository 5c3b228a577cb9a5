-- netcl: tensors and devices (the C core), plus what is written in Lua on top.
local nc = require "netcl.core"

return nc

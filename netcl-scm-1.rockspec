-- LuaRocks package for netcl-lua. Builds from this checkout, offline:
--   luarocks make netcl-scm-1.rockspec            (or: luarocks --tree DIR make ...)
-- It installs the netcl Lua modules, the C module netcl.core, libnetcl (kept in the rock's
-- own directory and found through the RPATH) and the netcl-lua command.
rockspec_format = "3.0"
package = "netcl"
version = "scm-1"
source = {
  -- `luarocks make` builds the working tree and never fetches this; the project has no
  -- public repository yet, so there is no URL to give for `luarocks install netcl`.
  url = ".",
}
description = {
  summary = "A deep-learning runtime in C with a Lua 5.4 frontend, on OpenCL devices or the CPU",
  detailed = [[
Tensors, devices (any OpenCL device, or the built-in CPU backend), kernels and autograd in C;
layers, optimizers, data loading and training in Lua. Includes the netcl-lua REPL.
]],
}
dependencies = {
  "lua >= 5.4, < 5.5",
}
build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    -- not lib/: LuaRocks would deploy everything under lib/ as Lua C modules
    CMAKE_INSTALL_LIBDIR = "netcl-lib",
    NETCL_INSTALL_LUADIR = "$(LUADIR)",
    NETCL_INSTALL_CMODDIR = "$(LIBDIR)",
    NETCL_BUILD_TESTS = "OFF",
  },
}

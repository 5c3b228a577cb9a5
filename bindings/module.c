/* The Lua C module for stock lua5.4 (lib/lua/5.4/netcl/core.so). Its loader,
 * luaopen_netcl_core, lives in the binding archive; this reference keeps it in the module. */
#include "netcl_lua.h"

int (*const nc_module_entry)(lua_State *L) = luaopen_netcl_core;

/* Embedding netcl-lua in a C host application.
 *
 *   lua_State *L = luaL_newstate();
 *   luaL_openlibs(L);
 *   netcl_lua_openlibs(L);            -- require "netcl" now works with no LUA_PATH
 *   netcl_lua_pushtensor(L, t);       -- hand a host tensor to Lua (shared, not copied)
 *
 * Each lua_State keeps its own netcl state (default device, random generator), so several
 * states can live in one process, each used by one thread at a time (Lua's rule); libnetcl
 * itself is thread-safe. docs/embedding.md has the whole story, samples/embed/host.c a host. */
#ifndef NETCL_LUA_H
#define NETCL_LUA_H

#include <lua.h>
#include "netcl/netcl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Registers "netcl.core" and every netcl Lua module (compiled in) in package.preload.
 * Needs the package library opened (luaL_openlibs). Returns 0, or raises a Lua error. */
int netcl_lua_openlibs(lua_State *L);

/* Pushes t as a Lua Tensor. The tensor is shared: this takes a new reference, the caller
 * keeps its own. Loads netcl.core into the state first if no script has yet. */
int netcl_lua_pushtensor(lua_State *L, nc_tensor *t);

/* The tensor at idx, or raises a Lua error. The reference is borrowed from the Lua value:
 * nc_tensor_retain it to keep it beyond the value's life. */
nc_tensor *netcl_lua_checktensor(lua_State *L, int idx);

/* The loader of the C module (what `require "netcl.core"` calls). */
int luaopen_netcl_core(lua_State *L);

#ifdef __cplusplus
}
#endif

#endif

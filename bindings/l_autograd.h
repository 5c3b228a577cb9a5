/* Node and Tape userdata (shared by l_autograd.c and l_autograd_ops.c). */
#ifndef NETCL_L_AUTOGRAD_H
#define NETCL_L_AUTOGRAD_H

#include "l_common.h"
#include "netcl/autograd.h"
#include "netcl_lua.h"

#define NC_NODE_MT "netcl.Node"
#define NC_TAPE_MT "netcl.Tape"

typedef struct {
  nc_node *n;
} nc_lua_node_box;

typedef struct {
  nc_tape *t;
} nc_lua_tape_box;

void nc_lua_pushnode_owned(lua_State *L, nc_node *n);
nc_node *nc_lua_tonode(lua_State *L, int idx);
nc_node *nc_lua_checknode(lua_State *L, int idx, const char *fname);
/* A Node, or a Tensor wrapped in a constant node (the wrapper replaces the argument slot). */
nc_node *nc_lua_checknodelike(lua_State *L, int idx, const char *fname);

/* The tape ops record onto: the active one (tape:record/scope), or NULL under no_grad or
 * when none is active. */
nc_tape *nc_lua_active_tape(lua_State *L);

#endif

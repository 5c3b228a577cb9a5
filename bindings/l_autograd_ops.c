/* The autograd module's op list (ag.ops()) and the registration of the Node-only functional ops
 * of l_autograd_nn.c. Every other differentiable op is bound once for Tensors and Nodes alike
 * by its family's file (l_ops.c, l_reduce.c, l_index.c, l_view.c, l_random.c).
 *
 * nc_lua_check_autograd verifies, once every family has registered, that each differentiable op
 * (DIFF in the op table's gradient column) has a binding in nc.autograd, so the gradient-check suite (which walks ag.ops()) covers every
 * bound op. */
#include "l_autograd.h"
#include "netcl/autograd_ops.h"

/* ag.ops(): the names of the differentiable ops, in op-table order. */
static int l_ops(lua_State *L) {
  lua_createtable(L, nc_ag_op_count, 0);
  for (int i = 0; i < nc_ag_op_count; i++) {
    lua_pushstring(L, nc_ag_op_names[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static void push_binding(lua_State *L, const nc_lua_ag_binding *b) {
  const nc_op_info *o = nc_op_find(b->name);
  lua_pushinteger(L, o ? (lua_Integer)o->op : -1);
  lua_pushstring(L, b->name);
  lua_pushcclosure(L, b->fn, 2);
}

void nc_lua_add_autograd_ops(lua_State *L) {
  int top = lua_gettop(L);
  lua_getfield(L, top, "autograd");
  int module = lua_gettop(L);
  luaL_getmetatable(L, NC_NODE_MT);
  lua_getfield(L, -1, "methods");
  int node_methods = lua_gettop(L);
  for (const nc_lua_ag_binding *b = nc_lua_ag_nn_bindings; b->name; b++) {
    if (!nc_ag_op_known(b->name))
      luaL_error(L, "netcl.autograd: binding %s is not a differentiable op", b->name);
    if (b->where & NC_LUA_AG_METHOD) {
      push_binding(L, b);
      lua_setfield(L, node_methods, b->name);
    }
    if (b->where & NC_LUA_AG_MODULE) {
      push_binding(L, b);
      lua_setfield(L, module, b->name);
    }
  }
  lua_pushcfunction(L, l_ops);
  lua_setfield(L, module, "ops");
  lua_settop(L, top);
}

void nc_lua_check_autograd(lua_State *L) {
  lua_getfield(L, -1, "autograd");
  for (int i = 0; i < nc_ag_op_count; i++) {
    if (lua_getfield(L, -1, nc_ag_op_names[i]) != LUA_TFUNCTION)
      luaL_error(L, "netcl.autograd: differentiable op %s has no binding", nc_ag_op_names[i]);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

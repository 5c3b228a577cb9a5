/* The autograd module's op list (ag.ops()) and the check that every differentiable op has a
 * binding. The ops themselves are bound once for Tensors and Nodes alike by their family's file
 * (l_ops.c, l_reduce.c, l_index.c, l_view.c, l_random.c, l_linalg.c, l_table_ops.c). */
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

void nc_lua_add_autograd_ops(lua_State *L) {
  lua_getfield(L, -1, "autograd");
  lua_pushcfunction(L, l_ops);
  lua_setfield(L, -2, "ops");
  lua_pop(L, 1);
}

/* Every differentiable op (DIFF in the op table's gradient column) must be a function of
 * nc.autograd, so the gradient-check suite, which walks ag.ops(), covers every bound op. */
void nc_lua_check_autograd(lua_State *L) {
  lua_getfield(L, -1, "autograd");
  for (int i = 0; i < nc_ag_op_count; i++) {
    if (lua_getfield(L, -1, nc_ag_op_names[i]) != LUA_TFUNCTION)
      luaL_error(L, "netcl.autograd: differentiable op %s has no binding", nc_ag_op_names[i]);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

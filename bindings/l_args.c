/* Argument helpers of the op bindings (l_ops.h): operands, scalars, options tables and results. */
#include "l_autograd.h"
#include "l_ops.h"

nc_operand nc_lua_checkoperand(lua_State *L, int idx, const char *fname) {
  nc_tensor *t = nc_lua_totensor(L, idx);
  if (t) return nc_operand_tensor(t);
  nc_node *n = nc_lua_tonode(L, idx);
  if (n) return nc_operand_tensor(nc_node_value(n));
  if (luaL_testudata(L, idx, NC_TENSOR_MT)) nc_lua_checktensor_f(L, idx, fname); /* freed: raises */
  if (lua_isinteger(L, idx)) return nc_operand_scalar(nc_scalar_int(lua_tointeger(L, idx)));
  if (lua_type(L, idx) == LUA_TNUMBER) return nc_operand_scalar(nc_scalar_float(lua_tonumber(L, idx)));
  nc_lua_argerror(L, fname, idx, "expected a Tensor or a number, got %s", luaL_typename(L, idx));
  return nc_operand_scalar(nc_scalar_int(0));
}

bool nc_lua_differentiable(nc_op op) { return nc_ag_op_known(nc_op_get(op)->name); }

nc_scalar nc_lua_checkscalar(lua_State *L, int idx, const char *fname) {
  if (lua_isboolean(L, idx)) return nc_scalar_int(lua_toboolean(L, idx));
  if (lua_isinteger(L, idx)) return nc_scalar_int(lua_tointeger(L, idx));
  if (lua_type(L, idx) == LUA_TNUMBER) return nc_scalar_float(lua_tonumber(L, idx));
  nc_lua_argerror(L, fname, idx, "expected a number, got %s", luaL_typename(L, idx));
  return nc_scalar_int(0);
}

nc_tensor *nc_lua_opt_out(lua_State *L, int opts, const char *fname) {
  if (!opts) return NULL;
  nc_tensor *t = NULL;
  if (lua_getfield(L, opts, "out") != LUA_TNIL) {
    t = nc_lua_totensor(L, -1);
    if (!t) luaL_error(L, "%s: opts.out must be a live Tensor, got %s", fname, luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  return t;
}

bool nc_lua_opt_bool(lua_State *L, int opts, const char *field, bool def) {
  if (!opts) return def;
  bool v = def;
  if (lua_getfield(L, opts, field) != LUA_TNIL) v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

int nc_lua_result(lua_State *L, nc_status s, int opts, nc_tensor *r, const char *fname) {
  if (s != NC_OK) nc_lua_raise(L, fname);
  if (r) {
    nc_lua_pushtensor_new(L, r);
  } else {
    lua_getfield(L, opts, "out");
  }
  return 1;
}

void nc_lua_bind_op(lua_State *L, int module, const char *name, lua_CFunction fn, int op, int where) {
  int top = lua_gettop(L);
  module = lua_absindex(L, module);
  int tables[4], n = 0;
  if (where & NC_LUA_FUNCTION) {
    tables[n++] = module;
    lua_getfield(L, module, "autograd");
    tables[n++] = lua_gettop(L);
  }
  if (where & NC_LUA_METHOD) {
    luaL_getmetatable(L, NC_TENSOR_MT);
    lua_getfield(L, -1, "methods");
    tables[n++] = lua_gettop(L);
    luaL_getmetatable(L, NC_NODE_MT);
    lua_getfield(L, -1, "methods");
    tables[n++] = lua_gettop(L);
  }
  if (where & NC_LUA_OPERATOR) {
    luaL_getmetatable(L, NC_TENSOR_MT);
    tables[n++] = lua_gettop(L);
    luaL_getmetatable(L, NC_NODE_MT);
    tables[n++] = lua_gettop(L);
  }
  /* One function object on every surface: nc.f == nc.autograd.f == t.f == n.f. */
  lua_pushinteger(L, op);
  lua_pushcclosure(L, fn, 1);
  for (int i = 0; i < n; i++) {
    lua_pushvalue(L, -1);
    lua_setfield(L, tables[i], name);
  }
  lua_settop(L, top);
}

/* Tensor-only methods (in-place variants); op as upvalue 1. */
void nc_lua_register_op(lua_State *L, int module, int methods, const char *name, lua_CFunction fn, int op) {
  if (module) {
    lua_pushinteger(L, op);
    lua_pushcclosure(L, fn, 1);
    lua_setfield(L, module, name);
  }
  if (methods) {
    lua_pushinteger(L, op);
    lua_pushcclosure(L, fn, 1);
    lua_setfield(L, methods, name);
  }
}

/* "netcl.<name>" of every op, built by the compiler: error messages name the op without a
 * string being formatted on each call. */
static const char *const qualified_names[NC_OP_COUNT] = {
#define QUALIFIED_(id, name, family, arity, dtypes, result, entry, grad, kernel, cpu) [NC_OP_##id] = "netcl." name,
    NC_OPS(QUALIFIED_)
#undef QUALIFIED_
};

nc_op nc_lua_opname(lua_State *L, const char **fname) {
  lua_Integer op = lua_tointeger(L, lua_upvalueindex(1));
  *fname = op >= 0 && op < NC_OP_COUNT ? qualified_names[op] : "netcl";
  return (nc_op)op;
}

nc_ag_operand nc_lua_ag_checkoperand(lua_State *L, int idx, const char *fname) {
  if (lua_type(L, idx) == LUA_TNUMBER) return nc_ag_scalar(nc_lua_checkscalar(L, idx, fname));
  if (!nc_lua_tonode(L, idx) && !luaL_testudata(L, idx, NC_TENSOR_MT))
    nc_lua_argerror(L, fname, idx, "expected a Node, a Tensor or a number, got %s", luaL_typename(L, idx));
  return nc_ag_node(nc_lua_checknodelike(L, idx, fname));
}

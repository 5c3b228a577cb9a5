/* Op bindings: the elementwise families generated from the op table (every unary and binary
 * op becomes nc.<name>, t:<name>() and, for ops that keep the dtype, t:<name>_()), clamp,
 * where, masked_fill and the arithmetic metamethods; then the other families' files. */
#include <string.h>
#include "l_ops.h"

/* ---- unary ------------------------------------------------------------------------------------- */
/* t:name(opts) and nc.name(t, opts) */
static int l_unary(lua_State *L) {
  char fname[64];
  nc_op op = nc_lua_opname(L, fname, sizeof fname);
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *r = NULL;
  int opts = nc_lua_opts(L, 2);
  if (op == NC_OP_GELU && opts) {
    lua_getfield(L, opts, "approximate");
    const char *a = lua_tostring(L, -1);
    if (a && strcmp(a, "tanh") == 0)
      op = NC_OP_GELU_TANH;
    else if (a && strcmp(a, "none") != 0)
      luaL_error(L, "%s: approximate must be \"none\" or \"tanh\", got %s", fname, a);
    lua_pop(L, 1);
  }
  nc_tensor *dst = nc_lua_opt_out(L, opts, fname);
  nc_status s = dst ? nc_unary_into(op, dst, x) : nc_unary(op, x, &r);
  return nc_lua_result(L, s, opts, r, fname);
}

static int l_unary_(lua_State *L) {
  char fname[64];
  nc_op op = nc_lua_opname(L, fname, sizeof fname);
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname);
  NC_LUA_CHECK(L, fname, nc_unary_into(op, x, x));
  lua_settop(L, 1);
  return 1;
}

static const nc_scalar *opt_bound(lua_State *L, int idx, nc_scalar *store, const char *fname) {
  if (lua_isnoneornil(L, idx)) return NULL;
  *store = nc_lua_checkscalar(L, idx, fname);
  return store;
}

/* t:clamp(lo, hi, opts); either bound may be nil */
static int l_clamp(lua_State *L) {
  const char *fname = "netcl.clamp";
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *r = NULL;
  nc_scalar a, b;
  const nc_scalar *lo = opt_bound(L, 2, &a, fname), *hi = opt_bound(L, 3, &b, fname);
  if (!lo && !hi) return luaL_error(L, "%s: needs at least one of lo and hi", fname);
  int opts = nc_lua_opts(L, 4);
  nc_tensor *dst = nc_lua_opt_out(L, opts, fname);
  nc_status s = dst ? nc_clamp_into(dst, x, lo, hi) : nc_clamp(x, lo, hi, &r);
  return nc_lua_result(L, s, opts, r, fname);
}

static int l_clamp_(lua_State *L) {
  const char *fname = "netcl.clamp_";
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname);
  nc_scalar a, b;
  const nc_scalar *lo = opt_bound(L, 2, &a, fname), *hi = opt_bound(L, 3, &b, fname);
  if (!lo && !hi) return luaL_error(L, "%s: needs at least one of lo and hi", fname);
  NC_LUA_CHECK(L, fname, nc_clamp_into(x, x, lo, hi));
  lua_settop(L, 1);
  return 1;
}

/* ---- binary ------------------------------------------------------------------------------------- */
/* nc.name(a, b, opts) and a:name(b, opts): tensors or numbers on either side */
static int l_binary(lua_State *L) {
  char fname[64];
  nc_op op = nc_lua_opname(L, fname, sizeof fname);
  nc_operand a = nc_lua_checkoperand(L, 1, fname), b = nc_lua_checkoperand(L, 2, fname);
  if (!a.t && !b.t) return luaL_error(L, "%s: needs at least one Tensor operand", fname);
  int opts = nc_lua_opts(L, 3);
  nc_tensor *dst = nc_lua_opt_out(L, opts, fname), *r = NULL;
  nc_status s = dst ? nc_binary_into(op, dst, a, b) : nc_binary(op, a, b, &r);
  return nc_lua_result(L, s, opts, r, fname);
}

static int l_binary_(lua_State *L) {
  char fname[64];
  nc_op op = nc_lua_opname(L, fname, sizeof fname);
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname);
  nc_operand b = nc_lua_checkoperand(L, 2, fname);
  NC_LUA_CHECK(L, fname, nc_binary_into(op, x, nc_operand_tensor(x), b));
  lua_settop(L, 1);
  return 1;
}

static int l_unm(lua_State *L) {
  nc_tensor *x = nc_lua_checktensor_f(L, 1, "netcl.neg"), *r;
  NC_LUA_CHECK(L, "netcl.neg", nc_unary(NC_OP_NEG, x, &r));
  nc_lua_pushtensor_new(L, r);
  return 1;
}

/* ---- where, masked_fill ------------------------------------------------------------------------- */
static nc_operand where_operand(lua_State *L, int idx, const char *fname) {
  if (lua_isboolean(L, idx)) return nc_operand_scalar(nc_scalar_int(lua_toboolean(L, idx)));
  return nc_lua_checkoperand(L, idx, fname);
}

/* nc.where(cond, a, b, opts) */
static int l_where(lua_State *L) {
  const char *fname = "netcl.where";
  nc_tensor *cond = nc_lua_checktensor_f(L, 1, fname), *r = NULL;
  nc_operand a = where_operand(L, 2, fname), b = where_operand(L, 3, fname);
  int opts = nc_lua_opts(L, 4);
  nc_tensor *dst = nc_lua_opt_out(L, opts, fname);
  nc_status s = dst ? nc_where_into(dst, cond, a, b) : nc_where(cond, a, b, &r);
  return nc_lua_result(L, s, opts, r, fname);
}

/* t:where(cond, other): cond ? t : other (PyTorch's Tensor.where) */
static int l_where_method(lua_State *L) {
  const char *fname = "netcl.where";
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *r = NULL;
  nc_tensor *cond = nc_lua_checktensor_f(L, 2, fname);
  nc_operand b = where_operand(L, 3, fname);
  NC_LUA_CHECK(L, fname, nc_where(cond, nc_operand_tensor(x), b, &r));
  nc_lua_pushtensor_new(L, r);
  return 1;
}

/* t:masked_fill(mask, value, opts) */
static int l_masked_fill(lua_State *L) {
  const char *fname = "netcl.masked_fill";
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *r = NULL;
  nc_tensor *mask = nc_lua_checktensor_f(L, 2, fname);
  nc_scalar v = nc_lua_checkscalar(L, 3, fname);
  int opts = nc_lua_opts(L, 4);
  nc_tensor *dst = nc_lua_opt_out(L, opts, fname);
  nc_status s = dst ? nc_masked_fill_into(dst, x, mask, v) : nc_masked_fill(x, mask, v, &r);
  return nc_lua_result(L, s, opts, r, fname);
}

static int l_masked_fill_(lua_State *L) {
  const char *fname = "netcl.masked_fill_";
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname);
  nc_tensor *mask = nc_lua_checktensor_f(L, 2, fname);
  nc_scalar v = nc_lua_checkscalar(L, 3, fname);
  NC_LUA_CHECK(L, fname, nc_masked_fill_into(x, x, mask, v));
  lua_settop(L, 1);
  return 1;
}

/* ---- op table introspection ------------------------------------------------------------------------ */
/* nc.ops() -> array of {name=, family=, arity=, dtypes={...}, result=, kernel=, cpu=} */
static int l_ops(lua_State *L) {
  static const char *const results[] = {"same", "float", "bool", "index", "sum", "arg"};
  lua_createtable(L, NC_OP_COUNT, 0);
  for (int i = 0; i < NC_OP_COUNT; i++) {
    const nc_op_info *o = nc_op_get((nc_op)i);
    lua_createtable(L, 0, 7);
    lua_pushstring(L, o->name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, nc_op_family_name(o->family));
    lua_setfield(L, -2, "family");
    lua_pushinteger(L, o->arity);
    lua_setfield(L, -2, "arity");
    lua_newtable(L);
    for (int d = 0, n = 0; d < NC_DTYPE_COUNT; d++)
      if (o->dtypes & (1u << d)) {
        lua_pushstring(L, nc_dtype_name((nc_dtype)d));
        lua_rawseti(L, -2, ++n);
      }
    lua_setfield(L, -2, "dtypes");
    lua_pushstring(L, results[o->result]);
    lua_setfield(L, -2, "result");
    lua_pushstring(L, o->kernel);
    lua_setfield(L, -2, "kernel");
    lua_pushstring(L, o->cpu);
    lua_setfield(L, -2, "cpu");
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

void nc_lua_add_ops(lua_State *L) {
  int module = lua_gettop(L);
  luaL_getmetatable(L, NC_TENSOR_MT);
  int meta = lua_gettop(L);
  lua_getfield(L, meta, "methods");
  int methods = lua_gettop(L);
  char name[64];
  for (int i = 0; i < NC_OP_COUNT; i++) {
    const nc_op_info *o = nc_op_get((nc_op)i);
    if (o->family == NC_FAMILY_UNARY && i != NC_OP_CLAMP) {
      nc_lua_register_op(L, module, methods, o->name, l_unary, i);
      if (o->result == NC_RES_SAME || o->result == NC_RES_FLOAT) {
        snprintf(name, sizeof name, "%s_", o->name);
        nc_lua_register_op(L, 0, methods, name, l_unary_, i);
      }
    } else if (o->family == NC_FAMILY_BINARY) {
      nc_lua_register_op(L, module, methods, o->name, l_binary, i);
      if (o->result != NC_RES_BOOL) {
        snprintf(name, sizeof name, "%s_", o->name);
        nc_lua_register_op(L, 0, methods, name, l_binary_, i);
      }
    }
  }
  static const struct {
    const char *meta;
    nc_op op;
  } arith[] = {{"__add", NC_OP_ADD},
               {"__sub", NC_OP_SUB},
               {"__mul", NC_OP_MUL},
               {"__div", NC_OP_DIV},
               {"__pow", NC_OP_POW}};
  for (size_t i = 0; i < sizeof arith / sizeof arith[0]; i++)
    nc_lua_register_op(L, 0, meta, arith[i].meta, l_binary, arith[i].op);
  lua_pushcfunction(L, l_unm);
  lua_setfield(L, meta, "__unm");

  static const luaL_Reg both[] = {{"clamp", l_clamp}, {"masked_fill", l_masked_fill}, {NULL, NULL}};
  static const luaL_Reg method_only[] = {
      {"clamp_", l_clamp_}, {"masked_fill_", l_masked_fill_}, {"where", l_where_method}, {NULL, NULL}};
  static const luaL_Reg module_only[] = {{"where", l_where}, {"ops", l_ops}, {NULL, NULL}};
  lua_pushvalue(L, methods);
  luaL_setfuncs(L, both, 0);
  luaL_setfuncs(L, method_only, 0);
  lua_pop(L, 1);
  lua_pushvalue(L, module);
  luaL_setfuncs(L, both, 0);
  luaL_setfuncs(L, module_only, 0);
  lua_pop(L, 1);

  nc_lua_add_reduce(L, module, methods);
  nc_lua_add_index(L, module, methods);
  nc_lua_add_random(L, module, methods);

  lua_settop(L, module);
}

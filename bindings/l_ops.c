/* Elementwise op bindings, one per op for Tensors and Nodes alike: every unary and binary op of
 * the op table becomes nc.<name>, nc.autograd.<name>, t:<name>() and n:<name>() (and, for ops
 * that keep the dtype, the Tensor's in-place t:<name>_()), plus clamp, where, masked_fill and
 * the arithmetic metamethods. An op with a Node operand is the differentiable op when it has
 * one (on the active tape), and otherwise the pure op on the Node's value; then the other
 * families' files register theirs. */
#include <string.h>
#include "l_autograd.h"
#include "l_ops.h"

/* ---- unary ------------------------------------------------------------------------------------- */
/* gelu's {approximate = "none" | "tanh"} picks the exact op or its tanh approximation. */
static nc_op unary_variant(lua_State *L, nc_op op, int opts, const char *fname) {
  if (op != NC_OP_GELU) return op;
  if (nc_lua_opt_field(L, opts, "approximate") != LUA_TNIL) {
    const char *a = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    if (a && !strcmp(a, "tanh"))
      op = NC_OP_GELU_TANH;
    else if (!a || strcmp(a, "none"))
      nc_lua_errorf(L, "%s: approximate must be \"none\" or \"tanh\", got %s", fname,
                    a ? a : luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  return op;
}

/* x:name(opts), nc.name(x, opts) */
static int l_unary(lua_State *L) {
  const char *fname;
  nc_op op = nc_lua_opname(L, &fname);
  int opts = nc_lua_checkopts(L, 2, fname, op == NC_OP_GELU ? "approximate out" : "out");
  op = unary_variant(L, op, opts, fname);
  if (nc_lua_isnode(L, 1) && nc_lua_differentiable(op)) {
    nc_lua_no_out(L, opts, fname);
    nc_node *out;
    return nc_lua_ag_result(L, nc_ag_unary(nc_lua_active_tape(L), op, nc_lua_checknode(L, 1, fname), &out), &out,
                            fname);
  }
  nc_tensor *x = nc_lua_ag_checktensor(L, 1, fname), *r = NULL, *dst = nc_lua_opt_out(L, opts, fname);
  nc_status s = dst ? nc_unary_into(op, dst, x) : nc_unary(op, x, &r);
  return nc_lua_result(L, s, opts, r, fname);
}

static int l_unary_(lua_State *L) {
  const char *fname;
  nc_op op = nc_lua_opname(L, &fname);
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname);
  op = unary_variant(L, op, nc_lua_checkopts(L, 2, fname, op == NC_OP_GELU ? "approximate" : ""), fname);
  NC_LUA_CHECK(L, fname, nc_unary_into(op, x, x));
  lua_settop(L, 1);
  return 1;
}

static const nc_scalar *opt_bound(lua_State *L, int idx, nc_scalar *store, const char *fname) {
  if (lua_isnoneornil(L, idx)) return NULL;
  *store = nc_lua_checkscalar(L, idx, fname);
  return store;
}

/* x:clamp(lo, hi, opts); either bound may be nil */
static int l_clamp(lua_State *L) {
  const char *fname = "netcl.clamp";
  nc_scalar a, b;
  const nc_scalar *lo = opt_bound(L, 2, &a, fname), *hi = opt_bound(L, 3, &b, fname);
  if (!lo && !hi) return nc_lua_errorf(L, "%s: needs at least one of lo and hi", fname);
  int opts = nc_lua_checkopts(L, 4, fname, "out");
  if (nc_lua_isnode(L, 1)) {
    nc_lua_no_out(L, opts, fname);
    nc_node *out;
    return nc_lua_ag_result(L, nc_ag_clamp(nc_lua_active_tape(L), nc_lua_checknode(L, 1, fname), lo, hi, &out),
                            &out, fname);
  }
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *r = NULL, *dst = nc_lua_opt_out(L, opts, fname);
  nc_status s = dst ? nc_clamp_into(dst, x, lo, hi) : nc_clamp(x, lo, hi, &r);
  return nc_lua_result(L, s, opts, r, fname);
}

static int l_clamp_(lua_State *L) {
  const char *fname = "netcl.clamp_";
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname);
  nc_scalar a, b;
  const nc_scalar *lo = opt_bound(L, 2, &a, fname), *hi = opt_bound(L, 3, &b, fname);
  if (!lo && !hi) return nc_lua_errorf(L, "%s: needs at least one of lo and hi", fname);
  NC_LUA_CHECK(L, fname, nc_clamp_into(x, x, lo, hi));
  lua_settop(L, 1);
  return 1;
}

/* ---- binary ------------------------------------------------------------------------------------- */
/* nc.name(a, b, opts), a:name(b, opts) and the metamethods: Tensors, Nodes or numbers on either
 * side. */
static int l_binary(lua_State *L) {
  const char *fname;
  nc_op op = nc_lua_opname(L, &fname);
  int opts = nc_lua_checkopts(L, 3, fname, "out");
  if (nc_lua_has_node(L, 1, 2) && nc_lua_differentiable(op)) {
    nc_lua_no_out(L, opts, fname);
    nc_ag_operand a = nc_lua_ag_checkoperand(L, 1, fname), b = nc_lua_ag_checkoperand(L, 2, fname);
    nc_node *out;
    return nc_lua_ag_result(L, nc_ag_binary(nc_lua_active_tape(L), op, a, b, &out), &out, fname);
  }
  nc_operand a = nc_lua_checkoperand(L, 1, fname), b = nc_lua_checkoperand(L, 2, fname);
  if (!a.t && !b.t) return nc_lua_errorf(L, "%s: needs at least one Tensor operand", fname);
  nc_tensor *dst = nc_lua_opt_out(L, opts, fname), *r = NULL;
  nc_status s = dst ? nc_binary_into(op, dst, a, b) : nc_binary(op, a, b, &r);
  return nc_lua_result(L, s, opts, r, fname);
}

static int l_binary_(lua_State *L) {
  const char *fname;
  nc_op op = nc_lua_opname(L, &fname);
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname);
  nc_operand b = nc_lua_checkoperand(L, 2, fname);
  NC_LUA_CHECK(L, fname, nc_binary_into(op, x, nc_operand_tensor(x), b));
  lua_settop(L, 1);
  return 1;
}

static int l_unm(lua_State *L) {
  const char *fname = "netcl.neg";
  if (nc_lua_isnode(L, 1)) {
    nc_node *out;
    return nc_lua_ag_result(L, nc_ag_unary(nc_lua_active_tape(L), NC_OP_NEG, nc_lua_checknode(L, 1, fname), &out),
                            &out, fname);
  }
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *r;
  NC_LUA_CHECK(L, fname, nc_unary(NC_OP_NEG, x, &r));
  nc_lua_pushtensor_new(L, r);
  return 1;
}

/* ---- where, masked_fill ------------------------------------------------------------------------- */
static nc_operand where_operand(lua_State *L, int idx, const char *fname) {
  if (lua_isboolean(L, idx)) return nc_operand_scalar(nc_scalar_int(lua_toboolean(L, idx)));
  return nc_lua_checkoperand(L, idx, fname);
}

static nc_ag_operand where_ag_operand(lua_State *L, int idx, const char *fname) {
  if (lua_isboolean(L, idx)) return nc_ag_scalar(nc_scalar_int(lua_toboolean(L, idx)));
  return nc_lua_ag_checkoperand(L, idx, fname);
}

/* cond ? (value at ai) : (value at bi); the condition is a constant (a Node gives its value). */
static int where_at(lua_State *L, int ci, int ai, int bi, int opts_at) {
  const char *fname = "netcl.where";
  int opts = opts_at ? nc_lua_checkopts(L, opts_at, fname, "out") : 0;
  nc_tensor *cond = nc_lua_ag_checktensor(L, ci, fname);
  if (nc_lua_isnode(L, ai) || nc_lua_isnode(L, bi)) {
    nc_lua_no_out(L, opts, fname);
    nc_ag_operand a = where_ag_operand(L, ai, fname), b = where_ag_operand(L, bi, fname);
    nc_node *out;
    return nc_lua_ag_result(L, nc_ag_where(nc_lua_active_tape(L), cond, a, b, &out), &out, fname);
  }
  nc_operand a = where_operand(L, ai, fname), b = where_operand(L, bi, fname);
  nc_tensor *dst = nc_lua_opt_out(L, opts, fname), *r = NULL;
  nc_status s = dst ? nc_where_into(dst, cond, a, b) : nc_where(cond, a, b, &r);
  return nc_lua_result(L, s, opts, r, fname);
}

/* nc.where(cond, a, b, opts) */
static int l_where(lua_State *L) { return where_at(L, 1, 2, 3, 4); }

/* x:where(cond, other): cond ? x : other (PyTorch's Tensor.where) */
static int l_where_method(lua_State *L) { return where_at(L, 2, 1, 3, 0); }

/* x:masked_fill(mask, value, opts) */
static int l_masked_fill(lua_State *L) {
  const char *fname = "netcl.masked_fill";
  nc_tensor *mask = nc_lua_ag_checktensor(L, 2, fname);
  nc_scalar v = nc_lua_checkscalar(L, 3, fname);
  int opts = nc_lua_checkopts(L, 4, fname, "out");
  if (nc_lua_isnode(L, 1)) {
    nc_lua_no_out(L, opts, fname);
    nc_node *out;
    return nc_lua_ag_result(
        L, nc_ag_masked_fill(nc_lua_active_tape(L), nc_lua_checknode(L, 1, fname), mask, v, &out), &out, fname);
  }
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *r = NULL, *dst = nc_lua_opt_out(L, opts, fname);
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
      if (nc_op_accepts((nc_op)i, (nc_dtype)d)) {
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
    bool unary = o->family == NC_FAMILY_UNARY, binary = o->family == NC_FAMILY_BINARY;
    if (!unary && !binary) continue;
    if (i == NC_OP_CLAMP) continue;
    nc_lua_bind_op(L, module, o->name, unary ? l_unary : l_binary, i, NC_LUA_BOTH);
    if (unary ? o->result == NC_RES_SAME || o->result == NC_RES_FLOAT : o->result != NC_RES_BOOL) {
      snprintf(name, sizeof name, "%s_", o->name);
      nc_lua_register_op(L, 0, methods, name, unary ? l_unary_ : l_binary_, i);
    }
  }
  static const struct {
    const char *meta;
    nc_op op;
  } arith[] = {{"__add", NC_OP_ADD},
               {"__sub", NC_OP_SUB},
               {"__mul", NC_OP_MUL},
               {"__div", NC_OP_DIV},
               {"__pow", NC_OP_POW},
               {"__idiv", NC_OP_FLOOR_DIVIDE},
               {"__mod", NC_OP_REMAINDER}};
  for (size_t i = 0; i < sizeof arith / sizeof arith[0]; i++)
    nc_lua_bind_op(L, module, arith[i].meta, l_binary, arith[i].op, NC_LUA_OPERATOR);
  nc_lua_bind_op(L, module, "__unm", l_unm, NC_OP_NEG, NC_LUA_OPERATOR);
  nc_lua_bind_op(L, module, "clamp", l_clamp, NC_OP_CLAMP, NC_LUA_BOTH);
  nc_lua_bind_op(L, module, "masked_fill", l_masked_fill, NC_OP_MASKED_FILL, NC_LUA_BOTH);
  nc_lua_bind_op(L, module, "where", l_where, NC_OP_WHERE, NC_LUA_FUNCTION);
  nc_lua_bind_op(L, module, "where", l_where_method, NC_OP_WHERE, NC_LUA_METHOD);

  static const luaL_Reg tensor_only[] = {
      {"clamp_", l_clamp_}, {"masked_fill_", l_masked_fill_}, {NULL, NULL}};
  lua_pushvalue(L, methods);
  luaL_setfuncs(L, tensor_only, 0);
  lua_pop(L, 1);
  lua_pushcfunction(L, l_ops);
  lua_setfield(L, module, "ops");

  nc_lua_add_reduce(L, module);
  nc_lua_add_index(L, module, methods);
  nc_lua_add_views(L, module);
  nc_lua_add_random(L, module, methods);

  lua_settop(L, module);
}

/* Reduction, cumsum and softmax bindings, generated from the op table; one binding per op for
 * Tensors and Nodes alike (nc.<op>, nc.autograd.<op>, t:<op>(), n:<op>()):
 *   x:sum(d?, opts)  d: nil (every dim), a dim, or a table of dims; opts {keepdim=, out=}
 *   x:max(d) / x:min(d) with one dim return values and int64 indices
 *   x:var(d?, {correction= | unbiased=})  x:std likewise  x:norm(d?, {p=})
 *   x:cumsum(d, opts)  x:softmax(d, opts)  x:log_softmax(d, opts)   (d may be omitted for 0-d and
 *   1-d tensors; opts {out=})
 * A Node records the differentiable op (every one but argmax, argmin, any and all, which apply
 * to its value and return Tensors). */
#include <math.h>
#include <string.h>
#include "l_autograd.h"
#include "l_ops.h"

/* Dims at idx: nil, an integer, or an array of integers; returns their count (0 = all). *single
 * tells whether one integer was given. */
static int check_dims(lua_State *L, int idx, const nc_tensor *t, int *dims, bool *single, const char *fname) {
  *single = false;
  if (lua_isnoneornil(L, idx)) return 0;
  if (lua_type(L, idx) == LUA_TNUMBER) {
    *single = true;
    dims[0] = nc_lua_checkdim(L, idx, t->ndim ? t->ndim : 1, fname);
    return 1;
  }
  if (!lua_istable(L, idx))
    return nc_lua_argerror(L, fname, idx, "dims must be an integer or a table of integers, got %s",
                           luaL_typename(L, idx));
  lua_Integer n = luaL_len(L, idx);
  if (n > NC_MAX_DIMS)
    return nc_lua_argerror(L, fname, idx, "%lld dims given; a tensor has at most %d", (long long)n,
                           NC_MAX_DIMS);
  for (int i = 0; i < n; i++) {
    lua_geti(L, idx, i + 1);
    dims[i] = nc_lua_checkdim(L, lua_gettop(L), t->ndim ? t->ndim : 1, fname);
    lua_pop(L, 1);
  }
  return (int)n;
}

/* The options each reduction takes. */
static const char *reduce_keys(nc_op op) {
  if (op == NC_OP_VAR || op == NC_OP_STD) return "keepdim correction unbiased out";
  if (op == NC_OP_NORM) return "keepdim p out";
  return "keepdim out";
}

static nc_reduce_args reduce_opts(lua_State *L, int opts, const char *fname) {
  nc_reduce_args a = nc_reduce_defaults();
  if (!opts) return a;
  if (lua_getfield(L, opts, "p") != LUA_TNIL) {
    if (lua_type(L, -1) == LUA_TSTRING) {
      const char *s = lua_tostring(L, -1);
      if (strcmp(s, "inf") == 0)
        a.p = INFINITY;
      else if (strcmp(s, "-inf") == 0)
        a.p = -INFINITY;
      else if (strcmp(s, "fro") == 0)
        a.p = 2;
      else
        luaL_error(L, "%s: opts.p must be a number, \"inf\", \"-inf\" or \"fro\", got \"%s\"", fname, s);
    } else if (lua_type(L, -1) == LUA_TNUMBER) {
      a.p = lua_tonumber(L, -1);
    } else {
      luaL_error(L, "%s: opts.p must be a number, got %s", fname, luaL_typename(L, -1));
    }
  }
  lua_pop(L, 1);
  if (lua_getfield(L, opts, "unbiased") != LUA_TNIL) a.correction = lua_toboolean(L, -1) ? 1 : 0;
  lua_pop(L, 1);
  if (lua_getfield(L, opts, "correction") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TNUMBER) luaL_error(L, "%s: opts.correction must be a number", fname);
    a.correction = lua_tonumber(L, -1);
  }
  lua_pop(L, 1);
  return a;
}

/* A table at idx is dims when it has an array part, options otherwise. */
static bool is_dims_table(lua_State *L, int idx) { return lua_istable(L, idx) && luaL_len(L, idx) > 0; }

/* nc.<op>(x, dims?, opts), x:<op>(dims?, opts); the op code is upvalue 1. */
static int l_reduce(lua_State *L) {
  const char *fname;
  nc_op op = nc_lua_opname(L, &fname);
  nc_tensor *x = nc_lua_ag_checktensor(L, 1, fname), *r = NULL, *ri = NULL;
  int dims_at = 2, opts_at = 3;
  if (lua_istable(L, 2) && !is_dims_table(L, 2)) dims_at = 0, opts_at = 2;
  int dims[NC_MAX_DIMS];
  bool single = false;
  int ndims = dims_at ? check_dims(L, dims_at, x, dims, &single, fname) : 0;
  int opts = nc_lua_checkopts(L, opts_at, fname, reduce_keys(op));
  bool keepdim = nc_lua_opt_bool(L, opts, "keepdim", false);
  nc_reduce_args a = reduce_opts(L, opts, fname);
  /* max/min along one dim also give the positions */
  bool indexed = (op == NC_OP_MAX || op == NC_OP_MIN) && single;
  bool node = nc_lua_isnode(L, 1) && nc_lua_differentiable(op);
  nc_tensor *dst = node ? NULL : nc_lua_opt_out(L, opts, fname);
  if (node) {
    nc_lua_no_out(L, opts, fname);
    nc_node *out;
    nc_lua_ag_result(L,
                     nc_ag_reduce(nc_lua_active_tape(L), op, nc_lua_checknode(L, 1, fname), ndims, dims,
                                  keepdim, &a, &out),
                     &out, fname);
  } else if (indexed && !dst) {
    NC_LUA_CHECK(L, fname, nc_reduce_indexed(op, x, dims[0], keepdim, &r, &ri));
    nc_lua_pushtensor_new(L, r);
    nc_lua_pushtensor_new(L, ri);
    return 2;
  } else {
    if ((op == NC_OP_ARGMAX || op == NC_OP_ARGMIN) && ndims > 1 && x->ndim > 0)
      return nc_lua_argerror(L, fname, 2, "takes one dim or none, got %d", ndims);
    nc_status s = dst ? nc_reduce_into(op, dst, x, ndims, dims, keepdim, &a)
                      : nc_reduce(op, x, ndims, dims, keepdim, &a, &r);
    nc_lua_result(L, s, opts, r, fname);
  }
  if (!indexed) return 1;
  NC_LUA_CHECK(L, fname,
               nc_reduce(op == NC_OP_MAX ? NC_OP_ARGMAX : NC_OP_ARGMIN, x, 1, dims, keepdim, NULL, &ri));
  nc_lua_pushtensor_new(L, ri);
  return 2;
}

/* The dim for cumsum/softmax: required, except that 0-d and 1-d tensors default to their only one. */
static int one_dim(lua_State *L, int idx, const nc_tensor *x, const char *fname) {
  bool given = !lua_isnoneornil(L, idx) && !lua_istable(L, idx);
  if (!given && x->ndim <= 1) return 0;
  if (!given) return nc_lua_argerror(L, fname, idx, "needs a dim for a tensor with %d dims", x->ndim);
  return nc_lua_checkdim(L, idx, x->ndim ? x->ndim : 1, fname);
}

/* x:cumsum(d?, opts), x:softmax(d?, opts), x:log_softmax(d?, opts); opts may take d's place. */
static int l_along(lua_State *L) {
  const char *fname;
  nc_op op = nc_lua_opname(L, &fname);
  nc_tensor *x = nc_lua_ag_checktensor(L, 1, fname), *r = NULL;
  int opts = nc_lua_checkopts(L, lua_istable(L, 2) ? 2 : 3, fname, "out");
  int dim = one_dim(L, 2, x, fname);
  if (nc_lua_isnode(L, 1)) {
    nc_lua_no_out(L, opts, fname);
    nc_node *n = nc_lua_checknode(L, 1, fname), *out;
    nc_tape *t = nc_lua_active_tape(L);
    nc_status s = op == NC_OP_CUMSUM ? nc_ag_cumsum(t, n, dim, &out) : nc_ag_softmax(t, op, n, dim, &out);
    return nc_lua_ag_result(L, s, &out, fname);
  }
  nc_tensor *dst = nc_lua_opt_out(L, opts, fname);
  nc_status s;
  if (op == NC_OP_CUMSUM)
    s = dst ? nc_cumsum_into(dst, x, dim) : nc_cumsum(x, dim, &r);
  else
    s = dst ? nc_softmax_into(op, dst, x, dim) : nc_softmax(op, x, dim, &r);
  return nc_lua_result(L, s, opts, r, fname);
}

void nc_lua_add_reduce(lua_State *L, int module) {
  for (int i = 0; i < NC_OP_COUNT; i++) {
    const nc_op_info *o = nc_op_get((nc_op)i);
    if (o->family == NC_FAMILY_REDUCE)
      nc_lua_bind_op(L, module, o->name, l_reduce, i, NC_LUA_BOTH);
    else if (o->family == NC_FAMILY_SCAN || o->family == NC_FAMILY_SOFTMAX)
      nc_lua_bind_op(L, module, o->name, l_along, i, NC_LUA_BOTH);
  }
}

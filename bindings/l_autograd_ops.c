/* Differentiable ops on Nodes: argument checking and unwrapping around nc_ag_* (the math is
 * in runtime/autograd). Each op is a Node method and/or an autograd module function, with the
 * same arguments as the Tensor op of the same name (dims 1-based, negative from the end).
 * Tensor arguments where a Node is expected become constant nodes; numbers stay numbers.
 *
 * The binding table below must list exactly the rows of NC_AG_OPS: registration fails loudly
 * otherwise, so the gradient-check suite (which walks ag.ops()) covers every bound op. */
#include <math.h>
#include <string.h>
#include "l_autograd.h"
#include "l_ops.h"
#include "netcl/autograd_ops.h"
#include "netcl/join.h"

/* ---- shared helpers ---------------------------------------------------------------------------- */
/* "netcl.autograd.<op name>" from upvalue 2 (the name). */
static const char *upname(lua_State *L, char *buf, size_t n) {
  snprintf(buf, n, "netcl.autograd.%s", lua_tostring(L, lua_upvalueindex(2)));
  return buf;
}

/* A shape that may hold one -1 (view, reshape, expand). */
static int shape_arg(lua_State *L, int idx, int64_t *shape, const char *fname) {
  if (lua_type(L, idx) == LUA_TNUMBER) {
    shape[0] = luaL_checkinteger(L, idx);
    return 1;
  }
  if (!lua_istable(L, idx))
    return nc_lua_argerror(L, fname, idx, "expected a shape table, got %s", luaL_typename(L, idx));
  lua_Integer n = luaL_len(L, idx);
  if (n > NC_MAX_DIMS)
    return nc_lua_argerror(L, fname, idx, "shape has %lld dims; at most %d are supported", (long long)n,
                           NC_MAX_DIMS);
  for (int i = 0; i < n; i++) {
    lua_geti(L, idx, i + 1);
    int isint;
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (!isint) return nc_lua_argerror(L, fname, idx, "size at dim %d is not an integer", i + 1);
    if (v < -1) return nc_lua_argerror(L, fname, idx, "size %lld at dim %d is negative", (long long)v, i + 1);
    shape[i] = v;
    lua_pop(L, 1);
  }
  return (int)n;
}

/* A 1-based position (negative from the end) into a dim of size n; returns it 0-based. */
static int64_t pos_arg(lua_State *L, int idx, int64_t n, const char *fname) {
  int isint;
  lua_Integer i = lua_tointegerx(L, idx, &isint);
  if (!isint)
    return nc_lua_argerror(L, fname, idx, "index must be an integer, got %s", luaL_typename(L, idx));
  int64_t z = i < 0 ? i + n : i - 1;
  if (i == 0 || z < 0 || z >= n)
    return nc_lua_argerror(L, fname, idx, "index %lld out of range for a dim of size %lld", (long long)i,
                           (long long)n);
  return z;
}

/* ---- reductions ----------------------------------------------------------------------------------- */
/* Dims at idx: nil (all), an integer, or an array of integers; returns their count. */
static int dims_arg(lua_State *L, int idx, int ndim, int *dims, bool *single, const char *fname) {
  *single = false;
  if (lua_isnoneornil(L, idx)) return 0;
  int nd = ndim ? ndim : 1;
  if (lua_type(L, idx) == LUA_TNUMBER) {
    *single = true;
    dims[0] = nc_lua_checkdim(L, idx, nd, fname);
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
    dims[i] = nc_lua_checkdim(L, lua_gettop(L), nd, fname);
    lua_pop(L, 1);
  }
  return (int)n;
}

static nc_reduce_args reduce_opts(lua_State *L, int opts, const char *fname) {
  nc_reduce_args a = nc_reduce_defaults();
  if (!opts) return a;
  if (lua_getfield(L, opts, "p") != LUA_TNIL) {
    const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    if (s && !strcmp(s, "inf"))
      a.p = INFINITY;
    else if (s && !strcmp(s, "-inf"))
      a.p = -INFINITY;
    else if (s && !strcmp(s, "fro"))
      a.p = 2;
    else if (lua_type(L, -1) == LUA_TNUMBER)
      a.p = lua_tonumber(L, -1);
    else
      luaL_error(L, "%s: opts.p must be a number, \"inf\", \"-inf\" or \"fro\"", fname);
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

/* x:sum(dims?, {keepdim=, p=, correction=}); x:max(d) / x:min(d) with one dim also return the
 * int64 positions (a Tensor), as the Tensor methods do. Upvalue 1: the op code. */
static int l_reduce(lua_State *L) {
  char fname[64];
  nc_op op = (nc_op)lua_tointeger(L, lua_upvalueindex(1));
  upname(L, fname, sizeof fname);
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  int dims_at = 2, opts_at = 3;
  if (lua_istable(L, 2) && luaL_len(L, 2) == 0) dims_at = 0, opts_at = 2;
  int dims[NC_MAX_DIMS];
  bool single = false;
  int ndims = dims_at ? dims_arg(L, dims_at, nc_node_value(x)->ndim, dims, &single, fname) : 0;
  int opts = nc_lua_opts(L, opts_at);
  bool keepdim = nc_lua_opt_bool(L, opts, "keepdim", false);
  nc_reduce_args a = reduce_opts(L, opts, fname);
  nc_lua_ag_result(L, nc_ag_reduce(nc_lua_active_tape(L), op, x, ndims, dims, keepdim, &a, &out), &out,
                   fname);
  if ((op == NC_OP_MAX || op == NC_OP_MIN) && single) {
    nc_tensor *idx;
    NC_LUA_CHECK(L, fname,
                 nc_reduce(op == NC_OP_MAX ? NC_OP_ARGMAX : NC_OP_ARGMIN, nc_node_value(x), 1, dims, keepdim,
                           NULL, &idx));
    nc_lua_pushtensor_new(L, idx);
    return 2;
  }
  return 1;
}

/* The dim of cumsum/softmax: required, except that 0-d and 1-d inputs default to their only one. */
static int along_dim(lua_State *L, int idx, const nc_tensor *x, const char *fname) {
  if (lua_isnoneornil(L, idx) || lua_istable(L, idx)) {
    if (x->ndim <= 1) return 0;
    return nc_lua_argerror(L, fname, idx, "needs a dim for a tensor with %d dims", x->ndim);
  }
  return nc_lua_checkdim(L, idx, x->ndim ? x->ndim : 1, fname);
}

static int l_cumsum(lua_State *L) {
  const char *fname = "netcl.autograd.cumsum";
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  int dim = along_dim(L, 2, nc_node_value(x), fname);
  return nc_lua_ag_result(L, nc_ag_cumsum(nc_lua_active_tape(L), x, dim, &out), &out, fname);
}

/* x:softmax(d), x:log_softmax(d); upvalue 1: the op code. */
static int l_softmax(lua_State *L) {
  char fname[64];
  nc_op op = (nc_op)lua_tointeger(L, lua_upvalueindex(1));
  upname(L, fname, sizeof fname);
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  int dim = along_dim(L, 2, nc_node_value(x), fname);
  return nc_lua_ag_result(L, nc_ag_softmax(nc_lua_active_tape(L), op, x, dim, &out), &out, fname);
}

/* ---- indexing and joins ------------------------------------------------------------------------ */
/* x:index_select(d, idx) and x:gather(d, idx); upvalue 2: the name. */
static int l_select_by_index(lua_State *L) {
  char fname[64];
  bool gather = !strcmp(lua_tostring(L, lua_upvalueindex(2)), "gather");
  upname(L, fname, sizeof fname);
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  int nd = nc_node_value(x)->ndim;
  int dim = nc_lua_checkdim(L, 2, nd ? nd : 1, fname);
  nc_tensor *idx = nc_lua_ag_checktensor(L, 3, fname);
  nc_status s = gather ? nc_ag_gather(nc_lua_active_tape(L), x, dim, idx, &out)
                       : nc_ag_index_select(nc_lua_active_tape(L), x, dim, idx, &out);
  return nc_lua_ag_result(L, s, &out, fname);
}

static int l_scatter_add(lua_State *L) {
  const char *fname = "netcl.autograd.scatter_add";
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  int nd = nc_node_value(x)->ndim;
  int dim = nc_lua_checkdim(L, 2, nd ? nd : 1, fname);
  nc_tensor *idx = nc_lua_ag_checktensor(L, 3, fname);
  nc_node *src = nc_lua_checknodelike(L, 4, fname);
  return nc_lua_ag_result(L, nc_ag_scatter_add(nc_lua_active_tape(L), x, dim, idx, src, &out), &out, fname);
}

/* The nodes of the list at idx (Tensors become constant nodes), in an array owned by a
 * userdata pushed on the stack, with the constant nodes kept alive in its user value. */
static nc_node **node_list(lua_State *L, int idx, int *n, const char *fname) {
  if (!lua_istable(L, idx)) {
    nc_lua_argerror(L, fname, idx, "expected a table of Nodes or Tensors, got %s", luaL_typename(L, idx));
    return NULL;
  }
  lua_Integer len = luaL_len(L, idx);
  if (len < 1) luaL_error(L, "%s: needs at least one node", fname);
  if (len > 1 << 20) luaL_error(L, "%s: too many nodes (%lld)", fname, (long long)len);
  nc_node **ns = lua_newuserdatauv(L, sizeof *ns * (size_t)len, 1);
  lua_createtable(L, (int)len, 0);
  for (lua_Integer i = 0; i < len; i++) {
    lua_geti(L, idx, i + 1);
    if (!nc_lua_tonode(L, -1) && !luaL_testudata(L, -1, NC_TENSOR_MT))
      luaL_error(L, "%s: element %lld of the list is a %s, not a Node or Tensor", fname, (long long)i + 1,
                 luaL_typename(L, -1));
    ns[i] = nc_lua_checknodelike(L, lua_gettop(L), fname);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setiuservalue(L, -2, 1);
  *n = (int)len;
  return ns;
}

static int join(lua_State *L, bool stack) {
  const char *fname = stack ? "netcl.autograd.stack" : "netcl.autograd.cat";
  lua_settop(L, 2);
  int n;
  nc_node **ns = node_list(L, 1, &n, fname), *out = NULL;
  const nc_tensor *first = nc_node_value(ns[0]);
  int rank = first->ndim + (stack ? 1 : 0);
  if (!stack)
    for (int i = 0; i < n; i++) {
      const nc_tensor *v = nc_node_value(ns[i]);
      if (!(v->ndim == 1 && v->shape[0] == 0)) {
        rank = v->ndim;
        break;
      }
    }
  int dim = lua_isnoneornil(L, 2) ? 0 : nc_lua_checkdim(L, 2, rank ? rank : 1, fname);
  nc_status s = stack ? nc_ag_stack(nc_lua_active_tape(L), n, ns, dim, &out)
                      : nc_ag_cat(nc_lua_active_tape(L), n, ns, dim, &out);
  return nc_lua_ag_result(L, s, &out, fname);
}
static int l_cat(lua_State *L) { return join(L, false); }
static int l_stack(lua_State *L) { return join(L, true); }


/* Pushes a Lua array of the n parts of x (sizes along dim). */
static int split_parts(lua_State *L, nc_node *x, int dim, int n, const int64_t *sizes, const char *fname) {
  nc_node **parts = lua_newuserdatauv(L, sizeof *parts * (size_t)(n ? n : 1), 0);
  NC_LUA_CHECK(L, fname, nc_ag_split(nc_lua_active_tape(L), x, dim, n, sizes, parts));
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    nc_lua_ag_push(L, parts[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* x:split(size | {sizes}, d?) */
static int l_split(lua_State *L) {
  const char *fname = "netcl.autograd.split";
  lua_settop(L, 3);
  nc_node *x = nc_lua_checknodelike(L, 1, fname);
  const nc_tensor *v = nc_node_value(x);
  if (v->ndim == 0) return luaL_error(L, "%s: cannot split a 0-dim node", fname);
  int dim = lua_isnoneornil(L, 3) ? 0 : nc_lua_checkdim(L, 3, v->ndim, fname);
  int64_t *sizes;
  int n = nc_lua_split_sizes(L, 2, v->shape[dim], &sizes, fname);
  return split_parts(L, x, dim, n, sizes, fname);
}

/* x:chunk(n, d?): pieces of ceil(size / n), as in PyTorch (possibly fewer than n) */
static int l_chunk(lua_State *L) {
  const char *fname = "netcl.autograd.chunk";
  lua_settop(L, 3);
  nc_node *x = nc_lua_checknodelike(L, 1, fname);
  const nc_tensor *v = nc_node_value(x);
  if (v->ndim == 0) return luaL_error(L, "%s: cannot chunk a 0-dim node", fname);
  lua_Integer chunks = luaL_checkinteger(L, 2);
  if (chunks <= 0 || chunks > NC_LUA_MAX_PARTS)
    return nc_lua_argerror(L, fname, 2, "chunk count must be in 1..%d, got %lld", NC_LUA_MAX_PARTS,
                           (long long)chunks);
  int dim = lua_isnoneornil(L, 3) ? 0 : nc_lua_checkdim(L, 3, v->ndim, fname);
  int64_t len = v->shape[dim], size = (len + chunks - 1) / chunks;
  int64_t *sizes = lua_newuserdatauv(L, sizeof *sizes * (size_t)chunks, 0);
  int n = size > 0 ? nc_split_sizes(len, size, sizes, (int)chunks) : 0;
  return split_parts(L, x, dim, n, sizes, fname);
}

/* ---- layers ------------------------------------------------------------------------------------------- */
/* ag.dropout(x, p=0.5, {training=true}) (or a boolean training as argument 3) */
static int l_dropout(lua_State *L) {
  const char *fname = "netcl.autograd.dropout";
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  double p = luaL_optnumber(L, 2, 0.5);
  bool training = true;
  if (lua_isboolean(L, 3))
    training = lua_toboolean(L, 3);
  else
    training = nc_lua_opt_bool(L, nc_lua_opts(L, 3), "training", true);
  return nc_lua_ag_result(L, nc_ag_dropout(nc_lua_active_tape(L), x, p, training, nc_lua_rng(L), &out), &out,
                          fname);
}

/* ---- views --------------------------------------------------------------------------------------- */
static int l_view(lua_State *L) {
  const char *fname = "netcl.autograd.view";
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  int64_t shape[NC_MAX_DIMS];
  int n = shape_arg(L, 2, shape, fname);
  return nc_lua_ag_result(L, nc_ag_view(nc_lua_active_tape(L), x, n, shape, &out), &out, fname);
}

static int l_reshape(lua_State *L) {
  const char *fname = "netcl.autograd.reshape";
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  int64_t shape[NC_MAX_DIMS];
  int n = shape_arg(L, 2, shape, fname);
  return nc_lua_ag_result(L, nc_ag_reshape(nc_lua_active_tape(L), x, n, shape, &out), &out, fname);
}

static int l_transpose(lua_State *L) {
  const char *fname = "netcl.autograd.transpose";
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  int nd = nc_node_value(x)->ndim;
  int d1 = nc_lua_checkdim(L, 2, nd, fname), d2 = nc_lua_checkdim(L, 3, nd, fname);
  return nc_lua_ag_result(L, nc_ag_transpose(nc_lua_active_tape(L), x, d1, d2, &out), &out, fname);
}

static int l_permute(lua_State *L) {
  const char *fname = "netcl.autograd.permute";
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  int nd = nc_node_value(x)->ndim, dims[NC_MAX_DIMS];
  luaL_checktype(L, 2, LUA_TTABLE);
  if (luaL_len(L, 2) != nd)
    return nc_lua_argerror(L, fname, 2, "needs %d dims, got %lld", nd, (long long)luaL_len(L, 2));
  for (int i = 0; i < nd; i++) {
    lua_geti(L, 2, i + 1);
    dims[i] = nc_lua_checkdim(L, -1, nd, fname);
    lua_pop(L, 1);
  }
  return nc_lua_ag_result(L, nc_ag_permute(nc_lua_active_tape(L), x, dims, &out), &out, fname);
}

static int l_narrow(lua_State *L) {
  const char *fname = "netcl.autograd.narrow";
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  const nc_tensor *v = nc_node_value(x);
  int d = nc_lua_checkdim(L, 2, v->ndim, fname);
  lua_Integer start = luaL_checkinteger(L, 3), len = luaL_checkinteger(L, 4);
  if (start < 0) start += v->shape[d] + 1;
  if (start < 1)
    return nc_lua_argerror(L, fname, 3, "start %lld is out of range", (long long)luaL_checkinteger(L, 3));
  return nc_lua_ag_result(L, nc_ag_narrow(nc_lua_active_tape(L), x, d, start - 1, len, &out), &out, fname);
}

static int select_at(lua_State *L, int dim_idx, int pos_idx, const char *fname) {
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  const nc_tensor *v = nc_node_value(x);
  if (v->ndim == 0) return nc_lua_errorf(L, "%s: cannot select from a 0-dim node", fname);
  int d = dim_idx ? nc_lua_checkdim(L, dim_idx, v->ndim, fname) : 0;
  int64_t i = pos_arg(L, pos_idx, v->shape[d], fname);
  return nc_lua_ag_result(L, nc_ag_select(nc_lua_active_tape(L), x, d, i, &out), &out, fname);
}

static int l_select(lua_State *L) { return select_at(L, 2, 3, "netcl.autograd.select"); }

static int l_expand(lua_State *L) {
  const char *fname = "netcl.autograd.expand";
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  int64_t shape[NC_MAX_DIMS];
  int n = shape_arg(L, 2, shape, fname);
  return nc_lua_ag_result(L, nc_ag_expand(nc_lua_active_tape(L), x, n, shape, &out), &out, fname);
}

static int l_squeeze(lua_State *L) {
  const char *fname = "netcl.autograd.squeeze";
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  int d = lua_isnoneornil(L, 2) ? -1 : nc_lua_checkdim(L, 2, nc_node_value(x)->ndim, fname);
  return nc_lua_ag_result(L, nc_ag_squeeze(nc_lua_active_tape(L), x, d, &out), &out, fname);
}

static int l_unsqueeze(lua_State *L) {
  const char *fname = "netcl.autograd.unsqueeze";
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  int d = nc_lua_checkdim(L, 2, nc_node_value(x)->ndim + 1, fname);
  return nc_lua_ag_result(L, nc_ag_unsqueeze(nc_lua_active_tape(L), x, d, &out), &out, fname);
}

static int l_flatten(lua_State *L) {
  const char *fname = "netcl.autograd.flatten";
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  int nd = nc_node_value(x)->ndim;
  int d1 = nd == 0 || lua_isnoneornil(L, 2) ? 0 : nc_lua_checkdim(L, 2, nd, fname);
  int d2 = nd == 0 || lua_isnoneornil(L, 3) ? nd - 1 : nc_lua_checkdim(L, 3, nd, fname);
  if (nd && d1 > d2)
    return nc_lua_argerror(L, fname, 3, "end dim %d comes before start dim %d", d2 + 1, d1 + 1);
  return nc_lua_ag_result(L, nc_ag_flatten(nc_lua_active_tape(L), x, d1, d2, &out), &out, fname);
}

static int l_contiguous(lua_State *L) {
  nc_node *x = nc_lua_checknodelike(L, 1, "netcl.autograd.contiguous"), *out;
  return nc_lua_ag_result(L, nc_ag_contiguous(nc_lua_active_tape(L), x, &out), &out,
                          "netcl.autograd.contiguous");
}

static int l_clone(lua_State *L) {
  nc_node *x = nc_lua_checknodelike(L, 1, "netcl.autograd.clone"), *out;
  return nc_lua_ag_result(L, nc_ag_clone(nc_lua_active_tape(L), x, &out), &out, "netcl.autograd.clone");
}

/* n[i]: select along dim 1 (as Tensors); l_autograd.c's __index calls it for number keys. */
static int node_index_number(lua_State *L) { return select_at(L, 0, 2, "netcl.autograd.index"); }

/* ---- registration ---------------------------------------------------------------------------------- */
/* Rows take their op code from the op table by name (-1 for ops outside it). The elementwise
 * ops are bound in l_ops.c, for Tensors and Nodes alike. */
static const nc_lua_ag_binding op_bindings[] = {
    {"sum", l_reduce, NC_LUA_AG_BOTH},
    {"mean", l_reduce, NC_LUA_AG_BOTH},
    {"prod", l_reduce, NC_LUA_AG_BOTH},
    {"max", l_reduce, NC_LUA_AG_BOTH},
    {"min", l_reduce, NC_LUA_AG_BOTH},
    {"var", l_reduce, NC_LUA_AG_BOTH},
    {"std", l_reduce, NC_LUA_AG_BOTH},
    {"norm", l_reduce, NC_LUA_AG_BOTH},
    {"logsumexp", l_reduce, NC_LUA_AG_BOTH},
    {"cumsum", l_cumsum, NC_LUA_AG_BOTH},
    {"softmax", l_softmax, NC_LUA_AG_BOTH},
    {"log_softmax", l_softmax, NC_LUA_AG_BOTH},
    {"view", l_view, NC_LUA_AG_BOTH},
    {"reshape", l_reshape, NC_LUA_AG_BOTH},
    {"transpose", l_transpose, NC_LUA_AG_BOTH},
    {"permute", l_permute, NC_LUA_AG_BOTH},
    {"narrow", l_narrow, NC_LUA_AG_BOTH},
    {"select", l_select, NC_LUA_AG_BOTH},
    {"expand", l_expand, NC_LUA_AG_BOTH},
    {"squeeze", l_squeeze, NC_LUA_AG_BOTH},
    {"unsqueeze", l_unsqueeze, NC_LUA_AG_BOTH},
    {"flatten", l_flatten, NC_LUA_AG_BOTH},
    {"contiguous", l_contiguous, NC_LUA_AG_BOTH},
    {"clone", l_clone, NC_LUA_AG_BOTH},
    {"index_select", l_select_by_index, NC_LUA_AG_BOTH},
    {"gather", l_select_by_index, NC_LUA_AG_BOTH},
    {"scatter_add", l_scatter_add, NC_LUA_AG_BOTH},
    {"cat", l_cat, NC_LUA_AG_MODULE},
    {"stack", l_stack, NC_LUA_AG_MODULE},
    {"split", l_split, NC_LUA_AG_BOTH},
    {"chunk", l_chunk, NC_LUA_AG_BOTH},
    {"dropout", l_dropout, NC_LUA_AG_BOTH},
    {NULL, NULL, 0},
};

static const nc_lua_ag_binding *const tables[] = {op_bindings};


/* ag.ops(): the names of NC_AG_OPS, in order. */
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
  int node_meta = lua_gettop(L);
  lua_getfield(L, node_meta, "methods");
  int node_methods = lua_gettop(L);
  lua_pushcfunction(L, node_index_number);
  lua_setfield(L, node_meta, "__index_number");
  for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
    for (const nc_lua_ag_binding *b = tables[t]; b->name; b++) {
      if (!nc_ag_op_known(b->name))
        luaL_error(L, "netcl.autograd: binding %s is not a row of NC_AG_OPS", b->name);
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

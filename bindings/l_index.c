/* Indexing and join bindings, one per op for Tensors and Nodes alike (nc.<op>, nc.autograd.<op>
 * and, except one_hot, cat and stack, t:<op>() and n:<op>()). Dims are 1-based (negative from
 * the end); values inside index tensors are 0-based int64.
 *   x:index_select(d, idx, opts)  x:gather(d, idx, opts)  x:scatter_add(d, idx, src, opts)   opts {out=}
 *   nc.cat(list, d?)  nc.stack(list, d?)  x:split(size | sizes, d?)  x:chunk(n, d?)
 *   nc.one_hot(idx, n?)  x:sort(d?, {descending=})  x:topk(k, d?, {largest=true})   (values, indices)
 *   t:scatter_add_(d, idx, src)   (Tensors only)
 * A Node operand (anywhere in the list for cat and stack) records the differentiable op, with
 * Tensors as constants; one_hot, sort and topk are not differentiable and take a Node's value. */
#include <stdlib.h>
#include "l_autograd.h"
#include "l_ops.h"
#include "netcl/index.h"
#include "netcl/join.h"
#include "netcl/sort.h"

/* x:index_select(d, idx, opts), x:gather(d, idx, opts); the op code is upvalue 1. */
static int l_take(lua_State *L) {
  const char *fname;
  nc_op op = nc_lua_opname(L, &fname);
  bool gather = op == NC_OP_GATHER;
  nc_tensor *x = nc_lua_ag_checktensor(L, 1, fname), *r = NULL;
  int dim = nc_lua_checkdim(L, 2, x->ndim ? x->ndim : 1, fname);
  nc_tensor *idx = nc_lua_ag_checktensor(L, 3, fname);
  int opts = nc_lua_checkopts(L, 4, fname, "out");
  if (nc_lua_isnode(L, 1)) {
    nc_lua_no_out(L, opts, fname);
    nc_node *n = nc_lua_checknode(L, 1, fname), *out;
    nc_tape *t = nc_lua_active_tape(L);
    nc_status s = gather ? nc_ag_gather(t, n, dim, idx, &out) : nc_ag_index_select(t, n, dim, idx, &out);
    return nc_lua_ag_result(L, s, &out, fname);
  }
  nc_tensor *dst = nc_lua_opt_out(L, opts, fname);
  nc_status s;
  if (gather)
    s = dst ? nc_gather_into(dst, x, dim, idx) : nc_gather(x, dim, idx, &r);
  else
    s = dst ? nc_index_select_into(dst, x, dim, idx) : nc_index_select(x, dim, idx, &r);
  return nc_lua_result(L, s, opts, r, fname);
}

/* x:scatter_add(d, idx, src, opts): x or src a Node records the op (the other as a constant). */
static int l_scatter_add(lua_State *L) {
  const char *fname = "netcl.scatter_add";
  nc_tensor *x = nc_lua_ag_checktensor(L, 1, fname), *r = NULL;
  int dim = nc_lua_checkdim(L, 2, x->ndim ? x->ndim : 1, fname);
  nc_tensor *idx = nc_lua_ag_checktensor(L, 3, fname), *src = nc_lua_ag_checktensor(L, 4, fname);
  int opts = nc_lua_checkopts(L, 5, fname, "out");
  if (nc_lua_isnode(L, 1) || nc_lua_isnode(L, 4)) {
    nc_lua_no_out(L, opts, fname);
    nc_node *xn = nc_lua_checknodelike(L, 1, fname), *sn = nc_lua_checknodelike(L, 4, fname), *out;
    return nc_lua_ag_result(L, nc_ag_scatter_add(nc_lua_active_tape(L), xn, dim, idx, sn, &out), &out, fname);
  }
  nc_tensor *dst = nc_lua_opt_out(L, opts, fname);
  nc_status s = dst ? nc_scatter_add_into(dst, x, dim, idx, src) : nc_scatter_add(x, dim, idx, src, &r);
  return nc_lua_result(L, s, opts, r, fname);
}

static int l_scatter_add_(lua_State *L) {
  const char *fname = "netcl.scatter_add_";
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname);
  int dim = nc_lua_checkdim(L, 2, x->ndim ? x->ndim : 1, fname);
  nc_tensor *idx = nc_lua_checktensor_f(L, 3, fname), *src = nc_lua_checktensor_f(L, 4, fname);
  NC_LUA_CHECK(L, fname, nc_scatter_add_into(x, x, dim, idx, src));
  lua_settop(L, 1);
  return 1;
}

static int l_one_hot(lua_State *L) {
  const char *fname = "netcl.one_hot";
  nc_tensor *idx = nc_lua_ag_checktensor(L, 1, fname), *r;
  lua_Integer n = lua_isnoneornil(L, 2) ? -1 : nc_lua_checkinteger(L, 2, fname);
  if (n < -1) return nc_lua_argerror(L, fname, 2, "class count %lld is negative", (long long)n);
  NC_LUA_CHECK(L, fname, nc_one_hot(idx, n, &r));
  nc_lua_pushtensor_new(L, r);
  return 1;
}

/* The list at idx: the tensors of its elements (a Node's value) in *ts and, when some element
 * is a Node, every element as a node in *ns (Tensors become constant nodes) -- else *ns is NULL.
 * The arrays live in a userdata left on the stack (the constant nodes in its user value). */
static int check_list(lua_State *L, int idx, nc_tensor ***ts, nc_node ***ns, const char *fname) {
  if (!lua_istable(L, idx))
    return nc_lua_argerror(L, fname, idx, "expected a table of Tensors or Nodes, got %s",
                           luaL_typename(L, idx));
  lua_Integer len = luaL_len(L, idx);
  if (len < 1) nc_lua_errorf(L, "%s: needs at least one tensor", fname);
  if (len > 1 << 20) nc_lua_errorf(L, "%s: too many tensors (%lld)", fname, (long long)len);
  bool nodes = false;
  for (lua_Integer i = 1; i <= len && !nodes; i++) {
    lua_geti(L, idx, i);
    nodes = nc_lua_isnode(L, -1);
    lua_pop(L, 1);
  }
  nc_tensor **t = lua_newuserdatauv(L, (sizeof *t + (nodes ? sizeof **ns : 0)) * (size_t)len, 1);
  nc_node **n = nodes ? (nc_node **)(t + len) : NULL;
  if (nodes) lua_createtable(L, (int)len, 0);
  for (lua_Integer i = 0; i < len; i++) {
    lua_geti(L, idx, i + 1);
    nc_node *e = nc_lua_tonode(L, -1);
    t[i] = e ? nc_node_value(e) : nc_lua_totensor(L, -1);
    if (!t[i])
      nc_lua_errorf(L, "%s: element %lld of the list is a %s, not a live Tensor or Node", fname,
                    (long long)i + 1, luaL_typename(L, -1));
    if (nodes) {
      n[i] = nc_lua_checknodelike(L, lua_gettop(L), fname);
      lua_rawseti(L, -2, i + 1);
    } else {
      lua_pop(L, 1);
    }
  }
  if (nodes) lua_setiuservalue(L, -2, 1);
  *ts = t;
  *ns = n;
  return (int)len;
}

/* nc.cat(list, d?), nc.stack(list, d?); the op code is upvalue 1. */
static int l_join(lua_State *L) {
  const char *fname;
  bool stack = nc_lua_opname(L, &fname) == NC_OP_STACK;
  lua_settop(L, 2); /* scratch userdata goes above the arguments */
  nc_tensor **ts = NULL, *r;
  nc_node **ns = NULL, *out;
  int n = check_list(L, 1, &ts, &ns, fname);
  int rank = ts[0]->ndim + (stack ? 1 : 0);
  if (!stack)
    for (int i = 0; i < n; i++)
      if (!(ts[i]->ndim == 1 && ts[i]->shape[0] == 0)) {
        rank = ts[i]->ndim;
        break;
      }
  int dim = lua_isnoneornil(L, 2) ? 0 : nc_lua_checkdim(L, 2, rank ? rank : 1, fname);
  if (ns) {
    nc_tape *t = nc_lua_active_tape(L);
    return nc_lua_ag_result(L, stack ? nc_ag_stack(t, n, ns, dim, &out) : nc_ag_cat(t, n, ns, dim, &out),
                            &out, fname);
  }
  NC_LUA_CHECK(L, fname, stack ? nc_stack(n, ts, dim, &r) : nc_cat(n, ts, dim, &r));
  nc_lua_pushtensor_new(L, r);
  return 1;
}

/* Pushes a Lua array of the n parts of the argument at 1 along dim: Tensor views, or for a Node
 * the nodes of the differentiable split. */
static int push_parts(lua_State *L, nc_tensor *x, int dim, int n, const int64_t *sizes, const char *fname) {
  void **parts = lua_newuserdatauv(L, sizeof *parts * (size_t)(n ? n : 1), 0);
  bool node = nc_lua_isnode(L, 1);
  if (node)
    NC_LUA_CHECK(
        L, fname,
        nc_ag_split(nc_lua_active_tape(L), nc_lua_checknode(L, 1, fname), dim, n, sizes, (nc_node **)parts));
  else
    NC_LUA_CHECK(L, fname, nc_split(x, dim, n, sizes, (nc_tensor **)parts));
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    if (node)
      nc_lua_ag_push(L, parts[i]);
    else
      nc_lua_pushtensor_owned(L, parts[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* The dim argument at idx of split and chunk (dim 1 when absent). */
static int split_dim(lua_State *L, int idx, const nc_tensor *x, const char *fname) {
  if (x->ndim == 0) return nc_lua_errorf(L, "%s: a 0-dim tensor has no dim to split", fname);
  return lua_isnoneornil(L, idx) ? 0 : nc_lua_checkdim(L, idx, x->ndim, fname);
}

/* x:split(size, d) or x:split({s1, s2, ...}, d) */
static int l_split(lua_State *L) {
  const char *fname = "netcl.split";
  lua_settop(L, 3);
  nc_tensor *x = nc_lua_ag_checktensor(L, 1, fname);
  int dim = split_dim(L, 3, x, fname);
  int64_t *sizes;
  int n = nc_lua_split_sizes(L, 2, x->shape[dim], &sizes, fname);
  return push_parts(L, x, dim, n, sizes, fname);
}

/* x:chunk(n, d): pieces of ceil(size / n), as in PyTorch (possibly fewer than n) */
static int l_chunk(lua_State *L) {
  const char *fname = "netcl.chunk";
  lua_settop(L, 3);
  nc_tensor *x = nc_lua_ag_checktensor(L, 1, fname);
  int dim = split_dim(L, 3, x, fname);
  lua_Integer chunks = nc_lua_checkinteger(L, 2, fname);
  if (chunks <= 0 || chunks > NC_LUA_MAX_PARTS)
    return nc_lua_argerror(L, fname, 2, "chunk count must be in 1..%d, got %lld", NC_LUA_MAX_PARTS,
                           (long long)chunks);
  int64_t len = x->shape[dim], size = (len + chunks - 1) / chunks;
  int64_t *sizes = lua_newuserdatauv(L, sizeof *sizes * (size_t)chunks, 0);
  int n = size > 0 ? nc_split_sizes(len, size, sizes, (int)chunks) : 0;
  return push_parts(L, x, dim, n, sizes, fname);
}

static int sort_dim(lua_State *L, int idx, const nc_tensor *x, const char *fname) {
  if (lua_isnoneornil(L, idx) || lua_istable(L, idx)) return x->ndim ? x->ndim - 1 : 0;
  return nc_lua_checkdim(L, idx, x->ndim ? x->ndim : 1, fname);
}

static int push_pair(lua_State *L, nc_tensor *v, nc_tensor *i) {
  nc_lua_pushtensor_new(L, v);
  nc_lua_pushtensor_new(L, i);
  return 2;
}

/* x:sort(d?, {descending=false}) */
static int l_sort(lua_State *L) {
  const char *fname = "netcl.sort";
  nc_tensor *x = nc_lua_ag_checktensor(L, 1, fname), *v, *i;
  int dim = sort_dim(L, 2, x, fname);
  int opts = nc_lua_checkopts(L, lua_istable(L, 2) ? 2 : 3, fname, "descending");
  NC_LUA_CHECK(L, fname, nc_sort(x, dim, nc_lua_opt_bool(L, opts, "descending", false), &v, &i));
  return push_pair(L, v, i);
}

/* x:topk(k, d?, {largest=true}) */
static int l_topk(lua_State *L) {
  const char *fname = "netcl.topk";
  nc_tensor *x = nc_lua_ag_checktensor(L, 1, fname), *v, *i;
  lua_Integer k = nc_lua_checkinteger(L, 2, fname);
  int dim = sort_dim(L, 3, x, fname);
  int opts = nc_lua_checkopts(L, lua_istable(L, 3) ? 3 : 4, fname, "largest");
  NC_LUA_CHECK(L, fname, nc_topk(x, k, dim, nc_lua_opt_bool(L, opts, "largest", true), &v, &i));
  return push_pair(L, v, i);
}

void nc_lua_add_index(lua_State *L, int module, int methods) {
  static const struct {
    const char *name;
    lua_CFunction fn;
    nc_op op;
    int where;
  } ops[] = {{"index_select", l_take, NC_OP_INDEX_SELECT, NC_LUA_BOTH},
             {"gather", l_take, NC_OP_GATHER, NC_LUA_BOTH},
             {"scatter_add", l_scatter_add, NC_OP_SCATTER_ADD, NC_LUA_BOTH},
             {"split", l_split, NC_OP_SPLIT, NC_LUA_BOTH},
             {"chunk", l_chunk, NC_OP_CHUNK, NC_LUA_BOTH},
             {"sort", l_sort, NC_OP_SORT, NC_LUA_BOTH},
             {"topk", l_topk, NC_OP_TOPK, NC_LUA_BOTH},
             {"cat", l_join, NC_OP_CAT, NC_LUA_FUNCTION},
             {"stack", l_join, NC_OP_STACK, NC_LUA_FUNCTION},
             {"one_hot", l_one_hot, NC_OP_ONE_HOT, NC_LUA_FUNCTION}};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    nc_lua_bind_op(L, module, ops[i].name, ops[i].fn, ops[i].op, ops[i].where);
  lua_pushcfunction(L, l_scatter_add_);
  lua_setfield(L, methods, "scatter_add_");
}

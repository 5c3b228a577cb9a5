/* Indexing and shape bindings. Dims are 1-based (negative from the end); values inside index
 * tensors are 0-based int64.
 *   t:index_select(d, idx)  t:gather(d, idx)  t:scatter_add(d, idx, src)  t:scatter_add_(d, idx, src)
 *   nc.one_hot(idx, n?)  nc.cat(list, d?)  nc.stack(list, d?)  t:split(size | sizes, d?)  t:chunk(n, d?)
 *   t:sort(d?, {descending=})  t:topk(k, d?, {largest=true})   (sort/topk return values, indices) */
#include <stdlib.h>
#include "l_ops.h"
#include "netcl/index.h"
#include "netcl/join.h"
#include "netcl/sort.h"

static int l_index_select(lua_State *L) {
  const char *fname = "netcl.index_select";
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *r = NULL;
  int dim = nc_lua_checkdim(L, 2, x->ndim ? x->ndim : 1, fname);
  nc_tensor *idx = nc_lua_checktensor_f(L, 3, fname);
  int opts = nc_lua_opts(L, 4);
  nc_tensor *dst = nc_lua_opt_out(L, opts, fname);
  nc_status s = dst ? nc_index_select_into(dst, x, dim, idx) : nc_index_select(x, dim, idx, &r);
  return nc_lua_result(L, s, opts, r, fname);
}

static int l_gather(lua_State *L) {
  const char *fname = "netcl.gather";
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *r = NULL;
  int dim = nc_lua_checkdim(L, 2, x->ndim ? x->ndim : 1, fname);
  nc_tensor *idx = nc_lua_checktensor_f(L, 3, fname);
  int opts = nc_lua_opts(L, 4);
  nc_tensor *dst = nc_lua_opt_out(L, opts, fname);
  nc_status s = dst ? nc_gather_into(dst, x, dim, idx) : nc_gather(x, dim, idx, &r);
  return nc_lua_result(L, s, opts, r, fname);
}

static int scatter_add(lua_State *L, bool in_place) {
  const char *fname = in_place ? "netcl.scatter_add_" : "netcl.scatter_add";
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *r = NULL;
  int dim = nc_lua_checkdim(L, 2, x->ndim ? x->ndim : 1, fname);
  nc_tensor *idx = nc_lua_checktensor_f(L, 3, fname), *src = nc_lua_checktensor_f(L, 4, fname);
  if (in_place) {
    NC_LUA_CHECK(L, fname, nc_scatter_add_into(x, x, dim, idx, src));
    lua_settop(L, 1);
    return 1;
  }
  int opts = nc_lua_opts(L, 5);
  nc_tensor *dst = nc_lua_opt_out(L, opts, fname);
  nc_status s = dst ? nc_scatter_add_into(dst, x, dim, idx, src) : nc_scatter_add(x, dim, idx, src, &r);
  return nc_lua_result(L, s, opts, r, fname);
}
static int l_scatter_add(lua_State *L) { return scatter_add(L, false); }
static int l_scatter_add_(lua_State *L) { return scatter_add(L, true); }

static int l_one_hot(lua_State *L) {
  const char *fname = "netcl.one_hot";
  nc_tensor *idx = nc_lua_checktensor_f(L, 1, fname), *r;
  lua_Integer n = luaL_optinteger(L, 2, -1);
  if (n < -1) return nc_lua_argerror(L, fname, 2, "class count %lld is negative", (long long)n);
  NC_LUA_CHECK(L, fname, nc_one_hot(idx, n, &r));
  nc_lua_pushtensor_new(L, r);
  return 1;
}

/* The tensors of the list at idx, in a userdata-owned array (freed by the collector on error). */
static nc_tensor **check_list(lua_State *L, int idx, int *n, const char *fname) {
  if (!lua_istable(L, idx)) {
    nc_lua_argerror(L, fname, idx, "expected a table of Tensors, got %s", luaL_typename(L, idx));
    return NULL;
  }
  lua_Integer len = luaL_len(L, idx);
  if (len < 1) luaL_error(L, "%s: needs at least one tensor", fname);
  if (len > 1 << 20) luaL_error(L, "%s: too many tensors (%lld)", fname, (long long)len);
  nc_tensor **ts = lua_newuserdatauv(L, sizeof *ts * (size_t)len, 0);
  for (lua_Integer i = 0; i < len; i++) {
    lua_geti(L, idx, i + 1);
    ts[i] = nc_lua_totensor(L, -1);
    if (!ts[i])
      luaL_error(L, "%s: element %lld of the list is a %s, not a live Tensor", fname, (long long)i + 1,
                 luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  *n = (int)len;
  return ts;
}

static int join(lua_State *L, bool stack) {
  const char *fname = stack ? "netcl.stack" : "netcl.cat";
  lua_settop(L, 2); /* scratch userdata goes above the arguments */
  int n;
  nc_tensor **ts = check_list(L, 1, &n, fname), *r;
  int rank = ts[0]->ndim + (stack ? 1 : 0);
  if (!stack)
    for (int i = 0; i < n; i++)
      if (!(ts[i]->ndim == 1 && ts[i]->shape[0] == 0)) {
        rank = ts[i]->ndim;
        break;
      }
  int dim = lua_isnoneornil(L, 2) ? 0 : nc_lua_checkdim(L, 2, rank ? rank : 1, fname);
  NC_LUA_CHECK(L, fname, stack ? nc_stack(n, ts, dim, &r) : nc_cat(n, ts, dim, &r));
  nc_lua_pushtensor_new(L, r);
  return 1;
}
static int l_cat(lua_State *L) { return join(L, false); }
static int l_stack(lua_State *L) { return join(L, true); }

/* Pushes a Lua array of the n views. */
static int push_parts(lua_State *L, nc_tensor *x, int dim, int n, const int64_t *sizes, const char *fname) {
  nc_tensor **parts = lua_newuserdatauv(L, sizeof *parts * (size_t)(n ? n : 1), 0);
  NC_LUA_CHECK(L, fname, nc_split(x, dim, n, sizes, parts));
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    nc_lua_pushtensor_owned(L, parts[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}


/* t:split(size, d) or t:split({s1, s2, ...}, d) */
static int l_split(lua_State *L) {
  const char *fname = "netcl.split";
  lua_settop(L, 3);
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname);
  if (x->ndim == 0) return luaL_error(L, "%s: cannot split a 0-dim tensor", fname);
  int dim = lua_isnoneornil(L, 3) ? 0 : nc_lua_checkdim(L, 3, x->ndim, fname);
  int64_t *sizes;
  int n = nc_lua_split_sizes(L, 2, x->shape[dim], &sizes, fname);
  return push_parts(L, x, dim, n, sizes, fname);
}

/* t:chunk(n, d): pieces of ceil(size / n), as in PyTorch (possibly fewer than n) */
static int l_chunk(lua_State *L) {
  const char *fname = "netcl.chunk";
  lua_settop(L, 3);
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname);
  if (x->ndim == 0) return luaL_error(L, "%s: cannot chunk a 0-dim tensor", fname);
  lua_Integer chunks = luaL_checkinteger(L, 2);
  if (chunks <= 0 || chunks > NC_LUA_MAX_PARTS)
    return nc_lua_argerror(L, fname, 2, "chunk count must be in 1..%d, got %lld", NC_LUA_MAX_PARTS,
                           (long long)chunks);
  int dim = lua_isnoneornil(L, 3) ? 0 : nc_lua_checkdim(L, 3, x->ndim, fname);
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

/* t:sort(d?, {descending=false}) */
static int l_sort(lua_State *L) {
  const char *fname = "netcl.sort";
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *v, *i;
  int dim = sort_dim(L, 2, x, fname);
  int opts = lua_istable(L, 2) ? 2 : nc_lua_opts(L, 3);
  NC_LUA_CHECK(L, fname, nc_sort(x, dim, nc_lua_opt_bool(L, opts, "descending", false), &v, &i));
  return push_pair(L, v, i);
}

/* t:topk(k, d?, {largest=true}) */
static int l_topk(lua_State *L) {
  const char *fname = "netcl.topk";
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *v, *i;
  lua_Integer k = luaL_checkinteger(L, 2);
  int dim = sort_dim(L, 3, x, fname);
  int opts = lua_istable(L, 3) ? 3 : nc_lua_opts(L, 4);
  NC_LUA_CHECK(L, fname, nc_topk(x, k, dim, nc_lua_opt_bool(L, opts, "largest", true), &v, &i));
  return push_pair(L, v, i);
}

void nc_lua_add_index(lua_State *L, int module, int methods) {
  static const luaL_Reg both[] = {{"index_select", l_index_select},
                                  {"gather", l_gather},
                                  {"scatter_add", l_scatter_add},
                                  {"split", l_split},
                                  {"chunk", l_chunk},
                                  {"sort", l_sort},
                                  {"topk", l_topk},
                                  {NULL, NULL}};
  static const luaL_Reg module_only[] = {
      {"one_hot", l_one_hot}, {"cat", l_cat}, {"stack", l_stack}, {NULL, NULL}};
  lua_pushvalue(L, methods);
  luaL_setfuncs(L, both, 0);
  lua_pushcfunction(L, l_scatter_add_);
  lua_setfield(L, -2, "scatter_add_");
  lua_pop(L, 1);
  lua_pushvalue(L, module);
  luaL_setfuncs(L, both, 0);
  luaL_setfuncs(L, module_only, 0);
  lua_pop(L, 1);
}

/* View and copy bindings, one per op for Tensors and Nodes alike (nc.<op>, nc.autograd.<op>,
 * t:<op>(), n:<op>()), and x[i]:
 *   x:view(shape) x:reshape(shape) x:expand(shape)   (shape may hold one -1; view and reshape)
 *   x:transpose(d1, d2) x:t() x:permute(dims) x:narrow(d, start, len) x:select(d, i) x[i]
 *   x:squeeze(d?) x:unsqueeze(d) x:flatten(d1?, d2?) x:contiguous() x:clone()
 * Views share storage with their input; reshape and flatten copy when no view exists. A Node
 * records the differentiable op, whose value shares storage the same way. */
#include "l_autograd.h"
#include "l_ops.h"

/* Argument 1: a Tensor, or a Node (*n) whose value is returned. */
static nc_tensor *self(lua_State *L, nc_node **n, const char *fname) {
  nc_tensor *x = nc_lua_ag_checktensor(L, 1, fname);
  *n = nc_lua_tonode(L, 1);
  return x;
}

/* Pushes the Tensor r an op made from x: a view of x's storage, or a copy whose new bytes are
 * reported to the collector. */
static int push_tensor(lua_State *L, const nc_tensor *x, nc_tensor *r) {
  if (r->storage == x->storage)
    nc_lua_pushtensor_owned(L, r);
  else
    nc_lua_pushtensor_new(L, r);
  return 1;
}

/* A shape that may hold one -1 (view, reshape, expand): a table, or sizes as the arguments
 * from idx on (x:view(3, 2), PyTorch's form). */
static int shape_arg(lua_State *L, int idx, int64_t *shape, const char *fname) {
  int top = lua_gettop(L);
  while (top > idx && lua_isnil(L, top)) top--;
  if (lua_type(L, idx) == LUA_TNUMBER) {
    if (top - idx + 1 > NC_MAX_DIMS)
      return nc_lua_argerror(L, fname, idx, "%d sizes; at most %d dims are supported", top - idx + 1, NC_MAX_DIMS);
    for (int i = idx; i <= top; i++) {
      lua_Integer v = nc_lua_checkinteger(L, i, fname);
      if (v < -1) return nc_lua_argerror(L, fname, i, "size %lld is negative", (long long)v);
      shape[i - idx] = v;
    }
    return top - idx + 1;
  }
  if (!lua_istable(L, idx))
    return nc_lua_argerror(L, fname, idx, "expected a shape table or sizes, got %s", luaL_typename(L, idx));
  if (top > idx)
    return nc_lua_argerror(L, fname, idx + 1, "a shape table takes no further arguments, got %s",
                           luaL_typename(L, idx + 1));
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

/* x:view(shape), x:reshape(shape), x:expand(shape) */
static int l_view(lua_State *L) {
  const char *fname = "netcl.view";
  nc_node *n, *out;
  nc_tensor *x = self(L, &n, fname), *r;
  int64_t shape[NC_MAX_DIMS];
  int nd = shape_arg(L, 2, shape, fname);
  if (n) return nc_lua_ag_result(L, nc_ag_view(nc_lua_active_tape(L), n, nd, shape, &out), &out, fname);
  NC_LUA_CHECK(L, fname, nc_tensor_view(x, nd, shape, &r));
  return push_tensor(L, x, r);
}

static int l_reshape(lua_State *L) {
  const char *fname = "netcl.reshape";
  nc_node *n, *out;
  nc_tensor *x = self(L, &n, fname), *r;
  int64_t shape[NC_MAX_DIMS];
  int nd = shape_arg(L, 2, shape, fname);
  if (n) return nc_lua_ag_result(L, nc_ag_reshape(nc_lua_active_tape(L), n, nd, shape, &out), &out, fname);
  NC_LUA_CHECK(L, fname, nc_reshape(x, nd, shape, &r));
  return push_tensor(L, x, r);
}

static int l_expand(lua_State *L) {
  const char *fname = "netcl.expand";
  nc_node *n, *out;
  nc_tensor *x = self(L, &n, fname), *r;
  int64_t shape[NC_MAX_DIMS];
  int nd = shape_arg(L, 2, shape, fname);
  if (n) return nc_lua_ag_result(L, nc_ag_expand(nc_lua_active_tape(L), n, nd, shape, &out), &out, fname);
  NC_LUA_CHECK(L, fname, nc_tensor_expand(x, nd, shape, &r));
  return push_tensor(L, x, r);
}

static int l_transpose(lua_State *L) {
  const char *fname = "netcl.transpose";
  nc_node *n, *out;
  nc_tensor *x = self(L, &n, fname), *r;
  int d1 = nc_lua_checkdim(L, 2, x->ndim, fname), d2 = nc_lua_checkdim(L, 3, x->ndim, fname);
  if (n) return nc_lua_ag_result(L, nc_ag_transpose(nc_lua_active_tape(L), n, d1, d2, &out), &out, fname);
  NC_LUA_CHECK(L, fname, nc_tensor_transpose(x, d1, d2, &r));
  return push_tensor(L, x, r);
}

/* x:t(): transpose(1, 2) of a 2-D x, x itself for 0 and 1 dims (as torch.Tensor.t). */
static int l_t(lua_State *L) {
  const char *fname = "netcl.t";
  nc_node *n, *out;
  nc_tensor *x = self(L, &n, fname), *r;
  if (x->ndim > 2)
    return nc_lua_errorf(L, "%s: expects a tensor of at most 2 dims, got %d (use transpose(d1, d2))", fname, x->ndim);
  if (x->ndim < 2) {
    lua_settop(L, 1);
    return 1;
  }
  if (n) return nc_lua_ag_result(L, nc_ag_transpose(nc_lua_active_tape(L), n, 0, 1, &out), &out, fname);
  NC_LUA_CHECK(L, fname, nc_tensor_transpose(x, 0, 1, &r));
  return push_tensor(L, x, r);
}

static int l_permute(lua_State *L) {
  const char *fname = "netcl.permute";
  nc_node *n, *out;
  nc_tensor *x = self(L, &n, fname), *r;
  int dims[NC_MAX_DIMS];
  if (!lua_istable(L, 2))
    return nc_lua_argerror(L, fname, 2, "expected a table of dims, got %s", luaL_typename(L, 2));
  if (luaL_len(L, 2) != x->ndim)
    return nc_lua_argerror(L, fname, 2, "needs %d dims, got %lld", x->ndim, (long long)luaL_len(L, 2));
  for (int i = 0; i < x->ndim; i++) {
    lua_geti(L, 2, i + 1);
    dims[i] = nc_lua_checkdim(L, -1, x->ndim, fname);
    lua_pop(L, 1);
  }
  if (n) return nc_lua_ag_result(L, nc_ag_permute(nc_lua_active_tape(L), n, dims, &out), &out, fname);
  NC_LUA_CHECK(L, fname, nc_tensor_permute(x, dims, &r));
  return push_tensor(L, x, r);
}

/* x:narrow(d, start, len): start is a 1-based position (negative from the end) */
static int l_narrow(lua_State *L) {
  const char *fname = "netcl.narrow";
  nc_node *n, *out;
  nc_tensor *x = self(L, &n, fname), *r;
  int d = nc_lua_checkdim(L, 2, x->ndim, fname);
  lua_Integer given = nc_lua_checkinteger(L, 3, fname), len = nc_lua_checkinteger(L, 4, fname);
  lua_Integer start = given < 0 ? given + x->shape[d] + 1 : given;
  if (start < 1) return nc_lua_argerror(L, fname, 3, "start %lld is out of range", (long long)given);
  if (n)
    return nc_lua_ag_result(L, nc_ag_narrow(nc_lua_active_tape(L), n, d, start - 1, len, &out), &out, fname);
  NC_LUA_CHECK(L, fname, nc_tensor_narrow(x, d, start - 1, len, &r));
  return push_tensor(L, x, r);
}

/* The selection at position pos_idx along the dim at dim_idx (0: dim 1, for x[i]). */
static int select_at(lua_State *L, int dim_idx, int pos_idx, const char *fname) {
  nc_node *n, *out;
  nc_tensor *x = self(L, &n, fname), *r;
  if (x->ndim == 0)
    return nc_lua_errorf(L, "%s: cannot %s a 0-dim tensor", fname, dim_idx ? "select from" : "index");
  int d = dim_idx ? nc_lua_checkdim(L, dim_idx, x->ndim, fname) : 0;
  int64_t i = nc_lua_checkpos(L, pos_idx, x->shape[d], fname);
  if (n) return nc_lua_ag_result(L, nc_ag_select(nc_lua_active_tape(L), n, d, i, &out), &out, fname);
  NC_LUA_CHECK(L, fname, nc_tensor_select(x, d, i, &r));
  return push_tensor(L, x, r);
}

static int l_select(lua_State *L) { return select_at(L, 2, 3, "netcl.select"); }

int nc_lua_index_number(lua_State *L) { return select_at(L, 0, 2, "netcl.index"); }

static int l_squeeze(lua_State *L) {
  const char *fname = "netcl.squeeze";
  nc_node *n, *out;
  nc_tensor *x = self(L, &n, fname), *r;
  int d = lua_isnoneornil(L, 2) ? -1 : nc_lua_checkdim(L, 2, x->ndim, fname);
  if (n) return nc_lua_ag_result(L, nc_ag_squeeze(nc_lua_active_tape(L), n, d, &out), &out, fname);
  NC_LUA_CHECK(L, fname, nc_tensor_squeeze(x, d, &r));
  return push_tensor(L, x, r);
}

static int l_unsqueeze(lua_State *L) {
  const char *fname = "netcl.unsqueeze";
  nc_node *n, *out;
  nc_tensor *x = self(L, &n, fname), *r;
  int d = nc_lua_checkdim(L, 2, x->ndim + 1, fname);
  if (n) return nc_lua_ag_result(L, nc_ag_unsqueeze(nc_lua_active_tape(L), n, d, &out), &out, fname);
  NC_LUA_CHECK(L, fname, nc_tensor_unsqueeze(x, d, &r));
  return push_tensor(L, x, r);
}

/* x:flatten(d1?, d2?): dims d1..d2 (default: all) merged into one; a 0-dim x becomes [1] */
static int l_flatten(lua_State *L) {
  const char *fname = "netcl.flatten";
  nc_node *n, *out;
  nc_tensor *x = self(L, &n, fname), *r;
  int nd = x->ndim;
  int d1 = nd == 0 || lua_isnoneornil(L, 2) ? 0 : nc_lua_checkdim(L, 2, nd, fname);
  int d2 = nd == 0 || lua_isnoneornil(L, 3) ? nd - 1 : nc_lua_checkdim(L, 3, nd, fname);
  if (nd && d1 > d2)
    return nc_lua_argerror(L, fname, 3, "end dim %d comes before start dim %d", d2 + 1, d1 + 1);
  if (n) return nc_lua_ag_result(L, nc_ag_flatten(nc_lua_active_tape(L), n, d1, d2, &out), &out, fname);
  int64_t shape[NC_MAX_DIMS], m = 1;
  int k = 0;
  for (int i = 0; i < d1; i++) shape[k++] = x->shape[i];
  for (int i = d1; i <= d2; i++) m *= x->shape[i];
  shape[k++] = m;
  for (int i = d2 + 1; i < nd; i++) shape[k++] = x->shape[i];
  NC_LUA_CHECK(L, fname, nc_reshape(x, k, shape, &r));
  return push_tensor(L, x, r);
}

/* x:contiguous(): a contiguous Tensor is returned itself; a Node always gives a new node */
static int l_contiguous(lua_State *L) {
  const char *fname = "netcl.contiguous";
  nc_node *n, *out;
  nc_tensor *x = self(L, &n, fname), *r;
  if (n) return nc_lua_ag_result(L, nc_ag_contiguous(nc_lua_active_tape(L), n, &out), &out, fname);
  if (nc_tensor_is_contiguous(x)) {
    lua_settop(L, 1);
    return 1;
  }
  NC_LUA_CHECK(L, fname, nc_contiguous(x, &r));
  return push_tensor(L, x, r);
}

static int l_clone(lua_State *L) {
  const char *fname = "netcl.clone";
  nc_node *n, *out;
  nc_tensor *x = self(L, &n, fname), *r;
  if (n) return nc_lua_ag_result(L, nc_ag_clone(nc_lua_active_tape(L), n, &out), &out, fname);
  NC_LUA_CHECK(L, fname, nc_to(x, nc_tensor_device(x), x->dtype, &r));
  return push_tensor(L, x, r);
}

void nc_lua_add_views(lua_State *L, int module) {
  static const luaL_Reg views[] = {{"view", l_view},
                                   {"reshape", l_reshape},
                                   {"expand", l_expand},
                                   {"transpose", l_transpose},
                                   {"permute", l_permute},
                                   {"narrow", l_narrow},
                                   {"select", l_select},
                                   {"squeeze", l_squeeze},
                                   {"unsqueeze", l_unsqueeze},
                                   {"flatten", l_flatten},
                                   {"contiguous", l_contiguous},
                                   {"clone", l_clone},
                                   {NULL, NULL}};
  for (const luaL_Reg *v = views; v->name; v++) {
    const nc_op_info *o = nc_op_find(v->name); /* the op table's view family */
    if (!o) luaL_error(L, "netcl: %s has no row in the op table", v->name);
    nc_lua_bind_op(L, module, v->name, v->func, (int)o->op, NC_LUA_BOTH);
  }
  nc_lua_bind_op(L, module, "t", l_t, (int)nc_op_find("transpose")->op, NC_LUA_BOTH);
  luaL_getmetatable(L, NC_NODE_MT);
  lua_pushcfunction(L, nc_lua_index_number);
  lua_setfield(L, -2, "__index_number");
  lua_pop(L, 1);
}

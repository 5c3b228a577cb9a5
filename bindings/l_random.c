/* Random draws beyond rand/randn, all from the per-state Philox generator:
 *   nc.randint(lo, hi, shape, opts) or nc.randint(hi, shape, opts)   int64 on [lo, hi) by default
 *   nc.randperm(n, opts)                                             int64 permutation of 0..n-1
 *     (opts {dtype=, device=})
 *   nc.bernoulli(p_tensor, {dtype=}) or nc.bernoulli(prob, shape, {dtype=, device=})
 *                                                                    0/1 draws (p's dtype, or float32)
 *   t:bernoulli_(p)                                                  p a number or a Tensor
 *   nc.dropout(x, p=0.5, {training=true}), x:dropout(p, opts)        (Tensors and Nodes) */
#include "l_autograd.h"
#include "l_ops.h"

static nc_tensor *new_tensor(lua_State *L, nc_device *dev, nc_dtype dt, int ndim, const int64_t *shape,
                             const char *fname) {
  nc_tensor *t;
  NC_LUA_CHECK(L, fname, nc_tensor_empty(dev, dt, ndim, shape, 0, &t));
  nc_lua_pushtensor_new(L, t);
  return t;
}

static int64_t check_int(lua_State *L, int idx, const char *fname, const char *what) {
  int isint;
  lua_Integer v = lua_tointegerx(L, idx, &isint);
  if (!isint) nc_lua_argerror(L, fname, idx, "%s must be an integer, got %s", what, luaL_typename(L, idx));
  return v;
}

static int l_randint(lua_State *L) {
  const char *fname = "netcl.randint";
  int64_t lo = 0, hi;
  int at = 2;
  if (lua_istable(L, 2)) { /* randint(hi, shape, opts) */
    hi = check_int(L, 1, fname, "hi");
  } else {
    lo = check_int(L, 1, fname, "lo");
    hi = check_int(L, 2, fname, "hi");
    at = 3;
  }
  int64_t shape[NC_MAX_DIMS];
  int n = nc_lua_checkshape(L, at, shape, fname);
  int opts = nc_lua_checkopts(L, at + 1, fname, "dtype device");
  nc_dtype dt = nc_lua_opt_dtype(L, opts, NC_INT64, fname);
  nc_device *dev = nc_lua_opt_device(L, opts, fname);
  nc_tensor *t = new_tensor(L, dev, dt, n, shape, fname);
  NC_LUA_CHECK(L, fname, nc_randint(t, nc_lua_rng(L), lo, hi));
  return 1;
}

static int l_randperm(lua_State *L) {
  const char *fname = "netcl.randperm";
  int64_t n = check_int(L, 1, fname, "n");
  if (n < 0) return nc_lua_argerror(L, fname, 1, "n = %lld is negative", (long long)n);
  int opts = nc_lua_checkopts(L, 2, fname, "dtype device");
  nc_dtype dt = nc_lua_opt_dtype(L, opts, NC_INT64, fname);
  nc_device *dev = nc_lua_opt_device(L, opts, fname);
  nc_tensor *t = new_tensor(L, dev, dt, 1, &n, fname);
  NC_LUA_CHECK(L, fname, nc_randperm(t, nc_lua_rng(L)));
  return 1;
}

static int l_bernoulli(lua_State *L) {
  const char *fname = "netcl.bernoulli";
  nc_tensor *p = nc_lua_totensor(L, 1), *t;
  if (p) { /* the draws go to p's device */
    nc_dtype dt = nc_lua_opt_dtype(L, nc_lua_checkopts(L, 2, fname, "dtype"), p->dtype, fname);
    t = new_tensor(L, nc_tensor_device(p), dt, p->ndim, p->shape, fname);
    NC_LUA_CHECK(L, fname, nc_bernoulli(t, nc_lua_rng(L), p, 0));
    return 1;
  }
  double prob = nc_lua_checknumber(L, 1, fname);
  int64_t shape[NC_MAX_DIMS];
  int n = nc_lua_checkshape(L, 2, shape, fname);
  int opts = nc_lua_checkopts(L, 3, fname, "dtype device");
  nc_dtype dt = nc_lua_opt_dtype(L, opts, NC_FLOAT32, fname);
  nc_device *dev = nc_lua_opt_device(L, opts, fname);
  t = new_tensor(L, dev, dt, n, shape, fname);
  NC_LUA_CHECK(L, fname, nc_bernoulli(t, nc_lua_rng(L), NULL, prob));
  return 1;
}

static int l_bernoulli_(lua_State *L) {
  const char *fname = "netcl.bernoulli_";
  nc_tensor *t = nc_lua_checktensor_f(L, 1, fname), *p = nc_lua_totensor(L, 2);
  double prob = p ? 0 : lua_isnoneornil(L, 2) ? 0.5 : nc_lua_checknumber(L, 2, fname);
  NC_LUA_CHECK(L, fname, nc_bernoulli(t, nc_lua_rng(L), p, prob));
  lua_settop(L, 1);
  return 1;
}

/* nc.dropout(x, p=0.5, {training=true}) (or training as a boolean argument 3). A Node records
 * the differentiable op; a Tensor gets the same draw and scaling (the op on a constant node,
 * recorded nowhere), so a seed drops the same elements either way. */
static int l_dropout(lua_State *L) {
  const char *fname = "netcl.dropout";
  bool node = nc_lua_isnode(L, 1);
  nc_tensor *x = nc_lua_ag_checktensor(L, 1, fname);
  double p = lua_isnoneornil(L, 2) ? 0.5 : nc_lua_checknumber(L, 2, fname);
  bool training = lua_isboolean(L, 3)
                      ? lua_toboolean(L, 3)
                      : nc_lua_opt_bool(L, nc_lua_checkopts(L, 3, fname, "training"), "training", true);
  nc_node *in = nc_lua_checknodelike(L, 1, fname), *out;
  NC_LUA_CHECK(L, fname,
               nc_ag_dropout(node ? nc_lua_active_tape(L) : NULL, in, p, training, nc_lua_rng(L), &out));
  if (node) {
    nc_lua_ag_push(L, out);
    return 1;
  }
  nc_tensor *y = nc_tensor_retain(nc_node_value(out));
  nc_node_release(out);
  if (y->storage == x->storage)
    nc_lua_pushtensor_owned(L, y); /* not training: the identity, a view of x */
  else
    nc_lua_pushtensor_new(L, y);
  return 1;
}

void nc_lua_add_random(lua_State *L, int module, int methods) {
  nc_lua_bind_op(L, module, "dropout", l_dropout, NC_OP_DROPOUT, NC_LUA_BOTH);
  static const luaL_Reg funcs[] = {
      {"randint", l_randint}, {"randperm", l_randperm}, {"bernoulli", l_bernoulli}, {NULL, NULL}};
  lua_pushvalue(L, module);
  luaL_setfuncs(L, funcs, 0);
  lua_pop(L, 1);
  lua_pushcfunction(L, l_bernoulli_);
  lua_setfield(L, methods, "bernoulli_");
}

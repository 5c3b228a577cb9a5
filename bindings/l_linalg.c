/* Lua glue for matrix products and the layer ops: Tensor methods matmul/mm/bmm, nc.matmul,
 * nc.mm, nc.bmm, nc.linear, nc.set_matmul_precision, and the functional forward/backward
 * entry points that autograd and nn call, under nc.nn_ops. Argument checking only. */
#include <string.h>
#include "l_common.h"

#define CHECK(fname, expr) NC_LUA_CHECK(L, fname, expr)

static void push_new(lua_State *L, nc_tensor *t) {
  nc_lua_pushtensor_owned(L, t);
  nc_lua_account(L, nc_tensor_nbytes(t));
}

static void push_opt(lua_State *L, nc_tensor *t) {
  if (t)
    push_new(L, t);
  else
    lua_pushnil(L);
}

static nc_tensor *opt_tensor(lua_State *L, int idx, const char *fname) {
  return lua_isnoneornil(L, idx) ? NULL : nc_lua_checktensor_f(L, idx, fname);
}

/* ---- options ----------------------------------------------------------------------------------- */
/* Pushes opts[key] (nil when opts is absent) and returns its type. */
/* An integer or a pair {h, w} at stack index idx. */
static void check_pair(lua_State *L, int idx, int64_t out[2], const char *fname, const char *what) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) == LUA_TNUMBER) {
    int isint;
    lua_Integer v = lua_tointegerx(L, idx, &isint);
    if (!isint) luaL_error(L, "%s: %s must be an integer or a pair of integers", fname, what);
    out[0] = out[1] = v;
    return;
  }
  if (!lua_istable(L, idx) || luaL_len(L, idx) != 2)
    luaL_error(L, "%s: %s must be an integer or a pair {h, w}, got %s", fname, what, luaL_typename(L, idx));
  for (int i = 0; i < 2; i++) {
    lua_geti(L, idx, i + 1);
    int isint;
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (!isint) luaL_error(L, "%s: %s must hold integers", fname, what);
    out[i] = v;
    lua_pop(L, 1);
  }
}

static void opt_pair(lua_State *L, int opts, const char *key, int64_t out[2], const char *fname) {
  if (nc_lua_opt_field(L, opts, key) != LUA_TNIL) check_pair(L, -1, out, fname, key);
  lua_pop(L, 1);
}

static bool opt_bool(lua_State *L, int opts, const char *key, bool def) {
  bool v = def;
  if (nc_lua_opt_field(L, opts, key) != LUA_TNIL) v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

/* A 4-D shape table (input_shape, weight_shape). */
static void check_shape4(lua_State *L, int idx, int64_t shape[4], const char *fname) {
  int n = nc_lua_checkshape(L, idx, shape, fname);
  if (n != 4) luaL_error(L, "%s: argument %d: expected a 4-D shape, got %d dims", fname, idx, n);
}

/* ---- products ------------------------------------------------------------------------------------ */
typedef nc_status (*binary_fn)(nc_tensor *, nc_tensor *, nc_tensor **);

static int binary(lua_State *L, binary_fn fn, const char *fname) {
  nc_tensor *a = nc_lua_checktensor_f(L, 1, fname), *b = nc_lua_checktensor_f(L, 2, fname), *r;
  CHECK(fname, fn(a, b, &r));
  push_new(L, r);
  return 1;
}

static int l_matmul(lua_State *L) { return binary(L, nc_matmul, "netcl.matmul"); }
static int l_mm(lua_State *L) { return binary(L, nc_mm, "netcl.mm"); }
static int l_bmm(lua_State *L) { return binary(L, nc_bmm, "netcl.bmm"); }

static int l_linear(lua_State *L) {
  const char *fname = "netcl.linear";
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *w = nc_lua_checktensor_f(L, 2, fname), *r;
  nc_tensor *b = opt_tensor(L, 3, fname);
  CHECK(fname, nc_linear(x, w, b, &r));
  push_new(L, r);
  return 1;
}

static int l_set_matmul_precision(lua_State *L) {
  CHECK("netcl.set_matmul_precision", nc_set_matmul_precision(luaL_checkstring(L, 1)));
  return 0;
}

static int l_get_matmul_precision(lua_State *L) {
  lua_pushstring(L, nc_get_matmul_precision());
  return 1;
}

/* ---- conv2d -------------------------------------------------------------------------------------- */
static nc_conv2d_desc conv_opts(lua_State *L, int opts, const char *fname) {
  nc_conv2d_desc p = {.stride = {1, 1}, .padding = {0, 0}, .dilation = {1, 1}, .groups = 1};
  opt_pair(L, opts, "stride", p.stride, fname);
  opt_pair(L, opts, "padding", p.padding, fname);
  opt_pair(L, opts, "dilation", p.dilation, fname);
  p.groups = nc_lua_opt_integer(L, opts, "groups", 1, fname);
  return p;
}

/* conv2d(x, weight, bias?, {stride=, padding=, dilation=, groups=}) */
static int l_conv2d(lua_State *L) {
  const char *fname = "netcl.nn_ops.conv2d";
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *w = nc_lua_checktensor_f(L, 2, fname),
            *b = opt_tensor(L, 3, fname), *r;
  nc_conv2d_desc p = conv_opts(L, 4, fname);
  CHECK(fname, nc_conv2d(x, w, b, &p, &r));
  push_new(L, r);
  return 1;
}

/* conv2d_backward_input(dy, weight, input_shape, opts) */
static int l_conv2d_backward_input(lua_State *L) {
  const char *fname = "netcl.nn_ops.conv2d_backward_input";
  nc_tensor *dy = nc_lua_checktensor_f(L, 1, fname), *w = nc_lua_checktensor_f(L, 2, fname), *r;
  int64_t shape[4];
  check_shape4(L, 3, shape, fname);
  nc_conv2d_desc p = conv_opts(L, 4, fname);
  CHECK(fname, nc_conv2d_backward_input(dy, w, shape, &p, &r));
  push_new(L, r);
  return 1;
}

/* conv2d_backward_weight(dy, x, weight_shape, opts) */
static int l_conv2d_backward_weight(lua_State *L) {
  const char *fname = "netcl.nn_ops.conv2d_backward_weight";
  nc_tensor *dy = nc_lua_checktensor_f(L, 1, fname), *x = nc_lua_checktensor_f(L, 2, fname), *r;
  int64_t shape[4];
  check_shape4(L, 3, shape, fname);
  nc_conv2d_desc p = conv_opts(L, 4, fname);
  CHECK(fname, nc_conv2d_backward_weight(dy, x, shape, &p, &r));
  push_new(L, r);
  return 1;
}

/* ---- pooling ------------------------------------------------------------------------------------- */
static nc_pool2d_desc pool_opts(lua_State *L, int kind, int kidx, int opts, const char *fname) {
  int64_t k[2];
  check_pair(L, kidx, k, fname, "kernel size");
  nc_pool2d_desc p = nc_pool2d_defaults(kind, k[0], k[1]);
  opt_pair(L, opts, "stride", p.stride, fname);
  opt_pair(L, opts, "padding", p.padding, fname);
  if (kind == NC_POOL_MAX) opt_pair(L, opts, "dilation", p.dilation, fname);
  p.ceil_mode = opt_bool(L, opts, "ceil_mode", false);
  if (kind == NC_POOL_AVG) p.count_include_pad = opt_bool(L, opts, "count_include_pad", true);
  return p;
}

static int input_shape(lua_State *L, int idx, int64_t *shape, const char *fname) {
  return nc_lua_checkshape(L, idx, shape, fname);
}

/* max_pool2d(x, kernel, {stride=, padding=, dilation=, ceil_mode=}) -> y, indices */
static int l_max_pool2d(lua_State *L) {
  const char *fname = "netcl.nn_ops.max_pool2d";
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *y, *idx;
  nc_pool2d_desc p = pool_opts(L, NC_POOL_MAX, 2, 3, fname);
  CHECK(fname, nc_max_pool2d(x, &p, &y, &idx));
  push_new(L, y);
  push_new(L, idx);
  return 2;
}

/* max_pool2d_backward(dy, indices, input_shape, kernel, opts) */
static int l_max_pool2d_backward(lua_State *L) {
  const char *fname = "netcl.nn_ops.max_pool2d_backward";
  nc_tensor *dy = nc_lua_checktensor_f(L, 1, fname), *idx = nc_lua_checktensor_f(L, 2, fname), *r;
  int64_t shape[NC_MAX_DIMS];
  int nd = input_shape(L, 3, shape, fname);
  nc_pool2d_desc p = pool_opts(L, NC_POOL_MAX, 4, 5, fname);
  CHECK(fname, nc_max_pool2d_backward(dy, idx, nd, shape, &p, &r));
  push_new(L, r);
  return 1;
}

/* avg_pool2d(x, kernel, {stride=, padding=, ceil_mode=, count_include_pad=}) */
static int l_avg_pool2d(lua_State *L) {
  const char *fname = "netcl.nn_ops.avg_pool2d";
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *y;
  nc_pool2d_desc p = pool_opts(L, NC_POOL_AVG, 2, 3, fname);
  CHECK(fname, nc_avg_pool2d(x, &p, &y));
  push_new(L, y);
  return 1;
}

/* avg_pool2d_backward(dy, input_shape, kernel, opts) */
static int l_avg_pool2d_backward(lua_State *L) {
  const char *fname = "netcl.nn_ops.avg_pool2d_backward";
  nc_tensor *dy = nc_lua_checktensor_f(L, 1, fname), *r;
  int64_t shape[NC_MAX_DIMS];
  int nd = input_shape(L, 2, shape, fname);
  nc_pool2d_desc p = pool_opts(L, NC_POOL_AVG, 3, 4, fname);
  CHECK(fname, nc_avg_pool2d_backward(dy, nd, shape, &p, &r));
  push_new(L, r);
  return 1;
}

/* adaptive_avg_pool2d(x, size) */
static int l_adaptive_avg_pool2d(lua_State *L) {
  const char *fname = "netcl.nn_ops.adaptive_avg_pool2d";
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *y;
  int64_t o[2];
  check_pair(L, 2, o, fname, "output size");
  CHECK(fname, nc_adaptive_avg_pool2d(x, o[0], o[1], &y));
  push_new(L, y);
  return 1;
}

/* adaptive_avg_pool2d_backward(dy, input_shape) */
static int l_adaptive_avg_pool2d_backward(lua_State *L) {
  const char *fname = "netcl.nn_ops.adaptive_avg_pool2d_backward";
  nc_tensor *dy = nc_lua_checktensor_f(L, 1, fname), *r;
  int64_t shape[NC_MAX_DIMS];
  int nd = input_shape(L, 2, shape, fname);
  CHECK(fname, nc_adaptive_avg_pool2d_backward(dy, nd, shape, &r));
  push_new(L, r);
  return 1;
}

/* ---- normalization ------------------------------------------------------------------------------- */
/* batch_norm(x, weight?, bias?, running_mean?, running_var?, {training=true, momentum=0.1, eps=1e-5})
 * -> y, save_mean, save_invstd */
static int l_batch_norm(lua_State *L) {
  const char *fname = "netcl.nn_ops.batch_norm";
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *w = opt_tensor(L, 2, fname),
            *b = opt_tensor(L, 3, fname);
  nc_tensor *rm = opt_tensor(L, 4, fname), *rv = opt_tensor(L, 5, fname), *y, *m, *is;
  bool training = opt_bool(L, 6, "training", true);
  double momentum = nc_lua_opt_number(L, 6, "momentum", 0.1, fname), eps = nc_lua_opt_number(L, 6, "eps", 1e-5, fname);
  CHECK(fname, nc_batch_norm(x, w, b, rm, rv, training, momentum, eps, &y, &m, &is));
  push_new(L, y);
  push_new(L, m);
  push_new(L, is);
  return 3;
}

/* batch_norm_backward(dy, x, weight?, save_mean, save_invstd, {training=true}) -> dx, dweight, dbias
 * (the affine gradients are nil without a weight) */
static int l_batch_norm_backward(lua_State *L) {
  const char *fname = "netcl.nn_ops.batch_norm_backward";
  nc_tensor *dy = nc_lua_checktensor_f(L, 1, fname), *x = nc_lua_checktensor_f(L, 2, fname),
            *w = opt_tensor(L, 3, fname);
  nc_tensor *m = nc_lua_checktensor_f(L, 4, fname), *is = nc_lua_checktensor_f(L, 5, fname);
  bool training = opt_bool(L, 6, "training", true);
  nc_tensor *dx = NULL, *dw = NULL, *db = NULL;
  CHECK(fname, nc_batch_norm_backward(dy, x, w, m, is, training, &dx, w ? &dw : NULL, w ? &db : NULL));
  push_opt(L, dx);
  push_opt(L, dw);
  push_opt(L, db);
  return 3;
}

/* normalized_shape (an integer or a table) must be x's trailing dims; returns its length. */
static int check_normalized(lua_State *L, int idx, const nc_tensor *x, const char *fname) {
  int64_t shape[NC_MAX_DIMS];
  int nd = nc_lua_checkshape(L, idx, shape, fname);
  bool ok = nd >= 1 && nd <= x->ndim;
  for (int i = 0; ok && i < nd; i++) ok = shape[i] == x->shape[x->ndim - nd + i];
  if (!ok) luaL_error(L, "%s: normalized_shape does not match the input's last dims", fname);
  return nd;
}

/* layer_norm(x, normalized_shape, weight?, bias?, {eps=1e-5}) -> y, mean, rstd */
static int l_layer_norm(lua_State *L) {
  const char *fname = "netcl.nn_ops.layer_norm";
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *y, *m, *rs;
  int nd = check_normalized(L, 2, x, fname);
  nc_tensor *w = opt_tensor(L, 3, fname), *b = opt_tensor(L, 4, fname);
  double eps = nc_lua_opt_number(L, 5, "eps", 1e-5, fname);
  CHECK(fname, nc_layer_norm(x, nd, w, b, eps, &y, &m, &rs));
  push_new(L, y);
  push_new(L, m);
  push_new(L, rs);
  return 3;
}

/* layer_norm_backward(dy, x, normalized_shape, weight?, mean, rstd) -> dx, dweight, dbias */
static int l_layer_norm_backward(lua_State *L) {
  const char *fname = "netcl.nn_ops.layer_norm_backward";
  nc_tensor *dy = nc_lua_checktensor_f(L, 1, fname), *x = nc_lua_checktensor_f(L, 2, fname);
  int nd = check_normalized(L, 3, x, fname);
  nc_tensor *w = opt_tensor(L, 4, fname), *m = nc_lua_checktensor_f(L, 5, fname),
            *rs = nc_lua_checktensor_f(L, 6, fname);
  nc_tensor *dx = NULL, *dw = NULL, *db = NULL;
  CHECK(fname, nc_layer_norm_backward(dy, x, nd, w, m, rs, &dx, w ? &dw : NULL, w ? &db : NULL));
  push_opt(L, dx);
  push_opt(L, dw);
  push_opt(L, db);
  return 3;
}

/* rms_norm(x, normalized_shape, weight?, {eps=1e-6}) -> y, rstd */
static int l_rms_norm(lua_State *L) {
  const char *fname = "netcl.nn_ops.rms_norm";
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *y, *rs;
  int nd = check_normalized(L, 2, x, fname);
  nc_tensor *w = opt_tensor(L, 3, fname);
  double eps = nc_lua_opt_number(L, 4, "eps", 1e-6, fname);
  CHECK(fname, nc_rms_norm(x, nd, w, eps, &y, &rs));
  push_new(L, y);
  push_new(L, rs);
  return 2;
}

/* rms_norm_backward(dy, x, normalized_shape, weight?, rstd) -> dx, dweight */
static int l_rms_norm_backward(lua_State *L) {
  const char *fname = "netcl.nn_ops.rms_norm_backward";
  nc_tensor *dy = nc_lua_checktensor_f(L, 1, fname), *x = nc_lua_checktensor_f(L, 2, fname);
  int nd = check_normalized(L, 3, x, fname);
  nc_tensor *w = opt_tensor(L, 4, fname), *rs = nc_lua_checktensor_f(L, 5, fname), *dx = NULL, *dw = NULL;
  CHECK(fname, nc_rms_norm_backward(dy, x, nd, w, rs, &dx, w ? &dw : NULL));
  push_opt(L, dx);
  push_opt(L, dw);
  return 2;
}

/* ---- embedding and loss -------------------------------------------------------------------------- */
static int l_embedding(lua_State *L) {
  const char *fname = "netcl.nn_ops.embedding";
  nc_tensor *w = nc_lua_checktensor_f(L, 1, fname), *idx = nc_lua_checktensor_f(L, 2, fname), *r;
  CHECK(fname, nc_embedding(w, idx, &r));
  push_new(L, r);
  return 1;
}

/* embedding_backward(dout, idx, num_embeddings, {padding_idx=}) (padding_idx is 0-based, like
 * the indices) */
static int l_embedding_backward(lua_State *L) {
  const char *fname = "netcl.nn_ops.embedding_backward";
  nc_tensor *g = nc_lua_checktensor_f(L, 1, fname), *idx = nc_lua_checktensor_f(L, 2, fname), *r;
  lua_Integer v = luaL_checkinteger(L, 3);
  int64_t pad = nc_lua_opt_integer(L, 4, "padding_idx", -1, fname);
  CHECK(fname, nc_embedding_backward(g, idx, v, pad, &r));
  push_new(L, r);
  return 1;
}

static nc_cross_entropy_opts ce_opts(lua_State *L, int opts, const char *fname) {
  nc_cross_entropy_opts o = nc_cross_entropy_defaults();
  o.ignore_index = nc_lua_opt_integer(L, opts, "ignore_index", o.ignore_index, fname);
  o.label_smoothing = nc_lua_opt_number(L, opts, "label_smoothing", 0.0, fname);
  if (nc_lua_opt_field(L, opts, "reduction") != LUA_TNIL) {
    const char *r = lua_tostring(L, -1);
    if (r && !strcmp(r, "mean"))
      o.reduction = NC_REDUCTION_MEAN;
    else if (r && !strcmp(r, "sum"))
      o.reduction = NC_REDUCTION_SUM;
    else if (r && !strcmp(r, "none"))
      o.reduction = NC_REDUCTION_NONE;
    else
      luaL_error(L, "%s: reduction must be \"mean\", \"sum\" or \"none\", got %s", fname,
                 r ? r : luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  return o;
}

/* cross_entropy(logits, targets, {label_smoothing=0, ignore_index=-100, reduction="mean"}) -> loss, lse */
static int l_cross_entropy(lua_State *L) {
  const char *fname = "netcl.nn_ops.cross_entropy";
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *t = nc_lua_checktensor_f(L, 2, fname), *l, *s;
  nc_cross_entropy_opts o = ce_opts(L, 3, fname);
  CHECK(fname, nc_cross_entropy(x, t, &o, &l, &s));
  push_new(L, l);
  push_new(L, s);
  return 2;
}

/* cross_entropy_backward(dloss, logits, targets, lse, opts) -> dlogits */
static int l_cross_entropy_backward(lua_State *L) {
  const char *fname = "netcl.nn_ops.cross_entropy_backward";
  nc_tensor *g = nc_lua_checktensor_f(L, 1, fname), *x = nc_lua_checktensor_f(L, 2, fname);
  nc_tensor *t = nc_lua_checktensor_f(L, 3, fname), *s = nc_lua_checktensor_f(L, 4, fname), *r;
  nc_cross_entropy_opts o = ce_opts(L, 5, fname);
  CHECK(fname, nc_cross_entropy_backward(g, x, t, s, &o, &r));
  push_new(L, r);
  return 1;
}

void nc_lua_add_linalg(lua_State *L) {
  static const luaL_Reg methods[] = {{"matmul", l_matmul}, {"mm", l_mm}, {"bmm", l_bmm}, {NULL, NULL}};
  static const luaL_Reg module[] = {{"matmul", l_matmul},
                                    {"mm", l_mm},
                                    {"bmm", l_bmm},
                                    {"linear", l_linear},
                                    {"set_matmul_precision", l_set_matmul_precision},
                                    {"get_matmul_precision", l_get_matmul_precision},
                                    {NULL, NULL}};
  static const luaL_Reg nn_ops[] = {{"linear", l_linear},
                                    {"conv2d", l_conv2d},
                                    {"conv2d_backward_input", l_conv2d_backward_input},
                                    {"conv2d_backward_weight", l_conv2d_backward_weight},
                                    {"max_pool2d", l_max_pool2d},
                                    {"max_pool2d_backward", l_max_pool2d_backward},
                                    {"avg_pool2d", l_avg_pool2d},
                                    {"avg_pool2d_backward", l_avg_pool2d_backward},
                                    {"adaptive_avg_pool2d", l_adaptive_avg_pool2d},
                                    {"adaptive_avg_pool2d_backward", l_adaptive_avg_pool2d_backward},
                                    {"batch_norm", l_batch_norm},
                                    {"batch_norm_backward", l_batch_norm_backward},
                                    {"layer_norm", l_layer_norm},
                                    {"layer_norm_backward", l_layer_norm_backward},
                                    {"rms_norm", l_rms_norm},
                                    {"rms_norm_backward", l_rms_norm_backward},
                                    {"embedding", l_embedding},
                                    {"embedding_backward", l_embedding_backward},
                                    {"cross_entropy", l_cross_entropy},
                                    {"cross_entropy_backward", l_cross_entropy_backward},
                                    {NULL, NULL}};
  luaL_setfuncs(L, module, 0);
  luaL_getsubtable(L, -1, "nn_ops");
  luaL_setfuncs(L, nn_ops, 0);
  lua_pop(L, 1);
  luaL_getmetatable(L, NC_TENSOR_MT);
  lua_getfield(L, -1, "methods");
  luaL_setfuncs(L, methods, 0);
  lua_pop(L, 2);
}

/* Functional layer and loss ops on Nodes (ag.linear, ag.conv2d, ..., ag.cross_entropy):
 * argument checking around nc_ag_*. Arguments follow torch.nn.functional, with dims 1-based and
 * options in a trailing table:
 *   ag.linear(x, w, b?)                 ag.conv2d(x, w, b?, {stride=, padding=, dilation=, groups=})
 *   ag.max_pool2d(x, k, {stride=, padding=, dilation=, ceil_mode=})
 *   ag.avg_pool2d(x, k, {stride=, padding=, ceil_mode=, count_include_pad=})
 *   ag.adaptive_avg_pool2d(x, size)
 *   ag.batch_norm(x, running_mean?, running_var?, w?, b?, {training=false, momentum=0.1, eps=1e-5})
 *   ag.layer_norm(x, normalized_shape, w?, b?, {eps=1e-5})   ag.rms_norm(x, normalized_shape, w?, {eps=1e-6})
 *   ag.embedding(idx, weight, {padding_idx=})   (or (weight, idx): the int tensor is the index)
 *   ag.cross_entropy(logits, targets, {label_smoothing=0, ignore_index=-100, reduction="mean"})
 *   ag.nll_loss(logp, targets, {ignore_index=-100, reduction=})   ag.mse_loss(a, b, {reduction=})
 *   ag.l1_loss(a, b, {reduction=})     ag.bce_with_logits(x, y, {reduction=})
 *   ag.cosine_similarity(a, b, {dim=2, eps=1e-8})   (or dim as argument 3)
 *   x:matmul(y) x:mm(y) x:bmm(y)  (also ag.matmul(x, y), ...) */
#include <string.h>
#include "l_autograd.h"
#include "l_ops.h"
#include "netcl/autograd_ops.h"

/* ---- options --------------------------------------------------------------------------------- */
/* Pushes opts[key] (nil without options) and returns its type. */
/* An integer or a pair {h, w} at idx. */
static void check_pair(lua_State *L, int idx, int64_t out[2], const char *fname, const char *what) {
  idx = lua_absindex(L, idx);
  int isint;
  if (lua_type(L, idx) == LUA_TNUMBER) {
    out[0] = out[1] = lua_tointegerx(L, idx, &isint);
    if (!isint) luaL_error(L, "%s: %s must be an integer or a pair of integers", fname, what);
    return;
  }
  if (!lua_istable(L, idx) || luaL_len(L, idx) != 2)
    luaL_error(L, "%s: %s must be an integer or a pair {h, w}, got %s", fname, what, luaL_typename(L, idx));
  for (int i = 0; i < 2; i++) {
    lua_geti(L, idx, i + 1);
    out[i] = lua_tointegerx(L, -1, &isint);
    if (!isint) luaL_error(L, "%s: %s must hold integers", fname, what);
    lua_pop(L, 1);
  }
}

static void opt_pair(lua_State *L, int opts, const char *key, int64_t out[2], const char *fname) {
  if (nc_lua_opt_field(L, opts, key) != LUA_TNIL) check_pair(L, -1, out, fname, key);
  lua_pop(L, 1);
}

static int opt_reduction(lua_State *L, int opts, const char *fname) {
  int r = NC_REDUCTION_MEAN;
  if (nc_lua_opt_field(L, opts, "reduction") != LUA_TNIL) {
    const char *s = lua_tostring(L, -1);
    if (s && !strcmp(s, "mean"))
      r = NC_REDUCTION_MEAN;
    else if (s && !strcmp(s, "sum"))
      r = NC_REDUCTION_SUM;
    else if (s && !strcmp(s, "none"))
      r = NC_REDUCTION_NONE;
    else
      luaL_error(L, "%s: reduction must be \"mean\", \"sum\" or \"none\", got %s", fname,
                 s ? s : luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  return r;
}

/* ---- products ------------------------------------------------------------------------------------ */
typedef nc_status (*product_fn)(nc_tape *, nc_node *, nc_node *, nc_node **);

static int product(lua_State *L, product_fn fn, const char *fname) {
  nc_node *a = nc_lua_checknodelike(L, 1, fname), *b = nc_lua_checknodelike(L, 2, fname), *out;
  return nc_lua_ag_result(L, fn(nc_lua_active_tape(L), a, b, &out), &out, fname);
}
static int l_matmul(lua_State *L) { return product(L, nc_ag_matmul, "netcl.autograd.matmul"); }
static int l_mm(lua_State *L) { return product(L, nc_ag_mm, "netcl.autograd.mm"); }
static int l_bmm(lua_State *L) { return product(L, nc_ag_bmm, "netcl.autograd.bmm"); }

static int l_linear(lua_State *L) {
  const char *fname = "netcl.autograd.linear";
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *w = nc_lua_checknodelike(L, 2, fname),
          *b = nc_lua_ag_optnode(L, 3, fname), *out;
  return nc_lua_ag_result(L, nc_ag_linear(nc_lua_active_tape(L), x, w, b, &out), &out, fname);
}

/* ---- convolution and pooling ------------------------------------------------------------------------ */
static int l_conv2d(lua_State *L) {
  const char *fname = "netcl.autograd.conv2d";
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *w = nc_lua_checknodelike(L, 2, fname),
          *b = nc_lua_ag_optnode(L, 3, fname), *out;
  int opts = nc_lua_opts(L, 4);
  nc_conv2d_desc p = {.stride = {1, 1}, .padding = {0, 0}, .dilation = {1, 1}, .groups = 1};
  opt_pair(L, opts, "stride", p.stride, fname);
  opt_pair(L, opts, "padding", p.padding, fname);
  opt_pair(L, opts, "dilation", p.dilation, fname);
  p.groups = nc_lua_opt_integer(L, opts, "groups", 1, fname);
  return nc_lua_ag_result(L, nc_ag_conv2d(nc_lua_active_tape(L), x, w, b, &p, &out), &out, fname);
}

static int pool(lua_State *L, int kind, const char *fname) {
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  int opts = nc_lua_opts(L, 3);
  int64_t k[2];
  check_pair(L, 2, k, fname, "kernel size");
  nc_pool2d_desc p = nc_pool2d_defaults(kind, k[0], k[1]);
  opt_pair(L, opts, "stride", p.stride, fname);
  opt_pair(L, opts, "padding", p.padding, fname);
  if (kind == NC_POOL_MAX) opt_pair(L, opts, "dilation", p.dilation, fname);
  p.ceil_mode = nc_lua_opt_bool(L, opts, "ceil_mode", false);
  if (kind == NC_POOL_AVG) p.count_include_pad = nc_lua_opt_bool(L, opts, "count_include_pad", true);
  return nc_lua_ag_result(L, nc_ag_pool2d(nc_lua_active_tape(L), x, &p, &out), &out, fname);
}
static int l_max_pool2d(lua_State *L) { return pool(L, NC_POOL_MAX, "netcl.autograd.max_pool2d"); }
static int l_avg_pool2d(lua_State *L) { return pool(L, NC_POOL_AVG, "netcl.autograd.avg_pool2d"); }

static int l_adaptive_avg_pool2d(lua_State *L) {
  const char *fname = "netcl.autograd.adaptive_avg_pool2d";
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  nc_pool2d_desc p = nc_pool2d_defaults(NC_POOL_ADAPTIVE_AVG, 1, 1);
  check_pair(L, 2, p.out_size, fname, "output size");
  return nc_lua_ag_result(L, nc_ag_pool2d(nc_lua_active_tape(L), x, &p, &out), &out, fname);
}

/* ---- normalization ------------------------------------------------------------------------------------ */
static int l_batch_norm(lua_State *L) {
  const char *fname = "netcl.autograd.batch_norm";
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  nc_tensor *rm = nc_lua_ag_opttensor(L, 2, fname), *rv = nc_lua_ag_opttensor(L, 3, fname);
  nc_node *w = nc_lua_ag_optnode(L, 4, fname), *b = nc_lua_ag_optnode(L, 5, fname);
  int opts = nc_lua_opts(L, 6);
  bool training = nc_lua_opt_bool(L, opts, "training", false);
  double momentum = nc_lua_opt_number(L, opts, "momentum", 0.1, fname),
         eps = nc_lua_opt_number(L, opts, "eps", 1e-5, fname);
  return nc_lua_ag_result(
      L, nc_ag_batch_norm(nc_lua_active_tape(L), x, w, b, rm, rv, training, momentum, eps, &out), &out,
      fname);
}

/* normalized_shape (an integer or a table) must be x's trailing dims; returns its length. */
static int normalized(lua_State *L, int idx, const nc_tensor *x, const char *fname) {
  int64_t shape[NC_MAX_DIMS];
  int nd = nc_lua_checkshape(L, idx, shape, fname);
  bool ok = nd >= 1 && nd <= x->ndim;
  for (int i = 0; ok && i < nd; i++) ok = shape[i] == x->shape[x->ndim - nd + i];
  if (!ok) luaL_error(L, "%s: normalized_shape does not match the input's last dims", fname);
  return nd;
}

static int l_layer_norm(lua_State *L) {
  const char *fname = "netcl.autograd.layer_norm";
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  int nd = normalized(L, 2, nc_node_value(x), fname);
  nc_node *w = nc_lua_ag_optnode(L, 3, fname), *b = nc_lua_ag_optnode(L, 4, fname);
  double eps = nc_lua_opt_number(L, nc_lua_opts(L, 5), "eps", 1e-5, fname);
  return nc_lua_ag_result(L, nc_ag_layer_norm(nc_lua_active_tape(L), x, nd, w, b, eps, &out), &out, fname);
}

static int l_rms_norm(lua_State *L) {
  const char *fname = "netcl.autograd.rms_norm";
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  int nd = normalized(L, 2, nc_node_value(x), fname);
  nc_node *w = nc_lua_ag_optnode(L, 3, fname);
  double eps = nc_lua_opt_number(L, nc_lua_opts(L, 4), "eps", 1e-6, fname);
  return nc_lua_ag_result(L, nc_ag_rms_norm(nc_lua_active_tape(L), x, nd, w, eps, &out), &out, fname);
}

/* ---- embedding ---------------------------------------------------------------------------------------- */
static int l_embedding(lua_State *L) {
  const char *fname = "netcl.autograd.embedding";
  nc_tensor *first = nc_lua_ag_checktensor(L, 1, fname);
  int wi = nc_dtype_is_float(first->dtype) ? 1 : 2, ii = 3 - wi; /* the integer tensor is the index */
  nc_node *w = nc_lua_checknodelike(L, wi, fname), *out;
  nc_tensor *idx = nc_lua_ag_checktensor(L, ii, fname);
  int64_t pad = nc_lua_opt_integer(L, nc_lua_opts(L, 3), "padding_idx", -1, fname);
  return nc_lua_ag_result(L, nc_ag_embedding(nc_lua_active_tape(L), w, idx, pad, &out), &out, fname);
}

/* ---- losses -----------------------------------------------------------------------------------------------
 */
static int l_cross_entropy(lua_State *L) {
  const char *fname = "netcl.autograd.cross_entropy";
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  nc_tensor *targets = nc_lua_ag_checktensor(L, 2, fname);
  int opts = nc_lua_opts(L, 3);
  nc_cross_entropy_opts o = nc_cross_entropy_defaults();
  o.ignore_index = nc_lua_opt_integer(L, opts, "ignore_index", o.ignore_index, fname);
  o.label_smoothing = nc_lua_opt_number(L, opts, "label_smoothing", 0.0, fname);
  o.reduction = (nc_reduction)opt_reduction(L, opts, fname);
  return nc_lua_ag_result(L, nc_ag_cross_entropy(nc_lua_active_tape(L), x, targets, &o, &out), &out, fname);
}

static int l_nll_loss(lua_State *L) {
  const char *fname = "netcl.autograd.nll_loss";
  nc_node *x = nc_lua_checknodelike(L, 1, fname), *out;
  nc_tensor *targets = nc_lua_ag_checktensor(L, 2, fname);
  int opts = nc_lua_opts(L, 3);
  int64_t ii = nc_lua_opt_integer(L, opts, "ignore_index", -100, fname);
  return nc_lua_ag_result(
      L, nc_ag_nll_loss(nc_lua_active_tape(L), x, targets, ii, opt_reduction(L, opts, fname), &out), &out,
      fname);
}

typedef nc_status (*pair_loss_fn)(nc_tape *, nc_node *, nc_node *, int, nc_node **);

static int pair_loss(lua_State *L, pair_loss_fn fn, const char *fname) {
  nc_node *a = nc_lua_checknodelike(L, 1, fname), *b = nc_lua_checknodelike(L, 2, fname), *out;
  int reduction = opt_reduction(L, nc_lua_opts(L, 3), fname);
  return nc_lua_ag_result(L, fn(nc_lua_active_tape(L), a, b, reduction, &out), &out, fname);
}
static int l_mse_loss(lua_State *L) { return pair_loss(L, nc_ag_mse_loss, "netcl.autograd.mse_loss"); }
static int l_l1_loss(lua_State *L) { return pair_loss(L, nc_ag_l1_loss, "netcl.autograd.l1_loss"); }
static int l_bce_with_logits(lua_State *L) {
  return pair_loss(L, nc_ag_bce_with_logits, "netcl.autograd.bce_with_logits");
}

static int l_cosine_similarity(lua_State *L) {
  const char *fname = "netcl.autograd.cosine_similarity";
  nc_node *a = nc_lua_checknodelike(L, 1, fname), *b = nc_lua_checknodelike(L, 2, fname), *out;
  int nd = nc_node_value(a)->ndim > nc_node_value(b)->ndim ? nc_node_value(a)->ndim : nc_node_value(b)->ndim;
  int opts = nc_lua_opts(L, 3) ? 3 : nc_lua_opts(L, 4), dim;
  if (lua_type(L, 3) == LUA_TNUMBER) {
    dim = nc_lua_checkdim(L, 3, nd, fname);
  } else if (nc_lua_opt_field(L, opts, "dim") != LUA_TNIL) {
    dim = nc_lua_checkdim(L, -1, nd, fname);
    lua_pop(L, 1);
  } else {
    lua_pop(L, 1);
    dim = nd >= 2 ? 1 : 0;
  }
  double eps = nc_lua_opt_number(L, opts, "eps", 1e-8, fname);
  return nc_lua_ag_result(L, nc_ag_cosine_similarity(nc_lua_active_tape(L), a, b, dim, eps, &out), &out,
                          fname);
}

const nc_lua_ag_binding nc_lua_ag_nn_bindings[] = {
    {"matmul", l_matmul, NC_LUA_AG_BOTH},
    {"mm", l_mm, NC_LUA_AG_BOTH},
    {"bmm", l_bmm, NC_LUA_AG_BOTH},
    {"linear", l_linear, NC_LUA_AG_MODULE},
    {"conv2d", l_conv2d, NC_LUA_AG_MODULE},
    {"max_pool2d", l_max_pool2d, NC_LUA_AG_MODULE},
    {"avg_pool2d", l_avg_pool2d, NC_LUA_AG_MODULE},
    {"adaptive_avg_pool2d", l_adaptive_avg_pool2d, NC_LUA_AG_MODULE},
    {"batch_norm", l_batch_norm, NC_LUA_AG_MODULE},
    {"layer_norm", l_layer_norm, NC_LUA_AG_MODULE},
    {"rms_norm", l_rms_norm, NC_LUA_AG_MODULE},
    {"embedding", l_embedding, NC_LUA_AG_MODULE},
    {"cross_entropy", l_cross_entropy, NC_LUA_AG_MODULE},
    {"nll_loss", l_nll_loss, NC_LUA_AG_MODULE},
    {"mse_loss", l_mse_loss, NC_LUA_AG_MODULE},
    {"l1_loss", l_l1_loss, NC_LUA_AG_MODULE},
    {"bce_with_logits", l_bce_with_logits, NC_LUA_AG_MODULE},
    {"cosine_similarity", l_cosine_similarity, NC_LUA_AG_MODULE},
    {NULL, NULL, 0},
};

/* Lua glue for matrix products, layers and losses.
 *
 * One binding per op for Tensors and Nodes: nc.<op> and nc.autograd.<op> (and the Tensor and
 * Node methods matmul, mm, bmm) are the same function. When an operand is a Node it is the
 * differentiable op (nc_ag_*, recorded on the active tape); with Tensors only it is the pure op
 * and returns its one result. Arguments follow torch.nn.functional, dims 1-based, options in a
 * trailing table (unknown keys are errors):
 *   matmul(a, b)  mm(a, b)  bmm(a, b)  linear(x, w, b?)
 *   conv2d(x, w, b?, {stride=1, padding=0, dilation=1, groups=1})       (pairs may be one integer)
 *   max_pool2d(x, k, {stride=k, padding=0, dilation=1, ceil_mode=false})
 *   avg_pool2d(x, k, {stride=k, padding=0, ceil_mode=false, count_include_pad=true})
 *   adaptive_avg_pool2d(x, size)
 *   batch_norm(x, running_mean?, running_var?, w?, b?, {training=false, momentum=0.1, eps=1e-5})
 *   layer_norm(x, normalized_shape, w?, b?, {eps=1e-5})   rms_norm(x, normalized_shape, w?, {eps=1e-6})
 *   embedding(idx, weight, {padding_idx=})   (or (weight, idx): the integer tensor is the index)
 *   cross_entropy(logits, targets, {label_smoothing=0, ignore_index=-100, reduction="mean"})
 *   nll_loss(logp, targets, {ignore_index=-100, reduction="mean"})
 *   mse_loss(a, b, {reduction=})  l1_loss(a, b, {reduction=})  bce_with_logits(x, y, {reduction=})
 *   cosine_similarity(a, b, {dim=2, eps=1e-8})   (or dim as argument 3, then {eps=})
 * Targets, indices and running statistics are constants (a Node gives its value). Ops with no
 * pure op (nll_loss, the pair losses, cosine_similarity, cross_entropy with probability targets)
 * are compositions in runtime/autograd: on Tensors they run on constant nodes with no tape.
 *
 * nc.nn_ops holds the lower-level entry points that return the ops' full outputs (saved
 * statistics, indices) and the backward ops, for Tensors, with the argument orders of
 * docs/linalg.md. Each op's options are parsed by the same function on both surfaces. */
#include <string.h>
#include "l_autograd.h"
#include "l_ops.h"

#define CHECK(fname, expr) NC_LUA_CHECK(L, fname, expr)

/* Pushes an op's n results, nil for NULL ones (affine gradients without a weight); returns n. */
static int push_results(lua_State *L, int n, nc_tensor *const *t) {
  for (int i = 0; i < n; i++)
    if (t[i])
      nc_lua_pushtensor_new(L, t[i]);
    else
      lua_pushnil(L);
  return n;
}

/* Pushes the tensor an op made (*r, read only once s is known: argument evaluation order is
 * unspecified) when s is NC_OK, else raises fname's error; returns 1. */
static int tensor_result(lua_State *L, nc_status s, nc_tensor **r, const char *fname) {
  if (s != NC_OK) nc_lua_raise(L, fname);
  nc_lua_pushtensor_new(L, *r);
  return 1;
}

static nc_tensor *opt_tensor(lua_State *L, int idx, const char *fname) {
  return lua_isnoneornil(L, idx) ? NULL : nc_lua_checktensor_f(L, idx, fname);
}

/* ---- operands -------------------------------------------------------------------------------------- */
/* The operands of an op at stack positions 1..strlen(spec), one character each: 'x' a Node or a
 * Tensor, 'o' the same or nil, 'c' a constant Tensor (a Node gives its value), 'k' the same or
 * nil, '.' not an operand. ag is whether any of them is a Node: then (or when nodes is asked
 * for) 'x' and 'o' operands are nodes in n[], Tensors becoming constant nodes. t[] holds every
 * operand's tensor (a node's value); absent ones are NULL. */
enum { MAX_OPERANDS = 5 };
typedef struct {
  bool ag;
  nc_node *n[MAX_OPERANDS];
  nc_tensor *t[MAX_OPERANDS];
} operands;

static operands take(lua_State *L, const char *spec, bool nodes, const char *fname) {
  operands a = {0};
  for (int i = 0; spec[i]; i++) a.ag = a.ag || (spec[i] != '.' && nc_lua_isnode(L, i + 1));
  for (int i = 0; spec[i]; i++) {
    int idx = i + 1;
    bool operand = spec[i] == 'x' || spec[i] == 'o', optional = spec[i] == 'o' || spec[i] == 'k';
    if (spec[i] == '.' || (optional && lua_isnoneornil(L, idx))) continue;
    if (!nc_lua_isnode(L, idx) && !luaL_testudata(L, idx, NC_TENSOR_MT))
      nc_lua_argerror(L, fname, idx, "expected Node or Tensor, got %s", luaL_typename(L, idx));
    if (operand && (a.ag || nodes)) {
      a.n[i] = nc_lua_checknodelike(L, idx, fname);
      a.t[i] = nc_node_value(a.n[i]);
    } else {
      a.t[i] = nc_lua_ag_checktensor(L, idx, fname);
    }
  }
  return a;
}

/* The tape a differentiable op records on: the active one for calls with a Node operand; none
 * for Tensor-only calls of composed ops. */
static nc_tape *tape_of(lua_State *L, const operands *a) { return a->ag ? nc_lua_active_tape(L) : NULL; }

/* Pushes what a differentiable op made: the node for calls with a Node operand, else its value
 * as a Tensor. */
static int node_or_value(lua_State *L, const operands *a, nc_status s, nc_node **out, const char *fname) {
  if (a->ag) return nc_lua_ag_result(L, s, out, fname);
  if (s != NC_OK) nc_lua_raise(L, fname);
  nc_tensor *v = nc_tensor_retain(nc_node_value(*out));
  nc_node_release(*out);
  nc_lua_pushtensor_new(L, v);
  return 1;
}

/* ---- option parsers (shared by nc.<op> and nc.nn_ops.<op>) ---------------------------------------- */
/* An integer or a pair {h, w} at idx. */
static void check_pair(lua_State *L, int idx, int64_t out[2], const char *fname, const char *what) {
  idx = lua_absindex(L, idx);
  int isint;
  if (lua_type(L, idx) == LUA_TNUMBER) {
    out[0] = out[1] = lua_tointegerx(L, idx, &isint);
    if (!isint) nc_lua_errorf(L, "%s: %s must be an integer or a pair of integers", fname, what);
    return;
  }
  if (!lua_istable(L, idx) || luaL_len(L, idx) != 2)
    nc_lua_errorf(L, "%s: %s must be an integer or a pair {h, w}, got %s", fname, what,
                  luaL_typename(L, idx));
  for (int i = 0; i < 2; i++) {
    lua_geti(L, idx, i + 1);
    out[i] = lua_tointegerx(L, -1, &isint);
    if (!isint) nc_lua_errorf(L, "%s: %s must hold integers", fname, what);
    lua_pop(L, 1);
  }
}

static void opt_pair(lua_State *L, int opts, const char *key, int64_t out[2], const char *fname) {
  if (nc_lua_opt_field(L, opts, key) != LUA_TNIL) check_pair(L, -1, out, fname, key);
  lua_pop(L, 1);
}

/* opts.reduction: "mean" (the default), "sum" or "none". */
static nc_reduction opt_reduction(lua_State *L, int opts, const char *fname) {
  static const char *const names[] = {"none", "mean", "sum"};
  static const nc_reduction codes[] = {NC_REDUCTION_NONE, NC_REDUCTION_MEAN, NC_REDUCTION_SUM};
  nc_reduction r = NC_REDUCTION_MEAN;
  if (nc_lua_opt_field(L, opts, "reduction") != LUA_TNIL) {
    const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    size_t i = 0;
    while (i < 3 && !(s && !strcmp(s, names[i]))) i++;
    if (i == 3)
      nc_lua_errorf(L, "%s: reduction must be \"mean\", \"sum\" or \"none\", got %s", fname,
                    s ? s : luaL_typename(L, -1));
    r = codes[i];
  }
  lua_pop(L, 1);
  return r;
}

/* Convolution geometry: the options table at idx. */
static nc_conv2d_desc conv_desc(lua_State *L, int idx, const char *fname) {
  int opts = nc_lua_checkopts(L, idx, fname, "stride padding dilation groups");
  nc_conv2d_desc p = {.stride = {1, 1}, .padding = {0, 0}, .dilation = {1, 1}, .groups = 1};
  opt_pair(L, opts, "stride", p.stride, fname);
  opt_pair(L, opts, "padding", p.padding, fname);
  opt_pair(L, opts, "dilation", p.dilation, fname);
  p.groups = nc_lua_opt_integer(L, opts, "groups", 1, fname);
  return p;
}

/* Pooling geometry of kind: the kernel size at idx and the options table after it (max, avg), or
 * the output size at idx (adaptive). */
static nc_pool2d_desc pool_desc(lua_State *L, int kind, int idx, const char *fname) {
  int64_t k[2];
  if (kind == NC_POOL_ADAPTIVE_AVG) {
    nc_pool2d_desc p = nc_pool2d_defaults(kind, 1, 1);
    check_pair(L, idx, p.out_size, fname, "output size");
    return p;
  }
  bool max = kind == NC_POOL_MAX;
  int opts = nc_lua_checkopts(
      L, idx + 1, fname,
      max ? "stride padding dilation ceil_mode" : "stride padding ceil_mode count_include_pad");
  check_pair(L, idx, k, fname, "kernel size");
  nc_pool2d_desc p = nc_pool2d_defaults(kind, k[0], k[1]);
  opt_pair(L, opts, "stride", p.stride, fname);
  opt_pair(L, opts, "padding", p.padding, fname);
  if (max) opt_pair(L, opts, "dilation", p.dilation, fname);
  p.ceil_mode = nc_lua_opt_bool(L, opts, "ceil_mode", false);
  if (!max) p.count_include_pad = nc_lua_opt_bool(L, opts, "count_include_pad", true);
  return p;
}

/* batch_norm's options; training's default differs between the surfaces (docs/linalg.md). */
typedef struct {
  bool training;
  double momentum, eps;
} bn_opts;

static bn_opts bn_options(lua_State *L, int idx, bool training, const char *fname) {
  int opts = nc_lua_checkopts(L, idx, fname, "training momentum eps");
  return (bn_opts){nc_lua_opt_bool(L, opts, "training", training),
                   nc_lua_opt_number(L, opts, "momentum", 0.1, fname),
                   nc_lua_opt_number(L, opts, "eps", 1e-5, fname)};
}

/* layer_norm's and rms_norm's {eps=}. */
static double eps_option(lua_State *L, int idx, double def, const char *fname) {
  return nc_lua_opt_number(L, nc_lua_checkopts(L, idx, fname, "eps"), "eps", def, fname);
}

/* normalized_shape at idx (an integer or a table) must be x's trailing dims; returns its length. */
static int normalized_ndim(lua_State *L, int idx, const nc_tensor *x, const char *fname) {
  int64_t shape[NC_MAX_DIMS];
  int nd = nc_lua_checkshape(L, idx, shape, fname);
  bool ok = nd >= 1 && nd <= x->ndim;
  for (int i = 0; ok && i < nd; i++) ok = shape[i] == x->shape[x->ndim - nd + i];
  if (!ok) nc_lua_errorf(L, "%s: normalized_shape does not match the input's last dims", fname);
  return nd;
}

/* {padding_idx=} (0-based, like the indices; -1: none). */
static int64_t padding_idx_option(lua_State *L, int idx, const char *fname) {
  return nc_lua_opt_integer(L, nc_lua_checkopts(L, idx, fname, "padding_idx"), "padding_idx", -1, fname);
}

static nc_cross_entropy_opts ce_options(lua_State *L, int idx, const char *fname) {
  int opts = nc_lua_checkopts(L, idx, fname, "label_smoothing ignore_index reduction");
  nc_cross_entropy_opts o = nc_cross_entropy_defaults();
  o.ignore_index = nc_lua_opt_integer(L, opts, "ignore_index", o.ignore_index, fname);
  o.label_smoothing = nc_lua_opt_number(L, opts, "label_smoothing", o.label_smoothing, fname);
  o.reduction = opt_reduction(L, opts, fname);
  return o;
}

/* A 4-D shape table (input_shape, weight_shape). */
static void check_shape4(lua_State *L, int idx, int64_t shape[4], const char *fname) {
  int n = nc_lua_checkshape(L, idx, shape, fname);
  if (n != 4) nc_lua_argerror(L, fname, idx, "expected a 4-D shape, got %d dims", n);
}

/* ---- products -------------------------------------------------------------------------------------- */
static const struct {
  nc_op op;
  nc_status (*pure)(nc_tensor *, nc_tensor *, nc_tensor **);
  nc_status (*diff)(nc_tape *, nc_node *, nc_node *, nc_node **);
} products[] = {
    {NC_OP_MATMUL, nc_matmul, nc_ag_matmul}, {NC_OP_MM, nc_mm, nc_ag_mm}, {NC_OP_BMM, nc_bmm, nc_ag_bmm}};

/* a:matmul(b), a:mm(b), a:bmm(b), nc.matmul(a, b), ... (op as upvalue) */
static int l_product(lua_State *L) {
  const char *fname;
  nc_op op = nc_lua_opname(L, &fname);
  size_t i = 0;
  while (products[i].op != op) i++;
  operands a = take(L, "xx", false, fname);
  if (a.ag) {
    nc_node *out;
    return nc_lua_ag_result(L, products[i].diff(nc_lua_active_tape(L), a.n[0], a.n[1], &out), &out, fname);
  }
  nc_tensor *r;
  return tensor_result(L, products[i].pure(a.t[0], a.t[1], &r), &r, fname);
}

/* linear(x, w, b?) */
static int l_linear(lua_State *L) {
  const char *fname = "netcl.linear";
  operands a = take(L, "xxo", false, fname);
  if (a.ag) {
    nc_node *out;
    return nc_lua_ag_result(L, nc_ag_linear(nc_lua_active_tape(L), a.n[0], a.n[1], a.n[2], &out), &out,
                            fname);
  }
  nc_tensor *r;
  return tensor_result(L, nc_linear(a.t[0], a.t[1], a.t[2], &r), &r, fname);
}

static int l_set_matmul_precision(lua_State *L) {
  CHECK("netcl.set_matmul_precision", nc_set_matmul_precision(luaL_checkstring(L, 1)));
  return 0;
}

/* get_matmul_precision() -> the mode set; get_matmul_precision(dev) -> what dev's products run at */
static int l_get_matmul_precision(lua_State *L) {
  if (lua_isnoneornil(L, 1)) lua_pushstring(L, nc_get_matmul_precision());
  else lua_pushstring(L, nc_matmul_precision_on(nc_lua_checkdevice(L, 1, "netcl.get_matmul_precision")));
  return 1;
}

/* ---- convolution ------------------------------------------------------------------------------------ */
/* conv2d(x, w, b?, opts) */
static int l_conv2d(lua_State *L) {
  const char *fname = "netcl.conv2d";
  nc_conv2d_desc p = conv_desc(L, 4, fname);
  operands a = take(L, "xxo", false, fname);
  if (a.ag) {
    nc_node *out;
    return nc_lua_ag_result(L, nc_ag_conv2d(nc_lua_active_tape(L), a.n[0], a.n[1], a.n[2], &p, &out), &out,
                            fname);
  }
  nc_tensor *r;
  return tensor_result(L, nc_conv2d(a.t[0], a.t[1], a.t[2], &p, &r), &r, fname);
}

/* nn_ops.conv2d(x, w, b?, opts) */
static int l_ops_conv2d(lua_State *L) {
  const char *fname = "netcl.nn_ops.conv2d";
  nc_conv2d_desc p = conv_desc(L, 4, fname);
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *w = nc_lua_checktensor_f(L, 2, fname),
            *b = opt_tensor(L, 3, fname), *r;
  return tensor_result(L, nc_conv2d(x, w, b, &p, &r), &r, fname);
}

/* nn_ops.conv2d_backward_input(dy, w, input_shape, opts) */
static int l_ops_conv2d_backward_input(lua_State *L) {
  const char *fname = "netcl.nn_ops.conv2d_backward_input";
  nc_conv2d_desc p = conv_desc(L, 4, fname);
  nc_tensor *dy = nc_lua_checktensor_f(L, 1, fname), *w = nc_lua_checktensor_f(L, 2, fname), *r;
  int64_t shape[4];
  check_shape4(L, 3, shape, fname);
  return tensor_result(L, nc_conv2d_backward_input(dy, w, shape, &p, &r), &r, fname);
}

/* nn_ops.conv2d_backward_weight(dy, x, weight_shape, opts) */
static int l_ops_conv2d_backward_weight(lua_State *L) {
  const char *fname = "netcl.nn_ops.conv2d_backward_weight";
  nc_conv2d_desc p = conv_desc(L, 4, fname);
  nc_tensor *dy = nc_lua_checktensor_f(L, 1, fname), *x = nc_lua_checktensor_f(L, 2, fname), *r;
  int64_t shape[4];
  check_shape4(L, 3, shape, fname);
  return tensor_result(L, nc_conv2d_backward_weight(dy, x, shape, &p, &r), &r, fname);
}

/* ---- pooling ---------------------------------------------------------------------------------------- */
/* The op code given as upvalue 1; "netcl.nn_ops.<name><suffix>" goes to fname. */
static nc_op ops_name(lua_State *L, const char *suffix, char *fname, size_t n) {
  nc_op op = (nc_op)lua_tointeger(L, lua_upvalueindex(1));
  snprintf(fname, n, "netcl.nn_ops.%s%s", nc_op_get(op)->name, suffix);
  return op;
}

static int pool_kind(nc_op op) {
  return op == NC_OP_MAX_POOL2D ? NC_POOL_MAX : op == NC_OP_AVG_POOL2D ? NC_POOL_AVG : NC_POOL_ADAPTIVE_AVG;
}

/* max_pool2d(x, k, opts), avg_pool2d(x, k, opts), adaptive_avg_pool2d(x, size) (op as upvalue) */
static int l_pool(lua_State *L) {
  const char *fname;
  nc_op op = nc_lua_opname(L, &fname);
  nc_pool2d_desc p = pool_desc(L, pool_kind(op), 2, fname);
  operands a = take(L, "x", false, fname);
  if (a.ag) {
    nc_node *out;
    return nc_lua_ag_result(L, nc_ag_pool2d(nc_lua_active_tape(L), a.n[0], &p, &out), &out, fname);
  }
  nc_tensor *r;
  return tensor_result(L, nc_pool2d(a.t[0], &p, &r, NULL), &r, fname);
}

/* nn_ops.max_pool2d(x, k, opts) -> y, indices; nn_ops.avg_pool2d(x, k, opts) and
 * nn_ops.adaptive_avg_pool2d(x, size) -> y (op as upvalue) */
static int l_ops_pool(lua_State *L) {
  char fname[80];
  nc_op op = ops_name(L, "", fname, sizeof fname);
  nc_pool2d_desc p = pool_desc(L, pool_kind(op), 2, fname);
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *y, *idx = NULL;
  CHECK(fname, nc_pool2d(x, &p, &y, p.kind == NC_POOL_MAX ? &idx : NULL));
  return push_results(L, idx ? 2 : 1, (nc_tensor *[]){y, idx});
}

/* nn_ops.max_pool2d_backward(dy, indices, input_shape, k, opts),
 * nn_ops.avg_pool2d_backward(dy, input_shape, k, opts),
 * nn_ops.adaptive_avg_pool2d_backward(dy, input_shape) (op as upvalue: the forward's) */
static int l_ops_pool_backward(lua_State *L) {
  char fname[80];
  nc_op op = ops_name(L, "_backward", fname, sizeof fname);
  int kind = pool_kind(op), at = kind == NC_POOL_MAX ? 3 : 2;
  nc_tensor *dy = nc_lua_checktensor_f(L, 1, fname), *r;
  nc_tensor *idx = kind == NC_POOL_MAX ? nc_lua_checktensor_f(L, 2, fname) : NULL;
  int64_t shape[NC_MAX_DIMS];
  int nd = nc_lua_checkshape(L, at, shape, fname);
  if (kind == NC_POOL_ADAPTIVE_AVG)
    return tensor_result(L, nc_adaptive_avg_pool2d_backward(dy, nd, shape, &r), &r, fname);
  nc_pool2d_desc p = pool_desc(L, kind, at + 1, fname);
  return tensor_result(L, nc_pool2d_backward(dy, idx, nd, shape, &p, &r), &r, fname);
}

/* ---- normalization ------------------------------------------------------------------------------------ */
/* batch_norm(x, running_mean?, running_var?, w?, b?, {training=false, momentum=0.1, eps=1e-5}) */
static int l_batch_norm(lua_State *L) {
  const char *fname = "netcl.batch_norm";
  bn_opts o = bn_options(L, 6, false, fname);
  operands a = take(L, "xkkoo", false, fname);
  if (a.ag) {
    nc_node *out;
    return nc_lua_ag_result(L,
                            nc_ag_batch_norm(nc_lua_active_tape(L), a.n[0], a.n[3], a.n[4], a.t[1], a.t[2],
                                             o.training, o.momentum, o.eps, &out),
                            &out, fname);
  }
  nc_tensor *y;
  return tensor_result(
      L, nc_batch_norm(a.t[0], a.t[3], a.t[4], a.t[1], a.t[2], o.training, o.momentum, o.eps, &y, NULL, NULL),
      &y, fname);
}

/* nn_ops.batch_norm(x, w?, b?, running_mean?, running_var?, {training=true, momentum=0.1, eps=1e-5})
 * -> y, save_mean, save_invstd */
static int l_ops_batch_norm(lua_State *L) {
  const char *fname = "netcl.nn_ops.batch_norm";
  bn_opts o = bn_options(L, 6, true, fname);
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *w = opt_tensor(L, 2, fname),
            *b = opt_tensor(L, 3, fname);
  nc_tensor *rm = opt_tensor(L, 4, fname), *rv = opt_tensor(L, 5, fname), *y, *m, *is;
  CHECK(fname, nc_batch_norm(x, w, b, rm, rv, o.training, o.momentum, o.eps, &y, &m, &is));
  return push_results(L, 3, (nc_tensor *[]){y, m, is});
}

/* nn_ops.batch_norm_backward(dy, x, w?, save_mean, save_invstd, opts) -> dx, dweight, dbias (the
 * affine gradients are nil without a weight). opts are the forward's: only training is read. */
static int l_ops_batch_norm_backward(lua_State *L) {
  const char *fname = "netcl.nn_ops.batch_norm_backward";
  bn_opts o = bn_options(L, 6, true, fname);
  nc_tensor *dy = nc_lua_checktensor_f(L, 1, fname), *x = nc_lua_checktensor_f(L, 2, fname),
            *w = opt_tensor(L, 3, fname);
  nc_tensor *m = nc_lua_checktensor_f(L, 4, fname), *is = nc_lua_checktensor_f(L, 5, fname);
  nc_tensor *dx = NULL, *dw = NULL, *db = NULL;
  CHECK(fname, nc_batch_norm_backward(dy, x, w, m, is, o.training, &dx, w ? &dw : NULL, w ? &db : NULL));
  return push_results(L, 3, (nc_tensor *[]){dx, dw, db});
}

/* layer_norm(x, normalized_shape, w?, b?, {eps=1e-5}) */
static int l_layer_norm(lua_State *L) {
  const char *fname = "netcl.layer_norm";
  double eps = eps_option(L, 5, 1e-5, fname);
  operands a = take(L, "x.oo", false, fname);
  int nd = normalized_ndim(L, 2, a.t[0], fname);
  if (a.ag) {
    nc_node *out;
    return nc_lua_ag_result(L, nc_ag_layer_norm(nc_lua_active_tape(L), a.n[0], nd, a.n[2], a.n[3], eps, &out),
                            &out, fname);
  }
  nc_tensor *y;
  return tensor_result(L, nc_layer_norm(a.t[0], nd, a.t[2], a.t[3], eps, &y, NULL, NULL), &y, fname);
}

/* nn_ops.layer_norm(x, normalized_shape, w?, b?, {eps=1e-5}) -> y, mean, rstd */
static int l_ops_layer_norm(lua_State *L) {
  const char *fname = "netcl.nn_ops.layer_norm";
  double eps = eps_option(L, 5, 1e-5, fname);
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *y, *m, *rs;
  int nd = normalized_ndim(L, 2, x, fname);
  nc_tensor *w = opt_tensor(L, 3, fname), *b = opt_tensor(L, 4, fname);
  CHECK(fname, nc_layer_norm(x, nd, w, b, eps, &y, &m, &rs));
  return push_results(L, 3, (nc_tensor *[]){y, m, rs});
}

/* nn_ops.layer_norm_backward(dy, x, normalized_shape, w?, mean, rstd) -> dx, dweight, dbias */
static int l_ops_layer_norm_backward(lua_State *L) {
  const char *fname = "netcl.nn_ops.layer_norm_backward";
  nc_tensor *dy = nc_lua_checktensor_f(L, 1, fname), *x = nc_lua_checktensor_f(L, 2, fname);
  int nd = normalized_ndim(L, 3, x, fname);
  nc_tensor *w = opt_tensor(L, 4, fname), *m = nc_lua_checktensor_f(L, 5, fname),
            *rs = nc_lua_checktensor_f(L, 6, fname);
  nc_tensor *dx = NULL, *dw = NULL, *db = NULL;
  CHECK(fname, nc_layer_norm_backward(dy, x, nd, w, m, rs, &dx, w ? &dw : NULL, w ? &db : NULL));
  return push_results(L, 3, (nc_tensor *[]){dx, dw, db});
}

/* rms_norm(x, normalized_shape, w?, {eps=1e-6}) */
static int l_rms_norm(lua_State *L) {
  const char *fname = "netcl.rms_norm";
  double eps = eps_option(L, 4, 1e-6, fname);
  operands a = take(L, "x.o", false, fname);
  int nd = normalized_ndim(L, 2, a.t[0], fname);
  if (a.ag) {
    nc_node *out;
    return nc_lua_ag_result(L, nc_ag_rms_norm(nc_lua_active_tape(L), a.n[0], nd, a.n[2], eps, &out), &out,
                            fname);
  }
  nc_tensor *y;
  return tensor_result(L, nc_rms_norm(a.t[0], nd, a.t[2], eps, &y, NULL), &y, fname);
}

/* nn_ops.rms_norm(x, normalized_shape, w?, {eps=1e-6}) -> y, rstd */
static int l_ops_rms_norm(lua_State *L) {
  const char *fname = "netcl.nn_ops.rms_norm";
  double eps = eps_option(L, 4, 1e-6, fname);
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *y, *rs;
  int nd = normalized_ndim(L, 2, x, fname);
  nc_tensor *w = opt_tensor(L, 3, fname);
  CHECK(fname, nc_rms_norm(x, nd, w, eps, &y, &rs));
  return push_results(L, 2, (nc_tensor *[]){y, rs});
}

/* nn_ops.rms_norm_backward(dy, x, normalized_shape, w?, rstd) -> dx, dweight */
static int l_ops_rms_norm_backward(lua_State *L) {
  const char *fname = "netcl.nn_ops.rms_norm_backward";
  nc_tensor *dy = nc_lua_checktensor_f(L, 1, fname), *x = nc_lua_checktensor_f(L, 2, fname);
  int nd = normalized_ndim(L, 3, x, fname);
  nc_tensor *w = opt_tensor(L, 4, fname), *rs = nc_lua_checktensor_f(L, 5, fname), *dx = NULL, *dw = NULL;
  CHECK(fname, nc_rms_norm_backward(dy, x, nd, w, rs, &dx, w ? &dw : NULL));
  return push_results(L, 2, (nc_tensor *[]){dx, dw});
}

/* ---- embedding ------------------------------------------------------------------------------------------
 */
/* embedding(idx, weight, {padding_idx=}) or embedding(weight, idx, ...): the integer tensor is the
 * index. padding_idx (0-based) only withholds that row's gradient. */
static int l_embedding(lua_State *L) {
  const char *fname = "netcl.embedding";
  int64_t pad = padding_idx_option(L, 3, fname);
  bool weight_first = nc_dtype_is_float(nc_lua_ag_checktensor(L, 1, fname)->dtype);
  int wi = weight_first ? 0 : 1;
  operands a = take(L, weight_first ? "xc" : "cx", false, fname);
  if (a.ag) {
    nc_node *out;
    return nc_lua_ag_result(L, nc_ag_embedding(nc_lua_active_tape(L), a.n[wi], a.t[1 - wi], pad, &out), &out,
                            fname);
  }
  nc_tensor *r;
  return tensor_result(L, nc_embedding(a.t[wi], a.t[1 - wi], &r), &r, fname);
}

/* nn_ops.embedding(weight, idx) */
static int l_ops_embedding(lua_State *L) {
  const char *fname = "netcl.nn_ops.embedding";
  nc_tensor *w = nc_lua_checktensor_f(L, 1, fname), *idx = nc_lua_checktensor_f(L, 2, fname), *r;
  return tensor_result(L, nc_embedding(w, idx, &r), &r, fname);
}

/* nn_ops.embedding_backward(dout, idx, num_embeddings, {padding_idx=}) */
static int l_ops_embedding_backward(lua_State *L) {
  const char *fname = "netcl.nn_ops.embedding_backward";
  int64_t pad = padding_idx_option(L, 4, fname);
  nc_tensor *g = nc_lua_checktensor_f(L, 1, fname), *idx = nc_lua_checktensor_f(L, 2, fname), *r;
  lua_Integer v = luaL_checkinteger(L, 3);
  return tensor_result(L, nc_embedding_backward(g, idx, v, pad, &r), &r, fname);
}

/* ---- losses and similarities ------------------------------------------------------------------------------
 */
/* cross_entropy(logits, targets, opts): int64 class indices, or probabilities shaped like the
 * logits (the composed op). */
static int l_cross_entropy(lua_State *L) {
  const char *fname = "netcl.cross_entropy";
  nc_cross_entropy_opts o = ce_options(L, 3, fname);
  operands a = take(L, "xc", false, fname);
  if (a.ag || nc_dtype_is_float(a.t[1]->dtype)) {
    nc_node *x = a.ag ? a.n[0] : nc_lua_checknodelike(L, 1, fname), *out;
    return node_or_value(L, &a, nc_ag_cross_entropy(tape_of(L, &a), x, a.t[1], &o, &out), &out, fname);
  }
  nc_tensor *loss;
  return tensor_result(L, nc_cross_entropy(a.t[0], a.t[1], &o, &loss, NULL), &loss, fname);
}

/* nn_ops.cross_entropy(logits, targets, opts) -> loss, lse */
static int l_ops_cross_entropy(lua_State *L) {
  const char *fname = "netcl.nn_ops.cross_entropy";
  nc_cross_entropy_opts o = ce_options(L, 3, fname);
  nc_tensor *x = nc_lua_checktensor_f(L, 1, fname), *t = nc_lua_checktensor_f(L, 2, fname), *loss, *lse;
  CHECK(fname, nc_cross_entropy(x, t, &o, &loss, &lse));
  return push_results(L, 2, (nc_tensor *[]){loss, lse});
}

/* nn_ops.cross_entropy_backward(dloss, logits, targets, lse, opts) -> dlogits */
static int l_ops_cross_entropy_backward(lua_State *L) {
  const char *fname = "netcl.nn_ops.cross_entropy_backward";
  nc_cross_entropy_opts o = ce_options(L, 5, fname);
  nc_tensor *g = nc_lua_checktensor_f(L, 1, fname), *x = nc_lua_checktensor_f(L, 2, fname);
  nc_tensor *t = nc_lua_checktensor_f(L, 3, fname), *s = nc_lua_checktensor_f(L, 4, fname), *r;
  return tensor_result(L, nc_cross_entropy_backward(g, x, t, s, &o, &r), &r, fname);
}

/* nll_loss(logp, targets, {ignore_index=-100, reduction="mean"}) */
static int l_nll_loss(lua_State *L) {
  const char *fname = "netcl.nll_loss";
  int opts = nc_lua_checkopts(L, 3, fname, "ignore_index reduction");
  int64_t ignore = nc_lua_opt_integer(L, opts, "ignore_index", -100, fname);
  nc_reduction r = opt_reduction(L, opts, fname);
  operands a = take(L, "xc", true, fname);
  nc_node *out;
  return node_or_value(L, &a, nc_ag_nll_loss(tape_of(L, &a), a.n[0], a.t[1], ignore, r, &out), &out, fname);
}

/* mse_loss(a, b, {reduction=}), l1_loss, bce_with_logits */
typedef nc_status (*pair_loss_fn)(nc_tape *, nc_node *, nc_node *, int, nc_node **);

static int pair_loss(lua_State *L, pair_loss_fn fn, const char *fname) {
  nc_reduction r = opt_reduction(L, nc_lua_checkopts(L, 3, fname, "reduction"), fname);
  operands a = take(L, "xx", true, fname);
  nc_node *out;
  return node_or_value(L, &a, fn(tape_of(L, &a), a.n[0], a.n[1], r, &out), &out, fname);
}
static int l_mse_loss(lua_State *L) { return pair_loss(L, nc_ag_mse_loss, "netcl.mse_loss"); }
static int l_l1_loss(lua_State *L) { return pair_loss(L, nc_ag_l1_loss, "netcl.l1_loss"); }
static int l_bce_with_logits(lua_State *L) {
  return pair_loss(L, nc_ag_bce_with_logits, "netcl.bce_with_logits");
}

/* cosine_similarity(a, b, {dim=2, eps=1e-8}) or (a, b, dim, {eps=}) */
static int l_cosine_similarity(lua_State *L) {
  const char *fname = "netcl.cosine_similarity";
  operands a = take(L, "xx", true, fname);
  int nd = a.t[0]->ndim > a.t[1]->ndim ? a.t[0]->ndim : a.t[1]->ndim, dim = nd >= 2 ? 1 : 0, opts;
  if (lua_type(L, 3) == LUA_TNUMBER) {
    dim = nc_lua_checkdim(L, 3, nd, fname);
    opts = nc_lua_checkopts(L, 4, fname, "eps");
  } else {
    opts = nc_lua_checkopts(L, lua_isnoneornil(L, 3) ? 4 : 3, fname, "dim eps");
    if (nc_lua_opt_field(L, opts, "dim") != LUA_TNIL) dim = nc_lua_checkdim(L, -1, nd, fname);
    lua_pop(L, 1);
  }
  double eps = nc_lua_opt_number(L, opts, "eps", 1e-8, fname);
  nc_node *out;
  return node_or_value(L, &a, nc_ag_cosine_similarity(tape_of(L, &a), a.n[0], a.n[1], dim, eps, &out), &out,
                       fname);
}

/* ---- registration ----------------------------------------------------------------------------------------
 */
void nc_lua_add_linalg(lua_State *L) {
  int module = lua_gettop(L);
  /* One binding per differentiable op (NC_AG_OPS rows): nc.<name> and nc.autograd.<name>, plus the
   * Tensor and Node methods of the products. Each has its op code as upvalue (-1 for the
   * compositions, which the op table does not list); only l_product and l_pool read it. */
  static const struct {
    const char *name;
    lua_CFunction fn;
    int where;
  } ops[] = {{"matmul", l_product, NC_LUA_BOTH},
             {"mm", l_product, NC_LUA_BOTH},
             {"bmm", l_product, NC_LUA_BOTH},
             {"linear", l_linear, NC_LUA_FUNCTION},
             {"conv2d", l_conv2d, NC_LUA_FUNCTION},
             {"max_pool2d", l_pool, NC_LUA_FUNCTION},
             {"avg_pool2d", l_pool, NC_LUA_FUNCTION},
             {"adaptive_avg_pool2d", l_pool, NC_LUA_FUNCTION},
             {"batch_norm", l_batch_norm, NC_LUA_FUNCTION},
             {"layer_norm", l_layer_norm, NC_LUA_FUNCTION},
             {"rms_norm", l_rms_norm, NC_LUA_FUNCTION},
             {"embedding", l_embedding, NC_LUA_FUNCTION},
             {"cross_entropy", l_cross_entropy, NC_LUA_FUNCTION},
             {"nll_loss", l_nll_loss, NC_LUA_FUNCTION},
             {"mse_loss", l_mse_loss, NC_LUA_FUNCTION},
             {"l1_loss", l_l1_loss, NC_LUA_FUNCTION},
             {"bce_with_logits", l_bce_with_logits, NC_LUA_FUNCTION},
             {"cosine_similarity", l_cosine_similarity, NC_LUA_FUNCTION}};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    const nc_op_info *o = nc_op_find(ops[i].name);
    nc_lua_bind_op(L, module, ops[i].name, ops[i].fn, o ? (int)o->op : -1, ops[i].where);
  }
  lua_pushcfunction(L, l_set_matmul_precision);
  lua_setfield(L, module, "set_matmul_precision");
  lua_pushcfunction(L, l_get_matmul_precision);
  lua_setfield(L, module, "get_matmul_precision");

  /* nc.nn_ops: full outputs and backward ops (Tensors); linear is nc.linear. */
  static const luaL_Reg nn_ops[] = {{"conv2d", l_ops_conv2d},
                                    {"conv2d_backward_input", l_ops_conv2d_backward_input},
                                    {"conv2d_backward_weight", l_ops_conv2d_backward_weight},
                                    {"batch_norm", l_ops_batch_norm},
                                    {"batch_norm_backward", l_ops_batch_norm_backward},
                                    {"layer_norm", l_ops_layer_norm},
                                    {"layer_norm_backward", l_ops_layer_norm_backward},
                                    {"rms_norm", l_ops_rms_norm},
                                    {"rms_norm_backward", l_ops_rms_norm_backward},
                                    {"embedding", l_ops_embedding},
                                    {"embedding_backward", l_ops_embedding_backward},
                                    {"cross_entropy", l_ops_cross_entropy},
                                    {"cross_entropy_backward", l_ops_cross_entropy_backward},
                                    {NULL, NULL}};
  luaL_getsubtable(L, module, "nn_ops");
  int ops_table = lua_gettop(L);
  luaL_setfuncs(L, nn_ops, 0);
  lua_getfield(L, module, "linear");
  lua_setfield(L, ops_table, "linear");
  static const nc_op pools[] = {NC_OP_MAX_POOL2D, NC_OP_AVG_POOL2D, NC_OP_ADAPTIVE_AVG_POOL2D};
  char name[64];
  for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++) {
    const char *pname = nc_op_get(pools[i])->name;
    nc_lua_register_op(L, ops_table, 0, pname, l_ops_pool, pools[i]);
    snprintf(name, sizeof name, "%s_backward", pname);
    nc_lua_register_op(L, ops_table, 0, name, l_ops_pool_backward, pools[i]);
  }
  lua_settop(L, module);
}

/* Normalization layers (batch, layer, RMS): gradients by the norm ops' fused backward kernels,
 * from the statistics the forward returned. Running statistics are buffers, not inputs. */
#include "core/check.h"
#include "netcl/autograd_ops.h"
#include "netcl/norm.h"
#include "record.h"
#include "scope.h"

/* The node inputs x, weight?, bias? and where each sits (-1: absent). */
typedef struct {
  nc_node *in[3];
  int n, w, b;
} affine_inputs;

static affine_inputs affine(nc_node *x, nc_node *w, nc_node *b) {
  affine_inputs a = {{x, NULL, NULL}, 1, -1, -1};
  if (w) {
    a.w = a.n;
    a.in[a.n++] = w;
  }
  if (b) {
    a.b = a.n;
    a.in[a.n++] = b;
  }
  return a;
}

/* The bias gradient when there is no weight (the fused kernels give it only with one): g
 * summed to the bias's shape over the dims it broadcast along. */
static nc_tensor *bias_grad(ag_scope *S, nc_tensor *g, const nc_tensor *bias, int channel_dim) {
  if (channel_dim < 0) return ag_reduce_to(S, g, bias);
  int dims[NC_MAX_DIMS], n = 0;
  for (int i = 0; i < g->ndim; i++)
    if (i != channel_dim) dims[n++] = i;
  return ag_reduce(S, NC_OP_SUM, g, n, dims, false, NULL);
}

/* Sets gi[] from the kernel's dx, dw, db (borrowed from the scope) for the inputs present. */
static void hand_out(ag_scope *S, nc_ag_ctx *c, const int64_t *ip, nc_tensor *dx, nc_tensor *dw,
                     nc_tensor *db, nc_tensor **gi) {
  if (nc_ag_needs_grad(c, 0)) gi[0] = ag_keep(S, dx);
  if (ip[1] >= 0 && nc_ag_needs_grad(c, (int)ip[1])) gi[ip[1]] = ag_keep(S, dw);
  if (ip[2] >= 0 && nc_ag_needs_grad(c, (int)ip[2])) gi[ip[2]] = ag_keep(S, db);
}

static void record_positions(nc_ag_ctx *c, const affine_inputs *a) {
  nc_ag_iparams(c)[1] = a->w;
  nc_ag_iparams(c)[2] = a->b;
}

/* ---- batch norm ------------------------------------------------------------------------------- */
/* iparams: [0] training, [1] weight position, [2] bias position; saved: x, mean, invstd, weight?
 * (the statistics are float32 for a storage-dtype x; the weight and g are widened, and x is read
 * as it is beside the float32 g, which makes dx float32: every gradient is the float32 op's,
 * float32). */
static nc_status batch_norm_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  const int64_t *ip = nc_ag_iparams(c);
  nc_tensor *x = ag_saved(&S, c, 0), *mean = ag_saved(&S, c, 1), *invstd = ag_saved(&S, c, 2);
  nc_tensor *w = ip[1] >= 0 ? ag_widen(&S, ag_saved(&S, c, 3)) : NULL, *dx = NULL, *dw = NULL, *db = NULL;
  g = ag_widen(&S, g);
  if (ag_ok(&S)) {
    nc_status s = nc_batch_norm_backward(g, x, w, mean, invstd, ip[0], &dx, w ? &dw : NULL, w ? &db : NULL);
    ag_take(&S, s, &dx);
    if (s == NC_OK && w) {
      ag_take(&S, NC_OK, &dw);
      ag_take(&S, NC_OK, &db);
    }
  }
  if (!w && ip[2] >= 0) db = bias_grad(&S, g, nc_ag_input_value(c, (int)ip[2]), 1);
  hand_out(&S, c, ip, dx, dw, db, gi);
  return ag_end(&S);
}

nc_status nc_ag_batch_norm(nc_tape *t, nc_node *x, nc_node *weight, nc_node *bias, nc_tensor *running_mean,
                           nc_tensor *running_var, bool training, double momentum, double eps,
                           nc_node **out) {
  nc_tensor *y, *mean, *invstd;
  NC_TRY(nc_batch_norm(nc_node_value(x), weight ? nc_node_value(weight) : NULL,
                       bias ? nc_node_value(bias) : NULL, running_mean, running_var, training, momentum, eps,
                       &y, &mean, &invstd));
  affine_inputs a = affine(x, weight, bias);
  nc_ag_ctx *c;
  nc_status s = ag_output(t, "batch_norm", batch_norm_rule, a.n, a.in, y, out, &c);
  if (s == NC_OK && c) {
    nc_ag_iparams(c)[0] = training;
    record_positions(c, &a);
    nc_ag_save(c, nc_node_value(x));
    nc_ag_save(c, mean);
    nc_ag_save(c, invstd);
    if (weight) nc_ag_save(c, nc_node_value(weight));
  }
  nc_tensor_release(mean);
  nc_tensor_release(invstd);
  return s;
}

/* ---- layer norm, RMS norm ------------------------------------------------------------------------ */
/* iparams: [0] normalized dims, [1] weight position, [2] bias position, [3] 1 for RMS norm;
 * saved: x, rstd, mean (layer norm), weight? */
static nc_status row_norm_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  const int64_t *ip = nc_ag_iparams(c);
  int nd = (int)ip[0], slot = 0;
  bool rms = ip[3];
  nc_tensor *x = ag_widen(&S, ag_saved(&S, c, slot++)), *rstd = ag_saved(&S, c, slot++);
  nc_tensor *mean = rms ? NULL : ag_saved(&S, c, slot++);
  nc_tensor *w = ip[1] >= 0 ? ag_widen(&S, ag_saved(&S, c, slot++)) : NULL, *dx = NULL, *dw = NULL,
            *db = NULL;
  g = ag_widen(&S, g);
  if (ag_ok(&S)) {
    nc_status s = rms ? nc_rms_norm_backward(g, x, nd, w, rstd, &dx, w ? &dw : NULL)
                      : nc_layer_norm_backward(g, x, nd, w, mean, rstd, &dx, w ? &dw : NULL, w ? &db : NULL);
    ag_take(&S, s, &dx);
    if (s == NC_OK && w) ag_take(&S, NC_OK, &dw);
    if (s == NC_OK && w && !rms) ag_take(&S, NC_OK, &db);
  }
  if (!w && ip[2] >= 0) db = bias_grad(&S, g, nc_ag_input_value(c, (int)ip[2]), -1);
  hand_out(&S, c, ip, dx, dw, db, gi);
  return ag_end(&S);
}

/* The forward half shared by layer and RMS norm (mean NULL for RMS norm); takes y, mean and
 * rstd's references. */
static nc_status record_row_norm(nc_tape *t, const char *op, nc_node *x, int normalized_ndim, nc_node *weight,
                                 nc_node *bias, nc_tensor *y, nc_tensor *mean, nc_tensor *rstd,
                                 nc_node **out) {
  affine_inputs a = affine(x, weight, bias);
  nc_ag_ctx *c;
  nc_status s = ag_output(t, op, row_norm_rule, a.n, a.in, y, out, &c);
  if (s == NC_OK && c) {
    nc_ag_iparams(c)[0] = normalized_ndim;
    record_positions(c, &a);
    nc_ag_iparams(c)[3] = mean == NULL;
    nc_ag_save(c, nc_node_value(x));
    nc_ag_save(c, rstd);
    if (mean) nc_ag_save(c, mean);
    if (weight) nc_ag_save(c, nc_node_value(weight));
  }
  nc_tensor_release(mean);
  nc_tensor_release(rstd);
  return s;
}

nc_status nc_ag_layer_norm(nc_tape *t, nc_node *x, int normalized_ndim, nc_node *weight, nc_node *bias,
                           double eps, nc_node **out) {
  nc_tensor *y, *mean, *rstd;
  NC_TRY(nc_layer_norm(nc_node_value(x), normalized_ndim, weight ? nc_node_value(weight) : NULL,
                       bias ? nc_node_value(bias) : NULL, eps, &y, &mean, &rstd));
  return record_row_norm(t, "layer_norm", x, normalized_ndim, weight, bias, y, mean, rstd, out);
}

nc_status nc_ag_rms_norm(nc_tape *t, nc_node *x, int normalized_ndim, nc_node *weight, double eps,
                         nc_node **out) {
  nc_tensor *y, *rstd;
  NC_TRY(
      nc_rms_norm(nc_node_value(x), normalized_ndim, weight ? nc_node_value(weight) : NULL, eps, &y, &rstd));
  return record_row_norm(t, "rms_norm", x, normalized_ndim, weight, NULL, y, NULL, rstd, out);
}

/* ---- group norm ------------------------------------------------------------------------------------ */
/* iparams: [0] groups, [1] weight position, [2] bias position; saved: x, mean, rstd, weight?. The
 * input gradient is the fused backward op's; the affine ones are sums over samples and positions
 * of g * xhat and of g, with xhat recomputed from the saved statistics. */
static nc_status group_norm_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  const int64_t *ip = nc_ag_iparams(c);
  const int64_t groups = ip[0];
  nc_tensor *x = ag_widen(&S, ag_saved(&S, c, 0)), *mean = ag_saved(&S, c, 1), *rstd = ag_saved(&S, c, 2);
  nc_tensor *w = ip[1] >= 0 ? ag_widen(&S, ag_saved(&S, c, 3)) : NULL, *dx = NULL, *dw = NULL, *db = NULL;
  g = ag_widen(&S, g);
  if (ag_ok(&S) && nc_ag_needs_grad(c, 0)) {
    nc_tensor *r;
    dx = ag_take(&S, nc_group_norm_backward(g, x, groups, w, mean, rstd, &r), &r);
  }
  const bool want_w = ip[1] >= 0 && nc_ag_needs_grad(c, (int)ip[1]), want_b = ip[2] >= 0 && nc_ag_needs_grad(c, (int)ip[2]);
  if (ag_ok(&S) && (want_w || want_b)) {
    const int64_t n = x->shape[0], ch = x->shape[1], sp = n * ch > 0 ? nc_tensor_numel(x) / (n * ch) : 0;
    const int64_t grouped[3] = {n, groups, groups > 0 ? ch / groups * sp : 0}, stat[3] = {n, groups, 1},
                  channels[3] = {n, ch, sp};
    const int over[2] = {0, 2};
    nc_tensor *g3 = ag_reshape(&S, g, 3, channels);
    if (want_w) {
      nc_tensor *centered = ag_bin(&S, NC_OP_SUB, AG_T(ag_reshape(&S, x, 3, grouped)), AG_T(ag_reshape(&S, mean, 3, stat)));
      nc_tensor *xhat = ag_mul(&S, centered, ag_reshape(&S, rstd, 3, stat));
      dw = ag_reduce(&S, NC_OP_SUM, ag_mul(&S, g3, ag_reshape(&S, xhat, 3, channels)), 2, over, false, NULL);
    }
    if (want_b) db = ag_reduce(&S, NC_OP_SUM, g3, 2, over, false, NULL);
  }
  if (nc_ag_needs_grad(c, 0)) gi[0] = ag_keep(&S, dx);
  if (want_w) gi[ip[1]] = ag_keep(&S, dw);
  if (want_b) gi[ip[2]] = ag_keep(&S, db);
  return ag_end(&S);
}

nc_status nc_ag_group_norm(nc_tape *t, nc_node *x, int64_t num_groups, nc_node *weight, nc_node *bias, double eps,
                           nc_node **out) {
  nc_tensor *y, *mean, *rstd;
  NC_TRY(nc_group_norm(nc_node_value(x), num_groups, weight ? nc_node_value(weight) : NULL,
                       bias ? nc_node_value(bias) : NULL, eps, &mean, &rstd, &y));
  affine_inputs a = affine(x, weight, bias);
  nc_ag_ctx *c;
  nc_status s = ag_output(t, "group_norm", group_norm_rule, a.n, a.in, y, out, &c);
  if (s == NC_OK && c) {
    nc_ag_iparams(c)[0] = num_groups;
    record_positions(c, &a);
    nc_ag_save(c, nc_node_value(x));
    nc_ag_save(c, mean);
    nc_ag_save(c, rstd);
    if (weight) nc_ag_save(c, nc_node_value(weight));
  }
  nc_tensor_release(mean);
  nc_tensor_release(rstd);
  return s;
}

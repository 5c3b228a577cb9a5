/* Losses. cross_entropy with class targets and bce_with_logits have rules of their own (fused
 * and exact where compositions have kinks: d/dx of the BCE is sigmoid(x) - y also at x = 0);
 * the others are compositions of differentiable ops. */
#include <stdio.h>
#include <string.h>
#include "core/check.h"
#include "netcl/autograd_ops.h"
#include "netcl/copy.h"
#include "compose.h"
#include "record.h"
#include "scope.h"

/* ---- cross_entropy ------------------------------------------------------------------------------- */
/* iparams: [0] ignore_index, [1] reduction; params: [0] label_smoothing; saved: logits, targets, lse. */
static nc_status cross_entropy_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  nc_tensor *x = ag_widen(&S, ag_saved(&S, c, 0)), *targets = ag_saved(&S, c, 1), *lse = ag_saved(&S, c, 2),
            *r = NULL;
  g = ag_widen(&S, g); /* storage logits: float32 gradients (the log-sum-exp is float32 already) */
  nc_cross_entropy_opts o = {nc_ag_iparams(c)[0], nc_ag_params(c)[0], (nc_reduction)nc_ag_iparams(c)[1]};
  if (ag_ok(&S) && ag_take(&S, nc_cross_entropy_backward(g, x, targets, lse, &o, &r), &r))
    gi[0] = ag_keep(&S, r);
  return ag_end(&S);
}

/* Probability targets (targets shaped like the logits): -sum_c t_c log_softmax(x)_c, with t
 * smoothed towards uniform, reduced over the positions. */
static nc_status soft_cross_entropy(nc_tape *t, nc_node *logits, nc_tensor *targets,
                                    const nc_cross_entropy_opts *o, nc_node **out) {
  nc_tensor *x = nc_node_value(logits);
  if (x->ndim < 2)
    return nc_error(NC_ERR_SHAPE, "logits must be [N, C] or [N, C, d1, ...], got %d dims", x->ndim);
  bool same = targets->ndim == x->ndim;
  for (int i = 0; same && i < x->ndim; i++) same = targets->shape[i] == x->shape[i];
  if (!same) return nc_error(NC_ERR_SHAPE, "probability targets must have the logits' shape");
  ag_scope S = AG_SCOPE;
  nc_tensor *p = targets;
  if (o->label_smoothing > 0)
    p = ag_bin(&S, NC_OP_ADD, AG_T(ag_muls(&S, targets, 1 - o->label_smoothing)),
               AG_F(o->label_smoothing / (double)x->shape[1]));
  ag_graph G = AG_GRAPH(t);
  nc_node *logp = NULL;
  if (ag_ok(&S)) cg_take(&G, nc_ag_softmax(t, NC_OP_LOG_SOFTMAX, logits, 1, &logp), &logp);
  int cls = 1;
  nc_node *per = cg_un(
      &G, NC_OP_NEG, cg_reduce(&G, NC_OP_SUM, cg_bin(&G, NC_OP_MUL, logp, cg_const(&G, p)), 1, &cls, false));
  nc_status s = ag_end(&S);
  if (s != NC_OK && G.s == NC_OK) G.s = s;
  return cg_end(&G, cg_reduction(&G, per, o->reduction), out);
}

nc_status nc_ag_cross_entropy(nc_tape *t, nc_node *logits, nc_tensor *targets,
                              const nc_cross_entropy_opts *opts, nc_node **out) {
  nc_cross_entropy_opts o = opts ? *opts : nc_cross_entropy_defaults();
  if (nc_dtype_is_float(targets->dtype)) return soft_cross_entropy(t, logits, targets, &o, out);
  nc_tensor *loss, *lse;
  NC_TRY(nc_cross_entropy(nc_node_value(logits), targets, &o, &loss, &lse));
  nc_ag_ctx *c;
  nc_status s = ag_output(t, "cross_entropy", cross_entropy_rule, 1, &logits, loss, out, &c);
  if (s == NC_OK && c) {
    nc_ag_iparams(c)[0] = o.ignore_index;
    nc_ag_iparams(c)[1] = o.reduction;
    nc_ag_params(c)[0] = o.label_smoothing;
    nc_ag_save(c, nc_node_value(logits));
    nc_ag_save(c, targets);
    nc_ag_save(c, lse);
  }
  nc_tensor_release(lse);
  return s;
}

/* ---- nll_loss ------------------------------------------------------------------------------------- */
/* -logp[n, target[n], ...] where target != ignore_index; mean divides by the number of those. */
nc_status nc_ag_nll_loss(nc_tape *t, nc_node *logp, nc_tensor *targets, int64_t ignore_index, int reduction,
                         nc_node **out) {
  nc_tensor *x = nc_node_value(logp);
  if (targets->dtype != NC_INT64)
    return nc_error(NC_ERR_DTYPE, "targets must be int64 class indices, got %s",
                    nc_dtype_name(targets->dtype));
  bool ok = x->ndim >= 2 && targets->ndim == x->ndim - 1;
  for (int i = 0; ok && i < targets->ndim; i++) ok = targets->shape[i] == x->shape[i == 0 ? 0 : i + 1];
  if (!ok) return nc_error(NC_ERR_SHAPE, "nll_loss needs log-probabilities [N, C, ...] and targets [N, ...]");
  ag_scope S = AG_SCOPE;
  nc_operand ii = nc_operand_scalar(nc_scalar_int(ignore_index));
  nc_tensor *keep = ag_bin(&S, NC_OP_NE, AG_T(targets), ii);
  nc_tensor *safe = ag_where(&S, keep, AG_T(targets), nc_operand_scalar(nc_scalar_int(0)));
  nc_tensor *idx = NULL, *weight = NULL;
  if (ag_ok(&S)) ag_take(&S, nc_tensor_unsqueeze(safe, 1, &idx), &idx);
  if (ag_ok(&S)) ag_take(&S, nc_to(keep, nc_tensor_device(x), x->dtype, &weight), &weight);
  ag_graph G = AG_GRAPH(t);
  if (!ag_ok(&S)) G.s = S.s;
  nc_node *picked = NULL;
  if (G.s == NC_OK) cg_take(&G, nc_ag_gather(t, logp, 1, idx, &picked), &picked);
  nc_node *squeezed = NULL;
  if (G.s == NC_OK) cg_take(&G, nc_ag_squeeze(t, picked, 1, &squeezed), &squeezed);
  nc_node *w = cg_const(&G, weight);
  nc_node *per = cg_un(&G, NC_OP_NEG, cg_bin(&G, NC_OP_MUL, squeezed, w));
  nc_node *result = per;
  if (reduction == NC_REDUCTION_MEAN) { /* over the kept targets only */
    nc_tensor *count = ag_reduce(&S, NC_OP_SUM, weight, 0, NULL, false, NULL);
    if (!ag_ok(&S) && G.s == NC_OK) G.s = S.s;
    result = cg_bin(&G, NC_OP_DIV, cg_reduce(&G, NC_OP_SUM, per, 0, NULL, false), cg_const(&G, count));
  } else {
    result = cg_reduction(&G, per, reduction);
  }
  ag_end(&S);
  return cg_end(&G, result, out);
}

/* The pair losses (mse, l1, bce_with_logits) take a target shaped like the input: broadcasting
 * one against the other ([4] with [4, 1] gives [4, 4]) gives a loss over pairs that were never
 * meant, so it is an error (PyTorch raises for bce_with_logits and warns for the others). */
static const char *shape_text(const nc_tensor *t, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < t->ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)t->shape[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

static nc_status same_shape(const char *loss, nc_node *input, nc_node *target) {
  const nc_tensor *x = nc_node_value(input), *y = nc_node_value(target);
  if (x->ndim == y->ndim && (x->ndim == 0 || !memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->ndim)))
    return NC_OK;
  char sx[128], sy[128];
  return nc_error(NC_ERR_SHAPE, "target shape %s differs from input shape %s (%s takes a target of the input's shape)",
                  shape_text(y, sy, sizeof sy), shape_text(x, sx, sizeof sx), loss);
}

/* ---- mse_loss, l1_loss ------------------------------------------------------------------------------ */
nc_status nc_ag_mse_loss(nc_tape *t, nc_node *input, nc_node *target, int reduction, nc_node **out) {
  NC_TRY(same_shape("mse_loss", input, target));
  ag_graph G = AG_GRAPH(t);
  nc_node *d = cg_bin(&G, NC_OP_SUB, input, target);
  return cg_end(&G, cg_reduction(&G, cg_bin(&G, NC_OP_MUL, d, d), reduction), out);
}

nc_status nc_ag_l1_loss(nc_tape *t, nc_node *input, nc_node *target, int reduction, nc_node **out) {
  NC_TRY(same_shape("l1_loss", input, target));
  ag_graph G = AG_GRAPH(t);
  nc_node *d = cg_un(&G, NC_OP_ABS, cg_bin(&G, NC_OP_SUB, input, target));
  return cg_end(&G, cg_reduction(&G, d, reduction), out);
}

/* ---- bce_with_logits ------------------------------------------------------------------------------- */
/* l = max(x, 0) - x y + log(1 + exp(-|x|)): dl/dx = sigmoid(x) - y, dl/dy = -x.
 * saved: x, y (the target: a node, possibly constant). */
static nc_status bce_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  nc_tensor *x = ag_saved(&S, c, 0), *y = ag_saved(&S, c, 1);
  if (nc_ag_needs_grad(c, 0)) {
    nc_tensor *d = ag_bin(&S, NC_OP_SUB, AG_T(ag_un(&S, NC_OP_SIGMOID, x)), AG_T(y));
    gi[0] = ag_keep(&S, ag_reduce_to(&S, ag_mul(&S, g, d), nc_ag_input_value(c, 0)));
  }
  if (nc_ag_n_inputs(c) == 2 && nc_ag_needs_grad(c, 1))
    gi[1] = ag_keep(&S, ag_reduce_to(&S, ag_un(&S, NC_OP_NEG, ag_mul(&S, g, x)), nc_ag_input_value(c, 1)));
  return ag_end(&S);
}

nc_status nc_ag_bce_with_logits(nc_tape *t, nc_node *input, nc_node *target, int reduction, nc_node **out) {
  NC_TRY(same_shape("bce_with_logits", input, target));
  nc_tensor *x = nc_node_value(input), *y = nc_node_value(target);
  ag_scope S = AG_SCOPE;
  nc_tensor *soft =
      ag_un(&S, NC_OP_LOG1P, ag_un(&S, NC_OP_EXP, ag_un(&S, NC_OP_NEG, ag_un(&S, NC_OP_ABS, x))));
  nc_tensor *l =
      ag_bin(&S, NC_OP_ADD,
             AG_T(ag_bin(&S, NC_OP_SUB, AG_T(ag_un(&S, NC_OP_RELU, x)), AG_T(ag_mul(&S, x, y)))), AG_T(soft));
  nc_tensor *loss = ag_keep(&S, l);
  NC_TRY(ag_end(&S));
  nc_node *in[2] = {input, target}, *per;
  nc_ag_ctx *c;
  NC_TRY(ag_output(t, "bce_with_logits", bce_rule, 2, in, loss, &per, &c));
  if (c) {
    nc_ag_save(c, x);
    nc_ag_save(c, y);
  }
  ag_graph G = AG_GRAPH(t);
  cg_take(&G, NC_OK, &per);
  return cg_end(&G, cg_reduction(&G, per, reduction), out);
}

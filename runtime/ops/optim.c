/* Optimizer updates and gradient clipping: validation, the host-side scalars of each rule, and
 * dispatch to the backends' fused kernels. */
#include <math.h>
#include <string.h>
#include "core/check.h"
#include "netcl/creation.h"
#include "netcl/optim.h"
#include "support.h"

/* NaN fails every comparison, so `!(v >= 0)` also rejects it. */
static nc_status check_nonneg(const char *op, const char *name, double v) {
  if (!(v >= 0)) return nc_error(NC_ERR_ARG, "%s: %s must be >= 0, got %g", op, name, v);
  return NC_OK;
}

/* t has param's shape and device, and (same_dtype) its dtype. */
static nc_status check_like(const char *op, const char *what, const nc_tensor *param, const nc_tensor *t,
                            bool same_dtype) {
  char a[128], b[128];
  bool same = t->ndim == param->ndim;
  for (int i = 0; same && i < t->ndim; i++) same = t->shape[i] == param->shape[i];
  if (!same)
    return nc_error(NC_ERR_SHAPE, "%s: %s has shape %s but the parameter has shape %s", op, what,
                    nc_shape_str(t->ndim, t->shape, a, sizeof a),
                    nc_shape_str(param->ndim, param->shape, b, sizeof b));
  if (same_dtype && t->dtype != param->dtype)
    return nc_error(NC_ERR_DTYPE, "%s: %s is %s but the parameter is %s", op, what, nc_dtype_name(t->dtype),
                    nc_dtype_name(param->dtype));
  nc_tensor *ts[1] = {(nc_tensor *)t};
  if (nc_check_devices(nc_tensor_device(param), 1, ts) != NC_OK)
    return nc_error_prefix(NC_ERR_DEVICE, "%s: %s", op, what);
  return NC_OK;
}

static nc_status check_same(const char *op, const char *what, const nc_tensor *param, const nc_tensor *t) {
  return check_like(op, what, param, t, true);
}

/* The tensors an update writes: param and its state. */
typedef struct {
  int n;
  nc_tensor *t[4];
  const char *name[4];
} written_set;

static nc_status add_written(const char *op, written_set *w, const char *name, nc_tensor *t, bool needed,
                             const char *why) {
  if (!needed) {
    if (t) return nc_error(NC_ERR_ARG, "%s: %s was given but %s", op, name, why);
    return NC_OK;
  }
  if (!t) return nc_error(NC_ERR_ARG, "%s: %s is required (it is missing)", op, name);
  if (w->n > 0) NC_TRY(check_same(op, name, w->t[0], t));
  /* The kernels index every written tensor by the same flat position. */
  if (!nc_tensor_is_contiguous(t)) return nc_error(NC_ERR_ARG, "%s: %s must be contiguous", op, name);
  for (int i = 0; i < w->n; i++)
    if (nc_tensors_overlap(w->t[i], t))
      return nc_error(NC_ERR_ARG, "%s: %s and %s share memory", op, w->name[i], name);
  w->t[w->n] = t;
  w->name[w->n++] = name;
  return NC_OK;
}

/* Validates param (first in w) and grad; *g receives grad ready for the kernel: contiguous and
 * clear of every written tensor (a copy when grad is neither). */
static nc_status prepare(const char *op, written_set *w, nc_tensor *param, nc_tensor *grad, nc_tensor **g) {
  if (!param || !grad) return nc_error(NC_ERR_ARG, "%s: %s is missing", op, param ? "grad" : "param");
  if (param->dtype != NC_FLOAT32 && param->dtype != NC_FLOAT64)
    return nc_error(NC_ERR_DTYPE, "%s: parameters must be float32 or float64, got %s", op,
                    nc_dtype_name(param->dtype));
  NC_TRY(add_written(op, w, "param", param, true, ""));
  NC_TRY(check_same(op, "grad", param, grad));
  bool clear = nc_tensor_is_contiguous(grad);
  for (int i = 0; clear && i < w->n; i++) clear = !nc_tensors_overlap(w->t[i], grad);
  if (clear) {
    *g = nc_tensor_retain(grad);
    return NC_OK;
  }
  return nc_to(grad, nc_tensor_device(grad), grad->dtype, g);
}

static void bump_all(written_set *w) {
  for (int i = 0; i < w->n; i++) nc_storage_bump_version(w->t[i]->storage);
}

/* The rounded copy an update may also write (the options' rounded): a bfloat16 or float16 tensor
 * of the float32 param's shape and device, apart from every written tensor. *direct: the kernel
 * writes it (contiguous); otherwise finish_rounded copies param into it after the update. */
static nc_status check_rounded(const char *op, const written_set *w, const nc_tensor *grad, nc_tensor *r,
                               nc_tensor **direct) {
  *direct = NULL;
  if (!r) return NC_OK;
  const nc_tensor *param = w->t[0];
  if (param->dtype != NC_FLOAT32)
    return nc_error(NC_ERR_DTYPE, "%s: a rounded copy needs a float32 parameter (the master copy), got %s",
                    op, nc_dtype_name(param->dtype));
  if (!nc_dtype_is_storage(r->dtype))
    return nc_error(NC_ERR_DTYPE, "%s: the rounded copy must be bfloat16 or float16, got %s", op,
                    nc_dtype_name(r->dtype));
  NC_TRY(check_like(op, "the rounded copy", param, r, false));
  NC_TRY(nc_check_writable(r));
  for (int i = 0; i < w->n; i++)
    if (nc_tensors_overlap(w->t[i], r))
      return nc_error(NC_ERR_ARG, "%s: %s and the rounded copy share memory", op, w->name[i]);
  if (nc_tensors_overlap(grad, r))
    return nc_error(NC_ERR_ARG, "%s: grad and the rounded copy share memory", op);
  if (nc_tensor_is_contiguous(r)) *direct = r;
  return NC_OK;
}

/* After an update that ran (s): the rounded copy the kernel did not write, copied from param. */
static nc_status finish_rounded(nc_status s, nc_tensor *param, nc_tensor *r, const nc_tensor *direct) {
  if (s != NC_OK || !r) return s;
  if (direct) {
    nc_storage_bump_version(r->storage);
    return NC_OK;
  }
  return nc_copy(r, param);
}

/* Fails before any state is touched when dev's backend lacks the update. */
static nc_status backend_entry(const char *op, nc_device *dev, nc_op entry) {
  nc_backend_fn fn;
  nc_status s = nc_dispatch_lookup(dev, entry, &fn);
  return s == NC_OK ? s : nc_error_prefix(s, "%s", op);
}

nc_status nc_sgd_step(nc_tensor *param, nc_tensor *grad, nc_tensor *momentum_buffer, bool first,
                      const nc_sgd_options *o) {
  const char *op = "sgd";
  NC_TRY(check_nonneg(op, "lr", o->lr));
  NC_TRY(check_nonneg(op, "momentum", o->momentum));
  NC_TRY(check_nonneg(op, "dampening", o->dampening));
  NC_TRY(check_nonneg(op, "weight_decay", o->weight_decay));
  if (o->nesterov && (o->momentum <= 0 || o->dampening != 0))
    return nc_error(NC_ERR_ARG,
                    "%s: nesterov momentum requires momentum > 0 and zero dampening (momentum %g, "
                    "dampening %g)",
                    op, o->momentum, o->dampening);
  const bool use_momentum = o->momentum != 0;
  written_set w = {0};
  nc_tensor *g = NULL;
  NC_TRY(prepare(op, &w, param, grad, &g));
  nc_status s = add_written(op, &w, "momentum_buffer", momentum_buffer, use_momentum, "momentum is 0");
  nc_tensor *direct = NULL;
  if (s == NC_OK) s = check_rounded(op, &w, grad, o->rounded, &direct);
  nc_device *dev = nc_tensor_device(param);
  if (s == NC_OK) s = backend_entry(op, dev, NC_OP_SGD_STEP);
  if (s == NC_OK && nc_tensor_numel(param) > 0) {
    const nc_sgd_kernel_args a = {
        .neg_lr = -o->lr,
        .weight_decay = o->weight_decay,
        .momentum = o->momentum,
        .one_minus_dampening = 1.0 - o->dampening,
        .use_weight_decay = o->weight_decay != 0,
        .use_momentum = use_momentum,
        .first = first,
        .nesterov = o->nesterov,
        .rounded = direct,
    };
    bump_all(&w);
    s = finish_rounded(nc_bk_sgd_step(param, g, momentum_buffer, &a), param, o->rounded, direct);
  }
  nc_tensor_release(g);
  return s;
}

nc_status nc_rmsprop_step(nc_tensor *param, nc_tensor *grad, nc_tensor *square_avg, nc_tensor *grad_avg,
                          nc_tensor *momentum_buffer, const nc_rmsprop_options *o) {
  const char *op = "rmsprop";
  NC_TRY(check_nonneg(op, "lr", o->lr));
  NC_TRY(check_nonneg(op, "alpha", o->alpha));
  NC_TRY(check_nonneg(op, "eps", o->eps));
  NC_TRY(check_nonneg(op, "momentum", o->momentum));
  NC_TRY(check_nonneg(op, "weight_decay", o->weight_decay));
  const bool use_momentum = o->momentum > 0;
  written_set w = {0};
  nc_tensor *g = NULL;
  NC_TRY(prepare(op, &w, param, grad, &g));
  nc_status s = add_written(op, &w, "square_avg", square_avg, true, "");
  if (s == NC_OK) s = add_written(op, &w, "grad_avg", grad_avg, o->centered, "centered is false");
  if (s == NC_OK) s = add_written(op, &w, "momentum_buffer", momentum_buffer, use_momentum, "momentum is 0");
  nc_tensor *direct = NULL;
  if (s == NC_OK) s = check_rounded(op, &w, grad, o->rounded, &direct);
  nc_device *dev = nc_tensor_device(param);
  if (s == NC_OK) s = backend_entry(op, dev, NC_OP_RMSPROP_STEP);
  if (s == NC_OK && nc_tensor_numel(param) > 0) {
    const nc_rmsprop_kernel_args a = {
        .neg_lr = -o->lr,
        .weight_decay = o->weight_decay,
        .alpha = o->alpha,
        .one_minus_alpha = 1.0 - o->alpha,
        .eps = o->eps,
        .momentum = o->momentum,
        .use_weight_decay = o->weight_decay != 0,
        .centered = o->centered,
        .use_momentum = use_momentum,
        .rounded = direct,
    };
    bump_all(&w);
    s = finish_rounded(nc_bk_rmsprop_step(param, g, square_avg, grad_avg, momentum_buffer, &a), param,
                       o->rounded, direct);
  }
  nc_tensor_release(g);
  return s;
}

nc_status nc_adam_step(nc_tensor *param, nc_tensor *grad, nc_tensor *exp_avg, nc_tensor *exp_avg_sq,
                       nc_tensor *max_exp_avg_sq, const nc_adam_options *o) {
  const char *op = o->decoupled ? "adamw" : "adam";
  NC_TRY(check_nonneg(op, "lr", o->lr));
  NC_TRY(check_nonneg(op, "eps", o->eps));
  NC_TRY(check_nonneg(op, "weight_decay", o->weight_decay));
  if (!(o->beta1 >= 0 && o->beta1 < 1))
    return nc_error(NC_ERR_ARG, "%s: beta1 must be in [0, 1), got %g", op, o->beta1);
  if (!(o->beta2 >= 0 && o->beta2 < 1))
    return nc_error(NC_ERR_ARG, "%s: beta2 must be in [0, 1), got %g", op, o->beta2);
  if (o->step < 1) return nc_error(NC_ERR_ARG, "%s: step must be >= 1, got %lld", op, (long long)o->step);
  written_set w = {0};
  nc_tensor *g = NULL;
  NC_TRY(prepare(op, &w, param, grad, &g));
  nc_status s = add_written(op, &w, "exp_avg", exp_avg, true, "");
  if (s == NC_OK) s = add_written(op, &w, "exp_avg_sq", exp_avg_sq, true, "");
  if (s == NC_OK) s = add_written(op, &w, "max_exp_avg_sq", max_exp_avg_sq, o->amsgrad, "amsgrad is false");
  nc_tensor *direct = NULL;
  if (s == NC_OK) s = check_rounded(op, &w, grad, o->rounded, &direct);
  nc_device *dev = nc_tensor_device(param);
  if (s == NC_OK) s = backend_entry(op, dev, NC_OP_ADAM_STEP);
  if (s == NC_OK && nc_tensor_numel(param) > 0) {
    /* As torch.optim.adam._single_tensor_adam computes them, in Python floats. */
    const double bias_correction1 = 1.0 - pow(o->beta1, (double)o->step);
    const double bias_correction2 = 1.0 - pow(o->beta2, (double)o->step);
    const nc_adam_kernel_args a = {
        .neg_step_size = -(o->lr / bias_correction1),
        .weight_decay = o->weight_decay,
        .decay = 1.0 - o->lr * o->weight_decay,
        .one_minus_beta1 = 1.0 - o->beta1,
        .beta2 = o->beta2,
        .one_minus_beta2 = 1.0 - o->beta2,
        .eps = o->eps,
        .bias_correction2_sqrt = sqrt(bias_correction2),
        .use_weight_decay = o->weight_decay != 0,
        .decoupled = o->decoupled,
        .amsgrad = o->amsgrad,
        .rounded = direct,
    };
    bump_all(&w);
    s = finish_rounded(nc_bk_adam_step(param, g, exp_avg, exp_avg_sq, max_exp_avg_sq, &a), param, o->rounded,
                       direct);
  }
  nc_tensor_release(g);
  return s;
}

nc_status nc_clip_grad_norm(int n, nc_tensor *const *grads, double max_norm, double *total_norm) {
  const char *op = "clip_grad_norm";
  if (!(max_norm >= 0)) return nc_error(NC_ERR_ARG, "%s: max_norm must be >= 0, got %g", op, max_norm);
  if (n < 0) return nc_error(NC_ERR_ARG, "%s: negative gradient count %d", op, n);
  nc_device *dev = NULL;
  int64_t m = 0;
  for (int i = 0; i < n; i++) {
    nc_tensor *g = grads[i];
    if (!g) continue;
    if (g->dtype != NC_FLOAT32 && g->dtype != NC_FLOAT64)
      return nc_error(NC_ERR_DTYPE, "%s: gradient %d is %s; gradients must be float32 or float64", op, i + 1,
                      nc_dtype_name(g->dtype));
    if (!dev) dev = nc_tensor_device(g);
    if (nc_check_devices(dev, 1, &grads[i]) != NC_OK)
      return nc_error_prefix(NC_ERR_DEVICE, "%s: gradient %d", op, i + 1);
    if (nc_tensor_numel(g) > 0) m++;
  }
  *total_norm = 0;
  if (m == 0) return NC_OK;
  NC_TRY(backend_entry(op, dev, NC_OP_SUM_SQUARES));

  const nc_dtype pdt = dev->info.fp64 ? NC_FLOAT64 : NC_FLOAT32;
  const int64_t count = m * NC_SUM_SQUARES_PARTS;
  nc_tensor *parts;
  NC_TRY(nc_tensor_empty(dev, pdt, 1, &count, 0, &parts));
  nc_status s = NC_OK;
  int64_t at = 0;
  for (int i = 0; i < n && s == NC_OK; i++) {
    if (!grads[i] || nc_tensor_numel(grads[i]) == 0) continue;
    s = nc_bk_sum_squares(parts, at, grads[i]);
    at += NC_SUM_SQUARES_PARTS;
  }
  void *host = s == NC_OK ? malloc(nc_tensor_nbytes(parts)) : NULL;
  if (s == NC_OK && !host) s = nc_error(NC_ERR_OOM, "%s: out of host memory", op);
  if (s == NC_OK) s = nc_tensor_read_host(parts, host, nc_tensor_nbytes(parts));
  nc_tensor_release(parts);
  if (s != NC_OK) {
    free(host);
    return s;
  }
  double sum = 0;
  for (int64_t j = 0; j < count; j++)
    sum += pdt == NC_FLOAT64 ? ((const double *)host)[j] : ((const float *)host)[j];
  free(host);
  const double total = sqrt(sum);
  *total_norm = total;

  const double coef = max_norm / (total + 1e-6);
  if (coef >= 1.0) return NC_OK;
  for (int i = 0; i < n; i++) {
    if (!grads[i] || nc_tensor_numel(grads[i]) == 0) continue;
    NC_TRY(nc_binary_into(NC_OP_MUL, grads[i], nc_operand_tensor(grads[i]),
                          nc_operand_scalar(nc_scalar_float(coef))));
  }
  return NC_OK;
}

nc_status nc_optim_state_new(const nc_tensor *like, nc_tensor **out) {
  nc_tensor *t;
  const nc_dtype dt = nc_dtype_is_storage(like->dtype) ? NC_FLOAT32 : like->dtype;
  NC_TRY(nc_tensor_empty(nc_tensor_device(like), dt, like->ndim, like->shape, NC_ALLOC_PERSISTENT, &t));
  nc_status s = nc_fill(t, 0.0);
  if (s != NC_OK) {
    nc_tensor_release(t);
    return s;
  }
  *out = t;
  return NC_OK;
}

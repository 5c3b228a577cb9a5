/* cross_entropy: checks (targets must be int64 class indices), allocation, dispatch. bfloat16 and
 * float16 logits go through the float32 path (ops/support.h): the loss is the float32 one rounded
 * once into the logits' dtype (PyTorch's dtype), the log-sum-exp kept for the backward is float32. */
#include "backend/dispatch.h"
#include "core/check.h"
#include "core/device_impl.h"
#include "netcl/loss.h"
#include "ops/dense.h"
#include "ops/support.h"

nc_cross_entropy_opts nc_cross_entropy_defaults(void) {
  return (nc_cross_entropy_opts){
      .ignore_index = -100, .label_smoothing = 0.0, .reduction = NC_REDUCTION_MEAN};
}

static nc_status check(const nc_tensor *logits, const nc_tensor *targets, const nc_cross_entropy_opts *o) {
  if (!nc_dtype_is_float(logits->dtype))
    return nc_error(NC_ERR_DTYPE, "logits must be float32, float64, bfloat16 or float16, got %s",
                    nc_dtype_name(logits->dtype));
  if (targets->dtype != NC_INT64)
    return nc_error(NC_ERR_DTYPE, "targets must be int64 class indices, got %s",
                    nc_dtype_name(targets->dtype));
  if (nc_tensor_device(targets) != nc_tensor_device(logits))
    return nc_error(NC_ERR_DEVICE, "targets are on another device than the logits");
  if (logits->ndim < 2)
    return nc_error(NC_ERR_SHAPE, "logits must be [N, C] or [N, C, d1, ...], got %d dims", logits->ndim);
  bool ok = targets->ndim == logits->ndim - 1 && targets->shape[0] == logits->shape[0];
  for (int i = 1; ok && i < targets->ndim; i++) ok = targets->shape[i] == logits->shape[i + 1];
  if (!ok) return nc_error(NC_ERR_SHAPE, "targets must have the logits' shape without the class dim");
  if (logits->shape[1] < 1) return nc_error(NC_ERR_SHAPE, "logits have no classes");
  if (!(o->label_smoothing >= 0 && o->label_smoothing <= 1))
    return nc_error(NC_ERR_ARG, "label_smoothing must be in [0, 1], got %g", o->label_smoothing);
  if (o->reduction != NC_REDUCTION_NONE && o->reduction != NC_REDUCTION_MEAN &&
      o->reduction != NC_REDUCTION_SUM)
    return nc_error(NC_ERR_ARG, "unknown reduction %d", (int)o->reduction);
  return NC_OK;
}

nc_status nc_cross_entropy(nc_tensor *logits, nc_tensor *targets, const nc_cross_entropy_opts *opts,
                           nc_tensor **loss, nc_tensor **lse) {
  nc_cross_entropy_opts o = opts ? *opts : nc_cross_entropy_defaults();
  NC_TRY(check(logits, targets, &o));
  if (nc_dtype_is_storage(logits->dtype)) {
    nc_tensor *wide, *l = NULL, *s_ = NULL;
    NC_TRY(nc_widen_n(1, &logits, &wide));
    nc_status s = nc_cross_entropy(wide, targets, &o, &l, &s_);
    nc_release_n(1, &wide);
    s = nc_round_result(s, l, logits->dtype, loss);
    if (s == NC_OK && lse) *lse = s_, s_ = NULL;
    nc_tensor_release(s_);
    return s;
  }
  nc_device *dev = nc_tensor_device(logits);
  nc_tensor *l = NULL, *s_ = NULL, *dl = NULL, *dt = NULL;
  nc_status s = o.reduction == NC_REDUCTION_NONE
                    ? nc_tensor_empty(dev, logits->dtype, targets->ndim, targets->shape, 0, &l)
                    : nc_tensor_empty(dev, logits->dtype, 0, NULL, 0, &l);
  if (s == NC_OK) s = nc_tensor_empty(dev, logits->dtype, targets->ndim, targets->shape, 0, &s_);
  if (s == NC_OK) s = nc_dense_operand(logits, &dl);
  if (s == NC_OK) s = nc_dense_operand(targets, &dt);
  nc_index_verdict bad = {0, NULL};
  if (s == NC_OK) s = nc_bk_cross_entropy(dl, dt, o.ignore_index, o.label_smoothing, o.reduction, l, s_, &bad);
  if (s == NC_OK)
    s = nc_index_verdict_settle(&bad, "cross_entropy", dt,
                                "target %lld at position %lld is not a class in [0, %lld) nor ignore_index %lld",
                                logits->shape[1], o.ignore_index);
  nc_tensor_release(bad.flag);
  nc_tensor_release(dl), nc_tensor_release(dt);
  if (s != NC_OK) {
    nc_tensor_release(l), nc_tensor_release(s_);
    return s;
  }
  *loss = l;
  if (lse)
    *lse = s_;
  else
    nc_tensor_release(s_);
  return NC_OK;
}

nc_status nc_cross_entropy_backward(nc_tensor *dloss, nc_tensor *logits, nc_tensor *targets, nc_tensor *lse,
                                    const nc_cross_entropy_opts *opts, nc_tensor **dlogits) {
  nc_cross_entropy_opts o = opts ? *opts : nc_cross_entropy_defaults();
  NC_TRY(check(logits, targets, &o));
  /* storage logits: the loss gradient and the log-sum-exp may be float32 (what the forward gave) */
  const bool storage = nc_dtype_is_storage(logits->dtype);
  if ((dloss->dtype != logits->dtype && !(storage && dloss->dtype == NC_FLOAT32)) ||
      nc_tensor_device(dloss) != nc_tensor_device(logits))
    return nc_error(NC_ERR_DTYPE, "the loss gradient must match the logits' dtype and device");
  bool ok = o.reduction == NC_REDUCTION_NONE ? dloss->ndim == targets->ndim : nc_tensor_numel(dloss) == 1;
  for (int i = 0; ok && o.reduction == NC_REDUCTION_NONE && i < targets->ndim; i++)
    ok = dloss->shape[i] == targets->shape[i];
  if (!ok) return nc_error(NC_ERR_SHAPE, "the loss gradient does not have the loss's shape");
  if (!lse || (lse->dtype != logits->dtype && !(storage && lse->dtype == NC_FLOAT32)) ||
      nc_tensor_numel(lse) != nc_tensor_numel(targets))
    return nc_error(NC_ERR_ARG, "needs the log-sum-exp the forward op returned");
  if (storage) {
    nc_tensor *in[3] = {dloss, logits, lse}, *wide[3], *r = NULL;
    NC_TRY(nc_widen_n(3, in, wide));
    nc_status s = nc_cross_entropy_backward(wide[0], wide[1], targets, wide[2], &o, &r);
    nc_release_n(3, wide);
    return nc_round_result(s, r, logits->dtype, dlogits);
  }
  nc_device *dev = nc_tensor_device(logits);
  nc_tensor *r = NULL, *d[4] = {NULL, NULL, NULL, NULL};
  nc_status s = nc_tensor_empty(dev, logits->dtype, logits->ndim, logits->shape, 0, &r);
  nc_tensor *in[4] = {dloss, logits, targets, lse};
  for (int i = 0; s == NC_OK && i < 4; i++) s = nc_dense_operand(in[i], &d[i]);
  if (s == NC_OK && nc_tensor_numel(r) > 0)
    s = nc_bk_cross_entropy_bwd(d[0], d[1], d[2], d[3], o.ignore_index, o.label_smoothing,
                                             o.reduction, r);
  for (int i = 0; i < 4; i++) nc_tensor_release(d[i]);
  if (s != NC_OK) {
    nc_tensor_release(r);
    return s;
  }
  *dlogits = r;
  return NC_OK;
}

/* Normalization ops: shape checks, saved-statistics tensors, dispatch. A bfloat16 or float16
 * input's affine parameters and running statistics have the input's dtype or float32 (all one of
 * them), as in PyTorch. Batch norm hands such tensors to the backends as they are: they compute
 * in float32 and round y (or dx, and the parameters' gradients) once into the dtype of what it
 * belongs to, bit for bit the float32 op's on the widened operands rounded once; its saved mean
 * and invstd are float32, and storage running statistics get the float32 update rounded once.
 * The other norms take them through the float32 path (ops/support.h): everything widened, the
 * float32 op run, the results rounded once the same way, the statistics they return float32. */
#include "backend/dispatch.h"
#include "core/check.h"
#include "core/device_impl.h"
#include "netcl/copy.h"
#include "netcl/creation.h"
#include "netcl/norm.h"
#include "netcl/table_ops.h"
#include "ops/dense.h"
#include "ops/support.h"

static nc_status check_param(const nc_tensor *p, const nc_tensor *x, int ndim, const int64_t *shape,
                             const char *what) {
  if (!p) return NC_OK;
  if (p->dtype != x->dtype && !(nc_dtype_is_storage(x->dtype) && p->dtype == NC_FLOAT32))
    return nc_error(NC_ERR_DTYPE, "%s is %s but the input is %s", what, nc_dtype_name(p->dtype),
                    nc_dtype_name(x->dtype));
  if (nc_tensor_device(p) != nc_tensor_device(x))
    return nc_error(NC_ERR_DEVICE, "%s is on another device", what);
  bool ok = p->ndim == ndim;
  for (int i = 0; ok && i < ndim; i++) ok = p->shape[i] == shape[i];
  if (!ok) {
    char buf[128];
    int len = 0;
    for (int i = 0; i < ndim; i++)
      len += snprintf(buf + len, sizeof buf - (size_t)len, "%s%lld", i ? "," : "", (long long)shape[i]);
    return nc_error(NC_ERR_SHAPE, "%s must have shape [%s]", what, buf);
  }
  return NC_OK;
}

/* The affine parameters and running statistics given (NULLs skipped) share one dtype. */
static nc_status one_param_dtype(int n, nc_tensor *const *ps) {
  const nc_tensor *first = NULL;
  for (int i = 0; i < n; i++) {
    if (!ps[i]) continue;
    if (first && ps[i]->dtype != first->dtype)
      return nc_error(NC_ERR_DTYPE,
                      "the parameters mix %s and %s; give them one dtype (the input's or float32)",
                      nc_dtype_name(first->dtype), nc_dtype_name(ps[i]->dtype));
    if (!first) first = ps[i];
  }
  return NC_OK;
}

static nc_status check_float(const nc_tensor *x) {
  if (!nc_dtype_is_float(x->dtype))
    return nc_error(NC_ERR_DTYPE, "expected a float32, float64, bfloat16 or float16 input, got %s",
                    nc_dtype_name(x->dtype));
  return NC_OK;
}

/* Contiguous versions of up to 4 optional tensors; releases them on failure. */
static nc_status dense(nc_tensor **in, nc_tensor **out, int n) {
  for (int i = 0; i < n; i++) out[i] = NULL;
  for (int i = 0; i < n; i++) {
    if (!in[i]) continue;
    nc_status s = nc_dense_operand(in[i], &out[i]);
    if (s != NC_OK) {
      for (int j = 0; j < i; j++) nc_tensor_release(out[j]);
      return s;
    }
  }
  return NC_OK;
}

static void release_all(nc_tensor **t, int n) {
  for (int i = 0; i < n; i++) nc_tensor_release(t[i]);
}

/* The storage dtypes' backward: the float32 path's dx, dweight, dbias (r[], references taken; NULL
 * where not asked) rounded once into x's and the weight's dtypes and handed out, or all released. */
static nc_status round_grads(nc_status s, nc_tensor **r, const nc_tensor *x, const nc_tensor *weight,
                             nc_tensor **dx, nc_tensor **dweight, nc_tensor **dbias) {
  nc_tensor *o[3] = {NULL, NULL, NULL};
  const nc_dtype dts[3] = {x->dtype, weight ? weight->dtype : x->dtype, weight ? weight->dtype : x->dtype};
  for (int i = 0; i < 3; i++) s = nc_round_result(s, r[i], dts[i], &o[i]);
  if (s != NC_OK) {
    nc_release_n(3, o);
    return s;
  }
  if (dx) *dx = o[0];
  if (dweight) *dweight = o[1];
  if (dbias) *dbias = o[2];
  return NC_OK;
}

/* Running stats are updated in place, so they must be contiguous themselves. */
static nc_status check_inplace(const nc_tensor *t, const char *what) {
  if (t && !nc_tensor_is_contiguous(t))
    return nc_error(NC_ERR_ARG, "%s must be contiguous (it is updated in place)", what);
  return NC_OK;
}

/* The batch norm's results to the caller: y, and the saved statistics where asked for (else
 * released). */
static void hand_out(nc_tensor *r, nc_tensor *m, nc_tensor *is, nc_tensor **y, nc_tensor **save_mean,
                     nc_tensor **save_invstd) {
  *y = r;
  if (save_mean)
    *save_mean = m;
  else
    nc_tensor_release(m);
  if (save_invstd)
    *save_invstd = is;
  else
    nc_tensor_release(is);
}

/* The dtype of batch norm's saved mean and invstd: float32 for a storage input. */
static nc_dtype stats_dtype(nc_dtype x) { return nc_dtype_is_storage(x) ? NC_FLOAT32 : x; }

nc_status nc_batch_norm(nc_tensor *x, nc_tensor *weight, nc_tensor *bias, nc_tensor *running_mean,
                        nc_tensor *running_var, bool training, double momentum, double eps, nc_tensor **y,
                        nc_tensor **save_mean, nc_tensor **save_invstd) {
  NC_TRY(check_float(x));
  if (x->ndim < 2) return nc_error(NC_ERR_SHAPE, "needs an input [N, C, ...], got %d dims", x->ndim);
  int64_t c = x->shape[1], per_channel = nc_tensor_numel(x) / (c ? c : 1);
  NC_TRY(check_param(weight, x, 1, &c, "weight"));
  NC_TRY(check_param(bias, x, 1, &c, "bias"));
  NC_TRY(check_param(running_mean, x, 1, &c, "running_mean"));
  NC_TRY(check_param(running_var, x, 1, &c, "running_var"));
  NC_TRY(check_inplace(running_mean, "running_mean"));
  NC_TRY(check_inplace(running_var, "running_var"));
  if (!(eps > 0)) return nc_error(NC_ERR_ARG, "eps must be > 0, got %g", eps);
  if ((running_mean == NULL) != (running_var == NULL))
    return nc_error(NC_ERR_ARG, "give both running_mean and running_var, or neither");
  if (!training && !running_mean) return nc_error(NC_ERR_ARG, "inference needs running_mean and running_var");
  if (training && per_channel < 2)
    return nc_error(NC_ERR_SHAPE, "training needs more than 1 value per channel, got %lld",
                    (long long)per_channel);
  nc_tensor *params[4] = {weight, bias, running_mean, running_var};
  NC_TRY(one_param_dtype(4, params));
  nc_device *dev = nc_tensor_device(x);
  nc_tensor *in[3] = {x, weight, bias}, *d[3], *r = NULL, *m = NULL, *is = NULL;
  NC_TRY(dense(in, d, 3));
  const nc_dtype st = stats_dtype(x->dtype);
  nc_status s = nc_tensor_empty(dev, x->dtype, x->ndim, x->shape, 0, &r);
  if (s == NC_OK) s = nc_tensor_empty(dev, st, 1, &c, 0, &m);
  if (s == NC_OK) s = nc_tensor_empty(dev, st, 1, &c, 0, &is);
  if (s == NC_OK && c > 0) {
    if (training && running_mean) {
      nc_storage_bump_version(running_mean->storage);
      nc_storage_bump_version(running_var->storage);
    }
    /* Running stats update in place; views that do not start their storage go through a
     * dense copy that is written back. */
    nc_tensor *rs[2] = {running_mean, running_var}, *drs[2] = {NULL, NULL};
    s = dense(rs, drs, 2);
    if (s == NC_OK)
      s = nc_bk_batch_norm(d[0], d[1], d[2], drs[0], drs[1], training, momentum, eps, r, m, is);
    for (int i = 0; i < 2 && s == NC_OK && training; i++)
      if (drs[i] && drs[i] != rs[i]) s = nc_copy(rs[i], drs[i]);
    release_all(drs, 2);
  }
  release_all(d, 3);
  if (s != NC_OK) {
    nc_tensor_release(r), nc_tensor_release(m), nc_tensor_release(is);
    return s;
  }
  hand_out(r, m, is, y, save_mean, save_invstd);
  return NC_OK;
}

nc_status nc_batch_norm_backward(nc_tensor *dy, nc_tensor *x, nc_tensor *weight, nc_tensor *save_mean,
                                 nc_tensor *save_invstd, bool training, nc_tensor **dx, nc_tensor **dweight,
                                 nc_tensor **dbias) {
  NC_TRY(check_float(x));
  if (x->ndim < 2) return nc_error(NC_ERR_SHAPE, "needs an input [N, C, ...], got %d dims", x->ndim);
  int64_t c = x->shape[1];
  NC_TRY(check_param(dy, x, x->ndim, x->shape, "the output gradient"));
  NC_TRY(check_param(weight, x, 1, &c, "weight"));
  NC_TRY(check_param(save_mean, x, 1, &c, "save_mean"));
  NC_TRY(check_param(save_invstd, x, 1, &c, "save_invstd"));
  if (!save_mean || !save_invstd) return nc_error(NC_ERR_ARG, "needs the saved mean and invstd");
  if ((dweight || dbias) && !weight) return nc_error(NC_ERR_ARG, "affine gradients need the weight");
  nc_device *dev = nc_tensor_device(x);
  /* The saved statistics are float32 for a storage input (a caller may pass them rounded to its
   * dtype: those two small tensors are widened). */
  nc_tensor *stats[2] = {save_mean, save_invstd}, *wstats[2];
  NC_TRY(nc_widen_n(2, stats, wstats));
  nc_tensor *in[5] = {dy, x, weight, wstats[0], wstats[1]}, *d[5], *out[3] = {NULL, NULL, NULL};
  nc_status s = dense(in, d, 5);
  nc_release_n(2, wstats);
  NC_TRY(s);
  const nc_dtype gdt = weight ? weight->dtype : x->dtype; /* dweight's and dbias's */
  /* dx: x's dtype, or float32 where dy is float32 beside a storage x (the tape's gradients) */
  const nc_dtype ddt = dy->dtype == NC_FLOAT32 && nc_dtype_is_storage(x->dtype) ? NC_FLOAT32 : x->dtype;
  if (dx) s = nc_tensor_empty(dev, ddt, x->ndim, x->shape, 0, &out[0]);
  if (s == NC_OK && dweight) s = nc_tensor_empty(dev, gdt, 1, &c, 0, &out[1]);
  if (s == NC_OK && dbias) s = nc_tensor_empty(dev, gdt, 1, &c, 0, &out[2]);
  if (s == NC_OK && c > 0)
    s = nc_bk_batch_norm_bwd(d[0], d[1], d[2], d[3], d[4], training, out[0], out[1], out[2]);
  release_all(d, 5);
  if (s != NC_OK) {
    release_all(out, 3);
    return s;
  }
  if (dx) *dx = out[0];
  if (dweight) *dweight = out[1];
  if (dbias) *dbias = out[2];
  return NC_OK;
}

static nc_status check_row(const nc_tensor *x, int nd) {
  NC_TRY(check_float(x));
  if (nd < 1 || nd > x->ndim)
    return nc_error(NC_ERR_SHAPE, "cannot normalize over the last %d dims of a %d-dim input", nd, x->ndim);
  return NC_OK;
}

static nc_status row_forward(bool rms, nc_tensor *x, int nd, nc_tensor *weight, nc_tensor *bias, double eps,
                             nc_tensor **y, nc_tensor **mean, nc_tensor **rstd) {
  NC_TRY(check_row(x, nd));
  const int64_t *norm_shape = x->shape + (x->ndim - nd);
  NC_TRY(check_param(weight, x, nd, norm_shape, "weight"));
  NC_TRY(check_param(bias, x, nd, norm_shape, "bias"));
  if (!(eps > 0)) return nc_error(NC_ERR_ARG, "eps must be > 0, got %g", eps);
  nc_tensor *params[2] = {weight, bias};
  NC_TRY(one_param_dtype(2, params));
  if (nc_dtype_is_storage(x->dtype)) {
    nc_tensor *in[3] = {x, weight, bias}, *wide[3], *r = NULL, *m = NULL, *rs = NULL;
    NC_TRY(nc_widen_n(3, in, wide));
    nc_status s = row_forward(rms, wide[0], nd, wide[1], wide[2], eps, &r, rms ? NULL : &m, &rs);
    nc_release_n(3, wide);
    s = nc_round_result(s, r, x->dtype, y);
    if (s == NC_OK && mean) *mean = m, m = NULL;
    if (s == NC_OK && rstd) *rstd = rs, rs = NULL;
    nc_tensor_release(m), nc_tensor_release(rs);
    return s;
  }
  nc_device *dev = nc_tensor_device(x);
  int lead = x->ndim - nd;
  nc_tensor *in[3] = {x, weight, bias}, *d[3], *r = NULL, *m = NULL, *rs = NULL;
  NC_TRY(dense(in, d, 3));
  nc_status s = nc_tensor_empty(dev, x->dtype, x->ndim, x->shape, 0, &r);
  if (s == NC_OK && !rms) s = nc_tensor_empty(dev, x->dtype, lead, x->shape, 0, &m);
  if (s == NC_OK) s = nc_tensor_empty(dev, x->dtype, lead, x->shape, 0, &rs);
  if (s == NC_OK && nc_tensor_numel(x) > 0) s = nc_bk_row_norm(rms ? NC_OP_RMS_NORM : NC_OP_LAYER_NORM, d[0], d[1], d[2], eps, r, m, rs);
  release_all(d, 3);
  if (s != NC_OK) {
    nc_tensor_release(r), nc_tensor_release(m), nc_tensor_release(rs);
    return s;
  }
  *y = r;
  if (mean)
    *mean = m;
  else
    nc_tensor_release(m);
  if (rstd)
    *rstd = rs;
  else
    nc_tensor_release(rs);
  return NC_OK;
}

static nc_status row_backward(bool rms, nc_tensor *dy, nc_tensor *x, int nd, nc_tensor *weight,
                              nc_tensor *mean, nc_tensor *rstd, nc_tensor **dx, nc_tensor **dweight,
                              nc_tensor **dbias) {
  NC_TRY(check_row(x, nd));
  int lead = x->ndim - nd;
  const int64_t *norm_shape = x->shape + lead;
  NC_TRY(check_param(dy, x, x->ndim, x->shape, "the output gradient"));
  NC_TRY(check_param(weight, x, nd, norm_shape, "weight"));
  if (!rms) NC_TRY(check_param(mean, x, lead, x->shape, "mean"));
  NC_TRY(check_param(rstd, x, lead, x->shape, "rstd"));
  if (!rstd || (!rms && !mean)) return nc_error(NC_ERR_ARG, "needs the statistics saved by the forward op");
  if ((dweight || dbias) && !weight) return nc_error(NC_ERR_ARG, "affine gradients need the weight");
  if (nc_dtype_is_storage(x->dtype)) {
    nc_tensor *in[5] = {dy, x, weight, rms ? NULL : mean, rstd}, *wide[5], *r[3] = {NULL, NULL, NULL};
    NC_TRY(nc_widen_n(5, in, wide));
    nc_status s = row_backward(rms, wide[0], wide[1], nd, wide[2], wide[3], wide[4], dx ? &r[0] : NULL,
                               dweight ? &r[1] : NULL, dbias ? &r[2] : NULL);
    nc_release_n(5, wide);
    return round_grads(s, r, x, weight, dx, dweight, dbias);
  }
  nc_device *dev = nc_tensor_device(x);
  nc_tensor *in[5] = {dy, x, weight, rms ? NULL : mean, rstd}, *d[5], *out[3] = {NULL, NULL, NULL};
  NC_TRY(dense(in, d, 5));
  nc_status s = NC_OK;
  /* dx: x's dtype, or float32 where dy is float32 beside a storage x (the tape's gradients) */
  const nc_dtype ddt = dy->dtype == NC_FLOAT32 && nc_dtype_is_storage(x->dtype) ? NC_FLOAT32 : x->dtype;
  if (dx) s = nc_tensor_empty(dev, ddt, x->ndim, x->shape, 0, &out[0]);
  if (s == NC_OK && dweight) s = nc_tensor_empty(dev, x->dtype, nd, norm_shape, 0, &out[1]);
  if (s == NC_OK && dbias) s = nc_tensor_empty(dev, x->dtype, nd, norm_shape, 0, &out[2]);
  if (s == NC_OK) {
    if (nc_tensor_numel(x) > 0)
      s = nc_bk_row_norm_bwd(rms ? NC_OP_RMS_NORM_BWD : NC_OP_LAYER_NORM_BWD, d[0], d[1], d[2], d[3], d[4], out[0], out[1], out[2]);
    for (int i = 1; s == NC_OK && i < 3; i++)
      if (out[i] && nc_tensor_numel(x) == 0) s = nc_fill(out[i], 0.0);
  }
  release_all(d, 5);
  if (s != NC_OK) {
    release_all(out, 3);
    return s;
  }
  if (dx) *dx = out[0];
  if (dweight) *dweight = out[1];
  if (dbias) *dbias = out[2];
  return NC_OK;
}

nc_status nc_layer_norm(nc_tensor *x, int normalized_ndim, nc_tensor *weight, nc_tensor *bias, double eps,
                        nc_tensor **y, nc_tensor **mean, nc_tensor **rstd) {
  return row_forward(false, x, normalized_ndim, weight, bias, eps, y, mean, rstd);
}

nc_status nc_layer_norm_backward(nc_tensor *dy, nc_tensor *x, int normalized_ndim, nc_tensor *weight,
                                 nc_tensor *mean, nc_tensor *rstd, nc_tensor **dx, nc_tensor **dweight,
                                 nc_tensor **dbias) {
  return row_backward(false, dy, x, normalized_ndim, weight, mean, rstd, dx, dweight, dbias);
}

nc_status nc_rms_norm(nc_tensor *x, int normalized_ndim, nc_tensor *weight, double eps, nc_tensor **y,
                      nc_tensor **rstd) {
  return row_forward(true, x, normalized_ndim, weight, NULL, eps, y, NULL, rstd);
}

nc_status nc_rms_norm_backward(nc_tensor *dy, nc_tensor *x, int normalized_ndim, nc_tensor *weight,
                               nc_tensor *rstd, nc_tensor **dx, nc_tensor **dweight) {
  return row_backward(true, dy, x, normalized_ndim, weight, NULL, rstd, dx, dweight, NULL);
}

/* ---- group norm (an op defined by its op-table row: netcl/table_ops.h) ---------------------------- */
/* x [N, C, ...] with groups dividing C; sets the kernel call's geometry: i = {C, S, groups}. */
static nc_status group_geometry(const nc_tensor *x, int64_t groups, nc_kernel_call *k) {
  NC_TRY(check_float(x));
  if (x->ndim < 2) return nc_error(NC_ERR_SHAPE, "needs an input of at least 2 dims [N, C, ...], got %d", x->ndim);
  const int64_t n = x->shape[0], c = x->shape[1];
  if (groups < 1 || c % groups != 0)
    return nc_error(NC_ERR_ARG, "num_groups %lld must be positive and divide the %lld channels", (long long)groups,
                    (long long)c);
  k->ni = 3;
  k->i[0] = c;
  k->i[1] = n * c > 0 ? nc_tensor_numel(x) / (n * c) : 0;
  k->i[2] = groups;
  k->rows = n * groups;
  return NC_OK;
}

nc_status nc_group_norm(nc_tensor *x, int64_t num_groups, nc_tensor *weight, nc_tensor *bias, double eps,
                        nc_tensor **mean, nc_tensor **rstd, nc_tensor **out) {
  nc_kernel_call k = {.op = NC_OP_GROUP_NORM, .nt = 6, .nf = 1, .f = {eps}};
  NC_TRY(group_geometry(x, num_groups, &k));
  const int64_t c = x->shape[1], stats[2] = {x->shape[0], num_groups};
  NC_TRY(check_param(weight, x, 1, &c, "weight"));
  NC_TRY(check_param(bias, x, 1, &c, "bias"));
  if (!(eps > 0)) return nc_error(NC_ERR_ARG, "eps must be > 0, got %g", eps);
  nc_tensor *params[2] = {weight, bias};
  NC_TRY(one_param_dtype(2, params));
  if (nc_dtype_is_storage(x->dtype)) {
    nc_tensor *in[3] = {x, weight, bias}, *wide[3], *y = NULL, *m = NULL, *rs = NULL;
    NC_TRY(nc_widen_n(3, in, wide));
    nc_status s = nc_group_norm(wide[0], num_groups, wide[1], wide[2], eps, &m, &rs, &y);
    nc_release_n(3, wide);
    s = nc_round_result(s, y, x->dtype, out);
    if (s == NC_OK && mean) *mean = m, m = NULL;
    if (s == NC_OK && rstd) *rstd = rs, rs = NULL;
    nc_tensor_release(m), nc_tensor_release(rs);
    return s;
  }
  nc_device *dev = nc_tensor_device(x);
  nc_tensor *in[3] = {x, weight, bias}, *d[3], *r[3] = {NULL, NULL, NULL};
  NC_TRY(dense(in, d, 3));
  nc_status s = nc_tensor_empty(dev, x->dtype, x->ndim, x->shape, 0, &r[0]);
  for (int i = 1; s == NC_OK && i < 3; i++) s = nc_tensor_empty(dev, x->dtype, 2, stats, 0, &r[i]);
  if (s == NC_OK && nc_tensor_numel(x) > 0) {
    for (int i = 0; i < 3; i++) k.t[i] = d[i], k.t[3 + i] = r[i];
    s = nc_bk_kernel(&k);
  }
  release_all(d, 3);
  if (s != NC_OK) {
    release_all(r, 3);
    return s;
  }
  *out = r[0];
  if (mean) *mean = r[1]; else nc_tensor_release(r[1]);
  if (rstd) *rstd = r[2]; else nc_tensor_release(r[2]);
  return NC_OK;
}

nc_status nc_group_norm_backward(nc_tensor *dy, nc_tensor *x, int64_t num_groups, nc_tensor *weight,
                                 nc_tensor *mean, nc_tensor *rstd, nc_tensor **out) {
  nc_kernel_call k = {.op = NC_OP_GROUP_NORM_BWD, .nt = 6};
  NC_TRY(group_geometry(x, num_groups, &k));
  const int64_t c = x->shape[1], stats[2] = {x->shape[0], num_groups};
  NC_TRY(check_param(dy, x, x->ndim, x->shape, "the output gradient"));
  NC_TRY(check_param(weight, x, 1, &c, "weight"));
  if (!mean || !rstd) return nc_error(NC_ERR_ARG, "needs the statistics saved by the forward op");
  NC_TRY(check_param(mean, x, 2, stats, "mean"));
  NC_TRY(check_param(rstd, x, 2, stats, "rstd"));
  if (nc_dtype_is_storage(x->dtype)) {
    nc_tensor *in[5] = {dy, x, weight, mean, rstd}, *wide[5], *r = NULL;
    NC_TRY(nc_widen_n(5, in, wide));
    nc_status s = nc_group_norm_backward(wide[0], wide[1], num_groups, wide[2], wide[3], wide[4], &r);
    nc_release_n(5, wide);
    return nc_round_result(s, r, x->dtype, out);
  }
  nc_device *dev = nc_tensor_device(x);
  nc_tensor *in[5] = {dy, x, weight, mean, rstd}, *d[5], *dx = NULL;
  NC_TRY(dense(in, d, 5));
  nc_status s = nc_tensor_empty(dev, x->dtype, x->ndim, x->shape, 0, &dx);
  if (s == NC_OK && nc_tensor_numel(x) > 0) {
    for (int i = 0; i < 5; i++) k.t[i] = d[i];
    k.t[5] = dx;
    s = nc_bk_kernel(&k);
  }
  release_all(d, 5);
  if (s != NC_OK) {
    nc_tensor_release(dx);
    return s;
  }
  *out = dx;
  return NC_OK;
}

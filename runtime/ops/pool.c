/* Pooling: output geometry (PyTorch's rules for padding, dilation and ceil mode), checks,
 * allocation and dispatch. A bfloat16 or float16 input (or output gradient) goes through the
 * float32 path: widened, pooled in float32, the result rounded once into its dtype (ops/support.h);
 * max pooling's positions are those of the float32 path. */
#include "backend/dispatch.h"
#include "core/check.h"
#include "core/device_impl.h"
#include "netcl/copy.h"
#include "netcl/creation.h"
#include "netcl/pool.h"
#include "ops/dense.h"
#include "ops/support.h"

nc_pool2d_desc nc_pool2d_defaults(int kind, int64_t kh, int64_t kw) {
  nc_pool2d_desc p = {
      .kind = kind, .kernel = {kh, kw}, .stride = {kh, kw}, .dilation = {1, 1}, .count_include_pad = true};
  return p;
}

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t pad, int64_t d, bool ceil_mode) {
  int64_t span = in + 2 * pad - d * (k - 1) - 1;
  if (span < 0) return 0;
  int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  /* The last window must start inside the input or its left padding. */
  if (ceil_mode && (o - 1) * s >= in + pad) o--;
  return o;
}

/* Fills the derived fields from the input shape (3-D [C,H,W] or 4-D [N,C,H,W]). */
static nc_status plan(nc_pool2d_desc *p, int ndim, const int64_t *shape) {
  if (ndim != 3 && ndim != 4)
    return nc_error(NC_ERR_SHAPE, "needs a 3-D [C,H,W] or 4-D [N,C,H,W] input, got %d dims", ndim);
  p->planes = shape[0] * (ndim == 4 ? shape[1] : 1);
  p->h = shape[ndim - 2];
  p->w = shape[ndim - 1];
  if (p->kind == NC_POOL_ADAPTIVE_AVG) {
    if (p->out_size[0] < 1 || p->out_size[1] < 1)
      return nc_error(NC_ERR_ARG, "output size must be positive, got %lldx%lld", (long long)p->out_size[0],
                      (long long)p->out_size[1]);
    if (p->h < 1 || p->w < 1)
      return nc_error(NC_ERR_SHAPE, "input plane %lldx%lld is empty", (long long)p->h, (long long)p->w);
    p->oh = p->out_size[0];
    p->ow = p->out_size[1];
    return NC_OK;
  }
  if (p->kind != NC_POOL_MAX && p->kind != NC_POOL_AVG)
    return nc_error(NC_ERR_ARG, "unknown pooling kind %d", p->kind);
  for (int i = 0; i < 2; i++) {
    if (p->kernel[i] < 1)
      return nc_error(NC_ERR_ARG, "kernel size must be >= 1, got %lld", (long long)p->kernel[i]);
    if (p->stride[i] < 1)
      return nc_error(NC_ERR_ARG, "stride must be >= 1, got %lld", (long long)p->stride[i]);
    if (p->dilation[i] < 1)
      return nc_error(NC_ERR_ARG, "dilation must be >= 1, got %lld", (long long)p->dilation[i]);
    if (p->padding[i] < 0 || p->padding[i] > p->kernel[i] / 2)
      return nc_error(NC_ERR_ARG, "padding %lld must be between 0 and half the kernel size %lld",
                      (long long)p->padding[i], (long long)p->kernel[i]);
  }
  if (p->kind == NC_POOL_AVG && (p->dilation[0] != 1 || p->dilation[1] != 1))
    return nc_error(NC_ERR_ARG, "avg_pool2d has no dilation");
  p->oh = out_size(p->h, p->kernel[0], p->stride[0], p->padding[0], p->dilation[0], p->ceil_mode);
  p->ow = out_size(p->w, p->kernel[1], p->stride[1], p->padding[1], p->dilation[1], p->ceil_mode);
  if (p->oh < 1 || p->ow < 1)
    return nc_error(NC_ERR_SHAPE, "kernel %lldx%lld is larger than the padded input %lldx%lld",
                    (long long)((p->kernel[0] - 1) * p->dilation[0] + 1),
                    (long long)((p->kernel[1] - 1) * p->dilation[1] + 1),
                    (long long)(p->h + 2 * p->padding[0]), (long long)(p->w + 2 * p->padding[1]));
  return NC_OK;
}

static nc_status check_float(const nc_tensor *t) {
  if (!nc_dtype_is_float(t->dtype))
    return nc_error(NC_ERR_DTYPE, "expected a float32, float64, bfloat16 or float16 tensor, got %s",
                    nc_dtype_name(t->dtype));
  return NC_OK;
}

nc_status nc_pool2d(nc_tensor *x, const nc_pool2d_desc *params, nc_tensor **out, nc_tensor **indices) {
  nc_pool2d_desc p = *params;
  NC_TRY(check_float(x));
  NC_TRY(plan(&p, x->ndim, x->shape));
  if (nc_dtype_is_storage(x->dtype)) {
    nc_tensor *wide, *y = NULL, *idx = NULL;
    NC_TRY(nc_widen_n(1, &x, &wide));
    nc_status s = nc_pool2d(wide, params, &y, indices ? &idx : NULL);
    nc_release_n(1, &wide);
    s = nc_round_result(s, y, x->dtype, out);
    if (s != NC_OK) {
      nc_tensor_release(idx);
      return s;
    }
    if (indices) *indices = idx;
    return NC_OK;
  }
  int64_t shape[4];
  for (int i = 0; i < x->ndim - 2; i++) shape[i] = x->shape[i];
  shape[x->ndim - 2] = p.oh;
  shape[x->ndim - 1] = p.ow;
  nc_device *dev = nc_tensor_device(x);
  nc_tensor *y = NULL, *idx = NULL, *cx = NULL;
  nc_status s = nc_tensor_empty(dev, x->dtype, x->ndim, shape, 0, &y);
  if (s == NC_OK && p.kind == NC_POOL_MAX) s = nc_tensor_empty(dev, NC_INT64, x->ndim, shape, 0, &idx);
  if (s == NC_OK) s = nc_dense_operand(x, &cx);
  if (s == NC_OK && nc_tensor_numel(y) > 0) s = nc_bk_pool2d(&p, cx, y, idx);
  nc_tensor_release(cx);
  if (s != NC_OK) {
    nc_tensor_release(y);
    nc_tensor_release(idx);
    return s;
  }
  *out = y;
  if (indices)
    *indices = idx;
  else
    nc_tensor_release(idx);
  return NC_OK;
}

nc_status nc_max_pool2d(nc_tensor *x, const nc_pool2d_desc *params, nc_tensor **out, nc_tensor **indices) {
  if (params->kind != NC_POOL_MAX)
    return nc_error(NC_ERR_ARG, "max_pool2d: parameters are for another pooling kind");
  return nc_pool2d(x, params, out, indices);
}

nc_status nc_avg_pool2d(nc_tensor *x, const nc_pool2d_desc *params, nc_tensor **out) {
  if (params->kind != NC_POOL_AVG)
    return nc_error(NC_ERR_ARG, "avg_pool2d: parameters are for another pooling kind");
  return nc_pool2d(x, params, out, NULL);
}

nc_status nc_adaptive_avg_pool2d(nc_tensor *x, int64_t oh, int64_t ow, nc_tensor **out) {
  nc_pool2d_desc p = {.kind = NC_POOL_ADAPTIVE_AVG, .out_size = {oh, ow}};
  return nc_pool2d(x, &p, out, NULL);
}

nc_status nc_pool2d_backward(nc_tensor *dy, nc_tensor *indices, int input_ndim, const int64_t *input_shape,
                             const nc_pool2d_desc *params, nc_tensor **dx) {
  nc_pool2d_desc p = *params;
  NC_TRY(check_float(dy));
  NC_TRY(nc_shape_check(input_ndim, input_shape));
  NC_TRY(plan(&p, input_ndim, input_shape));
  bool ok = dy->ndim == input_ndim && dy->shape[input_ndim - 2] == p.oh && dy->shape[input_ndim - 1] == p.ow;
  for (int i = 0; ok && i < input_ndim - 2; i++) ok = dy->shape[i] == input_shape[i];
  if (!ok) return nc_error(NC_ERR_SHAPE, "the output gradient does not have the pooled shape");
  nc_device *dev = nc_tensor_device(dy);
  nc_tensor *cidx = NULL;
  if (p.kind == NC_POOL_MAX) {
    if (!indices) return nc_error(NC_ERR_ARG, "max_pool2d backward needs the indices of the forward pass");
    if (indices->dtype != NC_INT64)
      return nc_error(NC_ERR_DTYPE, "max_pool2d backward: indices must be int64, got %s",
                      nc_dtype_name(indices->dtype));
    bool same = indices->ndim == dy->ndim && nc_tensor_device(indices) == dev;
    for (int i = 0; same && i < dy->ndim; i++) same = indices->shape[i] == dy->shape[i];
    if (!same)
      return nc_error(NC_ERR_SHAPE,
                      "max_pool2d backward: indices must have the output gradient's shape and device");
  }
  if (nc_dtype_is_storage(dy->dtype)) {
    nc_tensor *wide, *r = NULL;
    NC_TRY(nc_widen_n(1, &dy, &wide));
    nc_status s = nc_pool2d_backward(wide, indices, input_ndim, input_shape, params, &r);
    nc_release_n(1, &wide);
    return nc_round_result(s, r, dy->dtype, dx);
  }
  nc_tensor *r = NULL, *cdy = NULL;
  nc_status s = nc_tensor_empty(dev, dy->dtype, input_ndim, input_shape, 0, &r);
  if (s == NC_OK) s = nc_dense_operand(dy, &cdy);
  if (s == NC_OK && indices) s = nc_dense_operand(indices, &cidx);
  if (s == NC_OK && nc_tensor_numel(r) > 0) {
    if (nc_tensor_numel(dy) == 0)
      s = nc_fill(r, 0.0);
    else
      s = nc_bk_pool2d_bwd(&p, cdy, cidx, r);
  }
  nc_tensor_release(cdy);
  nc_tensor_release(cidx);
  if (s != NC_OK) {
    nc_tensor_release(r);
    return s;
  }
  *dx = r;
  return NC_OK;
}

nc_status nc_max_pool2d_backward(nc_tensor *dy, nc_tensor *indices, int input_ndim,
                                 const int64_t *input_shape, const nc_pool2d_desc *params, nc_tensor **dx) {
  if (params->kind != NC_POOL_MAX)
    return nc_error(NC_ERR_ARG, "max_pool2d: parameters are for another pooling kind");
  return nc_pool2d_backward(dy, indices, input_ndim, input_shape, params, dx);
}

nc_status nc_avg_pool2d_backward(nc_tensor *dy, int input_ndim, const int64_t *input_shape,
                                 const nc_pool2d_desc *params, nc_tensor **dx) {
  if (params->kind != NC_POOL_AVG)
    return nc_error(NC_ERR_ARG, "avg_pool2d: parameters are for another pooling kind");
  return nc_pool2d_backward(dy, NULL, input_ndim, input_shape, params, dx);
}

nc_status nc_adaptive_avg_pool2d_backward(nc_tensor *dy, int input_ndim, const int64_t *input_shape,
                                          nc_tensor **dx) {
  if (dy->ndim < 2)
    return nc_error(NC_ERR_SHAPE, "adaptive_avg_pool2d backward: the output gradient needs 2 or more dims");
  nc_pool2d_desc p = {.kind = NC_POOL_ADAPTIVE_AVG,
                      .out_size = {dy->shape[dy->ndim - 2], dy->shape[dy->ndim - 1]}};
  return nc_pool2d_backward(dy, NULL, input_ndim, input_shape, &p, dx);
}

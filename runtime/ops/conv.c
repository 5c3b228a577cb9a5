/* conv2d forward and gradients: geometry checks, contiguous operands, output allocation,
 * dispatch to the backend. bfloat16 and float16 operands (all of one dtype, as in PyTorch) go
 * through the float32 path: widened, convolved in float32, the result rounded once into their
 * dtype (ops/support.h). Where the backend takes bfloat16 tensors as they are
 * (nc_bk_conv2d_storage: the three passes on OpenCL under "medium", for most geometries), the
 * forward and the input gradient widen only the weights and bias (they are small), the weight
 * gradient nothing, and the backend rounds each result once, as the float32 path does. */
#include "backend/dispatch.h"
#include "core/check.h"
#include "support.h"
#include "core/device_impl.h"
#include "netcl/conv.h"
#include "netcl/copy.h"
#include "netcl/creation.h"
#include "ops/dense.h"
#include "ops/support.h"

static nc_status plan_shapes(nc_conv2d_desc *p, const int64_t *x, const int64_t *w) {
  for (int i = 0; i < 2; i++) {
    if (p->stride[i] < 1)
      return nc_error(NC_ERR_ARG, "stride must be >= 1, got %lld", (long long)p->stride[i]);
    if (p->dilation[i] < 1)
      return nc_error(NC_ERR_ARG, "dilation must be >= 1, got %lld", (long long)p->dilation[i]);
    if (p->padding[i] < 0)
      return nc_error(NC_ERR_ARG, "padding must be >= 0, got %lld", (long long)p->padding[i]);
  }
  if (p->groups < 1) return nc_error(NC_ERR_ARG, "groups must be >= 1, got %lld", (long long)p->groups);
  p->n = x[0], p->c_in = x[1], p->h = x[2], p->w = x[3];
  p->c_out = w[0], p->kh = w[2], p->kw = w[3];
  if (p->c_in % p->groups != 0)
    return nc_error(NC_ERR_SHAPE, "groups %lld does not divide the %lld input channels", (long long)p->groups,
                    (long long)p->c_in);
  if (p->c_out % p->groups != 0)
    return nc_error(NC_ERR_SHAPE, "groups %lld does not divide the %lld output channels",
                    (long long)p->groups, (long long)p->c_out);
  if (w[1] * p->groups != p->c_in)
    return nc_error(
        NC_ERR_SHAPE,
        "weight [%lld,%lld,%lld,%lld] expects %lld input channels (%lld per group x %lld groups), got %lld",
        (long long)w[0], (long long)w[1], (long long)w[2], (long long)w[3], (long long)(w[1] * p->groups),
        (long long)w[1], (long long)p->groups, (long long)p->c_in);
  if (p->kh < 1 || p->kw < 1)
    return nc_error(NC_ERR_SHAPE, "kernel %lldx%lld is empty", (long long)p->kh, (long long)p->kw);
  int64_t ekh = (p->kh - 1) * p->dilation[0] + 1, ekw = (p->kw - 1) * p->dilation[1] + 1;
  int64_t ph = p->h + 2 * p->padding[0], pw = p->w + 2 * p->padding[1];
  if (ekh > ph || ekw > pw)
    return nc_error(
        NC_ERR_SHAPE, "kernel %lldx%lld (%lldx%lld dilated) is larger than the padded input %lldx%lld",
        (long long)p->kh, (long long)p->kw, (long long)ekh, (long long)ekw, (long long)ph, (long long)pw);
  p->oh = (ph - ekh) / p->stride[0] + 1;
  p->ow = (pw - ekw) / p->stride[1] + 1;
  p->precision = nc_matmul_precision_level();
  return NC_OK;
}

static nc_status check_4d(const nc_tensor *t, const char *what) {
  if (t->ndim != 4) return nc_error(NC_ERR_SHAPE, "%s must be 4-D, got %d dims", what, t->ndim);
  return NC_OK;
}

nc_status nc_conv2d_plan(nc_conv2d_desc *p, const nc_tensor *x, const nc_tensor *weight) {
  NC_TRY(check_4d(x, "conv2d input [N,C,H,W]"));
  NC_TRY(check_4d(weight, "conv2d weight [O,C/groups,KH,KW]"));
  return plan_shapes(p, x->shape, weight->shape);
}

static nc_status same_float(const nc_tensor *a, const nc_tensor *b, const char *what) {
  if (!nc_dtype_is_float(a->dtype) || a->dtype != b->dtype)
    return nc_error(
        NC_ERR_DTYPE,
        "expected operands of one float dtype (float32, float64, bfloat16 or float16), got %s and %s",
        nc_dtype_name(a->dtype), nc_dtype_name(b->dtype));
  if (nc_tensor_device(a) != nc_tensor_device(b))
    return nc_error(NC_ERR_DEVICE, "tensors are on different devices");
  return NC_OK;
}

/* Contiguous copies of a and b (or the tensors themselves, retained). */

static nc_status dense_pair(nc_tensor *a, nc_tensor *b, nc_tensor **ca, nc_tensor **cb) {
  *ca = *cb = NULL;
  nc_status s = nc_dense_operand(a, ca);
  if (s == NC_OK) s = nc_dense_operand(b, cb);
  if (s != NC_OK) {
    nc_tensor_release(*ca);
    *ca = NULL;
  }
  return s;
}

static nc_status conv2d_run(const nc_conv2d_desc *p, nc_tensor *x, nc_tensor *weight, nc_tensor *bias,
                            nc_tensor **out);

nc_status nc_conv2d(nc_tensor *x, nc_tensor *weight, nc_tensor *bias, const nc_conv2d_desc *params,
                    nc_tensor **out) {
  nc_conv2d_desc p = *params;
  NC_TRY(same_float(x, weight, "conv2d"));
  NC_TRY(nc_conv2d_plan(&p, x, weight));
  if (bias) {
    NC_TRY(same_float(x, bias, "conv2d bias"));
    if (bias->ndim != 1 || bias->shape[0] != p.c_out)
      return nc_error(NC_ERR_SHAPE, "conv2d bias must have shape [%lld]", (long long)p.c_out);
  }
  nc_device *dev = nc_tensor_device(x);
  if (nc_dtype_is_storage(x->dtype)) {
    const bool direct = nc_bk_conv2d_storage(dev, NC_OP_CONV2D, &p, x->dtype);
    nc_tensor *in[3] = {direct ? NULL : x, weight, bias}, *wide[3], *y = NULL;
    NC_TRY(nc_widen_n(3, in, wide));
    nc_status s = direct ? conv2d_run(&p, x, wide[1], wide[2], out) : nc_conv2d(wide[0], wide[1], wide[2], params, &y);
    nc_release_n(3, wide);
    return direct ? s : nc_round_result(s, y, x->dtype, out);
  }
  return conv2d_run(&p, x, weight, bias, out);
}

/* y = conv2d(x, weight) + bias through the backend (y of x's dtype), planned and checked. */
static nc_status conv2d_run(const nc_conv2d_desc *pp, nc_tensor *x, nc_tensor *weight, nc_tensor *bias,
                            nc_tensor **out) {
  const nc_conv2d_desc p = *pp;
  int64_t shape[4] = {p.n, p.c_out, p.oh, p.ow};
  nc_device *dev = nc_tensor_device(x);
  nc_tensor *y, *cx, *cw, *cb = NULL;
  NC_TRY(nc_tensor_empty(dev, x->dtype, 4, shape, 0, &y));
  nc_status s = dense_pair(x, weight, &cx, &cw);
  if (s == NC_OK && bias) s = nc_dense_operand(bias, &cb);
  if (s == NC_OK && nc_tensor_numel(y) > 0) s = nc_bk_conv2d(&p, cx, cw, cb, y);
  nc_tensor_release(cx);
  nc_tensor_release(cw);
  nc_tensor_release(cb);
  if (s != NC_OK) {
    nc_tensor_release(y);
    return s;
  }
  *out = y;
  return NC_OK;
}

static nc_status check_dy(const nc_tensor *dy, const nc_conv2d_desc *p) {
  NC_TRY(check_4d(dy, "conv2d output gradient"));
  if (dy->shape[0] != p->n || dy->shape[1] != p->c_out || dy->shape[2] != p->oh || dy->shape[3] != p->ow)
    return nc_error(
        NC_ERR_SHAPE, "conv2d output gradient is [%lld,%lld,%lld,%lld], expected [%lld,%lld,%lld,%lld]",
        (long long)dy->shape[0], (long long)dy->shape[1], (long long)dy->shape[2], (long long)dy->shape[3],
        (long long)p->n, (long long)p->c_out, (long long)p->oh, (long long)p->ow);
  return NC_OK;
}

static nc_status backward_input_run(const nc_conv2d_desc *p, nc_tensor *dy, nc_tensor *weight,
                                    const int64_t input_shape[4], nc_tensor **dx);

nc_status nc_conv2d_backward_input(nc_tensor *dy, nc_tensor *weight, const int64_t input_shape[4],
                                   const nc_conv2d_desc *params, nc_tensor **dx) {
  nc_conv2d_desc p = *params;
  NC_TRY(same_float(dy, weight, "conv2d_backward_input"));
  NC_TRY(check_4d(weight, "conv2d weight [O,C/groups,KH,KW]"));
  NC_TRY(nc_shape_check(4, input_shape));
  NC_TRY(plan_shapes(&p, input_shape, weight->shape));
  NC_TRY(check_dy(dy, &p));
  nc_device *dev = nc_tensor_device(dy);
  if (nc_dtype_is_storage(dy->dtype)) {
    const bool direct = nc_bk_conv2d_storage(dev, NC_OP_CONV2D_BWD_INPUT, &p, dy->dtype);
    nc_tensor *in[2] = {direct ? NULL : dy, weight}, *wide[2], *r = NULL;
    NC_TRY(nc_widen_n(2, in, wide));
    nc_status s = direct ? backward_input_run(&p, dy, wide[1], input_shape, dx)
                         : nc_conv2d_backward_input(wide[0], wide[1], input_shape, params, &r);
    nc_release_n(2, wide);
    return direct ? s : nc_round_result(s, r, dy->dtype, dx);
  }
  return backward_input_run(&p, dy, weight, input_shape, dx);
}

/* dx (of dy's dtype) = conv2d's input gradient through the backend, planned and checked. */
static nc_status backward_input_run(const nc_conv2d_desc *pp, nc_tensor *dy, nc_tensor *weight,
                                    const int64_t input_shape[4], nc_tensor **dx) {
  const nc_conv2d_desc p = *pp;
  nc_device *dev = nc_tensor_device(dy);
  nc_tensor *r, *cdy, *cw;
  NC_TRY(nc_tensor_empty(dev, dy->dtype, 4, input_shape, 0, &r));
  nc_status s = dense_pair(dy, weight, &cdy, &cw);
  if (s == NC_OK && nc_tensor_numel(r) > 0) {
    if (nc_tensor_numel(dy) == 0)
      s = nc_fill(r, 0.0);
    else
      s = nc_bk_conv2d_bwd_input(&p, cdy, cw, r);
  }
  nc_tensor_release(cdy);
  nc_tensor_release(cw);
  if (s != NC_OK) {
    nc_tensor_release(r);
    return s;
  }
  *dx = r;
  return NC_OK;
}

nc_status nc_conv2d_backward_weight(nc_tensor *dy, nc_tensor *x, const int64_t weight_shape[4],
                                    const nc_conv2d_desc *params, nc_tensor **dw) {
  nc_conv2d_desc p = *params;
  /* a float32 dy beside a storage-dtype x (the tape's gradient of a bfloat16 activation): dw is
   * float32, the float32 op's on the widened x */
  const bool mixed = dy->dtype == NC_FLOAT32 && nc_dtype_is_storage(x->dtype);
  NC_TRY(same_float(mixed ? x : dy, x, "conv2d_backward_weight"));
  if (mixed && nc_tensor_device(dy) != nc_tensor_device(x))
    return nc_error(NC_ERR_DEVICE, "tensors are on different devices");
  NC_TRY(check_4d(x, "conv2d input [N,C,H,W]"));
  NC_TRY(nc_shape_check(4, weight_shape));
  NC_TRY(plan_shapes(&p, x->shape, weight_shape));
  NC_TRY(check_dy(dy, &p));
  nc_device *dev = nc_tensor_device(dy);
  if (nc_dtype_is_storage(x->dtype) && !nc_bk_conv2d_storage(dev, NC_OP_CONV2D_BWD_WEIGHT, &p, x->dtype)) {
    nc_tensor *in[2] = {dy, x}, *wide[2], *r = NULL;
    NC_TRY(nc_widen_n(2, in, wide));
    nc_status s = nc_conv2d_backward_weight(wide[0], wide[1], weight_shape, params, &r);
    nc_release_n(2, wide);
    return nc_round_result(s, r, dy->dtype, dw);
  }
  nc_tensor *r, *cdy, *cx;
  NC_TRY(nc_tensor_empty(dev, dy->dtype, 4, weight_shape, 0, &r));
  nc_status s = dense_pair(dy, x, &cdy, &cx);
  if (s == NC_OK && nc_tensor_numel(r) > 0) {
    if (nc_tensor_numel(dy) == 0)
      s = nc_fill(r, 0.0);
    else
      s = nc_bk_conv2d_bwd_weight(&p, cdy, cx, r);
  }
  nc_tensor_release(cdy);
  nc_tensor_release(cx);
  if (s != NC_OK) {
    nc_tensor_release(r);
    return s;
  }
  *dw = r;
  return NC_OK;
}

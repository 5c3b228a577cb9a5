/* Activations defined by their op-table rows (netcl/table_ops.h): elu, softplus, mish and
 * leaky_relu, and relu's gradient relu_backward (last). Each checks its input and numbers, takes
 * x contiguous (x itself when it already is, at any offset) and writes a new tensor of x's shape
 * and dtype through its backend kernel, in chunks of ACT_CHUNK elements: one OpenCL work-group
 * per chunk. A storage-dtype x (bfloat16, float16) goes through the float32 kernel: x widened
 * (exactly), the float32 result rounded once into x's dtype, as the elementwise families compute
 * those dtypes. */
#include <math.h>
#include "backend/dispatch.h"
#include "core/check.h"
#include "support.h"
#include "netcl/copy.h"
#include "netcl/table_ops.h"

/* Elements per work-group: 16 per work-item of a 256-wide group. */
#define ACT_CHUNK 4096

static nc_status check_finite(const char *what, double v) {
  if (isnan(v)) return nc_error(NC_ERR_ARG, "%s must be a finite number, got nan", what);
  if (!isfinite(v)) return nc_error(NC_ERR_ARG, "%s must be a finite number, got %g", what, v);
  return NC_OK;
}

static nc_status activation(nc_op op, nc_tensor *x, int nf, const double *f, nc_tensor **out);

/* op's kernel over the n elements of the contiguous tensors t[0 .. nt) (inputs, then the
 * output), in chunks of ACT_CHUNK, with the numbers f[0 .. nf). */
static nc_status run_chunks(nc_op op, int nt, nc_tensor *const *t, int64_t n, int nf, const double *f) {
  if (n == 0) return NC_OK;
  nc_kernel_call k = {
      .op = op, .nt = nt, .ni = 2, .i = {n, ACT_CHUNK}, .nf = nf, .rows = (n + ACT_CHUNK - 1) / ACT_CHUNK};
  for (int i = 0; i < nt; i++) k.t[i] = t[i];
  for (int i = 0; i < nf; i++) k.f[i] = f[i];
  return nc_bk_kernel(&k);
}

/* The storage dtypes: op on x as float32, rounded once into x's dtype (ops/support.h). */
static nc_status activation_storage(nc_op op, nc_tensor *x, int nf, const double *f, nc_tensor **out) {
  nc_tensor *wide, *y = NULL;
  NC_TRY(nc_widen_n(1, &x, &wide));
  nc_status s = activation(op, wide, nf, f, &y);
  nc_release_n(1, &wide);
  return nc_round_result(s, y, x->dtype, out);
}

/* y = op(x; f[0 .. nf)) */
static nc_status activation(nc_op op, nc_tensor *x, int nf, const double *f, nc_tensor **out) {
  if (!nc_op_accepts(op, x->dtype))
    return nc_error(NC_ERR_DTYPE, "expected a float32, float64, bfloat16 or float16 input, got %s",
                    nc_dtype_name(x->dtype));
  if (nc_dtype_is_storage(x->dtype)) return activation_storage(op, x, nf, f, out);
  const int64_t n = nc_tensor_numel(x);
  nc_tensor *xc, *y = NULL;
  NC_TRY(nc_contiguous(x, &xc));
  nc_status s = nc_tensor_empty(nc_tensor_device(x), x->dtype, x->ndim, x->shape, 0, &y);
  if (s == NC_OK) s = run_chunks(op, 2, (nc_tensor *[]){xc, y}, n, nf, f);
  nc_tensor_release(xc);
  if (s != NC_OK) {
    nc_tensor_release(y);
    return s;
  }
  *out = y;
  return NC_OK;
}

nc_status nc_elu(nc_tensor *x, double alpha, nc_tensor **out) {
  NC_TRY(check_finite("alpha", alpha));
  return activation(NC_OP_ELU, x, 1, &alpha, out);
}

nc_status nc_softplus(nc_tensor *x, double beta, double threshold, nc_tensor **out) {
  NC_TRY(check_finite("beta", beta));
  NC_TRY(check_finite("threshold", threshold));
  if (beta == 0) return nc_error(NC_ERR_ARG, "beta must not be 0");
  const double f[2] = {beta, threshold};
  return activation(NC_OP_SOFTPLUS, x, 2, f, out);
}

nc_status nc_mish(nc_tensor *x, nc_tensor **out) { return activation(NC_OP_MISH, x, 0, NULL, out); }

nc_status nc_leaky_relu(nc_tensor *x, double negative_slope, nc_tensor **out) {
  NC_TRY(check_finite("negative_slope", negative_slope));
  return activation(NC_OP_LEAKY_RELU, x, 1, &negative_slope, out);
}

/* t contiguous in dtype dt: t itself (retained) when it already is, else a copy. */
static nc_status contiguous_as(nc_tensor *t, nc_dtype dt, nc_tensor **out) {
  if (t->dtype == dt) return nc_contiguous(t, out);
  return nc_to(t, nc_tensor_device(t), dt, out);
}

/* relu_backward's kernels take dy float32 or float64 with y of dy's dtype, or a storage y beside a
 * float32 dy, as it is. Other pairs get there exactly: a storage dy is widened (the result rounded
 * back into its dtype: exact, it holds dy's values and zeros), and dy and y of float32 and float64
 * both go to float64 (a float64 y keeps its sign and zeros). */
nc_status nc_relu_backward(nc_tensor *dy, nc_tensor *y, nc_tensor **out) {
  if (!dy || !y) return nc_error(NC_ERR_ARG, "relu_backward needs dy and y");
  if (!nc_dtype_is_float(dy->dtype) || !nc_dtype_is_float(y->dtype))
    return nc_error(NC_ERR_DTYPE, "relu_backward takes float tensors, got dy %s and y %s",
                    nc_dtype_name(dy->dtype), nc_dtype_name(y->dtype));
  nc_device *dev = nc_tensor_device(dy);
  if (nc_tensor_device(y) != dev)
    return nc_error(NC_ERR_DEVICE, "relu_backward: dy and y are on different devices");
  bool same = dy->ndim == y->ndim;
  for (int i = 0; same && i < dy->ndim; i++) same = dy->shape[i] == y->shape[i];
  if (!same) {
    char a[96], b[96];
    return nc_error(NC_ERR_SHAPE, "relu_backward: dy %s and y %s differ in shape",
                    nc_shape_str(dy->ndim, dy->shape, a, sizeof a),
                    nc_shape_str(y->ndim, y->shape, b, sizeof b));
  }
  /* the dtypes the kernel reads dy and y in */
  const nc_dtype gd = dy->dtype == NC_FLOAT64 || y->dtype == NC_FLOAT64 ? NC_FLOAT64 : NC_FLOAT32;
  const nc_dtype yd = nc_dtype_is_storage(y->dtype) && gd == NC_FLOAT32 ? y->dtype : gd;
  const int64_t n = nc_tensor_numel(dy);
  nc_tensor *g = NULL, *yc = NULL, *dx = NULL;
  nc_status s = contiguous_as(dy, gd, &g);
  if (s == NC_OK) s = contiguous_as(y, yd, &yc);
  if (s == NC_OK) s = nc_tensor_empty(dev, gd, dy->ndim, dy->shape, 0, &dx);
  if (s == NC_OK) s = run_chunks(NC_OP_RELU_BWD, 3, (nc_tensor *[]){g, yc, dx}, n, 0, NULL);
  nc_tensor_release(g);
  nc_tensor_release(yc);
  if (s != NC_OK) {
    nc_tensor_release(dx);
    return s;
  }
  return nc_round_result(NC_OK, dx, dy->dtype, out);
}

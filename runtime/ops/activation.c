/* Activations defined by their op-table rows (netcl/table_ops.h): elu, softplus, mish and
 * leaky_relu. Each checks its input and numbers, takes x contiguous (x itself when it already is,
 * at any offset) and writes a new tensor of x's shape and dtype through its backend kernel, in
 * chunks of ACT_CHUNK elements: one OpenCL work-group per chunk. A storage-dtype x (bfloat16,
 * float16) goes through the float32 kernel: x widened (exactly), the float32 result rounded once
 * into x's dtype, as the elementwise families compute those dtypes. */
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
  if (s == NC_OK && n > 0) {
    nc_kernel_call k = {.op = op,
                        .nt = 2,
                        .t = {xc, y},
                        .ni = 2,
                        .i = {n, ACT_CHUNK},
                        .nf = nf,
                        .rows = (n + ACT_CHUNK - 1) / ACT_CHUNK};
    for (int i = 0; i < nf; i++) k.f[i] = f[i];
    s = nc_bk_kernel(&k);
  }
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

/* Image transforms on batches [N, C, H, W] (op-table rows resized_crop, adjust_color,
 * gaussian_blur): checks, contiguous operands, the output, dispatch. */
#include <math.h>
#include "backend/dispatch.h"
#include "core/check.h"
#include "netcl/copy.h"
#include "netcl/table_ops.h"

#define BLUR_MAX 63

static nc_status check_images(const nc_tensor *x) {
  if (!nc_dtype_is_float(x->dtype))
    return nc_error(NC_ERR_DTYPE, "expected float32 or float64 images, got %s (convert uint8 images first)",
                    nc_dtype_name(x->dtype));
  if (x->ndim != 4) return nc_error(NC_ERR_SHAPE, "expected images [N, C, H, W], got %d dims", x->ndim);
  return NC_OK;
}

/* params: x's dtype and device, shape [N, cols] (cols 0: [N]). */
static nc_status check_params(const nc_tensor *p, const nc_tensor *x, int64_t cols, const char *what) {
  if (p->dtype != x->dtype)
    return nc_error(NC_ERR_DTYPE, "%s are %s but the images are %s", what, nc_dtype_name(p->dtype),
                    nc_dtype_name(x->dtype));
  if (nc_tensor_device(p) != nc_tensor_device(x)) return nc_error(NC_ERR_DEVICE, "%s are on another device", what);
  bool ok = cols ? p->ndim == 2 && p->shape[0] == x->shape[0] && p->shape[1] == cols
                 : p->ndim == 1 && p->shape[0] == x->shape[0];
  if (!ok) {
    if (cols) return nc_error(NC_ERR_SHAPE, "%s must have shape [%lld, %lld]", what, (long long)x->shape[0], (long long)cols);
    return nc_error(NC_ERR_SHAPE, "%s must have shape [%lld]", what, (long long)x->shape[0]);
  }
  return NC_OK;
}

/* y [N, C, oh, ow] = op(x, params), one row of work per plane (per_sample: per sample). */
static nc_status run(nc_op op, nc_tensor *x, nc_tensor *params, int64_t oh, int64_t ow, bool per_sample, int ni,
                     const int64_t *ints, int nf, const double *f, nc_tensor **out) {
  const int64_t shape[4] = {x->shape[0], x->shape[1], oh, ow};
  nc_tensor *xc = NULL, *pc = NULL, *y = NULL;
  nc_status s = nc_contiguous(x, &xc);
  if (s == NC_OK) s = nc_contiguous(params, &pc);
  if (s == NC_OK) s = nc_tensor_empty(nc_tensor_device(x), x->dtype, 4, shape, 0, &y);
  if (s == NC_OK && nc_tensor_numel(y) > 0) {
    nc_kernel_call k = {.op = op, .nt = 3, .t = {xc, pc, y}, .ni = ni, .nf = nf};
    for (int i = 0; i < ni; i++) k.i[i] = ints[i];
    for (int i = 0; i < nf; i++) k.f[i] = f[i];
    k.rows = per_sample ? x->shape[0] : x->shape[0] * x->shape[1];
    s = nc_bk_kernel(&k);
  }
  nc_tensor_release(xc);
  nc_tensor_release(pc);
  if (s != NC_OK) {
    nc_tensor_release(y);
    return s;
  }
  *out = y;
  return NC_OK;
}

nc_status nc_resized_crop(nc_tensor *x, nc_tensor *boxes, int64_t height, int64_t width, double fill,
                          nc_tensor **out) {
  NC_TRY(check_images(x));
  NC_TRY(check_params(boxes, x, 5, "boxes"));
  if (height < 1 || width < 1)
    return nc_error(NC_ERR_ARG, "the output size must be at least 1 x 1, got %lld x %lld", (long long)height,
                    (long long)width);
  if (x->shape[2] < 1 || x->shape[3] < 1) return nc_error(NC_ERR_SHAPE, "the images are empty (H or W is 0)");
  if (!isfinite(fill)) return nc_error(NC_ERR_ARG, "fill must be a finite number, got %g", fill);
  const int64_t ints[5] = {x->shape[1], x->shape[2], x->shape[3], height, width};
  return run(NC_OP_RESIZED_CROP, x, boxes, height, width, false, 5, ints, 1, &fill, out);
}

nc_status nc_adjust_color(nc_tensor *x, nc_tensor *factors, nc_tensor **out) {
  NC_TRY(check_images(x));
  if (x->shape[1] != 3) return nc_error(NC_ERR_SHAPE, "expected RGB images (3 channels), got %lld", (long long)x->shape[1]);
  NC_TRY(check_params(factors, x, 6, "factors"));
  const int64_t hw = x->shape[2] * x->shape[3];
  return run(NC_OP_ADJUST_COLOR, x, factors, x->shape[2], x->shape[3], true, 1, &hw, 0, NULL, out);
}

nc_status nc_gaussian_blur(nc_tensor *x, nc_tensor *sigmas, int64_t kernel_size, nc_tensor **out) {
  NC_TRY(check_images(x));
  NC_TRY(check_params(sigmas, x, 0, "sigmas"));
  if (kernel_size < 1 || kernel_size % 2 == 0 || kernel_size > BLUR_MAX)
    return nc_error(NC_ERR_ARG, "kernel_size must be odd, in 1..%d, got %lld", BLUR_MAX, (long long)kernel_size);
  if (kernel_size / 2 >= x->shape[2] || kernel_size / 2 >= x->shape[3])
    return nc_error(NC_ERR_ARG, "kernel_size %lld is too large for %lld x %lld images (reflected borders need "
                    "kernel_size / 2 < H and W)", (long long)kernel_size, (long long)x->shape[2], (long long)x->shape[3]);
  const int64_t ints[4] = {x->shape[1], x->shape[2], x->shape[3], kernel_size};
  return run(NC_OP_GAUSSIAN_BLUR, x, sigmas, x->shape[2], x->shape[3], false, 4, ints, 0, NULL, out);
}

#include "backend/dispatch.h"
#include "core/check.h"
#include "core/device_impl.h"
#include "netcl/creation.h"

static nc_status need_contiguous(const nc_tensor *t, const char *op) {
  if (!nc_tensor_is_contiguous(t))
    return nc_error(NC_ERR_ARG, "%s: the output tensor must be contiguous", op);
  return NC_OK;
}

nc_status nc_fill(nc_tensor *t, double value) {
  if (nc_tensor_numel(t) == 0) return NC_OK;
  nc_storage_bump_version(t->storage);
  return nc_bk_fill(t, value);
}

nc_status nc_arange_fill(nc_tensor *t, double start, double step) {
  NC_TRY(need_contiguous(t, "arange"));
  if (nc_tensor_numel(t) == 0) return NC_OK;
  nc_storage_bump_version(t->storage);
  return nc_bk_arange(t, start, step);
}

static nc_status random_fill(nc_tensor *t, nc_rng *g, nc_op kind, double a, double b, const char *op) {
  if (!nc_dtype_is_float(t->dtype))
    return nc_error(NC_ERR_DTYPE, "%s: needs a floating dtype, got %s", op, nc_dtype_name(t->dtype));
  NC_TRY(need_contiguous(t, op));
  int64_t n = nc_tensor_numel(t);
  if (n == 0) return NC_OK;
  nc_storage_bump_version(t->storage);
  NC_TRY(nc_bk_random(kind, t, g->seed, g->offset, a, b));
  g->offset += (uint64_t)n;
  return NC_OK;
}

nc_status nc_uniform(nc_tensor *t, nc_rng *g, double lo, double hi) {
  if (!(lo <= hi)) return nc_error(NC_ERR_ARG, "uniform: needs lo <= hi, got [%g, %g)", lo, hi);
  return random_fill(t, g, NC_OP_UNIFORM, lo, hi, "uniform");
}

nc_status nc_normal(nc_tensor *t, nc_rng *g, double mean, double std) {
  if (!(std >= 0)) return nc_error(NC_ERR_ARG, "normal: std must be >= 0, got %g", std);
  return random_fill(t, g, NC_OP_NORMAL, mean, std, "normal");
}

/* bernoulli, randint and randperm: draws into a contiguous tensor (a temporary when the
 * destination is strided or of another dtype), so element i always uses counter offset + i. */
#include <math.h>
#include "core/check.h"
#include "support.h"
#include "netcl/creation.h"
#include "netcl/sort.h"

/* Runs one backend draw of dtype dt over t's shape and stores it into t. */
static nc_status draw_into(nc_tensor *t, nc_dtype dt, nc_op op, nc_tensor *p, nc_rng *g, int64_t lo,
                           uint64_t range) {
  NC_TRY(nc_check_writable(t));
  int64_t n = nc_tensor_numel(t);
  if (n == 0) return NC_OK;
  nc_device *dev = nc_tensor_device(t);
  nc_tensor *work = t;
  if (t->dtype != dt || !nc_tensor_is_contiguous(t))
    NC_TRY(nc_tensor_empty(dev, dt, t->ndim, t->shape, 0, &work));
  nc_storage_bump_version(t->storage);
  nc_status s = nc_bk_sample(op, work, p, g->seed, g->offset, lo, range);
  if (s == NC_OK) g->offset += (uint64_t)n;
  if (s == NC_OK && work != t) s = nc_copy(t, work);
  if (work != t) nc_tensor_release(work);
  return s;
}

nc_status nc_bernoulli(nc_tensor *t, nc_rng *g, nc_tensor *p, double prob) {
  nc_device *dev = nc_tensor_device(t);
  nc_tensor *pt = NULL, *pe = NULL;
  nc_status s = NC_OK;
  if (p) {
    if (!nc_dtype_is_float(p->dtype))
      return nc_error(NC_ERR_DTYPE, "bernoulli probabilities must be float32 or float64, got %s",
                      nc_dtype_name(p->dtype));
    NC_TRY(nc_check_devices(dev, 1, &p));
    s = nc_input_for(p, p->dtype, t, &pt);
  } else {
    if (!(prob >= 0 && prob <= 1))
      return nc_error(NC_ERR_ARG, "bernoulli probability %g is outside [0, 1]", prob);
    /* float32 on every device, so devices without float64 draw the same numbers */
    s = nc_tensor_empty(dev, NC_FLOAT32, 0, NULL, 0, &pt);
    if (s == NC_OK) s = nc_fill(pt, prob);
  }
  if (s == NC_OK) {
    s = nc_tensor_expand(pt, t->ndim, t->shape, &pe);
    if (s != NC_OK) {
      char a[128], b[128];
      s = nc_error(NC_ERR_SHAPE, "probabilities of shape %s cannot be broadcast to %s",
                   nc_shape_str(pt->ndim, pt->shape, a, sizeof a),
                   nc_shape_str(t->ndim, t->shape, b, sizeof b));
    }
  }
  if (s == NC_OK) s = draw_into(t, pt->dtype, NC_OP_BERNOULLI, pe, g, 0, 0);
  nc_tensor_release(pe);
  nc_tensor_release(pt);
  return s;
}

nc_status nc_randint(nc_tensor *t, nc_rng *g, int64_t lo, int64_t hi) {
  if (lo >= hi)
    return nc_error(NC_ERR_ARG, "randint needs lo < hi, got [%lld, %lld)", (long long)lo, (long long)hi);
  if (t->dtype != NC_INT64 && t->dtype != NC_FLOAT64 && t->dtype != NC_FLOAT32) {
    int64_t tmin, tmax;
    nc_dtype_int_range(t->dtype, &tmin, &tmax);
    if (lo < tmin || hi - 1 > tmax)
      return nc_error(NC_ERR_ARG, "randint range [%lld, %lld) does not fit %s", (long long)lo, (long long)hi,
                      nc_dtype_name(t->dtype));
  }
  return draw_into(t, NC_INT64, NC_OP_RANDINT, NULL, g, lo, (uint64_t)hi - (uint64_t)lo);
}

nc_status nc_randperm(nc_tensor *t, nc_rng *g) {
  if (t->ndim != 1) return nc_error(NC_ERR_SHAPE, "randperm fills a 1-dim tensor, got %d dims", t->ndim);
  if (!nc_op_accepts(NC_OP_RANDPERM, t->dtype))
    return nc_error(NC_ERR_DTYPE, "randperm does not fill %s tensors", nc_dtype_name(t->dtype));
  int64_t n = t->shape[0];
  if (n == 0) return NC_OK;
  int64_t tmin, tmax;
  nc_dtype_int_range(t->dtype, &tmin, &tmax);
  if (!nc_dtype_is_float(t->dtype) && n - 1 > tmax)
    return nc_error(NC_ERR_ARG, "randperm of %lld does not fit %s", (long long)n, nc_dtype_name(t->dtype));
  nc_tensor *keys = NULL, *perm = NULL;
  nc_status s = nc_tensor_empty(nc_tensor_device(t), NC_INT64, 1, &n, 0, &keys);
  /* 62-bit keys: ties are rare, and sort breaks them by position, so the result is exact */
  if (s == NC_OK) s = nc_randint(keys, g, 0, INT64_C(1) << 62);
  if (s == NC_OK) s = nc_sort(keys, 0, false, NULL, &perm);
  if (s == NC_OK) s = nc_copy(t, perm);
  nc_tensor_release(perm);
  nc_tensor_release(keys);
  return s;
}

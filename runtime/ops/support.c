#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "support.h"

const char *nc_shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
  size_t len = 0;
  buf[0] = 0;
  len += (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && len < n; i++)
    len += (size_t)snprintf(buf + len, n - len, "%s%lld", i ? "," : "", (long long)shape[i]);
  if (len < n) snprintf(buf + len, n - len, "]");
  return buf;
}

nc_status nc_check_devices(nc_device *dev, int n, nc_tensor *const *ts) {
  for (int i = 0; i < n; i++) {
    if (!ts[i]) continue;
    nc_device *d = nc_tensor_device(ts[i]);
    if (d != dev)
      return nc_error(NC_ERR_DEVICE, "tensors are on different devices (%s and %s); move one with :to()",
                      nc_device_info_of(dev)->spec, nc_device_info_of(d)->spec);
  }
  return NC_OK;
}

static void extent(const nc_tensor *t, int64_t *lo, int64_t *hi) {
  int64_t first = t->offset;
  int64_t last = first;
  for (int i = 0; i < t->ndim; i++) {
    int64_t span = (t->shape[i] - 1) * t->strides[i];
    if (span < 0)
      first += span;
    else
      last += span;
  }
  size_t es = nc_dtype_size(t->dtype);
  *lo = first * (int64_t)es;
  *hi = (last + 1) * (int64_t)es;
}

bool nc_tensors_overlap(const nc_tensor *a, const nc_tensor *b) {
  if (a->storage != b->storage || nc_tensor_numel(a) == 0 || nc_tensor_numel(b) == 0) return false;
  int64_t alo, ahi, blo, bhi;
  extent(a, &alo, &ahi);
  extent(b, &blo, &bhi);
  return alo < bhi && blo < ahi;
}

bool nc_same_layout(const nc_tensor *a, const nc_tensor *b) {
  if (a->storage != b->storage || a->offset != b->offset || a->ndim != b->ndim || a->dtype != b->dtype)
    return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i] || (a->shape[i] > 1 && a->strides[i] != b->strides[i])) return false;
  return true;
}

nc_status nc_check_not_storage(const nc_tensor *a, const nc_tensor *b) {
  if (a && nc_dtype_is_storage(a->dtype)) return nc_storage_dtype_error(a->dtype);
  if (b && nc_dtype_is_storage(b->dtype)) return nc_storage_dtype_error(b->dtype);
  return NC_OK;
}

nc_status nc_widen_n(int n, nc_tensor *const *in, nc_tensor **out) {
  for (int i = 0; i < n; i++) out[i] = NULL;
  for (int i = 0; i < n; i++) {
    if (!in[i]) continue;
    if (!nc_dtype_is_storage(in[i]->dtype)) {
      out[i] = nc_tensor_retain(in[i]);
      continue;
    }
    nc_status s = nc_to(in[i], nc_tensor_device(in[i]), NC_FLOAT32, &out[i]);
    if (s != NC_OK) {
      out[i] = NULL;
      nc_release_n(i, out);
      return s;
    }
  }
  return NC_OK;
}

void nc_release_n(int n, nc_tensor **t) {
  for (int i = 0; i < n; i++) {
    nc_tensor_release(t[i]);
    t[i] = NULL;
  }
}

nc_status nc_round_result(nc_status s, nc_tensor *r, nc_dtype dt, nc_tensor **out) {
  if (s != NC_OK || !out || !r) {
    nc_tensor_release(r);
    return s;
  }
  if (r->dtype == dt) {
    *out = r;
    return NC_OK;
  }
  s = nc_to(r, nc_tensor_device(r), dt, out);
  nc_tensor_release(r);
  return s;
}

nc_status nc_check_writable(const nc_tensor *dst) {
  for (int i = 0; i < dst->ndim; i++)
    if (dst->shape[i] > 1 && dst->strides[i] == 0)
      return nc_error(NC_ERR_ARG,
                      "cannot write into an expanded tensor (several elements share memory); "
                      "use contiguous() or clone() first");
  return NC_OK;
}

bool nc_dtype_castable(nc_dtype from, nc_dtype to) {
  if (nc_dtype_is_float(from)) return nc_dtype_is_float(to);
  if (from == NC_BOOL) return true;
  return to != NC_BOOL;
}

nc_status nc_check_dst(const nc_tensor *dst, int ndim, const int64_t *shape, nc_dtype res) {
  bool same = dst->ndim == ndim;
  for (int i = 0; same && i < ndim; i++) same = dst->shape[i] == shape[i];
  if (!same) {
    char a[128], b[128];
    return nc_error(NC_ERR_SHAPE, "the destination has shape %s but the result has shape %s",
                    nc_shape_str(dst->ndim, dst->shape, a, sizeof a), nc_shape_str(ndim, shape, b, sizeof b));
  }
  if (!nc_dtype_castable(res, dst->dtype))
    return nc_error(NC_ERR_DTYPE, "result type %s can't be cast to the destination's %s", nc_dtype_name(res),
                    nc_dtype_name(dst->dtype));
  return nc_check_writable(dst);
}

nc_status nc_input_for(nc_tensor *x, nc_dtype dt, const nc_tensor *dst, nc_tensor **out) {
  bool alias = dst && nc_tensors_overlap(x, dst) && !nc_same_layout(x, dst);
  if (x->dtype == dt && !alias) {
    *out = nc_tensor_retain(x);
    return NC_OK;
  }
  return nc_to(x, nc_tensor_device(x), dt, out);
}

void nc_dtype_int_range(nc_dtype dt, int64_t *lo, int64_t *hi) {
  switch (dt) {
    case NC_INT32:
      *lo = INT32_MIN, *hi = INT32_MAX;
      break;
    case NC_UINT8:
      *lo = 0, *hi = 255;
      break;
    case NC_BOOL:
      *lo = 0, *hi = 1;
      break;
    default:
      *lo = INT64_MIN, *hi = INT64_MAX;
      break;
  }
}

nc_scalar nc_scalar_cast(nc_scalar s, nc_dtype dt) {
  if (nc_dtype_is_float(dt)) return nc_scalar_float(s.is_int ? (double)s.i : s.f);
  if (dt == NC_BOOL) return nc_scalar_int(s.is_int ? s.i != 0 : s.f != 0);
  if (s.is_int) return s;
  if (!isfinite(s.f)) return nc_scalar_int(0);
  return nc_scalar_int(s.f >= 9.2e18 ? INT64_MAX : s.f <= -9.2e18 ? INT64_MIN : (int64_t)s.f);
}

nc_status nc_check_dim(int dim, int ndim) {
  if (dim < 0 || dim >= (ndim ? ndim : 1))
    return nc_error(NC_ERR_INDEX, "dim %d is out of range for a tensor with %d dims", dim + 1, ndim);
  return NC_OK;
}

/* ---- index verdicts ------------------------------------------------------------------------------ */
typedef struct {
  const char *op, *fmt;
  nc_tensor *idx;
  int64_t a, b;
} index_report;

/* The index at 0-based flat position pos of a dense int64 or int32 tensor (0 if unreadable). */
static int64_t index_value(nc_tensor *idx, int64_t pos) {
  int64_t n = nc_tensor_numel(idx), v = 0;
  nc_tensor *flat = NULL, *one = NULL;
  if (nc_tensor_view(idx, 1, &n, &flat) == NC_OK && nc_tensor_narrow(flat, 0, pos, 1, &one) == NC_OK) {
    if (idx->dtype == NC_INT64) {
      nc_read_values(one, &v, sizeof v);
    } else {
      int32_t v32 = 0;
      nc_read_values(one, &v32, sizeof v32);
      v = v32;
    }
  }
  nc_tensor_release(flat), nc_tensor_release(one);
  return v;
}

static nc_status index_error(const index_report *r, int64_t position, bool deferred) {
  char msg[256];
  snprintf(msg, sizeof msg, r->fmt, (long long)index_value(r->idx, position - 1), (long long)position,
           (long long)r->a, (long long)r->b);
  if (deferred)
    return nc_error(NC_ERR_INDEX, "%s: %s (found on the device, reported at this sync point)", r->op, msg);
  return nc_error(NC_ERR_INDEX, "%s", msg);
}

static nc_status report_deferred(void *ud, int64_t position) { return index_error(ud, position, true); }

static void free_report(void *ud) {
  index_report *r = ud;
  nc_tensor_release(r->idx);
  free(r);
}

nc_status nc_index_verdict_settle(nc_index_verdict *v, const char *op, nc_tensor *idx, const char *fmt, int64_t a,
                                  int64_t b) {
  index_report now = {op, fmt, idx, a, b};
  if (!v->flag) return v->bad > 0 ? index_error(&now, v->bad, false) : NC_OK;
  nc_tensor *flag = v->flag;
  v->flag = NULL;
  index_report *r = malloc(sizeof *r);
  nc_status s = NC_OK;
  if (!r) {
    s = nc_error(NC_ERR_OOM, "out of host memory for a pending index check");
  } else {
    *r = now;
    r->idx = nc_tensor_retain(idx);
    s = nc_device_defer_check(nc_tensor_device(flag), flag->storage, (size_t)flag->offset * sizeof(int32_t),
                              report_deferred, r, free_report);
  }
  nc_tensor_release(flag);
  return s;
}

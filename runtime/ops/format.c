/* tostring for tensors, after PyTorch's layout: one format for every element (fixed, integral
 * or scientific, chosen from the values shown), aligned columns, and "..." past 1000 elements. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "netcl/copy.h"
#include "netcl/format.h"
#include "netcl/half.h"

#define SUMMARY_THRESHOLD 1000
#define EDGE 3

typedef struct {
  char *buf;
  size_t len, cap;
  bool oom;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) {
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int n = vsnprintf(b->buf + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < b->cap - b->len) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = (b->cap + (size_t)n + 1) * 2;
    char *p = realloc(b->buf, cap);
    if (!p) {
      b->oom = true;
      return;
    }
    b->buf = p;
    b->cap = cap;
  }
}

typedef struct {
  const nc_tensor *t;
  const void *vals; /* contiguous host copy */
  bool summarize;
  enum { F_FIXED, F_INT_VALUED, F_SCI, F_INT, F_BOOL } mode;
  int width;
} fmt_ctx;

static double as_double(const fmt_ctx *c, int64_t i) {
  switch (c->t->dtype) {
    case NC_FLOAT32: return ((const float *)c->vals)[i];
    case NC_FLOAT64: return ((const double *)c->vals)[i];
    case NC_INT32: return ((const int32_t *)c->vals)[i];
    case NC_INT64: return (double)((const int64_t *)c->vals)[i];
    case NC_BFLOAT16:
    case NC_FLOAT16: return nc_half_to_double(c->t->dtype, ((const uint16_t *)c->vals)[i]);
    default: return ((const uint8_t *)c->vals)[i];
  }
}

static int element(const fmt_ctx *c, int64_t i, char *out, size_t n) {
  if (c->mode == F_BOOL) return snprintf(out, n, "%s", ((const uint8_t *)c->vals)[i] ? "True" : "False");
  if (c->mode == F_INT) {
    long long v = c->t->dtype == NC_INT64 ? (long long)((const int64_t *)c->vals)[i] : (long long)as_double(c, i);
    return snprintf(out, n, "%lld", v);
  }
  double v = as_double(c, i);
  if (isnan(v)) return snprintf(out, n, "nan");
  if (isinf(v)) return snprintf(out, n, v > 0 ? "inf" : "-inf");
  if (c->mode == F_INT_VALUED) return snprintf(out, n, "%.0f.", v);
  if (c->mode == F_SCI) return snprintf(out, n, "%.4e", v);
  return snprintf(out, n, "%.4f", v);
}

/* Calls fn on each flat index that will be shown. */
static void visit(const fmt_ctx *c, int dim, int64_t base, void (*fn)(fmt_ctx *, int64_t), fmt_ctx *ud) {
  const nc_tensor *t = c->t;
  if (dim == t->ndim) {
    fn(ud, base);
    return;
  }
  int64_t n = t->shape[dim], stride = 1;
  for (int d = dim + 1; d < t->ndim; d++) stride *= t->shape[d];
  for (int64_t i = 0; i < n; i++) {
    if (c->summarize && n > 2 * EDGE && i == EDGE) i = n - EDGE;
    visit(c, dim + 1, base + i * stride, fn, ud);
  }
}

static _Thread_local struct { double max_abs, min_abs; bool all_int, any_finite; int width; } scan;

static void scan_value(fmt_ctx *c, int64_t i) {
  double v = as_double(c, i);
  if (!isfinite(v)) return;
  double a = fabs(v);
  scan.any_finite = true;
  if (a > scan.max_abs) scan.max_abs = a;
  if (a != 0 && a < scan.min_abs) scan.min_abs = a;
  if (v != floor(v)) scan.all_int = false;
}

static void measure(fmt_ctx *c, int64_t i) {
  char tmp[64];
  int w = element(c, i, tmp, sizeof tmp);
  if (w > scan.width) scan.width = w;
}

static void emit(const fmt_ctx *c, sbuf *b, int dim, int64_t base, int indent) {
  const nc_tensor *t = c->t;
  if (dim == t->ndim) {
    char tmp[64];
    element(c, base, tmp, sizeof tmp);
    sb_add(b, "%*s", c->width, tmp);
    return;
  }
  int64_t n = t->shape[dim], stride = 1;
  for (int d = dim + 1; d < t->ndim; d++) stride *= t->shape[d];
  sb_add(b, "[");
  for (int64_t i = 0; i < n; i++) {
    if (i > 0) {
      if (dim == t->ndim - 1) {
        sb_add(b, ", ");
      } else {
        sb_add(b, ",");
        for (int k = 0; k < t->ndim - dim - 1; k++) sb_add(b, "\n");
        sb_add(b, "%*s", indent + dim + 1, "");
      }
    }
    if (c->summarize && n > 2 * EDGE && i == EDGE) {
      sb_add(b, "...");
      i = n - EDGE - 1;
      continue;
    }
    emit(c, b, dim + 1, base + i * stride, indent);
  }
  sb_add(b, "]");
}

nc_status nc_tensor_format(nc_tensor *t, char **out) {
  sbuf b = {0};
  int64_t numel = nc_tensor_numel(t);
  const nc_device_info *info = nc_device_info_of(nc_tensor_device(t));
  void *vals = NULL;
  if (numel > 0) {
    size_t nbytes = nc_tensor_nbytes(t);
    vals = malloc(nbytes);
    if (!vals) return nc_error(NC_ERR_OOM, "out of host memory formatting a tensor of %zu bytes", nbytes);
    nc_status s = nc_read_values(t, vals, nbytes);
    if (s != NC_OK) {
      free(vals);
      return s;
    }
  }
  fmt_ctx c = {.t = t, .vals = vals, .summarize = numel > SUMMARY_THRESHOLD};
  if (t->dtype == NC_BOOL) c.mode = F_BOOL;
  else if (!nc_dtype_is_float(t->dtype)) c.mode = F_INT;
  else {
    scan.max_abs = 0;
    scan.min_abs = INFINITY;
    scan.all_int = true;
    scan.any_finite = false;
    if (numel > 0) visit(&c, 0, 0, scan_value, &c);
    if (scan.any_finite && scan.all_int && scan.max_abs < 1e8) c.mode = F_INT_VALUED;
    else if (scan.any_finite && (scan.max_abs >= 1e8 || scan.min_abs < 1e-4 ||
                                 (scan.min_abs > 0 && scan.max_abs / scan.min_abs > 1e3)))
      c.mode = F_SCI;
    else c.mode = F_FIXED;
  }
  scan.width = 0;
  if (numel > 0) visit(&c, 0, 0, measure, &c);
  c.width = scan.width;
  sb_add(&b, "tensor(");
  if (numel == 0) {
    sb_add(&b, "[], size=[");
    for (int i = 0; i < t->ndim; i++) sb_add(&b, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    sb_add(&b, "]");
  } else {
    emit(&c, &b, 0, 0, 7);
  }
  sb_add(&b, ", dtype=%s, device=%s)", nc_dtype_name(t->dtype), info->spec);
  free(vals);
  if (b.oom || !b.buf) {
    free(b.buf);
    return nc_error(NC_ERR_OOM, "out of host memory formatting a tensor");
  }
  *out = b.buf;
  return NC_OK;
}

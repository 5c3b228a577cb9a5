/* CPU cross entropy over logits [N, C, S] with the log-softmax fused: per position, the
 * max, log-sum-exp and the smoothed target term in one pass over the classes (double). */
#include <math.h>
#include <stdint.h>
#include "cpu_linalg.h"

static inline double ld(const void *p, int64_t i, bool f32) {
  return f32 ? ((const float *)p)[i] : ((const double *)p)[i];
}
static inline void st(void *p, int64_t i, double v, bool f32) {
  if (f32)
    ((float *)p)[i] = (float)v;
  else
    ((double *)p)[i] = v;
}
static inline const void *ptr(const nc_tensor *t) {
  return (const char *)nc_cpu_base(t) + (size_t)t->offset * nc_dtype_size(t->dtype);
}

nc_status nc_cpu_cross_entropy(const nc_tensor *logits, const nc_tensor *targets, int64_t ignore_index,
                               double label_smoothing, int reduction, nc_tensor *loss, nc_tensor *lse,
                               nc_index_verdict *bad) {
  const bool f = logits->dtype == NC_FLOAT32;
  const int64_t n = logits->shape[0], c = logits->shape[1], s = nc_tensor_numel(targets) / (n > 0 ? n : 1);
  const void *x = ptr(logits);
  const int64_t *t = ptr(targets);
  void *lp = (void *)ptr(loss), *sp = (void *)ptr(lse);
  double total = 0;
  int64_t count = 0, first_bad = INT64_MAX; /* the identity of the min reduction */
  const double eps = label_smoothing;
#pragma omp parallel for if (n * s * c > 32768) reduction(+ : total, count) reduction(min : first_bad)
  for (int64_t pos = 0; pos < n * s; pos++) {
    const int64_t i = pos / s, j = pos % s, base = i * c * s + j, tgt = t[pos];
    double m = -INFINITY, sum = 0, sx = 0;
    for (int64_t k = 0; k < c; k++) {
      double v = ld(x, base + k * s, f);
      if (v > m) m = v;
    }
    for (int64_t k = 0; k < c; k++) {
      double v = ld(x, base + k * s, f);
      sum += exp(v - m);
      sx += v;
    }
    /* The ops layer checks C >= 1, so sum >= 1. */
    // cppcheck-suppress invalidFunctionArg
    const double l = m + log(sum);
    st(sp, pos, l, f);
    double r = 0;
    if (tgt != ignore_index) {
      if (tgt < 0 || tgt >= c) {
        if (pos + 1 < first_bad) first_bad = pos + 1;
      } else {
        r = l - (1 - eps) * ld(x, base + tgt * s, f) - eps / (double)c * sx;
        count++;
      }
    }
    if (reduction == NC_REDUCTION_NONE) st(lp, pos, r, f);
    total += r;
  }
  *bad = (nc_index_verdict){first_bad == INT64_MAX ? 0 : first_bad, NULL};
  if (reduction == NC_REDUCTION_SUM)
    st(lp, 0, total, f);
  else if (reduction == NC_REDUCTION_MEAN)
    st(lp, 0, total / (double)count, f); /* 0/0 = NaN: all ignored */
  return NC_OK;
}

nc_status nc_cpu_cross_entropy_backward(const nc_tensor *dloss, const nc_tensor *logits,
                                        const nc_tensor *targets, const nc_tensor *lse, int64_t ignore_index,
                                        double label_smoothing, int reduction, nc_tensor *dlogits) {
  const bool f = logits->dtype == NC_FLOAT32;
  const int64_t n = logits->shape[0], c = logits->shape[1], s = nc_tensor_numel(targets) / (n > 0 ? n : 1);
  const void *x = ptr(logits), *g = ptr(dloss), *sp = ptr(lse);
  const int64_t *t = ptr(targets);
  void *dx = (void *)ptr(dlogits);
  double scale = 1;
  if (reduction == NC_REDUCTION_MEAN) {
    int64_t count = 0;
    for (int64_t pos = 0; pos < n * s; pos++) count += t[pos] != ignore_index;
    scale = 1.0 / (double)count;
  }
  const double eps = label_smoothing;
#pragma omp parallel for if (n * s * c > 32768)
  for (int64_t pos = 0; pos < n * s; pos++) {
    const int64_t i = pos / s, j = pos % s, base = i * c * s + j, tgt = t[pos];
    const bool skip = tgt == ignore_index || tgt < 0 || tgt >= c;
    const double gv = skip ? 0 : (reduction == NC_REDUCTION_NONE ? ld(g, pos, f) : ld(g, 0, f) * scale);
    const double l = ld(sp, pos, f);
    for (int64_t k = 0; k < c; k++) {
      double p = exp(ld(x, base + k * s, f) - l);
      double d = p - eps / (double)c - (k == tgt ? 1 - eps : 0);
      st(dx, base + k * s, skip ? 0 : gv * d, f);
    }
  }
  return NC_OK;
}

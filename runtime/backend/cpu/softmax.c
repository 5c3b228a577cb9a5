/* CPU softmax and log_softmax along the last dim: max, then the sum of exp(x - max) in double,
 * then one pass writing. Contiguous float32 rows take vmath.h's vectorized exp, write exp(x - max)
 * while summing it, and scale in place; other rows compute in double with libm. */
#include <math.h>
#include "cpu_backend.h"
#include "strided.h"
#include "vmath.h"

NC_CPU_CLONES static void softmax_row_f32(const float *px, float *pd, int64_t n, bool log_out) {
  float m = -INFINITY;
  int nan = 0;
#pragma omp simd reduction(max : m) reduction(| : nan)
  for (int64_t j = 0; j < n; j++) {
    m = px[j] > m ? px[j] : m;
    nan |= px[j] != px[j];
  }
  if (nan) m = NAN; /* as the double path: a NaN anywhere makes the row NaN */
  double sum = 0;
  if (log_out) {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; j++) sum += nc_vexpf(px[j] - m);
    const float ls = (float)log(sum);
#pragma omp simd
    for (int64_t j = 0; j < n; j++) pd[j] = (px[j] - m) - ls;
  } else {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; j++) {
      const float e = nc_vexpf(px[j] - m);
      pd[j] = e;
      sum += e;
    }
    const float inv = (float)(1.0 / sum);
#pragma omp simd
    for (int64_t j = 0; j < n; j++) pd[j] *= inv;
  }
}

static inline void *base_of(const nc_tensor *t) { return nc_storage_host_ptr(t->storage); }

#define SOFTMAX_ROWS(T)                                                                          \
  do {                                                                                           \
    const T *X = base_of(x);                                                                     \
    T *D = base_of(out);                                                                         \
    NC_CPU_PARALLEL_FOR(outer *inner > NC_CPU_PARALLEL_MIN, , r, outer, {                        \
      const T *px = X + nc_cpu_offset(k, x->shape, x->strides, x->offset, r);                    \
      T *pd = D + nc_cpu_offset(k, out->shape, out->strides, out->offset, r);                    \
      double m = -INFINITY, sum = 0;                                                             \
      for (int64_t j = 0; j < inner; j++) {                                                      \
        double v = px[j * xs];                                                                   \
        m = (v > m || isnan(v)) ? v : m;                                                         \
      }                                                                                          \
      for (int64_t j = 0; j < inner; j++) sum += exp((double)px[j * xs] - m);                    \
      if (log_out) {                                                                             \
        const double ls = log(sum);                                                              \
        for (int64_t j = 0; j < inner; j++) pd[j * ds] = (T)(((double)px[j * xs] - m) - ls);     \
      } else {                                                                                   \
        for (int64_t j = 0; j < inner; j++) pd[j * ds] = (T)(exp((double)px[j * xs] - m) / sum); \
      }                                                                                          \
    });                                                                                          \
  } while (0)

nc_status nc_cpu_softmax(nc_op op, nc_tensor *out, const nc_tensor *x) {
  const bool log_out = op == NC_OP_LOG_SOFTMAX;
  const int k = x->ndim > 0 ? x->ndim - 1 : 0;
  const int64_t inner = x->ndim ? x->shape[k] : 1, xs = x->ndim ? x->strides[k] : 1,
                ds = out->ndim ? out->strides[k] : 1;
  const int64_t outer = inner ? nc_tensor_numel(x) / inner : 0;
  switch (x->dtype) {
    case NC_FLOAT32:
      if (xs == 1 && ds == 1) {
        const float *X = base_of(x);
        float *D = base_of(out);
        NC_CPU_PARALLEL_FOR(outer *inner > NC_CPU_PARALLEL_MIN, schedule(dynamic, 16), r, outer, {
          softmax_row_f32(X + nc_cpu_offset(k, x->shape, x->strides, x->offset, r),
                          D + nc_cpu_offset(k, out->shape, out->strides, out->offset, r), inner, log_out);
        });
      } else {
        SOFTMAX_ROWS(float);
      }
      break;
    case NC_FLOAT64:
      SOFTMAX_ROWS(double);
      break;
    default:
      return nc_error(NC_ERR_UNSUPPORTED, "cpu softmax: %s input", nc_dtype_name(x->dtype));
  }
  return NC_OK;
}

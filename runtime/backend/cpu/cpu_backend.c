/* The CPU backend's host memory (its device interface) and the foundation ops: fill, copy with
 * dtype conversion, arange and Philox random fills. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cpu_backend.h"
#include "cpu_linalg.h"
#include "netcl/random.h"
#include "strided.h"

nc_status nc_cpu_alloc(nc_device *d, size_t n, void **h) {
  size_t rounded = (n + 63) & ~(size_t)63;
  *h = aligned_alloc(64, rounded);
  if (!*h) return nc_error(NC_ERR_OOM, "host allocation of %zu bytes failed", n);
  return NC_OK;
}
void nc_cpu_release(nc_device *d, void *h) { free(h); }
void *nc_cpu_host_ptr(nc_device *d, void *h) { return h; }
nc_status nc_cpu_write(nc_device *d, void *h, size_t off, const void *src, size_t n) {
  memcpy((char *)h + off, src, n);
  return NC_OK;
}
nc_status nc_cpu_read(nc_device *d, void *h, size_t off, void *dst, size_t n) {
  memcpy(dst, (const char *)h + off, n);
  return NC_OK;
}
nc_status nc_cpu_sync(nc_device *d) { return NC_OK; }

static inline void *base_of(const nc_tensor *t) { return nc_storage_host_ptr(t->storage); }

/* X-macro over (dtype, C type). bool is stored as uint8_t holding 0 or 1. */
#define NC_CPU_TYPES(X) \
  X(NC_FLOAT32, float) X(NC_FLOAT64, double) X(NC_INT32, int32_t) X(NC_INT64, int64_t) \
  X(NC_UINT8, uint8_t) X(NC_BOOL, uint8_t)

#define NC_CONVERT(DT, T, x) ((DT) == NC_BOOL ? (T)((x) != 0) : (T)(x))

/* ---- fill ----------------------------------------------------------------------------------- */
nc_status nc_cpu_fill(nc_tensor *t, double v) {
  if (nc_dtype_is_storage(t->dtype)) return nc_cpu_fill_half(t, v);
  nc_cpu_iter it;
  const nc_tensor *ops[1] = {t};
  nc_cpu_iter_init(&it, 1, ops);
  int64_t numel = nc_tensor_numel(t);
  switch (t->dtype) {
#define X(DT, T)                                                                   \
  case DT: {                                                                       \
    T *p = base_of(t);                                                             \
    const T val = NC_CONVERT(DT, T, v);                                            \
    NC_CPU_PARALLEL_FOR(numel > NC_CPU_PARALLEL_MIN, , r, it.rows, {              \
      int64_t o;                                                                   \
      nc_cpu_iter_row(&it, r, &o);                                                 \
      const int64_t s = it.strides[0][it.ndim - 1];                                \
      for (int64_t i = 0; i < it.inner; i++) p[o + i * s] = val;                   \
    });                                                                            \
    break;                                                                         \
  }
    NC_CPU_TYPES(X)
#undef X
    default: return nc_error(NC_ERR_DTYPE, "fill: unsupported dtype");
  }
  return NC_OK;
}

/* ---- strided copy with conversion ------------------------------------------------------------ */
#define COPY_LOOP(DDT, DT_, ST_)                                                      \
  {                                                                                   \
    DT_ *dp = base_of(dst);                                                           \
    const ST_ *sp = base_of(src);                                                     \
    NC_CPU_PARALLEL_FOR(numel > NC_CPU_PARALLEL_MIN, , r, it.rows, {                 \
      int64_t o[2];                                                                   \
      nc_cpu_iter_row(&it, r, o);                                                     \
      const int64_t ds = it.strides[0][it.ndim - 1], ss = it.strides[1][it.ndim - 1]; \
      DT_ *d = dp + o[0];                                                             \
      const ST_ *s = sp + o[1];                                                       \
      if (ds == 1 && ss == 1)                                                         \
        for (int64_t i = 0; i < it.inner; i++) d[i] = NC_CONVERT(DDT, DT_, s[i]);     \
      else                                                                            \
        for (int64_t i = 0; i < it.inner; i++) d[i * ds] = NC_CONVERT(DDT, DT_, s[i * ss]); \
    });                                                                               \
  }

nc_status nc_cpu_copy(nc_tensor *dst, const nc_tensor *src) {
  if (nc_dtype_is_storage(dst->dtype) || nc_dtype_is_storage(src->dtype)) return nc_cpu_copy_half(dst, src);
  nc_cpu_iter it;
  const nc_tensor *ops[2] = {dst, src};
  nc_cpu_iter_init(&it, 2, ops);
  int64_t numel = nc_tensor_numel(dst);
  switch (dst->dtype) {
#define OUTER(DDT, DT_)                                        \
  case DDT:                                                    \
    switch (src->dtype) {                                      \
      INNER_FOR(DDT, DT_)                                      \
      default: return nc_error(NC_ERR_DTYPE, "copy: bad source dtype"); \
    }                                                          \
    break;
#define INNER_FOR(DDT, DT_)                                                       \
  case NC_FLOAT32: COPY_LOOP(DDT, DT_, float) break;                              \
  case NC_FLOAT64: COPY_LOOP(DDT, DT_, double) break;                             \
  case NC_INT32: COPY_LOOP(DDT, DT_, int32_t) break;                              \
  case NC_INT64: COPY_LOOP(DDT, DT_, int64_t) break;                              \
  case NC_UINT8: COPY_LOOP(DDT, DT_, uint8_t) break;                              \
  case NC_BOOL: COPY_LOOP(DDT, DT_, uint8_t) break;
    NC_CPU_TYPES(OUTER)
#undef OUTER

#undef INNER_FOR
    default: return nc_error(NC_ERR_DTYPE, "copy: bad destination dtype");
  }
  return NC_OK;
}

/* ---- arange ------------------------------------------------------------------------------------ */
nc_status nc_cpu_arange(nc_tensor *t, double start, double step) {
  int64_t numel = nc_tensor_numel(t); /* contiguous output (ops layer guarantees) */
  switch (t->dtype) {
#define X(DT, T)                                                                          \
  case DT: {                                                                              \
    T *p = (T *)base_of(t) + t->offset;                                                   \
    NC_CPU_PARALLEL_FOR(numel > NC_CPU_PARALLEL_MIN, , i, numel,                          \
                        { p[i] = NC_CONVERT(DT, T, start + (double)i * step); });           \
    break;                                                                                \
  }
    NC_CPU_TYPES(X)
#undef X
    default: return nc_error(NC_ERR_DTYPE, "arange: unsupported dtype");
  }
  return NC_OK;
}

/* ---- random: the element at flat index i uses Philox counter (offset + i) --------------------- */
static inline float u24(uint32_t w) { return (float)(w >> 8) * 0x1p-24f; }
static inline double u53(uint32_t a, uint32_t b) {
  return (double)(((uint64_t)(a >> 5) << 26) | (b >> 6)) * 0x1p-53;
}

nc_status nc_cpu_random(nc_tensor *t, int kind, uint64_t seed, uint64_t offset, double a, double b) {
  int64_t numel = nc_tensor_numel(t); /* contiguous output (ops layer guarantees) */
  if (t->dtype == NC_FLOAT32) {
    float *p = (float *)base_of(t) + t->offset;
    const float fa = (float)a, fb = (float)b;
    NC_CPU_PARALLEL_FOR(numel > NC_CPU_PARALLEL_MIN / 8, , i, numel, {
      uint32_t w[4];
      nc_philox_element(seed, offset + (uint64_t)i, w);
      if (kind == NC_RANDOM_UNIFORM) {
        p[i] = fa + (fb - fa) * u24(w[0]);
      } else {
        float u1 = u24(w[0]) + 0x1p-24f, u2 = u24(w[1]);
        p[i] = fa + fb * (sqrtf(-2.0f * logf(u1)) * cosf(6.2831853071795865f * u2));
      }
    });
  } else if (t->dtype == NC_FLOAT64) {
    double *p = (double *)base_of(t) + t->offset;
    NC_CPU_PARALLEL_FOR(numel > NC_CPU_PARALLEL_MIN / 8, , i, numel, {
      uint32_t w[4];
      nc_philox_element(seed, offset + (uint64_t)i, w);
      if (kind == NC_RANDOM_UNIFORM) {
        p[i] = a + (b - a) * u53(w[0], w[1]);
      } else {
        double u1 = u53(w[0], w[1]) + 0x1p-53, u2 = u53(w[2], w[3]);
        p[i] = a + b * (sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
      }
    });
  } else {
    return nc_error(NC_ERR_DTYPE, "random fill needs a floating dtype, got %s", nc_dtype_name(t->dtype));
  }
  return NC_OK;
}

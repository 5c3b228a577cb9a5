/* CPU sort: each row's (key, position) pairs go through qsort with the total order of
 * netcl/sort.h (nan above everything, ties by position), so the result is unique and matches
 * the OpenCL bitonic sort exactly. */
#include <math.h>
#include <stdlib.h>
#include "cpu_backend.h"
#include "strided.h"

static inline void *base_of(const nc_tensor *t) { return nc_storage_host_ptr(t->storage); }

#define NOT_NAN(v) 0
#define SORT_TYPE(N, T, ISNAN)                                                                               \
  typedef struct {                                                                                           \
    T key;                                                                                                   \
    int64_t pos;                                                                                             \
  } pair_##N;                                                                                                \
  static int cmp_##N(const pair_##N *a, const pair_##N *b, bool desc) {                                      \
    const bool na = ISNAN(a->key), nb = ISNAN(b->key);                                                       \
    if (na || nb) {                                                                                          \
      if (na && nb) return a->pos < b->pos ? -1 : 1;                                                         \
      return (desc ? na : nb) ? -1 : 1;                                                                      \
    }                                                                                                        \
    if (a->key == b->key) return a->pos < b->pos ? -1 : a->pos > b->pos;                                     \
    return (desc ? a->key > b->key : a->key < b->key) ? -1 : 1;                                              \
  }                                                                                                          \
  static int asc_##N(const void *a, const void *b) { return cmp_##N(a, b, false); }                          \
  static int desc_##N(const void *a, const void *b) { return cmp_##N(a, b, true); }                          \
  static bool sort_rows_##N(nc_tensor *indices, const nc_tensor *x, bool desc) {                             \
    const int k = x->ndim - 1;                                                                               \
    const int64_t inner = x->shape[k], outer = nc_tensor_numel(x) / inner;                                   \
    const T *X = base_of(x);                                                                                 \
    int64_t *P = (int64_t *)base_of(indices) + indices->offset;                                              \
    bool ok = true;                                                                                          \
    _Pragma("omp parallel for if (outer * inner > NC_CPU_PARALLEL_MIN) reduction(&& : ok)") for (int64_t r = \
                                                                                                     0;      \
                                                                                                 r < outer;  \
                                                                                                 r++) {      \
      pair_##N *buf = malloc(sizeof *buf * (size_t)inner);                                                   \
      if (!buf) {                                                                                            \
        ok = false;                                                                                          \
        continue;                                                                                            \
      }                                                                                                      \
      const T *row = X + nc_cpu_offset(k, x->shape, x->strides, x->offset, r);                               \
      for (int64_t j = 0; j < inner; j++) buf[j] = (pair_##N){row[j * x->strides[k]], j};                    \
      qsort(buf, (size_t)inner, sizeof *buf, desc ? desc_##N : asc_##N);                                     \
      for (int64_t j = 0; j < inner; j++) P[r * inner + j] = buf[j].pos;                                     \
      free(buf);                                                                                             \
    }                                                                                                        \
    return ok;                                                                                               \
  }

SORT_TYPE(float32, float, isnan)
SORT_TYPE(float64, double, isnan)
SORT_TYPE(int64, int64_t, NOT_NAN)

nc_status nc_cpu_sort(nc_tensor *indices, const nc_tensor *x, bool descending) {
  bool ok;
  switch (x->dtype) {
    case NC_FLOAT32:
      ok = sort_rows_float32(indices, x, descending);
      break;
    case NC_FLOAT64:
      ok = sort_rows_float64(indices, x, descending);
      break;
    case NC_INT64:
      ok = sort_rows_int64(indices, x, descending);
      break;
    default:
      return nc_error(NC_ERR_UNSUPPORTED, "cpu sort: %s keys", nc_dtype_name(x->dtype));
  }
  return ok ? NC_OK : nc_error(NC_ERR_OOM, "out of host memory sorting rows");
}

/* CPU cumulative sums along the last dim: one row per thread, sequential within a row (floats
 * accumulate in double, int64 wraps). */
#include "cpu_backend.h"
#include "strided.h"

static inline void *base_of(const nc_tensor *t) { return nc_storage_host_ptr(t->storage); }

#define CUMSUM_ROWS(T, ACC, ADD)                                              \
  do {                                                                        \
    const T *X = base_of(x);                                                  \
    T *D = base_of(out);                                                      \
    NC_CPU_PARALLEL_FOR(outer *inner > NC_CPU_PARALLEL_MIN, , r, outer, {     \
      const T *px = X + nc_cpu_offset(k, x->shape, x->strides, x->offset, r); \
      T *pd = D + nc_cpu_offset(k, out->shape, out->strides, out->offset, r); \
      ACC acc = 0;                                                            \
      for (int64_t j = 0; j < inner; j++) {                                   \
        acc = ADD(acc, px[j * xs]);                                           \
        pd[j * ds] = (T)acc;                                                  \
      }                                                                       \
    });                                                                       \
  } while (0)

#define PLAIN_ADD(a, b) ((a) + (b))
#define WRAP_ADD(a, b) ((uint64_t)(a) + (uint64_t)(b))

nc_status nc_cpu_scan(nc_op op, nc_tensor *out, const nc_tensor *x) {
  if (op != NC_OP_CUMSUM)
    return nc_error(NC_ERR_UNSUPPORTED, "cpu scan: %s is not a scan", nc_op_get(op)->name);
  const int k = x->ndim > 0 ? x->ndim - 1 : 0;
  const int64_t inner = x->ndim ? x->shape[k] : 1, xs = x->ndim ? x->strides[k] : 1,
                ds = out->ndim ? out->strides[k] : 1;
  const int64_t outer = inner ? nc_tensor_numel(x) / inner : 0;
  switch (x->dtype) {
    case NC_FLOAT32:
      CUMSUM_ROWS(float, double, PLAIN_ADD);
      break;
    case NC_FLOAT64:
      CUMSUM_ROWS(double, double, PLAIN_ADD);
      break;
    case NC_INT64:
      CUMSUM_ROWS(int64_t, uint64_t, WRAP_ADD);
      break;
    default:
      return nc_error(NC_ERR_UNSUPPORTED, "cpu scan: %s input", nc_dtype_name(x->dtype));
  }
  return NC_OK;
}

/* CPU random family: the same Philox words and conversions as kernels/random.cl. */
#include "cpu_backend.h"
#include "netcl/random.h"
#include "strided.h"

static inline void *base_of(const nc_tensor *t) { return nc_storage_host_ptr(t->storage); }
static inline float u24(uint32_t w) { return (float)(w >> 8) * 0x1p-24f; }
static inline double u53(uint32_t a, uint32_t b) {
  return (double)(((uint64_t)(a >> 5) << 26) | (b >> 6)) * 0x1p-53;
}

#define BERNOULLI(T, U)                                                            \
  do {                                                                             \
    T *o = (T *)base_of(out) + out->offset;                                        \
    const T *pp = base_of(p);                                                      \
    NC_CPU_PARALLEL_FOR(n > NC_CPU_PARALLEL_MIN / 8, , i, n, {                     \
      uint32_t w[4];                                                               \
      nc_philox_element(seed, offset + (uint64_t)i, w);                            \
      o[i] = (U) < pp[nc_cpu_offset(p->ndim, p->shape, p->strides, p->offset, i)]; \
    });                                                                            \
  } while (0)

nc_status nc_cpu_sample(nc_op op, nc_tensor *out, const nc_tensor *p, uint64_t seed, uint64_t offset,
                        int64_t lo, uint64_t range) {
  const int64_t n = nc_tensor_numel(out);
  if (op == NC_OP_BERNOULLI) {
    if (out->dtype == NC_FLOAT32)
      BERNOULLI(float, u24(w[0]));
    else
      BERNOULLI(double, u53(w[0], w[1]));
    return NC_OK;
  }
  if (op != NC_OP_RANDINT) return nc_error(NC_ERR_UNSUPPORTED, "cpu sample: %s", nc_op_get(op)->name);
  int64_t *o = (int64_t *)base_of(out) + out->offset;
  NC_CPU_PARALLEL_FOR(n > NC_CPU_PARALLEL_MIN / 8, , i, n, {
    uint32_t w[4];
    nc_philox_element(seed, offset + (uint64_t)i, w);
    o[i] = (int64_t)((uint64_t)lo + (((uint64_t)w[1] << 32) | w[0]) % range);
  });
  return NC_OK;
}

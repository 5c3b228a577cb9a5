/* CPU ema_update (op-table KERNEL row): t = {target, online}, contiguous, float32 or float64;
 * i = {n, chunk}; f = {momentum}. target = m target + (1 - m) online in target's precision, the
 * expression of kernels/ema.cl; blocks of chunk elements are spread over threads. */
#include "cpu_backend.h"
#include "strided.h"

static inline void *elems(const nc_tensor *t) {
  return (char *)nc_storage_host_ptr(t->storage) + (size_t)t->offset * nc_dtype_size(t->dtype);
}

#define EMA_LOOP(T)                                                                                  \
  do {                                                                                               \
    T *restrict tp = elems(k->t[0]);                                                                 \
    const T *restrict op = elems(k->t[1]);                                                           \
    const T m = (T)k->f[0], r = (T)1 - m;                                                            \
    NC_CPU_PARALLEL_FOR(n > NC_CPU_PARALLEL_MIN, schedule(dynamic, 1), b, blocks, {                  \
      const int64_t lo = b * chunk, hi = lo + chunk < n ? lo + chunk : n;                            \
      for (int64_t i = lo; i < hi; i++) tp[i] = m * tp[i] + r * op[i];                               \
    });                                                                                              \
  } while (0)

nc_status nc_cpu_ema_update(const nc_kernel_call *k) {
  const int64_t n = k->i[0], chunk = k->i[1] > 0 ? k->i[1] : 1, blocks = (n + chunk - 1) / chunk;
  if (k->t[0]->dtype == NC_FLOAT32)
    EMA_LOOP(float);
  else
    EMA_LOOP(double);
  return NC_OK;
}

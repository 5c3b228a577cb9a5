/* CPU attention (op-table KERNEL rows rope, flash_attention, flash_attention_backward_q and
 * _kv): the reference for kernels/attention.cl. Tensors arrive contiguous (at any offset);
 * float32 runs in float, float64 in double (cpu_attention.inc, included once per type). */
#include <math.h>
#include "core/check.h"
#include "cpu_backend.h"
#include "strided.h"

#define ATT_BQ 32 /* query rows per task */
#define ATT_BK 64 /* keys per block */
#define ATT_MAX_D 256 /* the largest head dimension (runtime/ops/attention.c checks it) */

static inline void *elems(const nc_tensor *t) {
  return (char *)nc_storage_host_ptr(t->storage) + (size_t)t->offset * nc_dtype_size(t->dtype);
}

#define T float
#define EXP expf
#define LOG logf
#define COS cosf
#define SIN sinf
#define NAME(x) att_##x##_f32
#include "cpu_attention.inc"
#undef T
#undef EXP
#undef LOG
#undef COS
#undef SIN
#undef NAME
#define T double
#define EXP exp
#define LOG log
#define COS cos
#define SIN sin
#define NAME(x) att_##x##_f64
#include "cpu_attention.inc"
#undef T
#undef EXP
#undef LOG
#undef COS
#undef SIN
#undef NAME

#define ATT_DISPATCH(k, fn) ((k)->t[0]->dtype == NC_FLOAT32 ? att_##fn##_f32(k) : att_##fn##_f64(k))

/* t = {x, positions (int64), y}; i = {t, dh, npairs, chunk, inverse}; f = {theta}. */
nc_status nc_cpu_rope(const nc_kernel_call *k) {
  if (k->t[0]->dtype == NC_FLOAT32)
    att_rope_f32(k);
  else
    att_rope_f64(k);
  return NC_OK;
}

nc_status nc_cpu_flash_attention(const nc_kernel_call *k) { return ATT_DISPATCH(k, flash_fwd); }
nc_status nc_cpu_flash_attention_backward_q(const nc_kernel_call *k) { return ATT_DISPATCH(k, flash_bwd_q); }
nc_status nc_cpu_flash_attention_backward_kv(const nc_kernel_call *k) { return ATT_DISPATCH(k, flash_bwd_kv); }

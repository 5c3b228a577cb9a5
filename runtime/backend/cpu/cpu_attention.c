/* CPU attention (op-table KERNEL rows rope, flash_attention, flash_attention_backward_q and
 * _kv): the reference for kernels/attention.cl. Tensors arrive contiguous (at any offset);
 * float32 runs in float, float64 in double (cpu_attention.inc, included once per type). */
#include <math.h>
#include "core/check.h"
#include "cpu_backend.h"
#include "cpu_linalg.h"
#include "strided.h"

#define ATT_BQ 32 /* query rows per task (and per block of the backward) */
#define ATT_BK 64 /* keys per block at head_dim <= 64 (half that to 128, a quarter above) */
#define ATT_MAX_D 256 /* the largest head dimension (runtime/ops/attention.c checks it) */

/* expf for the probabilities, in a form the compiler vectorizes (libm's is a call per element):
 * Cephes' range reduction x = n ln2 + r and degree-5 polynomial on r, then 2^n through the
 * exponent bits; within 2 ulp of expf on [-87, 88], 0 below (exp(-inf) = 0), inf above. */
static inline float att_expf(float x) {
  const float xc = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float n = floorf(xc * 1.44269504088896341f + 0.5f);
  const float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  union {
    int32_t i;
    float f;
  } e = {.i = ((int32_t)n + 127) << 23};
  return x < -87.0f ? 0.0f : (x > 88.0f ? INFINITY : y * e.f);
}

static inline void *elems(const nc_tensor *t) {
  return (char *)nc_storage_host_ptr(t->storage) + (size_t)t->offset * nc_dtype_size(t->dtype);
}

#define T float
#define EXP expf
#define LOG logf
#define COS cosf
#define SIN sinf
#define VEXP att_expf
#define GEMM nc_cpu_sgemm
#define NAME(x) att_##x##_f32
#include "cpu_attention.inc"
#undef T
#undef EXP
#undef LOG
#undef COS
#undef SIN
#undef VEXP
#undef GEMM
#undef NAME
#define T double
#define EXP exp
#define LOG log
#define COS cos
#define SIN sin
#define VEXP exp
#define GEMM nc_cpu_dgemm
#define NAME(x) att_##x##_f64
#include "cpu_attention.inc"
#undef T
#undef EXP
#undef LOG
#undef COS
#undef SIN
#undef VEXP
#undef GEMM
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

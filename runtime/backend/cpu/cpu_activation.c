/* CPU activations (op-table KERNEL rows elu, softplus, mish, leaky_relu): t = {x, y}, contiguous,
 * float32 or float64; i = {n, chunk} (the chunk only shapes OpenCL's launch); f = the op's
 * numbers. Each op is one loop over the elements in x's precision (tgmath.h picks expf, log1pf,
 * ... for float32); the expressions match kernels/activation.cl term for term. relu_backward,
 * last, takes three tensors. */
#include <tgmath.h>
#include "cpu_backend.h"
#include "netcl/half.h"
#include "strided.h"

static inline void *elems(const nc_tensor *t) {
  return (char *)nc_storage_host_ptr(t->storage) + (size_t)t->offset * nc_dtype_size(t->dtype);
}

/* y[i] = E for every element, v = x[i], in type T; small tensors stay on one thread (entering a
 * parallel region costs more than their loop). */
#define ACT_LOOP(k, T, E)                                                 \
  do {                                                                    \
    const T *restrict xp_ = elems((k)->t[0]);                             \
    T *restrict yp_ = elems((k)->t[1]);                                   \
    const int64_t n_ = (k)->i[0];                                         \
    if (n_ > NC_CPU_PARALLEL_MIN) {                                       \
      _Pragma("omp parallel for simd") for (int64_t i = 0; i < n_; i++) { \
        const T v = xp_[i];                                               \
        yp_[i] = (E);                                                     \
      }                                                                   \
    } else {                                                              \
      for (int64_t i = 0; i < n_; i++) {                                  \
        const T v = xp_[i];                                               \
        yp_[i] = (E);                                                     \
      }                                                                   \
    }                                                                     \
  } while (0)

/* ACT_LOOP in x's dtype, the op's numbers as p0, p1 of that type. */
#define ACT_MAP(k, E)                                           \
  do {                                                          \
    if ((k)->t[0]->dtype == NC_FLOAT32) {                       \
      const float p0 = (float)(k)->f[0], p1 = (float)(k)->f[1]; \
      (void)p0, (void)p1;                                       \
      ACT_LOOP(k, float, E);                                    \
    } else {                                                    \
      const double p0 = (k)->f[0], p1 = (k)->f[1];              \
      (void)p0, (void)p1;                                       \
      ACT_LOOP(k, double, E);                                   \
    }                                                           \
  } while (0)

/* log1p(exp(beta v)) / beta, or v where beta v > threshold (torch's softplus). */
#define SOFTPLUS(v, beta, threshold) ((v) * (beta) > (threshold) ? (v) : log1p(exp((v) * (beta))) / (beta))

nc_status nc_cpu_elu(const nc_kernel_call *k) { /* f = {alpha} */
  ACT_MAP(k, v > 0 ? v : p0 * expm1(v));
  return NC_OK;
}

nc_status nc_cpu_softplus(const nc_kernel_call *k) { /* f = {beta, threshold} */
  ACT_MAP(k, SOFTPLUS(v, p0, p1));
  return NC_OK;
}

nc_status nc_cpu_mish(const nc_kernel_call *k) {
  ACT_MAP(k, v * tanh(SOFTPLUS(v, 1, 20)));
  return NC_OK;
}

nc_status nc_cpu_leaky_relu(const nc_kernel_call *k) { /* f = {negative_slope} */
  ACT_MAP(k, v > 0 ? v : p0 * v);
  return NC_OK;
}

/* relu_backward: t = {dy, y, dx}, contiguous; dx = y <= 0 ? 0 : dy (torch's threshold_backward at
 * 0: a nan y passes dy). dy and dx float32 or float64; y of their dtype, or a storage dtype beside
 * float32 (widened exactly, one element at a time). */
#define RELU_BWD_LOOP(T, Y, READ)                                                   \
  do {                                                                              \
    const T *restrict g_ = elems(k->t[0]);                                          \
    const Y *restrict y_ = elems(k->t[1]);                                          \
    T *restrict d_ = elems(k->t[2]);                                                \
    _Pragma("omp parallel for simd if (n > NC_CPU_PARALLEL_MIN)") for (int64_t i = 0; i < n; i++) { \
      const T g = g_[i]; /* read whatever y holds: a select, not a branch */       \
      d_[i] = READ(y_[i]) <= 0 ? (T)0 : g;                                          \
    }                                                                               \
  } while (0)
#define RELU_BWD_SAME(v) (v)

nc_status nc_cpu_relu_backward(const nc_kernel_call *k) {
  const int64_t n = k->i[0];
  switch (k->t[1]->dtype) {
    case NC_FLOAT64: RELU_BWD_LOOP(double, double, RELU_BWD_SAME); break;
    case NC_BFLOAT16: RELU_BWD_LOOP(float, uint16_t, nc_bf16_to_f32); break;
    case NC_FLOAT16: RELU_BWD_LOOP(float, uint16_t, nc_f16_to_f32); break;
    default: RELU_BWD_LOOP(float, float, RELU_BWD_SAME); break;
  }
  return NC_OK;
}

/* CPU fused optimizer updates and the sum of squares behind clip_grad_norm.
 *
 * An update is one parallel loop over blocks of contiguous memory. Inside a block, the rule's
 * options (weight decay, momentum, ...) pick one of several calls to an always-inlined loop with
 * the options as constants, so each combination compiles to its own branch-free loop that the
 * compiler vectorizes. The element code mirrors PyTorch's single-tensor updates operation for
 * operation (runtime/ops/optim.c derives the scalars). This file is built with -fno-math-errno
 * and -fno-trapping-math (CMakeLists.txt): without them the compiler may neither vectorize
 * sqrt nor if-convert the lerp; neither changes a result. */
#include <math.h>
#include "cpu_backend.h"
#include "strided.h"

#define NC_INLINE static inline __attribute__((always_inline))

static inline void *data_of(const nc_tensor *t) { return nc_storage_host_ptr(t->storage); }

enum { MOMENTUM_NONE, MOMENTUM_FIRST, MOMENTUM_UPDATE };
enum { DECAY_NONE, DECAY_L2, DECAY_DECOUPLED };

#define BLOCKS(n) (((n) + NC_CPU_BLOCK - 1) / NC_CPU_BLOCK)

#define OPTIM_CPU(S, T, SQRT, FABS)                                                                          \
  /* torch.lerp's formula: the weight's side picks the end the result is anchored to. */                     \
  NC_INLINE T lerp_##S(T self, T end, T w) {                                                                 \
    return FABS(w) < (T)0.5 ? self + w * (end - self) : end - (end - self) * ((T)1 - w);                     \
  }                                                                                                          \
                                                                                                             \
  typedef struct {                                                                                           \
    T neg_lr, wd, mom, omd;                                                                                  \
  } sgd_scalars_##S;                                                                                         \
                                                                                                             \
  NC_INLINE void sgd_run_##S(T *restrict p, const T *restrict g, T *restrict b, int64_t n,                   \
                             const sgd_scalars_##S k, const bool wd, const int mode, const bool nesterov) {  \
    const T neg_lr = k.neg_lr, wdv = k.wd, mom = k.mom, omd = k.omd;                                         \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                                    \
      T d = g[i];                                                                                            \
      if (wd) d = d + wdv * p[i];                                                                            \
      if (mode != MOMENTUM_NONE) {                                                                           \
        const T nb = mode == MOMENTUM_FIRST ? d : b[i] * mom + omd * d;                                      \
        b[i] = nb;                                                                                           \
        d = nesterov ? d + mom * nb : nb;                                                                    \
      }                                                                                                      \
      p[i] = p[i] + neg_lr * d;                                                                              \
    }                                                                                                        \
  }                                                                                                          \
                                                                                                             \
  static void sgd_##S(nc_tensor *param, const nc_tensor *grad, nc_tensor *buf,                               \
                      const nc_sgd_kernel_args *a) {                                                         \
    T *p = (T *)data_of(param) + param->offset, *b = buf ? (T *)data_of(buf) + buf->offset : NULL;           \
    const T *g = (const T *)data_of(grad) + grad->offset;                                                    \
    const sgd_scalars_##S k = {(T)a->neg_lr, (T)a->weight_decay, (T)a->momentum, (T)a->one_minus_dampening}; \
    const int mode = !a->use_momentum ? MOMENTUM_NONE : a->first ? MOMENTUM_FIRST : MOMENTUM_UPDATE;         \
    const bool wd = a->use_weight_decay, nest = a->nesterov;                                                 \
    const int64_t n = nc_tensor_numel(param), nblocks = BLOCKS(n);                                           \
    NC_CPU_PARALLEL_FOR(n > NC_CPU_PARALLEL_MIN, , blk, nblocks, {                                           \
      const int64_t lo = blk * NC_CPU_BLOCK, len = n - lo < NC_CPU_BLOCK ? n - lo : NC_CPU_BLOCK;            \
      T *pp = p + lo, *bb = b ? b + lo : NULL;                                                               \
      const T *gg = g + lo;                                                                                  \
      if (mode == MOMENTUM_NONE) {                                                                           \
        if (wd)                                                                                              \
          sgd_run_##S(pp, gg, bb, len, k, true, MOMENTUM_NONE, false);                                       \
        else                                                                                                 \
          sgd_run_##S(pp, gg, bb, len, k, false, MOMENTUM_NONE, false);                                      \
      } else if (mode == MOMENTUM_FIRST) {                                                                   \
        /* Once per parameter: not worth a specialization per option. */                                     \
        sgd_run_##S(pp, gg, bb, len, k, wd, MOMENTUM_FIRST, nest);                                           \
      } else if (nest) {                                                                                     \
        if (wd)                                                                                              \
          sgd_run_##S(pp, gg, bb, len, k, true, MOMENTUM_UPDATE, true);                                      \
        else                                                                                                 \
          sgd_run_##S(pp, gg, bb, len, k, false, MOMENTUM_UPDATE, true);                                     \
      } else {                                                                                               \
        if (wd)                                                                                              \
          sgd_run_##S(pp, gg, bb, len, k, true, MOMENTUM_UPDATE, false);                                     \
        else                                                                                                 \
          sgd_run_##S(pp, gg, bb, len, k, false, MOMENTUM_UPDATE, false);                                    \
      }                                                                                                      \
    });                                                                                                      \
  }                                                                                                          \
                                                                                                             \
  typedef struct {                                                                                           \
    T neg_lr, wd, alpha, oma, eps, mom;                                                                      \
  } rmsprop_scalars_##S;                                                                                     \
                                                                                                             \
  NC_INLINE void rmsprop_run_##S(T *restrict p, const T *restrict g, T *restrict sq, T *restrict ga,         \
                                 T *restrict b, int64_t n, const rmsprop_scalars_##S k, const bool wd,       \
                                 const bool centered, const bool momentum) {                                 \
    const T neg_lr = k.neg_lr, wdv = k.wd, alpha = k.alpha, oma = k.oma, eps = k.eps, mom = k.mom;           \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                                    \
      T gi = g[i];                                                                                           \
      if (wd) gi = gi + wdv * p[i];                                                                          \
      const T sa = sq[i] * alpha + oma * gi * gi;                                                            \
      sq[i] = sa;                                                                                            \
      T avg;                                                                                                 \
      if (centered) {                                                                                        \
        const T m = lerp_##S(ga[i], gi, oma);                                                                \
        ga[i] = m;                                                                                           \
        avg = SQRT(sa + (T)-1 * m * m);                                                                      \
      } else {                                                                                               \
        avg = SQRT(sa);                                                                                      \
      }                                                                                                      \
      avg = avg + eps;                                                                                       \
      if (momentum) {                                                                                        \
        const T nb = b[i] * mom + gi / avg;                                                                  \
        b[i] = nb;                                                                                           \
        p[i] = p[i] + neg_lr * nb;                                                                           \
      } else {                                                                                               \
        p[i] = p[i] + neg_lr * (gi / avg);                                                                   \
      }                                                                                                      \
    }                                                                                                        \
  }                                                                                                          \
                                                                                                             \
  static void rmsprop_##S(nc_tensor *param, const nc_tensor *grad, nc_tensor *square_avg,                    \
                          nc_tensor *grad_avg, nc_tensor *buf, const nc_rmsprop_kernel_args *a) {            \
    T *p = (T *)data_of(param) + param->offset, *sq = (T *)data_of(square_avg) + square_avg->offset;         \
    T *ga = grad_avg ? (T *)data_of(grad_avg) + grad_avg->offset : NULL;                                     \
    T *b = buf ? (T *)data_of(buf) + buf->offset : NULL;                                                     \
    const T *g = (const T *)data_of(grad) + grad->offset;                                                    \
    const rmsprop_scalars_##S k = {(T)a->neg_lr,          (T)a->weight_decay, (T)a->alpha,                   \
                                   (T)a->one_minus_alpha, (T)a->eps,          (T)a->momentum};               \
    const int variant = (a->use_weight_decay ? 4 : 0) | (a->centered ? 2 : 0) | (a->use_momentum ? 1 : 0);   \
    const int64_t n = nc_tensor_numel(param), nblocks = BLOCKS(n);                                           \
    NC_CPU_PARALLEL_FOR(n > NC_CPU_PARALLEL_MIN, , blk, nblocks, {                                           \
      const int64_t lo = blk * NC_CPU_BLOCK, len = n - lo < NC_CPU_BLOCK ? n - lo : NC_CPU_BLOCK;            \
      T *pp = p + lo, *sqq = sq + lo, *gaa = ga ? ga + lo : NULL, *bb = b ? b + lo : NULL;                   \
      const T *gg = g + lo;                                                                                  \
      switch (variant) {                                                                                     \
        case 0:                                                                                              \
          rmsprop_run_##S(pp, gg, sqq, gaa, bb, len, k, false, false, false);                                \
          break;                                                                                             \
        case 1:                                                                                              \
          rmsprop_run_##S(pp, gg, sqq, gaa, bb, len, k, false, false, true);                                 \
          break;                                                                                             \
        case 2:                                                                                              \
          rmsprop_run_##S(pp, gg, sqq, gaa, bb, len, k, false, true, false);                                 \
          break;                                                                                             \
        case 3:                                                                                              \
          rmsprop_run_##S(pp, gg, sqq, gaa, bb, len, k, false, true, true);                                  \
          break;                                                                                             \
        case 4:                                                                                              \
          rmsprop_run_##S(pp, gg, sqq, gaa, bb, len, k, true, false, false);                                 \
          break;                                                                                             \
        case 5:                                                                                              \
          rmsprop_run_##S(pp, gg, sqq, gaa, bb, len, k, true, false, true);                                  \
          break;                                                                                             \
        case 6:                                                                                              \
          rmsprop_run_##S(pp, gg, sqq, gaa, bb, len, k, true, true, false);                                  \
          break;                                                                                             \
        default:                                                                                             \
          rmsprop_run_##S(pp, gg, sqq, gaa, bb, len, k, true, true, true);                                   \
          break;                                                                                             \
      }                                                                                                      \
    });                                                                                                      \
  }                                                                                                          \
                                                                                                             \
  typedef struct {                                                                                           \
    T neg_step, wd, decay, omb1, beta2, omb2, eps, bc2s;                                                     \
  } adam_scalars_##S;                                                                                        \
                                                                                                             \
  NC_INLINE void adam_run_##S(T *restrict p, const T *restrict g, T *restrict m1, T *restrict m2,            \
                              T *restrict mx, int64_t n, const adam_scalars_##S k, const int decay,          \
                              const bool amsgrad) {                                                          \
    const T neg_step = k.neg_step, wdv = k.wd, dec = k.decay, omb1 = k.omb1, beta2 = k.beta2, omb2 = k.omb2, \
            eps = k.eps, bc2s = k.bc2s;                                                                      \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                                    \
      T pi = p[i], gi = g[i];                                                                                \
      if (decay == DECAY_DECOUPLED) pi = pi * dec;                                                           \
      if (decay == DECAY_L2) gi = gi + wdv * pi;                                                             \
      const T m = lerp_##S(m1[i], gi, omb1);                                                                 \
      m1[i] = m;                                                                                             \
      T v = m2[i] * beta2 + omb2 * gi * gi;                                                                  \
      m2[i] = v;                                                                                             \
      if (amsgrad) {                                                                                         \
        /* torch.maximum: nan wins */                                                                        \
        const T old = mx[i];                                                                                 \
        v = (old != old || old > v) ? old : v;                                                               \
        mx[i] = v;                                                                                           \
      }                                                                                                      \
      const T denom = SQRT(v) / bc2s + eps;                                                                  \
      p[i] = pi + neg_step * (m / denom);                                                                    \
    }                                                                                                        \
  }                                                                                                          \
                                                                                                             \
  static void adam_##S(nc_tensor *param, const nc_tensor *grad, nc_tensor *exp_avg, nc_tensor *exp_avg_sq,   \
                       nc_tensor *max_exp_avg_sq, const nc_adam_kernel_args *a) {                            \
    T *p = (T *)data_of(param) + param->offset, *m1 = (T *)data_of(exp_avg) + exp_avg->offset;               \
    T *m2 = (T *)data_of(exp_avg_sq) + exp_avg_sq->offset;                                                   \
    T *mx = max_exp_avg_sq ? (T *)data_of(max_exp_avg_sq) + max_exp_avg_sq->offset : NULL;                   \
    const T *g = (const T *)data_of(grad) + grad->offset;                                                    \
    const adam_scalars_##S k = {                                                                             \
        (T)a->neg_step_size, (T)a->weight_decay,    (T)a->decay, (T)a->one_minus_beta1,                      \
        (T)a->beta2,         (T)a->one_minus_beta2, (T)a->eps,   (T)a->bias_correction2_sqrt};               \
    const int decay = !a->use_weight_decay ? DECAY_NONE : a->decoupled ? DECAY_DECOUPLED : DECAY_L2;         \
    const bool ams = a->amsgrad;                                                                             \
    const int64_t n = nc_tensor_numel(param), nblocks = BLOCKS(n);                                           \
    NC_CPU_PARALLEL_FOR(n > NC_CPU_PARALLEL_MIN, , blk, nblocks, {                                           \
      const int64_t lo = blk * NC_CPU_BLOCK, len = n - lo < NC_CPU_BLOCK ? n - lo : NC_CPU_BLOCK;            \
      T *pp = p + lo, *mm1 = m1 + lo, *mm2 = m2 + lo, *mmx = mx ? mx + lo : NULL;                            \
      const T *gg = g + lo;                                                                                  \
      if (ams) {                                                                                             \
        if (decay == DECAY_NONE)                                                                             \
          adam_run_##S(pp, gg, mm1, mm2, mmx, len, k, DECAY_NONE, true);                                     \
        else if (decay == DECAY_L2)                                                                          \
          adam_run_##S(pp, gg, mm1, mm2, mmx, len, k, DECAY_L2, true);                                       \
        else                                                                                                 \
          adam_run_##S(pp, gg, mm1, mm2, mmx, len, k, DECAY_DECOUPLED, true);                                \
      } else {                                                                                               \
        if (decay == DECAY_NONE)                                                                             \
          adam_run_##S(pp, gg, mm1, mm2, mmx, len, k, DECAY_NONE, false);                                    \
        else if (decay == DECAY_L2)                                                                          \
          adam_run_##S(pp, gg, mm1, mm2, mmx, len, k, DECAY_L2, false);                                      \
        else                                                                                                 \
          adam_run_##S(pp, gg, mm1, mm2, mmx, len, k, DECAY_DECOUPLED, false);                               \
      }                                                                                                      \
    });                                                                                                      \
  }                                                                                                          \
                                                                                                             \
  /* Part k covers the flat elements [k * chunk, (k + 1) * chunk): the split depends only on the             \
   * size, so the sum does not depend on the thread count. */                                                \
  static void sum_squares_##S(double *out, const nc_tensor *x) {                                             \
    const T *px = (const T *)data_of(x);                                                                     \
    const bool contiguous = nc_tensor_is_contiguous(x);                                                      \
    const int64_t n = nc_tensor_numel(x), chunk = (n + NC_SUM_SQUARES_PARTS - 1) / NC_SUM_SQUARES_PARTS;     \
    _Pragma("omp parallel for if (n > NC_CPU_PARALLEL_MIN)") for (int k = 0; k < NC_SUM_SQUARES_PARTS;       \
                                                                  k++) {                                     \
      const int64_t lo = (int64_t)k * chunk < n ? (int64_t)k * chunk : n;                                    \
      const int64_t hi = n - lo < chunk ? n : lo + chunk;                                                    \
      double acc = 0;                                                                                        \
      if (contiguous) {                                                                                      \
        const T *c = px + x->offset;                                                                         \
        _Pragma("omp simd reduction(+ : acc)") for (int64_t i = lo; i < hi; i++) acc +=                      \
            (double)c[i] * (double)c[i];                                                                     \
      } else {                                                                                               \
        /* Strided gradients are rare (a transposed view): index each element. */                            \
        for (int64_t i = lo; i < hi; i++) {                                                                  \
          const double v = px[nc_cpu_offset(x->ndim, x->shape, x->strides, x->offset, i)];                   \
          acc += v * v;                                                                                      \
        }                                                                                                    \
      }                                                                                                      \
      out[k] = acc;                                                                                          \
    }                                                                                                        \
  }

OPTIM_CPU(f32, float, sqrtf, fabsf)
OPTIM_CPU(f64, double, sqrt, fabs)

/* The updated float32 param rounded into the storage-dtype tensor r (contiguous), if any. */
static void round_into(const nc_tensor *param, nc_tensor *r) {
  if (!r) return;
  const float *p = (const float *)nc_storage_host_ptr(param->storage) + param->offset;
  uint16_t *d = (uint16_t *)nc_storage_host_ptr(r->storage) + r->offset;
  nc_cpu_f32_to_half(r->dtype, d, 1, p, 1, nc_tensor_numel(param));
}

nc_status nc_cpu_sgd_step(nc_tensor *param, const nc_tensor *grad, nc_tensor *buf,
                          const nc_sgd_kernel_args *a) {
  if (param->dtype == NC_FLOAT32)
    sgd_f32(param, grad, buf, a);
  else
    sgd_f64(param, grad, buf, a);
  round_into(param, a->rounded);
  return NC_OK;
}

nc_status nc_cpu_rmsprop_step(nc_tensor *param, const nc_tensor *grad, nc_tensor *square_avg,
                              nc_tensor *grad_avg, nc_tensor *buf, const nc_rmsprop_kernel_args *a) {
  if (param->dtype == NC_FLOAT32)
    rmsprop_f32(param, grad, square_avg, grad_avg, buf, a);
  else
    rmsprop_f64(param, grad, square_avg, grad_avg, buf, a);
  round_into(param, a->rounded);
  return NC_OK;
}

nc_status nc_cpu_adam_step(nc_tensor *param, const nc_tensor *grad, nc_tensor *exp_avg, nc_tensor *exp_avg_sq,
                           nc_tensor *max_exp_avg_sq, const nc_adam_kernel_args *a) {
  if (param->dtype == NC_FLOAT32)
    adam_f32(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, a);
  else
    adam_f64(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, a);
  round_into(param, a->rounded);
  return NC_OK;
}

nc_status nc_cpu_sum_squares(nc_tensor *parts, int64_t at, const nc_tensor *x) {
  double *out = (double *)data_of(parts) + parts->offset + at;
  if (x->dtype == NC_FLOAT32)
    sum_squares_f32(out, x);
  else
    sum_squares_f64(out, x);
  return NC_OK;
}

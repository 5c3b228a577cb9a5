/* Fused optimizer updates and the sum of squares behind clip_grad_norm; the same element code,
 * operation for operation, as runtime/backend/cpu/optim.c. Built after half.cl ("half+optim"):
 * an update may also write its param rounded to bfloat16 or float16 (OPTIM_ROUND). Param, grad
 * and state are contiguous (from element offsets po, go, ...); hyper-parameters arrive as
 * arguments of the tensor's type and flags as ints, so one build serves every setting. A state
 * buffer whose flag is off is a stand-in that is never touched. */

#define NC_SLOCAL 256
#define NC_SUM_SQUARES_PARTS 64 /* as runtime/core/device_impl.h */

/* The updates' rounded copy (rfmt 1: bfloat16, 2: float16, 0: none; the host passes one only
 * beside a float32 param): element i of r gets the new param v rounded once, half.cl's rounding
 * (this program is built after half.cl). */
#define OPTIM_ROUND(r, ro, i, rfmt, v)                                                                        \
  if (rfmt) (r)[(ro) + (i)] = (rfmt) == 1 ? nc_to_bf16((float)(v)) : nc_to_f16((float)(v))

#define OPTIM_K(N, T)                                                                                         \
  inline T lerp_##N(T self, T end, T w) {                                                                     \
    return fabs(w) < (T)0.5 ? self + w * (end - self) : end - (end - self) * ((T)1 - w);                      \
  }                                                                                                           \
                                                                                                              \
  /* mode: 0 no momentum, 1 first update (buf = d), 2 buf = momentum * buf + (1 - dampening) * d */          \
  __kernel void sgd_##N(__global T *p, long po, __global const T *g, long go, __global T *b, long bo, long n,  \
                        T neg_lr, T wd, T mom, T omd, int use_wd, int mode, int nesterov,                     \
                        __global ushort *r, long ro, int rfmt) {                                              \
    NC_GRID_LOOP(i, n) {                                                                                      \
      T d = g[go + i];                                                                                        \
      if (use_wd) d = d + wd * p[po + i];                                                                     \
      if (mode != 0) {                                                                                        \
        const T nb = mode == 1 ? d : b[bo + i] * mom + omd * d;                                               \
        b[bo + i] = nb;                                                                                       \
        d = nesterov ? d + mom * nb : nb;                                                                     \
      }                                                                                                       \
      const T np = p[po + i] + neg_lr * d;                                                                    \
      p[po + i] = np;                                                                                         \
      OPTIM_ROUND(r, ro, i, rfmt, np);                                                                        \
    }                                                                                                         \
  }                                                                                                           \
                                                                                                              \
  __kernel void rmsprop_##N(__global T *p, long po, __global const T *g, long go, __global T *sq, long so,     \
                            __global T *ga, long gao, __global T *b, long bo, long n, T neg_lr, T wd, T alpha, \
                            T oma, T eps, T mom, int use_wd, int centered, int use_momentum,                  \
                            __global ushort *r, long ro, int rfmt) {                                          \
    NC_GRID_LOOP(i, n) {                                                                                      \
      T gi = g[go + i];                                                                                       \
      if (use_wd) gi = gi + wd * p[po + i];                                                                   \
      const T sa = sq[so + i] * alpha + oma * gi * gi;                                                        \
      sq[so + i] = sa;                                                                                        \
      T avg;                                                                                                  \
      if (centered) {                                                                                         \
        const T m = lerp_##N(ga[gao + i], gi, oma);                                                           \
        ga[gao + i] = m;                                                                                      \
        avg = sqrt(sa + (T)-1 * m * m);                                                                       \
      } else {                                                                                                \
        avg = sqrt(sa);                                                                                       \
      }                                                                                                       \
      avg = avg + eps;                                                                                        \
      if (use_momentum) {                                                                                     \
        const T nb = b[bo + i] * mom + gi / avg;                                                              \
        b[bo + i] = nb;                                                                                       \
        p[po + i] = p[po + i] + neg_lr * nb;                                                                  \
      } else {                                                                                                \
        p[po + i] = p[po + i] + neg_lr * (gi / avg);                                                          \
      }                                                                                                       \
      OPTIM_ROUND(r, ro, i, rfmt, p[po + i]);                                                                 \
    }                                                                                                         \
  }                                                                                                           \
                                                                                                              \
  /* decay: 0 none, 1 L2 (Adam: added to the gradient), 2 decoupled (AdamW: param scaled) */                  \
  __kernel void adam_##N(__global T *p, long po, __global const T *g, long go, __global T *m1, long m1o,       \
                         __global T *m2, long m2o, __global T *mx, long mxo, long n, T neg_step, T wd,         \
                         T dec, T omb1, T beta2, T omb2, T eps, T bc2s, int decay, int amsgrad,               \
                         __global ushort *r, long ro, int rfmt) {                                             \
    NC_GRID_LOOP(i, n) {                                                                                      \
      T pi = p[po + i], gi = g[go + i];                                                                       \
      if (decay == 2) pi = pi * dec;                                                                          \
      if (decay == 1) gi = gi + wd * pi;                                                                      \
      const T m = lerp_##N(m1[m1o + i], gi, omb1);                                                            \
      m1[m1o + i] = m;                                                                                        \
      T v = m2[m2o + i] * beta2 + omb2 * gi * gi;                                                             \
      m2[m2o + i] = v;                                                                                        \
      if (amsgrad) {                                                                                          \
        const T old = mx[mxo + i];                                                                            \
        v = (isnan(old) || old > v) ? old : v; /* torch.maximum: nan wins */                                  \
        mx[mxo + i] = v;                                                                                      \
      }                                                                                                       \
      const T denom = sqrt(v) / bc2s + eps;                                                                   \
      const T np = pi + neg_step * (m / denom);                                                               \
      p[po + i] = np;                                                                                         \
      OPTIM_ROUND(r, ro, i, rfmt, np);                                                                        \
    }                                                                                                         \
  }                                                                                                           \
                                                                                                              \
  /* Work-group k of the launch writes parts[at + k]; group 0 zeroes the parts no group covers.               \
   * Launched with a fixed work-group size and a group count that depends only on n, so the sum is            \
   * deterministic. */                                                                                        \
  __kernel void sum_squares_##N(__global nc_acc *parts, long at, __global const T *x, nc_layout lx, long n) {  \
    __local nc_acc sh[NC_SLOCAL];                                                                             \
    const int lid = get_local_id(0), ls = get_local_size(0);                                                  \
    nc_acc acc = 0;                                                                                           \
    NC_GROUP_FOR(long, i, 0, get_global_id(0), n, get_global_size(0)) {                                       \
      const nc_acc v = x[lx.contiguous ? lx.offset + i : nc_offset(&lx, i)];                                  \
      acc += v * v;                                                                                           \
    }                                                                                                         \
    sh[lid] = acc;                                                                                            \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                             \
    for (int w = ls / 2; w > 0; w >>= 1) {                                                                    \
      if (lid < w) sh[lid] += sh[lid + w];                                                                    \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                           \
    }                                                                                                         \
    if (lid == 0) parts[at + get_group_id(0)] = sh[0];                                                        \
    if (get_group_id(0) == 0) {                                                                               \
      NC_GROUP_FOR(int, j, (int)get_num_groups(0), lid, NC_SUM_SQUARES_PARTS, ls) parts[at + j] = 0;         \
    }                                                                                                         \
  }

OPTIM_K(float32, float)
#ifdef NC_FP64
OPTIM_K(float64, double)
#endif

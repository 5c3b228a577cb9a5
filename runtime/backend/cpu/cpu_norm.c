/* CPU batch, layer and RMS norm with their fused backward passes. Statistics accumulate in
 * double (two passes: mean, then squared deviations) whatever the element type.
 *
 * Batch norm also takes bfloat16 and float16 tensors (x, y, dy, dx, where dy and dx may both be
 * float32; the parameters and running statistics in x's dtype or float32; the saved statistics
 * float32): each run of elements is
 * widened into a float32 scratch and goes through the float32 loops, results rounded once, so
 * they are bit for bit the float32 backend's on the widened tensors, rounded. */
#include <math.h>
#include <stdlib.h>
#include "cpu_backend.h"
#include "cpu_linalg.h"
#include "netcl/half.h"

/* Element i of a float32 or float64 array (the branch is loop-invariant). */
static inline double ld(const void *p, int64_t i, bool f32) {
  return f32 ? ((const float *)p)[i] : ((const double *)p)[i];
}
static inline void st(void *p, int64_t i, double v, bool f32) {
  if (f32)
    ((float *)p)[i] = (float)v;
  else
    ((double *)p)[i] = v;
}
static inline const void *ptr(const nc_tensor *t) {
  return t ? (const char *)nc_cpu_base(t) + (size_t)t->offset * nc_dtype_size(t->dtype) : NULL;
}
static inline void *wptr(nc_tensor *t) { return (void *)ptr(t); }

/* Batch norm's per-channel scalars (parameters, running and saved statistics, affine gradients),
 * whose dtype may differ from x's: element i of t's data p as a double (exactly), and v stored as
 * one (through float32 for float32 and the storage dtypes, which rounds once). */
static inline double ld_of(const nc_tensor *t, const void *p, int64_t i) {
  switch (t->dtype) {
    case NC_FLOAT32: return ((const float *)p)[i];
    case NC_BFLOAT16: return nc_bf16_to_f32(((const uint16_t *)p)[i]);
    case NC_FLOAT16: return nc_f16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const double *)p)[i];
  }
}
static inline void st_of(const nc_tensor *t, void *p, int64_t i, double v) {
  switch (t->dtype) {
    case NC_FLOAT32: ((float *)p)[i] = (float)v; break;
    case NC_BFLOAT16: ((uint16_t *)p)[i] = nc_f32_to_bf16((float)v); break;
    case NC_FLOAT16: ((uint16_t *)p)[i] = nc_f32_to_f16((float)v); break;
    default: ((double *)p)[i] = v; break;
  }
}

/* float32 runs of batch norm's loops (one image's plane of one channel): double accumulators
 * as above, with `simd` reductions so that they vectorize (4 or 8 lanes, added at the end). */
static double run_sum(const float *x, int64_t s) {
  double acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t j = 0; j < s; j++) acc += x[j];
  return acc;
}
static double run_sqdev(const float *x, int64_t s, double m) {
  double acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t j = 0; j < s; j++) acc += ((double)x[j] - m) * ((double)x[j] - m);
  return acc;
}
static void run_norm(const float *x, float *y, int64_t s, double m, double is, double w, double b) {
#pragma omp simd
  for (int64_t j = 0; j < s; j++) y[j] = (float)(((double)x[j] - m) * is * w + b);
}
static void run_grad_sums(const float *dy, const float *x, int64_t s, double m, double *sdy, double *sdyx) {
  double a = 0, b = 0;
#pragma omp simd reduction(+ : a, b)
  for (int64_t j = 0; j < s; j++) a += dy[j], b += (double)dy[j] * ((double)x[j] - m);
  *sdy += a, *sdyx += b;
}
static void run_grad(const float *dy, const float *x, float *dx, int64_t s, double m, double a, double mdy,
                     double mdyx) {
#pragma omp simd
  for (int64_t j = 0; j < s; j++) dx[j] = (float)(a * ((double)dy[j] - mdy - ((double)x[j] - m) * mdyx));
}

/* The run of s elements at element off of a float32 or storage tensor's data p, for the float32
 * loops: p's own floats, or (storage) widened into slot, a 64-byte aligned scratch of s + 16
 * floats, at off's place modulo 16: where the run of a float32 tensor (64-byte aligned data:
 * nc_cpu_alloc) would start, so a vectorized loop splits it the same way. run_out is where a
 * result run goes, run_round rounds it into p when p has a storage dtype. */
static const float *run_in(const void *p, nc_dtype dt, int64_t off, int64_t s, float *slot) {
  if (dt == NC_FLOAT32) return (const float *)p + off;
  float *r = slot + off % 16;
  nc_cpu_half_to_f32(dt, r, 1, (const uint16_t *)p + off, 1, s);
  return r;
}
static float *run_out(void *p, nc_dtype dt, int64_t off, float *slot) {
  return dt == NC_FLOAT32 ? (float *)p + off : slot + off % 16;
}
static void run_round(void *p, nc_dtype dt, int64_t off, int64_t s, const float *r) {
  if (dt != NC_FLOAT32) nc_cpu_f32_to_half(dt, (uint16_t *)p + off, 1, r, 1, s);
}

/* A channel's scratch of k slots for runs of s elements (NULL when nothing has a storage dtype,
 * or on failure: *oom then set); slot i starts at the result + i * run_slot(s). */
static int64_t run_slot(int64_t s) { return (s + 31) / 16 * 16; }
static float *run_scratch(bool need, int64_t s, int k, int *oom) {
  if (!need) return NULL;
  float *b = aligned_alloc(64, sizeof(float) * (size_t)(k * run_slot(s)));
  if (!b) __atomic_store_n(oom, 1, __ATOMIC_RELAXED);
  return b;
}
static nc_status scratch_status(int oom, nc_dtype dt) {
  return oom ? nc_error(NC_ERR_OOM, "out of host memory for batch norm's float32 runs of a %s tensor",
                        nc_dtype_name(dt))
             : NC_OK;
}

nc_status nc_cpu_batch_norm(const nc_tensor *x, const nc_tensor *weight, const nc_tensor *bias,
                            nc_tensor *running_mean, nc_tensor *running_var, bool training, double momentum,
                            double eps, nc_tensor *y, nc_tensor *save_mean, nc_tensor *save_invstd) {
  const nc_dtype xd = x->dtype;
  const bool half = nc_dtype_is_storage(xd), runs = xd == NC_FLOAT32 || half; /* runs: the float32 loops */
  const int64_t n = x->shape[0], c = x->shape[1], s = nc_tensor_numel(x) / (n * c > 0 ? n * c : 1),
                cnt = n * s, slot = run_slot(s);
  const void *xp = ptr(x), *wp = ptr(weight), *bp = ptr(bias);
  void *yp = wptr(y), *rm = wptr(running_mean), *rv = wptr(running_var), *sm = wptr(save_mean),
       *si = wptr(save_invstd);
  int oom = 0;
#pragma omp parallel for if (nc_tensor_numel(x) > 32768)
  for (int64_t ch = 0; ch < c; ch++) {
    float *scratch = run_scratch(half, s, 2, &oom), *bx = scratch, *by = scratch ? scratch + slot : NULL;
    if (half && !scratch) continue;
    double mean, var;
    if (training) {
      double sum = 0, sq = 0;
      if (runs) {
        for (int64_t i = 0; i < n; i++) sum += run_sum(run_in(xp, xd, (i * c + ch) * s, s, bx), s);
      } else {
        for (int64_t i = 0; i < n; i++)
          for (int64_t j = 0; j < s; j++) sum += ld(xp, (i * c + ch) * s + j, false);
      }
      mean = sum / (double)cnt;
      if (runs) {
        for (int64_t i = 0; i < n; i++) sq += run_sqdev(run_in(xp, xd, (i * c + ch) * s, s, bx), s, mean);
      } else {
        for (int64_t i = 0; i < n; i++)
          for (int64_t j = 0; j < s; j++) {
            double d = ld(xp, (i * c + ch) * s + j, false) - mean;
            sq += d * d;
          }
      }
      var = sq / (double)cnt;
      if (rm) {
        st_of(running_mean, rm, ch, (1 - momentum) * ld_of(running_mean, rm, ch) + momentum * mean);
        st_of(running_var, rv, ch,
              (1 - momentum) * ld_of(running_var, rv, ch) + momentum * sq / (double)(cnt - 1));
      }
    } else {
      mean = ld_of(running_mean, rm, ch);
      var = ld_of(running_var, rv, ch);
    }
    double invstd = 1.0 / sqrt(var + eps), w = wp ? ld_of(weight, wp, ch) : 1.0,
           b = bp ? ld_of(bias, bp, ch) : 0.0;
    st_of(save_mean, sm, ch, mean);
    st_of(save_invstd, si, ch, invstd);
    if (runs) {
      for (int64_t i = 0; i < n; i++) {
        const int64_t off = (i * c + ch) * s;
        float *out = run_out(yp, xd, off, by);
        run_norm(run_in(xp, xd, off, s, bx), out, s, mean, invstd, w, b);
        run_round(yp, xd, off, s, out);
      }
    } else {
      for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < s; j++) {
          int64_t k = (i * c + ch) * s + j;
          st(yp, k, (ld(xp, k, false) - mean) * invstd * w + b, false);
        }
    }
    free(scratch);
  }
  return scratch_status(oom, xd);
}

nc_status nc_cpu_batch_norm_backward(const nc_tensor *dy, const nc_tensor *x, const nc_tensor *weight,
                                     const nc_tensor *mean, const nc_tensor *invstd, bool training,
                                     nc_tensor *dx, nc_tensor *dweight, nc_tensor *dbias) {
  /* dy and dx: x's dtype, or both float32 beside a storage x */
  const nc_dtype xd = x->dtype, gd = dy->dtype, dd = dx ? dx->dtype : xd;
  const bool half = nc_dtype_is_storage(xd), runs = xd == NC_FLOAT32 || half;
  const int64_t n = x->shape[0], c = x->shape[1], s = nc_tensor_numel(x) / (n * c > 0 ? n * c : 1),
                cnt = n * s, slot = run_slot(s);
  const void *dyp = ptr(dy), *xp = ptr(x), *wp = ptr(weight), *mp = ptr(mean), *ip = ptr(invstd);
  void *dxp = wptr(dx), *dwp = wptr(dweight), *dbp = wptr(dbias);
  int oom = 0;
#pragma omp parallel for if (nc_tensor_numel(x) > 32768)
  for (int64_t ch = 0; ch < c; ch++) {
    float *scratch = run_scratch(half, s, 3, &oom), *bdy = scratch, *bx = scratch ? scratch + slot : NULL,
          *bdx = scratch ? scratch + 2 * slot : NULL;
    if (half && !scratch) continue;
    const double m = ld_of(mean, mp, ch), is = ld_of(invstd, ip, ch), w = wp ? ld_of(weight, wp, ch) : 1.0;
    double sdy = 0, sdyx = 0;
    if (runs) {
      for (int64_t i = 0; i < n; i++) {
        const int64_t off = (i * c + ch) * s;
        run_grad_sums(run_in(dyp, gd, off, s, bdy), run_in(xp, xd, off, s, bx), s, m, &sdy, &sdyx);
      }
    } else {
      for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < s; j++) {
          int64_t k = (i * c + ch) * s + j;
          double g = ld(dyp, k, false);
          sdy += g;
          sdyx += g * (ld(xp, k, false) - m);
        }
    }
    if (dwp) st_of(dweight, dwp, ch, sdyx * is);
    if (dbp) st_of(dbias, dbp, ch, sdy);
    if (dxp) {
      /* Training: the batch mean and variance depend on x, which adds the two mean terms. */
      const double a = w * is, mdy = training ? sdy / (double)cnt : 0,
                   mdyx = training ? sdyx * is * is / (double)cnt : 0;
      if (runs) {
        for (int64_t i = 0; i < n; i++) {
          const int64_t off = (i * c + ch) * s;
          float *out = run_out(dxp, dd, off, bdx);
          run_grad(run_in(dyp, gd, off, s, bdy), run_in(xp, xd, off, s, bx), out, s, m, a, mdy, mdyx);
          run_round(dxp, dd, off, s, out);
        }
      } else {
        for (int64_t i = 0; i < n; i++)
          for (int64_t j = 0; j < s; j++) {
            int64_t k = (i * c + ch) * s + j;
            st(dxp, k, a * (ld(dyp, k, false) - mdy - (ld(xp, k, false) - m) * mdyx), false);
          }
      }
    }
    free(scratch);
  }
  return scratch_status(oom, xd);
}

nc_status nc_cpu_row_norm(bool rms, const nc_tensor *x, const nc_tensor *weight, const nc_tensor *bias,
                          double eps, nc_tensor *y, nc_tensor *mean, nc_tensor *rstd) {
  bool f = x->dtype == NC_FLOAT32;
  const int64_t r = rstd->ndim ? nc_tensor_numel(rstd) : 1, d = nc_tensor_numel(x) / (r ? r : 1);
  const void *xp = ptr(x), *wp = ptr(weight), *bp = ptr(bias);
  void *yp = wptr(y), *mp = wptr(mean), *rp = wptr(rstd);
#pragma omp parallel for if (nc_tensor_numel(x) > 32768)
  for (int64_t i = 0; i < r; i++) {
    const int64_t base = i * d;
    double mu = 0, sq = 0;
    if (!rms) {
      for (int64_t j = 0; j < d; j++) mu += ld(xp, base + j, f);
      mu /= (double)d;
    }
    for (int64_t j = 0; j < d; j++) {
      double v = ld(xp, base + j, f) - mu;
      sq += v * v;
    }
    const double rs = 1.0 / sqrt(sq / (double)d + eps);
    if (mp) st(mp, i, mu, f);
    st(rp, i, rs, f);
    for (int64_t j = 0; j < d; j++) {
      double v = (ld(xp, base + j, f) - mu) * rs;
      if (wp) v *= ld(wp, j, f);
      if (bp && !rms) v += ld(bp, j, f);
      st(yp, base + j, v, f);
    }
  }
  return NC_OK;
}

nc_status nc_cpu_row_norm_backward(bool rms, const nc_tensor *dy, const nc_tensor *x, const nc_tensor *weight,
                                   const nc_tensor *mean, const nc_tensor *rstd, nc_tensor *dx,
                                   nc_tensor *dweight, nc_tensor *dbias) {
  bool f = x->dtype == NC_FLOAT32;
  const int64_t r = rstd->ndim ? nc_tensor_numel(rstd) : 1, d = nc_tensor_numel(x) / (r ? r : 1);
  const void *dyp = ptr(dy), *xp = ptr(x), *wp = ptr(weight), *mp = ptr(mean), *rp = ptr(rstd);
  void *dxp = wptr(dx), *dwp = wptr(dweight), *dbp = wptr(dbias);
  if (dxp) {
#pragma omp parallel for if (nc_tensor_numel(x) > 32768)
    for (int64_t i = 0; i < r; i++) {
      const int64_t base = i * d;
      const double mu = rms ? 0 : ld(mp, i, f), rs = ld(rp, i, f);
      double sg = 0, sgx = 0;
      for (int64_t j = 0; j < d; j++) {
        double g = ld(dyp, base + j, f) * (wp ? ld(wp, j, f) : 1.0), xh = (ld(xp, base + j, f) - mu) * rs;
        sg += g;
        sgx += g * xh;
      }
      const double mg = rms ? 0 : sg / (double)d, mgx = sgx / (double)d;
      for (int64_t j = 0; j < d; j++) {
        double g = ld(dyp, base + j, f) * (wp ? ld(wp, j, f) : 1.0), xh = (ld(xp, base + j, f) - mu) * rs;
        st(dxp, base + j, rs * (g - mg - xh * mgx), f);
      }
    }
  }
  if (dwp || dbp) {
#pragma omp parallel for if (nc_tensor_numel(x) > 32768)
    for (int64_t j = 0; j < d; j++) {
      double sw = 0, sb = 0;
      for (int64_t i = 0; i < r; i++) {
        const double g = ld(dyp, i * d + j, f);
        sw += g * (ld(xp, i * d + j, f) - (rms ? 0 : ld(mp, i, f))) * ld(rp, i, f);
        sb += g;
      }
      if (dwp) st(dwp, j, sw, f);
      if (dbp) st(dbp, j, sb, f);
    }
  }
  return NC_OK;
}

/* Group norm (op-table KERNEL rows): t = {x, weight?, bias?, y, mean, rstd}, i = {c, s, groups},
 * f = {eps}; [n, c, s] contiguous, one (sample, group) row of (c / groups) * s elements each. */
nc_status nc_cpu_group_norm(const nc_kernel_call *k) {
  const nc_tensor *x = k->t[0], *w = k->t[1], *b = k->t[2];
  const bool f = x->dtype == NC_FLOAT32;
  const int64_t c = k->i[0], s = k->i[1], groups = k->i[2], cpg = c / groups, m = cpg * s;
  const void *xp = ptr(x), *wp = ptr(w), *bp = ptr(b);
  void *yp = wptr(k->t[3]), *mp = wptr(k->t[4]), *rp = wptr(k->t[5]);
  const double eps = k->f[0];
#pragma omp parallel for if (k->rows * m > 32768)
  for (int64_t row = 0; row < k->rows; row++) {
    const int64_t base = row * m, g = row % groups;
    double sum = 0, sq = 0;
    for (int64_t e = 0; e < m; e++) sum += ld(xp, base + e, f);
    const double mean = sum / (double)m;
    for (int64_t e = 0; e < m; e++) {
      const double d = ld(xp, base + e, f) - mean;
      sq += d * d;
    }
    const double rstd = 1 / sqrt(sq / (double)m + eps);
    st(mp, row, mean, f);
    st(rp, row, rstd, f);
    for (int64_t e = 0; e < m; e++) {
      const int64_t ch = g * cpg + e / s;
      const double wv = wp ? ld(wp, ch, f) : 1, bv = bp ? ld(bp, ch, f) : 0;
      st(yp, base + e, (ld(xp, base + e, f) - mean) * rstd * wv + bv, f);
    }
  }
  return NC_OK;
}

/* t = {dy, x, weight?, mean, rstd, dx}, i = {c, s, groups}: dx = rstd (gw - mean(gw) - xhat
 * mean(gw xhat)) per row, gw = dy * weight. */
nc_status nc_cpu_group_norm_backward(const nc_kernel_call *k) {
  const nc_tensor *x = k->t[1];
  const bool f = x->dtype == NC_FLOAT32;
  const int64_t c = k->i[0], s = k->i[1], groups = k->i[2], cpg = c / groups, m = cpg * s;
  const void *dyp = ptr(k->t[0]), *xp = ptr(x), *wp = ptr(k->t[2]), *mp = ptr(k->t[3]), *rp = ptr(k->t[4]);
  void *dxp = wptr(k->t[5]);
#pragma omp parallel for if (k->rows * m > 32768)
  for (int64_t row = 0; row < k->rows; row++) {
    const int64_t base = row * m, g = row % groups;
    const double mean = ld(mp, row, f), rstd = ld(rp, row, f);
    double a1 = 0, a2 = 0;
    for (int64_t e = 0; e < m; e++) {
      const double gw = ld(dyp, base + e, f) * (wp ? ld(wp, g * cpg + e / s, f) : 1);
      a1 += gw;
      a2 += gw * (ld(xp, base + e, f) - mean) * rstd;
    }
    const double mg = a1 / (double)m, mgx = a2 / (double)m;
    for (int64_t e = 0; e < m; e++) {
      const double gw = ld(dyp, base + e, f) * (wp ? ld(wp, g * cpg + e / s, f) : 1);
      st(dxp, base + e, rstd * (gw - mg - (ld(xp, base + e, f) - mean) * rstd * mgx), f);
    }
  }
  return NC_OK;
}

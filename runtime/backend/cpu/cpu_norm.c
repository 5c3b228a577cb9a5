/* CPU batch, layer and RMS norm with their fused backward passes. Statistics accumulate in
 * double (two passes: mean, then squared deviations) whatever the element type. */
#include <math.h>
#include "cpu_linalg.h"

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

nc_status nc_cpu_batch_norm(const nc_tensor *x, const nc_tensor *weight, const nc_tensor *bias,
                            nc_tensor *running_mean, nc_tensor *running_var, bool training, double momentum,
                            double eps, nc_tensor *y, nc_tensor *save_mean, nc_tensor *save_invstd) {
  bool f = x->dtype == NC_FLOAT32;
  const int64_t n = x->shape[0], c = x->shape[1], s = nc_tensor_numel(x) / (n * c > 0 ? n * c : 1),
                cnt = n * s;
  const void *xp = ptr(x), *wp = ptr(weight), *bp = ptr(bias);
  void *yp = wptr(y), *rm = wptr(running_mean), *rv = wptr(running_var), *sm = wptr(save_mean),
       *si = wptr(save_invstd);
#pragma omp parallel for if (nc_tensor_numel(x) > 32768)
  for (int64_t ch = 0; ch < c; ch++) {
    double mean, var;
    if (training) {
      double sum = 0, sq = 0;
      if (f) {
        for (int64_t i = 0; i < n; i++) sum += run_sum((const float *)xp + (i * c + ch) * s, s);
      } else {
        for (int64_t i = 0; i < n; i++)
          for (int64_t j = 0; j < s; j++) sum += ld(xp, (i * c + ch) * s + j, f);
      }
      mean = sum / (double)cnt;
      if (f) {
        for (int64_t i = 0; i < n; i++) sq += run_sqdev((const float *)xp + (i * c + ch) * s, s, mean);
      } else {
        for (int64_t i = 0; i < n; i++)
          for (int64_t j = 0; j < s; j++) {
            double d = ld(xp, (i * c + ch) * s + j, f) - mean;
            sq += d * d;
          }
      }
      var = sq / (double)cnt;
      if (rm) {
        st(rm, ch, (1 - momentum) * ld(rm, ch, f) + momentum * mean, f);
        st(rv, ch, (1 - momentum) * ld(rv, ch, f) + momentum * sq / (double)(cnt - 1), f);
      }
    } else {
      mean = ld(rm, ch, f);
      var = ld(rv, ch, f);
    }
    double invstd = 1.0 / sqrt(var + eps), w = wp ? ld(wp, ch, f) : 1.0, b = bp ? ld(bp, ch, f) : 0.0;
    st(sm, ch, mean, f);
    st(si, ch, invstd, f);
    if (f) {
      for (int64_t i = 0; i < n; i++)
        run_norm((const float *)xp + (i * c + ch) * s, (float *)yp + (i * c + ch) * s, s, mean, invstd, w, b);
      continue;
    }
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < s; j++) {
        int64_t k = (i * c + ch) * s + j;
        st(yp, k, (ld(xp, k, f) - mean) * invstd * w + b, f);
      }
  }
  return NC_OK;
}

nc_status nc_cpu_batch_norm_backward(const nc_tensor *dy, const nc_tensor *x, const nc_tensor *weight,
                                     const nc_tensor *mean, const nc_tensor *invstd, bool training,
                                     nc_tensor *dx, nc_tensor *dweight, nc_tensor *dbias) {
  bool f = x->dtype == NC_FLOAT32;
  const int64_t n = x->shape[0], c = x->shape[1], s = nc_tensor_numel(x) / (n * c > 0 ? n * c : 1),
                cnt = n * s;
  const void *dyp = ptr(dy), *xp = ptr(x), *wp = ptr(weight), *mp = ptr(mean), *ip = ptr(invstd);
  void *dxp = wptr(dx), *dwp = wptr(dweight), *dbp = wptr(dbias);
#pragma omp parallel for if (nc_tensor_numel(x) > 32768)
  for (int64_t ch = 0; ch < c; ch++) {
    const double m = ld(mp, ch, f), is = ld(ip, ch, f), w = wp ? ld(wp, ch, f) : 1.0;
    double sdy = 0, sdyx = 0;
    if (f) {
      for (int64_t i = 0; i < n; i++)
        run_grad_sums((const float *)dyp + (i * c + ch) * s, (const float *)xp + (i * c + ch) * s, s, m, &sdy,
                      &sdyx);
    } else {
      for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < s; j++) {
          int64_t k = (i * c + ch) * s + j;
          double g = ld(dyp, k, f);
          sdy += g;
          sdyx += g * (ld(xp, k, f) - m);
        }
    }
    if (dwp) st(dwp, ch, sdyx * is, f);
    if (dbp) st(dbp, ch, sdy, f);
    if (!dxp) continue;
    /* Training: the batch mean and variance depend on x, which adds the two mean terms. */
    const double a = w * is, mdy = training ? sdy / (double)cnt : 0,
                 mdyx = training ? sdyx * is * is / (double)cnt : 0;
    if (f) {
      for (int64_t i = 0; i < n; i++) {
        const int64_t k = (i * c + ch) * s;
        run_grad((const float *)dyp + k, (const float *)xp + k, (float *)dxp + k, s, m, a, mdy, mdyx);
      }
      continue;
    }
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < s; j++) {
        int64_t k = (i * c + ch) * s + j;
        st(dxp, k, a * (ld(dyp, k, f) - mdy - (ld(xp, k, f) - m) * mdyx), f);
      }
  }
  return NC_OK;
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

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
      for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < s; j++) sum += ld(xp, (i * c + ch) * s + j, f);
      mean = sum / (double)cnt;
      for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < s; j++) {
          double d = ld(xp, (i * c + ch) * s + j, f) - mean;
          sq += d * d;
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
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < s; j++) {
        int64_t k = (i * c + ch) * s + j;
        double g = ld(dyp, k, f);
        sdy += g;
        sdyx += g * (ld(xp, k, f) - m);
      }
    if (dwp) st(dwp, ch, sdyx * is, f);
    if (dbp) st(dbp, ch, sdy, f);
    if (!dxp) continue;
    /* Training: the batch mean and variance depend on x, which adds the two mean terms. */
    const double a = w * is, mdy = training ? sdy / (double)cnt : 0,
                 mdyx = training ? sdyx * is * is / (double)cnt : 0;
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

/* CPU image transforms (op-table KERNEL rows resized_crop, adjust_color, gaussian_blur), the
 * reference of kernels/image.cl: the same steps in the tensor's precision (tgmath.h picks the
 * float or double functions). Tensors are contiguous; t = {x, params, y}. */
#include <tgmath.h>
#include "cpu_backend.h"
#include "strided.h"

#define BLUR_MAX 63

static inline void *elems(const nc_tensor *t) {
  return (char *)nc_storage_host_ptr(t->storage) + (size_t)t->offset * nc_dtype_size(t->dtype);
}

/* One body per dtype: DEFINE(T, suffix) instantiates the three transforms for T. */
#define DEFINE(T, S)                                                                                          \
  static inline T at_##S(const T *p, int64_t r, int64_t c, int64_t h, int64_t w, T fill) {                   \
    return (r >= 0 && r < h && c >= 0 && c < w) ? p[r * w + c] : fill;                                        \
  }                                                                                                           \
  static inline void src_##S(int64_t o, int64_t n, int64_t m, int64_t *i0, int64_t *i1, T *l) {               \
    T s = ((T)o + (T)0.5) * ((T)n / (T)m) - (T)0.5;                                                           \
    if (s < 0) s = 0;                                                                                         \
    int64_t i = (int64_t)s;                                                                                   \
    if (i > n - 1) i = n - 1;                                                                                 \
    *i0 = i;                                                                                                  \
    *i1 = i < n - 1 ? i + 1 : i;                                                                              \
    *l = s - (T)i;                                                                                            \
  }                                                                                                           \
  static void resized_crop_##S(const nc_kernel_call *k) {                                                     \
    const T *x = elems(k->t[0]), *box = elems(k->t[1]);                                                       \
    T *y = elems(k->t[2]);                                                                                    \
    const int64_t c = k->i[0], h = k->i[1], w = k->i[2], oh = k->i[3], ow = k->i[4];                          \
    const T fill = (T)k->f[0];                                                                                \
    NC_CPU_PARALLEL_FOR(k->rows * oh * ow > NC_CPU_PARALLEL_MIN, schedule(dynamic, 4), plane, k->rows, {     \
      const T *b = box + (plane / c) * 5;                                                                     \
      const int64_t top = (int64_t)b[0], left = (int64_t)b[1];                                                \
      const int64_t bh = (int64_t)b[2] > 1 ? (int64_t)b[2] : 1, bw = (int64_t)b[3] > 1 ? (int64_t)b[3] : 1;   \
      const int flip = b[4] != 0;                                                                             \
      const T *src = x + plane * h * w;                                                                       \
      T *dst = y + plane * oh * ow;                                                                           \
      if (bh == oh && bw == ow) { /* a plain crop: every weight is 0, the pixels are copied */               \
        for (int64_t oy = 0; oy < oh; oy++) {                                                                 \
          const int64_t r = top + oy;                                                                         \
          T *d = dst + oy * ow;                                                                               \
          if (r < 0 || r >= h) {                                                                              \
            for (int64_t ox = 0; ox < ow; ox++) d[ox] = fill;                                                 \
            continue;                                                                                         \
          }                                                                                                   \
          const T *sr = src + r * w;                                                                          \
          for (int64_t ox = 0; ox < ow; ox++) {                                                               \
            const int64_t q = left + (flip ? ow - 1 - ox : ox);                                               \
            d[ox] = q >= 0 && q < w ? sr[q] : fill;                                                           \
          }                                                                                                   \
        }                                                                                                     \
        continue;                                                                                             \
      }                                                                                                       \
      for (int64_t oy = 0; oy < oh; oy++) {                                                                   \
        int64_t y0, y1;                                                                                       \
        T ly;                                                                                                 \
        src_##S(oy, bh, oh, &y0, &y1, &ly);                                                                   \
        for (int64_t ox0 = 0; ox0 < ow; ox0++) {                                                              \
          const int64_t ox = flip ? ow - 1 - ox0 : ox0;                                                       \
          int64_t x0, x1;                                                                                     \
          T lx;                                                                                               \
          src_##S(ox, bw, ow, &x0, &x1, &lx);                                                                 \
          const T a = at_##S(src, top + y0, left + x0, h, w, fill), bb = at_##S(src, top + y0, left + x1, h, w, fill); \
          const T cc = at_##S(src, top + y1, left + x0, h, w, fill), d = at_##S(src, top + y1, left + x1, h, w, fill); \
          dst[oy * ow + ox0] = ((T)1 - ly) * (((T)1 - lx) * a + lx * bb) + ly * (((T)1 - lx) * cc + lx * d);  \
        }                                                                                                     \
      }                                                                                                       \
    });                                                                                                       \
  }                                                                                                           \
  static inline T gray_##S(T r, T g, T b) { return (T)0.2989 * r + (T)0.587 * g + (T)0.114 * b; }             \
  static inline T blend_##S(T a, T b, T ratio) {                                                              \
    const T v = ratio * a + ((T)1 - ratio) * b;                                                               \
    return v < 0 ? 0 : v > 1 ? 1 : v;                                                                         \
  }                                                                                                           \
  static inline T clamp01_##S(T v) { return v < 0 ? 0 : v > 1 ? 1 : v; }                                     \
  static void hue_##S(T *r, T *g, T *b, T hue) {                                                              \
    const T maxc = fmax(*r, fmax(*g, *b)), minc = fmin(*r, fmin(*g, *b));                                     \
    const int eqc = maxc == minc;                                                                             \
    const T cr = maxc - minc, s = cr / (eqc ? (T)1 : maxc), div = eqc ? (T)1 : cr;                            \
    const T rc = (maxc - *r) / div, gc = (maxc - *g) / div, bc = (maxc - *b) / div;                           \
    T hh = maxc == *r ? bc - gc : maxc == *g ? (T)2 + rc - bc : (T)4 + gc - rc;                               \
    hh = fmod(hh / (T)6 + (T)1, (T)1);                                                                        \
    hh = hh + hue;                                                                                            \
    hh = hh - floor(hh);                                                                                      \
    const T v = maxc, i6 = floor(hh * (T)6), f = hh * (T)6 - i6;                                              \
    const int i = ((int)i6 % 6 + 6) % 6;                                                                      \
    const T p = clamp01_##S(v * ((T)1 - s)), q = clamp01_##S(v * ((T)1 - s * f));                             \
    const T t = clamp01_##S(v * ((T)1 - s * ((T)1 - f)));                                                     \
    const T o[6][3] = {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}};                     \
    *r = o[i][0], *g = o[i][1], *b = o[i][2];                                                                 \
  }                                                                                                           \
  static void adjust_color_##S(const nc_kernel_call *k) {                                                     \
    const T *x = elems(k->t[0]), *fac = elems(k->t[1]);                                                       \
    T *y = elems(k->t[2]);                                                                                    \
    const int64_t hw = k->i[0];                                                                               \
    NC_CPU_PARALLEL_FOR(k->rows * hw > NC_CPU_PARALLEL_MIN / 8, schedule(dynamic, 1), n, k->rows, {           \
      const T *p = fac + n * 6;                                                                               \
      const T bright = p[0], contrast = p[1], sat = p[2], hue = p[3];                                         \
      const int64_t order = (int64_t)p[4];                                                                    \
      const T *src = x + n * 3 * hw;                                                                          \
      T *dst = y + n * 3 * hw;                                                                                \
      for (int64_t e = 0; e < 3 * hw; e++) dst[e] = src[e];                                                   \
      for (int step = 0; step < 4; step++) {                                                                  \
        const int64_t op = (order >> (2 * step)) & 3;                                                         \
        T mean = 0;                                                                                           \
        if (op == 1 && contrast != 1) {                                                                       \
          double acc = 0;                                                                                     \
          for (int64_t e = 0; e < hw; e++) acc += gray_##S(dst[e], dst[hw + e], dst[2 * hw + e]);             \
          mean = (T)(acc / (double)hw);                                                                       \
        }                                                                                                     \
        for (int64_t e = 0; e < hw; e++) {                                                                    \
          T r = dst[e], g = dst[hw + e], b = dst[2 * hw + e];                                                 \
          if (op == 0 && bright != 1) {                                                                       \
            r = blend_##S(r, 0, bright), g = blend_##S(g, 0, bright), b = blend_##S(b, 0, bright);            \
          } else if (op == 1 && contrast != 1) {                                                              \
            r = blend_##S(r, mean, contrast), g = blend_##S(g, mean, contrast), b = blend_##S(b, mean, contrast); \
          } else if (op == 2 && sat != 1) {                                                                   \
            const T l = gray_##S(r, g, b);                                                                    \
            r = blend_##S(r, l, sat), g = blend_##S(g, l, sat), b = blend_##S(b, l, sat);                     \
          } else if (op == 3 && hue != 0) {                                                                   \
            hue_##S(&r, &g, &b, hue);                                                                         \
          }                                                                                                   \
          dst[e] = r, dst[hw + e] = g, dst[2 * hw + e] = b;                                                   \
        }                                                                                                     \
      }                                                                                                       \
      if (p[5] != 0)                                                                                          \
        for (int64_t e = 0; e < hw; e++) {                                                                    \
          const T l = gray_##S(dst[e], dst[hw + e], dst[2 * hw + e]);                                         \
          dst[e] = l, dst[hw + e] = l, dst[2 * hw + e] = l;                                                   \
        }                                                                                                     \
    });                                                                                                       \
  }                                                                                                           \
  static inline int64_t reflect_##S(int64_t i, int64_t n) {                                                   \
    if (i < 0) i = -i;                                                                                        \
    if (i >= n) i = 2 * n - 2 - i;                                                                            \
    return i;                                                                                                 \
  }                                                                                                           \
  static void gaussian_blur_##S(const nc_kernel_call *k) {                                                    \
    const T *x = elems(k->t[0]), *sig = elems(k->t[1]);                                                       \
    T *y = elems(k->t[2]);                                                                                    \
    const int64_t c = k->i[0], h = k->i[1], w = k->i[2], ks = k->i[3], hk = ks / 2;                         \
    NC_CPU_PARALLEL_FOR(k->rows * h * w * ks > NC_CPU_PARALLEL_MIN, schedule(dynamic, 4), plane, k->rows, {  \
      const T sigma = sig[plane / c];                                                                         \
      T wt[BLUR_MAX], norm = 0;                                                                               \
      for (int64_t i = 0; i < ks; i++) {                                                                      \
        const T d = (T)(i - hk) / sigma;                                                                    \
        wt[i] = exp((T)-0.5 * d * d);                                                                         \
        norm += wt[i];                                                                                        \
      }                                                                                                       \
      for (int64_t i = 0; i < ks; i++) wt[i] /= norm;                                                         \
      const T *src = x + plane * h * w;                                                                       \
      T *dst = y + plane * h * w;                                                                             \
      for (int64_t e = 0; e < h * w; e++) {                                                                   \
        const int64_t oy = e / w, ox = e % w;                                                                 \
        T acc = 0;                                                                                            \
        for (int64_t i = 0; i < ks; i++) {                                                                    \
          const int64_t r = reflect_##S(oy + i - hk, h);                                                    \
          T row = 0;                                                                                          \
          for (int64_t j = 0; j < ks; j++) row += wt[j] * src[r * w + reflect_##S(ox + j - hk, w)];         \
          acc += wt[i] * row;                                                                                 \
        }                                                                                                     \
        dst[e] = acc;                                                                                         \
      }                                                                                                       \
    });                                                                                                       \
  }

DEFINE(float, f32)
DEFINE(double, f64)

nc_status nc_cpu_resized_crop(const nc_kernel_call *k) {
  if (k->t[0]->dtype == NC_FLOAT32)
    resized_crop_f32(k);
  else
    resized_crop_f64(k);
  return NC_OK;
}

nc_status nc_cpu_adjust_color(const nc_kernel_call *k) {
  if (k->t[0]->dtype == NC_FLOAT32)
    adjust_color_f32(k);
  else
    adjust_color_f64(k);
  return NC_OK;
}

nc_status nc_cpu_gaussian_blur(const nc_kernel_call *k) {
  if (k->t[0]->dtype == NC_FLOAT32)
    gaussian_blur_f32(k);
  else
    gaussian_blur_f64(k);
  return NC_OK;
}

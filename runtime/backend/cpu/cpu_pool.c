/* CPU pooling, parallel over planes (N*C). Windows follow PyTorch: max takes the first
 * maximum and lets NaN win; avg divides by the window clipped to the padded input (or to the
 * input without count_include_pad); adaptive windows are [floor(i*H/OH), ceil((i+1)*H/OH)). */
#include <math.h>
#include <stdlib.h>
#include "cpu_linalg.h"
#include "strided.h"

static inline int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
static inline int64_t adaptive_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

/* The window of output (oy, ox) for avg pooling and its divisor. */
static inline void avg_window(const nc_pool2d_desc *p, int64_t oy, int64_t ox, int64_t *y0, int64_t *y1,
                              int64_t *x0, int64_t *x1, double *div) {
  int64_t ys = oy * p->stride[0] - p->padding[0], xs = ox * p->stride[1] - p->padding[1];
  int64_t ye = ys + p->kernel[0], xe = xs + p->kernel[1];
  if (ye > p->h + p->padding[0]) ye = p->h + p->padding[0];
  if (xe > p->w + p->padding[1]) xe = p->w + p->padding[1];
  int64_t padded = (ye - ys) * (xe - xs);
  if (ys < 0) ys = 0;
  if (xs < 0) xs = 0;
  if (ye > p->h) ye = p->h;
  if (xe > p->w) xe = p->w;
  *y0 = ys, *y1 = ye, *x0 = xs, *x1 = xe;
  *div = (double)(p->count_include_pad ? padded : (ye - ys) * (xe - xs));
}

/* The taps i in [0, k) of a window starting at s (dilation d) that fall inside [0, n). */
static inline void taps(int64_t s, int64_t d, int64_t k, int64_t n, int64_t *i0, int64_t *i1) {
  *i0 = s < 0 ? (-s + d - 1) / d : 0;
  int64_t e = n - s > 0 ? (n - s + d - 1) / d : 0;
  *i1 = e < k ? e : k;
}

/* Max pooling without per-tap bounds checks or divisions: each output row's and column's range
 * of taps inside the input is found once per call (the same choices as the generic loop below:
 * the first maximum, NaN wins). rng: [oh] row ranges, then [ow] column ranges, as (t0, t1). */
#define DEFINE_MAX_POOL(T, SUF)                                                                           \
  static void max_pool_fwd_##SUF(const nc_pool2d_desc *p, const int64_t *rng, const T *x, T *y,           \
                                 int64_t *idx) {                                                          \
    const int64_t ohw = p->oh * p->ow, hw = p->h * p->w;                                                  \
    const int64_t dh = p->dilation[0], dw = p->dilation[1];                                               \
    NC_CPU_PARALLEL_FOR(p->planes * ohw > 16384, schedule(dynamic, 4), pl, p->planes, {                   \
      const T *xp = x + pl * hw;                                                                          \
      for (int64_t oy = 0; oy < p->oh; oy++) {                                                            \
        const int64_t ys = oy * p->stride[0] - p->padding[0], i0 = rng[2 * oy], i1 = rng[2 * oy + 1];     \
        for (int64_t ox = 0; ox < p->ow; ox++) {                                                          \
          const int64_t xs = ox * p->stride[1] - p->padding[1], o = pl * ohw + oy * p->ow + ox;           \
          const int64_t j0 = rng[2 * (p->oh + ox)], j1 = rng[2 * (p->oh + ox) + 1];                       \
          T best = -INFINITY;                                                                             \
          int64_t bi = -1;                                                                                \
          if (i0 < i1 && j0 < j1) {                                                                       \
            bi = (ys + i0 * dh) * p->w + xs + j0 * dw;                                                    \
            best = xp[bi];                                                                                \
            /* branch-free (selects): a tap is taken when greater or NaN, unless best is NaN */        \
            for (int64_t i = i0; i < i1; i++) {                                                           \
              const int64_t r = (ys + i * dh) * p->w + xs;                                                \
              for (int64_t j = j0; j < j1; j++) {                                                         \
                const T v = xp[r + j * dw];                                                               \
                const int take = ((v > best) | (v != v)) & (best == best);                                \
                const T keep = best;                                                                      \
                best = take ? v : keep;                                                                   \
                bi = take ? r + j * dw : bi;                                                              \
              }                                                                                           \
            }                                                                                             \
          }                                                                                               \
          y[o] = best;                                                                                    \
          idx[o] = bi;                                                                                    \
        }                                                                                                 \
      }                                                                                                   \
    });                                                                                                   \
  }

DEFINE_MAX_POOL(float, f32)
DEFINE_MAX_POOL(double, f64)

#define DEFINE_POOL(T, SUF)                                                                               \
  static void pool_fwd_##SUF(const nc_pool2d_desc *p, const T *x, T *y, int64_t *idx) {                   \
    const int64_t ohw = p->oh * p->ow, hw = p->h * p->w;                                                  \
    _Pragma("omp parallel for if (p->planes * ohw > 16384)") for (int64_t pl = 0; pl < p->planes; pl++) { \
      const T *xp = x + pl * hw;                                                                          \
      for (int64_t oy = 0; oy < p->oh; oy++)                                                              \
        for (int64_t ox = 0; ox < p->ow; ox++) {                                                          \
          const int64_t o = pl * ohw + oy * p->ow + ox;                                                   \
          if (p->kind == NC_POOL_MAX) {                                                                   \
            T best = -INFINITY;                                                                           \
            int64_t bi = -1;                                                                              \
            for (int64_t i = 0; i < p->kernel[0]; i++) {                                                  \
              const int64_t yy = oy * p->stride[0] - p->padding[0] + i * p->dilation[0];                  \
              if (yy < 0 || yy >= p->h) continue;                                                         \
              for (int64_t j = 0; j < p->kernel[1]; j++) {                                                \
                const int64_t xx = ox * p->stride[1] - p->padding[1] + j * p->dilation[1];                \
                if (xx < 0 || xx >= p->w) continue;                                                       \
                const T v = xp[yy * p->w + xx];                                                           \
                if (bi < 0 || v > best || isnan(v)) {                                                     \
                  best = v;                                                                               \
                  bi = yy * p->w + xx;                                                                    \
                  if (isnan(v)) goto done_##SUF;                                                          \
                }                                                                                         \
              }                                                                                           \
            }                                                                                             \
            done_##SUF : y[o] = best;                                                                     \
            idx[o] = bi;                                                                                  \
          } else {                                                                                        \
            int64_t y0, y1, x0, x1;                                                                       \
            double div, s = 0;                                                                            \
            if (p->kind == NC_POOL_AVG) {                                                                 \
              avg_window(p, oy, ox, &y0, &y1, &x0, &x1, &div);                                            \
            } else {                                                                                      \
              y0 = adaptive_start(oy, p->h, p->oh), y1 = adaptive_end(oy, p->h, p->oh);                   \
              x0 = adaptive_start(ox, p->w, p->ow), x1 = adaptive_end(ox, p->w, p->ow);                   \
              div = (double)((y1 - y0) * (x1 - x0));                                                      \
            }                                                                                             \
            for (int64_t yy = y0; yy < y1; yy++)                                                          \
              for (int64_t xx = x0; xx < x1; xx++) s += xp[yy * p->w + xx];                               \
            y[o] = (T)(s / div);                                                                          \
          }                                                                                               \
        }                                                                                                 \
    }                                                                                                     \
  }                                                                                                       \
  /* Scatter per plane: each plane's outputs touch only that plane of dx. */                              \
  static void pool_bwd_##SUF(const nc_pool2d_desc *p, const T *dy, const int64_t *idx, T *dx) {           \
    const int64_t ohw = p->oh * p->ow, hw = p->h * p->w;                                                  \
    _Pragma("omp parallel for if (p->planes * hw > 16384)") for (int64_t pl = 0; pl < p->planes; pl++) {  \
      T *dp = dx + pl * hw;                                                                               \
      for (int64_t i = 0; i < hw; i++) dp[i] = 0;                                                         \
      for (int64_t oy = 0; oy < p->oh; oy++)                                                              \
        for (int64_t ox = 0; ox < p->ow; ox++) {                                                          \
          const int64_t o = pl * ohw + oy * p->ow + ox;                                                   \
          if (p->kind == NC_POOL_MAX) {                                                                   \
            if (idx[o] >= 0) dp[idx[o]] += dy[o];                                                         \
            continue;                                                                                     \
          }                                                                                               \
          int64_t y0, y1, x0, x1;                                                                         \
          double div;                                                                                     \
          if (p->kind == NC_POOL_AVG) {                                                                   \
            avg_window(p, oy, ox, &y0, &y1, &x0, &x1, &div);                                              \
          } else {                                                                                        \
            y0 = adaptive_start(oy, p->h, p->oh), y1 = adaptive_end(oy, p->h, p->oh);                     \
            x0 = adaptive_start(ox, p->w, p->ow), x1 = adaptive_end(ox, p->w, p->ow);                     \
            div = (double)((y1 - y0) * (x1 - x0));                                                        \
          }                                                                                               \
          const T g = (T)(dy[o] / div);                                                                   \
          for (int64_t yy = y0; yy < y1; yy++)                                                            \
            for (int64_t xx = x0; xx < x1; xx++) dp[yy * p->w + xx] += g;                                 \
        }                                                                                                 \
    }                                                                                                     \
  }

DEFINE_POOL(float, f32)
DEFINE_POOL(double, f64)

nc_status nc_cpu_pool2d(const nc_pool2d_desc *p, const nc_tensor *x, nc_tensor *y, nc_tensor *indices) {
  int64_t *idx = indices ? (int64_t *)nc_cpu_base(indices) + indices->offset : NULL;
  if (p->kind == NC_POOL_MAX && idx) {
    int64_t *rng = malloc(sizeof(int64_t) * 2 * (size_t)(p->oh + p->ow) + 1);
    if (!rng) return nc_error(NC_ERR_OOM, "out of host memory for max_pool2d");
    for (int64_t oy = 0; oy < p->oh; oy++)
      taps(oy * p->stride[0] - p->padding[0], p->dilation[0], p->kernel[0], p->h, &rng[2 * oy], &rng[2 * oy + 1]);
    for (int64_t ox = 0; ox < p->ow; ox++)
      taps(ox * p->stride[1] - p->padding[1], p->dilation[1], p->kernel[1], p->w, &rng[2 * (p->oh + ox)],
           &rng[2 * (p->oh + ox) + 1]);
    if (y->dtype == NC_FLOAT32)
      max_pool_fwd_f32(p, rng, (const float *)nc_cpu_base(x) + x->offset, (float *)nc_cpu_base(y) + y->offset, idx);
    else
      max_pool_fwd_f64(p, rng, (const double *)nc_cpu_base(x) + x->offset, (double *)nc_cpu_base(y) + y->offset,
                       idx);
    free(rng);
    return NC_OK;
  }
  if (y->dtype == NC_FLOAT32)
    pool_fwd_f32(p, (const float *)nc_cpu_base(x) + x->offset, (float *)nc_cpu_base(y) + y->offset, idx);
  else
    pool_fwd_f64(p, (const double *)nc_cpu_base(x) + x->offset, (double *)nc_cpu_base(y) + y->offset, idx);
  return NC_OK;
}

nc_status nc_cpu_pool2d_backward(const nc_pool2d_desc *p, const nc_tensor *dy, const nc_tensor *indices,
                                 nc_tensor *dx) {
  const int64_t *idx = indices ? (const int64_t *)nc_cpu_base(indices) + indices->offset : NULL;
  if (dx->dtype == NC_FLOAT32)
    pool_bwd_f32(p, (const float *)nc_cpu_base(dy) + dy->offset, idx, (float *)nc_cpu_base(dx) + dx->offset);
  else
    pool_bwd_f64(p, (const double *)nc_cpu_base(dy) + dy->offset, idx,
                 (double *)nc_cpu_base(dx) + dx->offset);
  return NC_OK;
}

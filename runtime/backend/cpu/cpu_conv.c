/* CPU conv2d: im2col plus GEMM, per image and group (the GEMM is OpenBLAS or the blocked C
 * GEMM, both multithreaded; im2col runs in parallel over its rows). 1x1 convolutions with
 * stride 1 and no padding read the input directly as the column matrix. */
#include <stdlib.h>
#include <string.h>
#include "cpu_linalg.h"

typedef struct {
  int64_t cg, og, kdim, hw, ohw;
  bool direct; /* 1x1, stride 1, no padding: col = x */
} conv_dims;

static conv_dims dims_of(const nc_conv2d_desc *p) {
  conv_dims d;
  d.cg = p->c_in / p->groups;
  d.og = p->c_out / p->groups;
  d.kdim = d.cg * p->kh * p->kw;
  d.hw = p->h * p->w;
  d.ohw = p->oh * p->ow;
  d.direct = p->kh == 1 && p->kw == 1 && p->stride[0] == 1 && p->stride[1] == 1 && p->padding[0] == 0 &&
             p->padding[1] == 0;
  return d;
}

/* col [cg*kh*kw, oh*ow] from one image's group of channels x [cg, h, w]; and the adjoint,
 * which adds col back into x (x must be zeroed first). */
#define DEFINE_IM2COL(T, SUF)                                                                               \
  static void im2col_##SUF(const nc_conv2d_desc *p, int64_t cg, const T *x, T *col) {                       \
    const int64_t kh = p->kh, kw = p->kw, rows = cg * kh * kw, ohw = p->oh * p->ow;                         \
    _Pragma("omp parallel for if (rows * ohw > 65536)")                                                     \
    for (int64_t r = 0; r < rows; r++) {                                                                    \
      const int64_t c = r / (kh * kw), i = (r / kw) % kh, j = r % kw;                                       \
      T *out = col + r * ohw;                                                                               \
      for (int64_t oy = 0; oy < p->oh; oy++) {                                                              \
        const int64_t y = oy * p->stride[0] - p->padding[0] + i * p->dilation[0];                           \
        if (y < 0 || y >= p->h) {                                                                           \
          memset(out + oy * p->ow, 0, sizeof(T) * (size_t)p->ow);                                           \
          continue;                                                                                         \
        }                                                                                                   \
        const T *row = x + (c * p->h + y) * p->w;                                                           \
        for (int64_t ox = 0; ox < p->ow; ox++) {                                                            \
          const int64_t xx = ox * p->stride[1] - p->padding[1] + j * p->dilation[1];                        \
          out[oy * p->ow + ox] = (xx >= 0 && xx < p->w) ? row[xx] : (T)0;                                   \
        }                                                                                                   \
      }                                                                                                     \
    }                                                                                                       \
  }                                                                                                         \
  /* Parallel over channels: each channel's rows write only that channel of x. */                          \
  static void col2im_##SUF(const nc_conv2d_desc *p, int64_t cg, const T *col, T *x) {                      \
    const int64_t kh = p->kh, kw = p->kw, ohw = p->oh * p->ow;                                              \
    _Pragma("omp parallel for if (cg * kh * kw * ohw > 65536)")                                             \
    for (int64_t c = 0; c < cg; c++)                                                                        \
      for (int64_t i = 0; i < kh; i++)                                                                      \
        for (int64_t j = 0; j < kw; j++) {                                                                  \
          const T *in = col + ((c * kh + i) * kw + j) * ohw;                                                \
          for (int64_t oy = 0; oy < p->oh; oy++) {                                                          \
            const int64_t y = oy * p->stride[0] - p->padding[0] + i * p->dilation[0];                       \
            if (y < 0 || y >= p->h) continue;                                                               \
            T *row = x + (c * p->h + y) * p->w;                                                             \
            for (int64_t ox = 0; ox < p->ow; ox++) {                                                        \
              const int64_t xx = ox * p->stride[1] - p->padding[1] + j * p->dilation[1];                    \
              if (xx >= 0 && xx < p->w) row[xx] += in[oy * p->ow + ox];                                     \
            }                                                                                               \
          }                                                                                                 \
        }                                                                                                   \
  }

DEFINE_IM2COL(float, f32)
DEFINE_IM2COL(double, f64)

static void im2col(bool f32, const nc_conv2d_desc *p, int64_t cg, const void *x, void *col) {
  if (f32) im2col_f32(p, cg, x, col);
  else im2col_f64(p, cg, x, col);
}

static void col2im(bool f32, const nc_conv2d_desc *p, int64_t cg, const void *col, void *x) {
  if (f32) col2im_f32(p, cg, col, x);
  else col2im_f64(p, cg, col, x);
}

static nc_status gemm(bool f32, int64_t m, int64_t n, int64_t k, const void *a, int64_t sam, int64_t sak,
                      const void *b, int64_t sbk, int64_t sbn, double beta, void *c, int64_t csm, int64_t csn) {
  if (f32) return nc_cpu_sgemm(m, n, k, 1.0f, a, sam, sak, b, sbk, sbn, (float)beta, c, csm, csn);
  return nc_cpu_dgemm(m, n, k, 1.0, a, sam, sak, b, sbk, sbn, beta, c, csm, csn);
}

static void *col_buffer(const conv_dims *d, size_t es) {
  return d->direct ? NULL : malloc(es * (size_t)(d->kdim * d->ohw) + 1);
}

nc_status nc_cpu_conv2d(const nc_conv2d_desc *p, const nc_tensor *x, const nc_tensor *w, const nc_tensor *bias,
                        nc_tensor *y) {
  bool f32 = y->dtype == NC_FLOAT32;
  size_t es = f32 ? 4 : 8;
  conv_dims d = dims_of(p);
  const char *xb = (const char *)nc_cpu_base(x) + es * (size_t)x->offset;
  const char *wb = (const char *)nc_cpu_base(w) + es * (size_t)w->offset;
  char *yb = (char *)nc_cpu_base(y) + es * (size_t)y->offset;
  void *col = col_buffer(&d, es);
  if (!col && !d.direct) return nc_error(NC_ERR_OOM, "out of host memory for the im2col buffer");
  nc_status s = NC_OK;
  for (int64_t n = 0; n < p->n && s == NC_OK; n++)
    for (int64_t g = 0; g < p->groups && s == NC_OK; g++) {
      const char *xg = xb + es * (size_t)((n * p->c_in + g * d.cg) * d.hw);
      char *yg = yb + es * (size_t)((n * p->c_out + g * d.og) * d.ohw);
      const void *cm = xg;
      if (!d.direct) {
        im2col(f32, p, d.cg, xg, col);
        cm = col;
      }
      s = gemm(f32, d.og, d.ohw, d.kdim, wb + es * (size_t)(g * d.og * d.kdim), d.kdim, 1, cm, d.ohw, 1, 0.0, yg,
               d.ohw, 1);
    }
  free(col);
  if (s != NC_OK || !bias) return s;
  const char *bb = (const char *)nc_cpu_base(bias) + es * (size_t)bias->offset;
#pragma omp parallel for collapse(2) if (p->n * p->c_out * d.ohw > 65536)
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t o = 0; o < p->c_out; o++) {
      int64_t base = (n * p->c_out + o) * d.ohw;
      if (f32) {
        float *yy = (float *)yb + base, bv = ((const float *)bb)[o];
        for (int64_t i = 0; i < d.ohw; i++) yy[i] += bv;
      } else {
        double *yy = (double *)yb + base, bv = ((const double *)bb)[o];
        for (int64_t i = 0; i < d.ohw; i++) yy[i] += bv;
      }
    }
  return NC_OK;
}

nc_status nc_cpu_conv2d_backward_input(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *w,
                                       nc_tensor *dx) {
  bool f32 = dx->dtype == NC_FLOAT32;
  size_t es = f32 ? 4 : 8;
  conv_dims d = dims_of(p);
  const char *dyb = (const char *)nc_cpu_base(dy) + es * (size_t)dy->offset;
  const char *wb = (const char *)nc_cpu_base(w) + es * (size_t)w->offset;
  char *dxb = (char *)nc_cpu_base(dx) + es * (size_t)dx->offset;
  void *col = col_buffer(&d, es);
  if (!col && !d.direct) return nc_error(NC_ERR_OOM, "out of host memory for the im2col buffer");
  if (!d.direct) memset(dxb, 0, es * (size_t)(p->n * p->c_in * d.hw));
  nc_status s = NC_OK;
  for (int64_t n = 0; n < p->n && s == NC_OK; n++)
    for (int64_t g = 0; g < p->groups && s == NC_OK; g++) {
      const char *dyg = dyb + es * (size_t)((n * p->c_out + g * d.og) * d.ohw);
      char *dxg = dxb + es * (size_t)((n * p->c_in + g * d.cg) * d.hw);
      /* dcol [kdim, ohw] = W_g^T [kdim, og] @ dy_g [og, ohw]; W_g^T read through strides. */
      s = gemm(f32, d.kdim, d.ohw, d.og, wb + es * (size_t)(g * d.og * d.kdim), 1, d.kdim, dyg, d.ohw, 1, 0.0,
               d.direct ? (void *)dxg : col, d.ohw, 1);
      if (s == NC_OK && !d.direct) col2im(f32, p, d.cg, col, dxg);
    }
  free(col);
  return s;
}

nc_status nc_cpu_conv2d_backward_weight(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *x,
                                        nc_tensor *dw) {
  bool f32 = dw->dtype == NC_FLOAT32;
  size_t es = f32 ? 4 : 8;
  conv_dims d = dims_of(p);
  const char *dyb = (const char *)nc_cpu_base(dy) + es * (size_t)dy->offset;
  const char *xb = (const char *)nc_cpu_base(x) + es * (size_t)x->offset;
  char *dwb = (char *)nc_cpu_base(dw) + es * (size_t)dw->offset;
  void *col = col_buffer(&d, es);
  if (!col && !d.direct) return nc_error(NC_ERR_OOM, "out of host memory for the im2col buffer");
  nc_status s = NC_OK;
  for (int64_t n = 0; n < p->n && s == NC_OK; n++)
    for (int64_t g = 0; g < p->groups && s == NC_OK; g++) {
      const char *dyg = dyb + es * (size_t)((n * p->c_out + g * d.og) * d.ohw);
      const char *xg = xb + es * (size_t)((n * p->c_in + g * d.cg) * d.hw);
      const void *cm = xg;
      if (!d.direct) {
        im2col(f32, p, d.cg, xg, col);
        cm = col;
      }
      /* dW_g [og, kdim] (+)= dy_g [og, ohw] @ col^T [ohw, kdim]. */
      s = gemm(f32, d.og, d.kdim, d.ohw, dyg, d.ohw, 1, cm, 1, d.ohw, n == 0 ? 0.0 : 1.0,
               dwb + es * (size_t)(g * d.og * d.kdim), d.kdim, 1);
    }
  free(col);
  return s;
}

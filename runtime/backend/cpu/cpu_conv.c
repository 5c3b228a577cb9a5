/* CPU conv2d: im2col plus GEMM (OpenBLAS or the blocked C GEMM, both multithreaded). Images
 * are processed in chunks whose column matrices are laid side by side, so layers with small
 * outputs (7x7, 14x14) still make one large GEMM per chunk instead of many thin ones: each
 * chunk has about CHUNK_COLUMNS columns. The output and output-gradient blocks are gathered
 * to and scattered from [channels, chunk columns] form around the GEMM. Builds with oneDNN run
 * float32 convolutions on it (cpu_dnnl.c) and keep this path for the cases it declines. */
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "cpu_dnnl.h"
#include "cpu_linalg.h"

enum { CHUNK_COLUMNS = 4096 };

typedef struct {
  int64_t cg, og, kdim, hw, ohw;
  int64_t nb, cols; /* images per chunk, columns per chunk (nb * ohw) */
} conv_dims;

static conv_dims dims_of(const nc_conv2d_desc *p) {
  conv_dims d;
  d.cg = p->c_in / p->groups;
  d.og = p->c_out / p->groups;
  d.kdim = d.cg * p->kh * p->kw;
  d.hw = p->h * p->w;
  d.ohw = p->oh * p->ow;
  d.nb = CHUNK_COLUMNS / (d.ohw > 0 ? d.ohw : 1);
  if (d.nb < 1) d.nb = 1;
  if (d.nb > p->n) d.nb = p->n;
  d.cols = d.nb * d.ohw;
  return d;
}

/* col rows (c, kh, kw) x columns [col0, col0 + oh*ow) with row stride ld, from one image's
 * group of channels x [cg, h, w]; col2im is its adjoint (adds into x, which starts zeroed).
 * col2im runs in parallel over channels: each channel's rows write only that channel. */
#define DEFINE_IM2COL(T, SUF)                                                                               \
  static void im2col_##SUF(const nc_conv2d_desc *p, int64_t cg, const T *x, T *col, int64_t ld) {           \
    const int64_t kh = p->kh, kw = p->kw, rows = cg * kh * kw;                                              \
    _Pragma("omp parallel for if (rows * p->oh * p->ow > 65536)") for (int64_t r = 0; r < rows; r++) {      \
      const int64_t c = r / (kh * kw), i = (r / kw) % kh, j = r % kw;                                       \
      T *out = col + r * ld;                                                                                \
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
  static void col2im_##SUF(const nc_conv2d_desc *p, int64_t cg, const T *col, int64_t ld, T *x) {           \
    const int64_t kh = p->kh, kw = p->kw;                                                                   \
    _Pragma(                                                                                                \
        "omp parallel for if (cg * kh * kw * p->oh * p->ow > 65536)") for (int64_t c = 0; c < cg;           \
                                                                           c++) for (int64_t i = 0; i < kh; \
                                                                                     i++) for (int64_t j =  \
                                                                                                   0;       \
                                                                                               j < kw;      \
                                                                                               j++) {       \
      const T *in = col + ((c * kh + i) * kw + j) * ld;                                                     \
      for (int64_t oy = 0; oy < p->oh; oy++) {                                                              \
        const int64_t y = oy * p->stride[0] - p->padding[0] + i * p->dilation[0];                           \
        if (y < 0 || y >= p->h) continue;                                                                   \
        T *row = x + (c * p->h + y) * p->w;                                                                 \
        for (int64_t ox = 0; ox < p->ow; ox++) {                                                            \
          const int64_t xx = ox * p->stride[1] - p->padding[1] + j * p->dilation[1];                        \
          if (xx >= 0 && xx < p->w) row[xx] += in[oy * p->ow + ox];                                         \
        }                                                                                                   \
      }                                                                                                     \
    }                                                                                                       \
  }

DEFINE_IM2COL(float, f32)
DEFINE_IM2COL(double, f64)

static void im2col(bool f32, const nc_conv2d_desc *p, int64_t cg, const void *x, void *col, int64_t ld) {
  if (f32)
    im2col_f32(p, cg, x, col, ld);
  else
    im2col_f64(p, cg, x, col, ld);
}

static void col2im(bool f32, const nc_conv2d_desc *p, int64_t cg, const void *col, int64_t ld, void *x) {
  if (f32)
    col2im_f32(p, cg, col, ld, x);
  else
    col2im_f64(p, cg, col, ld, x);
}

/* Between a block of `ch` channels of nb images in NCHW-like storage (image stride istride,
 * channel stride plane) and its [ch, nb * plane] matrix form. */
static void gather(size_t es, const char *src, int64_t nb, int64_t ch, int64_t plane, int64_t istride,
                   char *dst) {
#pragma omp parallel for collapse(2) if (nb * ch * plane > 65536)
  for (int64_t c = 0; c < ch; c++)
    for (int64_t b = 0; b < nb; b++)
      memcpy(dst + es * (size_t)((c * nb + b) * plane), src + es * (size_t)(b * istride + c * plane),
             es * (size_t)plane);
}

static void scatter(size_t es, const char *src, int64_t nb, int64_t ch, int64_t plane, int64_t istride,
                    char *dst) {
#pragma omp parallel for collapse(2) if (nb * ch * plane > 65536)
  for (int64_t c = 0; c < ch; c++)
    for (int64_t b = 0; b < nb; b++)
      memcpy(dst + es * (size_t)(b * istride + c * plane), src + es * (size_t)((c * nb + b) * plane),
             es * (size_t)plane);
}

static nc_status gemm(bool f32, int64_t m, int64_t n, int64_t k, const void *a, int64_t sam, int64_t sak,
                      const void *b, int64_t sbk, int64_t sbn, double beta, void *c, int64_t csm,
                      int64_t csn) {
  if (f32) return nc_cpu_sgemm(m, n, k, 1.0f, a, sam, sak, b, sbk, sbn, (float)beta, c, csm, csn);
  return nc_cpu_dgemm(m, n, k, 1.0, a, sam, sak, b, sbk, sbn, beta, c, csm, csn);
}

/* The two chunk buffers: columns [kdim, cols] and an output block [channels, cols]. */
static nc_status buffers(const conv_dims *d, int64_t channels, size_t es, void **col, void **blk) {
  *col = malloc(es * (size_t)(d->kdim * d->cols) + 1);
  *blk = malloc(es * (size_t)(channels * d->cols) + 1);
  if (*col && *blk) return NC_OK;
  free(*col), free(*blk);
  return nc_error(NC_ERR_OOM, "out of host memory for conv2d column buffers");
}

#define AT(base, off) ((const void *)((const char *)nc_cpu_base(base) + es * (size_t)((base)->offset + (off))))
#define AT_W(base, off) ((void *)((char *)nc_cpu_base(base) + es * (size_t)((base)->offset + (off))))

nc_status nc_cpu_conv2d(const nc_conv2d_desc *p, const nc_tensor *x, const nc_tensor *w,
                        const nc_tensor *bias, nc_tensor *y) {
  nc_status ds;
  if (nc_cpu_dnnl_conv2d(p, x, w, bias, y, &ds)) return ds;
  bool f32 = y->dtype == NC_FLOAT32;
  size_t es = f32 ? 4 : 8;
  conv_dims d = dims_of(p);
  void *col, *blk;
  NC_TRY(buffers(&d, d.og, es, &col, &blk));
  nc_status s = NC_OK;
  for (int64_t n0 = 0; n0 < p->n && s == NC_OK; n0 += d.nb) {
    int64_t nb = p->n - n0 < d.nb ? p->n - n0 : d.nb, cols = nb * d.ohw;
    for (int64_t g = 0; g < p->groups && s == NC_OK; g++) {
      for (int64_t b = 0; b < nb; b++)
        im2col(f32, p, d.cg, AT(x, ((n0 + b) * p->c_in + g * d.cg) * d.hw),
               (char *)col + es * (size_t)(b * d.ohw), cols);
      s = gemm(f32, d.og, cols, d.kdim, AT(w, g * d.og * d.kdim), d.kdim, 1, col, cols, 1, 0.0, blk, cols, 1);
      if (s == NC_OK)
        scatter(es, blk, nb, d.og, d.ohw, p->c_out * d.ohw, AT_W(y, (n0 * p->c_out + g * d.og) * d.ohw));
    }
  }
  free(col), free(blk);
  if (s != NC_OK || !bias) return s;
#pragma omp parallel for collapse(2) if (p->n * p->c_out * d.ohw > 65536)
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t o = 0; o < p->c_out; o++) {
      int64_t base = (n * p->c_out + o) * d.ohw;
      if (f32) {
        float *yy = (float *)AT_W(y, base), bv = *(const float *)AT(bias, o);
        for (int64_t i = 0; i < d.ohw; i++) yy[i] += bv;
      } else {
        double *yy = (double *)AT_W(y, base), bv = *(const double *)AT(bias, o);
        for (int64_t i = 0; i < d.ohw; i++) yy[i] += bv;
      }
    }
  return NC_OK;
}

nc_status nc_cpu_conv2d_backward_input(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *w,
                                       nc_tensor *dx) {
  nc_status ds;
  if (nc_cpu_dnnl_conv2d_backward_input(p, dy, w, dx, &ds)) return ds;
  bool f32 = dx->dtype == NC_FLOAT32;
  size_t es = f32 ? 4 : 8;
  conv_dims d = dims_of(p);
  void *col, *blk;
  NC_TRY(buffers(&d, d.og, es, &col, &blk));
  memset(AT_W(dx, 0), 0, es * (size_t)(p->n * p->c_in * d.hw));
  nc_status s = NC_OK;
  for (int64_t n0 = 0; n0 < p->n && s == NC_OK; n0 += d.nb) {
    int64_t nb = p->n - n0 < d.nb ? p->n - n0 : d.nb, cols = nb * d.ohw;
    for (int64_t g = 0; g < p->groups && s == NC_OK; g++) {
      gather(es, AT(dy, (n0 * p->c_out + g * d.og) * d.ohw), nb, d.og, d.ohw, p->c_out * d.ohw, blk);
      /* dcol [kdim, cols] = W_g^T [kdim, og] @ dy block [og, cols]; W_g^T through strides. */
      s = gemm(f32, d.kdim, cols, d.og, AT(w, g * d.og * d.kdim), 1, d.kdim, blk, cols, 1, 0.0, col, cols, 1);
      for (int64_t b = 0; s == NC_OK && b < nb; b++)
        col2im(f32, p, d.cg, (char *)col + es * (size_t)(b * d.ohw), cols,
               AT_W(dx, ((n0 + b) * p->c_in + g * d.cg) * d.hw));
    }
  }
  free(col), free(blk);
  return s;
}

nc_status nc_cpu_conv2d_backward_weight(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *x,
                                        nc_tensor *dw) {
  nc_status ds;
  if (nc_cpu_dnnl_conv2d_backward_weight(p, dy, x, dw, &ds)) return ds;
  bool f32 = dw->dtype == NC_FLOAT32;
  size_t es = f32 ? 4 : 8;
  conv_dims d = dims_of(p);
  void *col, *blk;
  NC_TRY(buffers(&d, d.og, es, &col, &blk));
  nc_status s = NC_OK;
  for (int64_t n0 = 0; n0 < p->n && s == NC_OK; n0 += d.nb) {
    int64_t nb = p->n - n0 < d.nb ? p->n - n0 : d.nb, cols = nb * d.ohw;
    for (int64_t g = 0; g < p->groups && s == NC_OK; g++) {
      for (int64_t b = 0; b < nb; b++)
        im2col(f32, p, d.cg, AT(x, ((n0 + b) * p->c_in + g * d.cg) * d.hw),
               (char *)col + es * (size_t)(b * d.ohw), cols);
      gather(es, AT(dy, (n0 * p->c_out + g * d.og) * d.ohw), nb, d.og, d.ohw, p->c_out * d.ohw, blk);
      /* dW_g [og, kdim] (+)= dy block [og, cols] @ col^T [cols, kdim]. */
      s = gemm(f32, d.og, d.kdim, cols, blk, cols, 1, col, 1, cols, n0 == 0 ? 0.0 : 1.0,
               AT_W(dw, g * d.og * d.kdim), d.kdim, 1);
    }
  }
  free(col), free(blk);
  return s;
}

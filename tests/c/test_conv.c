/* conv2d forward, input gradient and weight gradient on every device against direct loops in
 * double: groups, dilation, stride 2, batch 1, non-square kernels, padding, 1x1; and the
 * errors a user can cause. */
#include "check.h"
#include "linalg_ref.h"

typedef struct {
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, g;
} conv_case;

static const conv_case cases[] = {
    {2, 3, 9, 11, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {1, 4, 10, 7, 6, 3, 2, 2, 2, 1, 0, 1, 1, 2},
    {2, 6, 12, 12, 6, 3, 3, 1, 2, 2, 2, 2, 2, 3},
    {3, 8, 5, 5, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1},
    {1, 2, 7, 9, 3, 5, 1, 2, 1, 2, 0, 1, 1, 1},
    {2, 4, 6, 6, 4, 3, 3, 2, 2, 1, 1, 1, 1, 4},
    {4, 16, 17, 19, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {2, 3, 8, 8, 5, 1, 1, 2, 2, 0, 0, 1, 1, 1},
    {5, 2, 40, 40, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1}, /* CPU: chunks of 2, 2 and 1 images */
    /* 20 input channels per group at stride 1: OpenCL's implicit-GEMM input gradient (fewer
     * channels, or a stride, take the columns route) */
    {2, 40, 9, 7, 8, 3, 3, 1, 1, 1, 1, 2, 1, 2},
};

static void reference(const conv_case *k, int64_t oh, int64_t ow, const double *x, const double *w,
                      const double *b, const double *dy, double *y, double *dx, double *dw) {
  int64_t cg = k->c / k->g, og = k->o / k->g;
  for (int64_t n = 0; n < k->n; n++)
    for (int64_t o = 0; o < k->o; o++)
      for (int64_t oy = 0; oy < oh; oy++)
        for (int64_t ox = 0; ox < ow; ox++) {
          int64_t yi = ((n * k->o + o) * oh + oy) * ow + ox;
          double s = b[o];
          for (int64_t c = 0; c < cg; c++)
            for (int64_t i = 0; i < k->kh; i++)
              for (int64_t j = 0; j < k->kw; j++) {
                int64_t yy = oy * k->sh - k->ph + i * k->dh, xx = ox * k->sw - k->pw + j * k->dw;
                if (yy < 0 || yy >= k->h || xx < 0 || xx >= k->w) continue;
                int64_t ci = (o / og) * cg + c;
                int64_t xi = ((n * k->c + ci) * k->h + yy) * k->w + xx,
                        wi = ((o * cg + c) * k->kh + i) * k->kw + j;
                s += x[xi] * w[wi];
                dx[xi] += w[wi] * dy[yi];
                dw[wi] += dy[yi] * x[xi];
              }
          y[yi] = s;
        }
}

static void run_case(nc_device *dev, nc_dtype dt, const conv_case *k) {
  int64_t oh = (k->h + 2 * k->ph - k->dh * (k->kh - 1) - 1) / k->sh + 1;
  int64_t ow = (k->w + 2 * k->pw - k->dw * (k->kw - 1) - 1) / k->sw + 1;
  int64_t xs[4] = {k->n, k->c, k->h, k->w}, ws[4] = {k->o, k->c / k->g, k->kh, k->kw},
          ys[4] = {k->n, k->o, oh, ow};
  int64_t nx = xs[0] * xs[1] * xs[2] * xs[3], nw = ws[0] * ws[1] * ws[2] * ws[3],
          ny = ys[0] * ys[1] * ys[2] * ys[3];
  double *x = ref_random(nx), *w = ref_random(nw), *b = ref_random(k->o), *dy = ref_random(ny);
  double *y = calloc((size_t)ny, 8), *dx = calloc((size_t)nx, 8), *dw = calloc((size_t)nw, 8);
  reference(k, oh, ow, x, w, b, dy, y, dx, dw);
  nc_tensor *tx = ref_tensor(dev, dt, 4, xs, x), *tw = ref_tensor(dev, dt, 4, ws, w),
            *tb = ref_tensor(dev, dt, 1, &k->o, b);
  nc_tensor *tdy = ref_tensor(dev, dt, 4, ys, dy), *ty = NULL, *tdx = NULL, *tdw = NULL;
  nc_conv2d_desc p = {
      .stride = {k->sh, k->sw}, .padding = {k->ph, k->pw}, .dilation = {k->dh, k->dw}, .groups = k->g};
  CHECK_OK(nc_conv2d(tx, tw, tb, &p, &ty));
  CHECK_OK(nc_conv2d_backward_input(tdy, tw, xs, &p, &tdx));
  CHECK_OK(nc_conv2d_backward_weight(tdy, tx, ws, &p, &tdw));
  double tol = dt == NC_FLOAT64 ? 1e-12 : 2e-5;
  double e1 = ref_tensor_error(ty, y, ny), e2 = ref_tensor_error(tdx, dx, nx),
         e3 = ref_tensor_error(tdw, dw, nw);
  if (!(e1 <= tol && e2 <= tol && e3 <= tol))
    fprintf(stderr, "conv %s %s case n=%lld c=%lld o=%lld k=%lldx%lld g=%lld: errors y %g dx %g dw %g\n",
            nc_device_info_of(dev)->spec, nc_dtype_name(dt), (long long)k->n, (long long)k->c,
            (long long)k->o, (long long)k->kh, (long long)k->kw, (long long)k->g, e1, e2, e3);
  CHECK(e1 <= tol);
  CHECK(e2 <= tol);
  CHECK(e3 <= tol);
  /* A strided (non-contiguous) input gives the same result. */
  nc_tensor *xt = NULL, *xtc = NULL, *xv = NULL, *ty2 = NULL;
  CHECK_OK(nc_tensor_transpose(tx, 2, 3, &xt));
  CHECK_OK(nc_contiguous(xt, &xtc));
  CHECK_OK(nc_tensor_transpose(xtc, 2, 3, &xv));
  CHECK_OK(nc_conv2d(xv, tw, tb, &p, &ty2));
  CHECK(ref_tensor_error(ty2, y, ny) <= tol);
  nc_tensor_release(ty2);
  /* So does a contiguous view that starts inside its storage (one extra image in front). */
  int64_t xbs[4] = {k->n + 1, k->c, k->h, k->w};
  double *xbig = calloc((size_t)(nx + nx / k->n), 8);
  memcpy(xbig + nx / k->n, x, sizeof(double) * (size_t)nx);
  nc_tensor *tbig = ref_tensor(dev, dt, 4, xbs, xbig), *xn = NULL;
  CHECK_OK(nc_tensor_narrow(tbig, 0, 1, k->n, &xn));
  CHECK_OK(nc_conv2d(xn, tw, tb, &p, &ty2));
  CHECK(ref_tensor_error(ty2, y, ny) <= tol);
  free(xbig);
  nc_tensor_release(tbig), nc_tensor_release(xn);
  nc_tensor_release(xt), nc_tensor_release(xtc), nc_tensor_release(xv), nc_tensor_release(ty2);
  nc_tensor_release(tx), nc_tensor_release(tw), nc_tensor_release(tb), nc_tensor_release(tdy);
  nc_tensor_release(ty), nc_tensor_release(tdx), nc_tensor_release(tdw);
  free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw);
}

static void test_errors(nc_device *dev) {
  nc_tensor *x, *w, *w3, *y = NULL, *i64;
  int64_t xs[4] = {1, 4, 4, 4}, ws[4] = {6, 4, 5, 5}, ws3[4] = {6, 1, 3, 3};
  CHECK_OK(nc_tensor_empty(dev, NC_FLOAT32, 4, xs, 0, &x));
  CHECK_OK(nc_tensor_empty(dev, NC_FLOAT32, 4, ws, 0, &w));
  CHECK_OK(nc_tensor_empty(dev, NC_FLOAT32, 4, ws3, 0, &w3));
  CHECK_OK(nc_tensor_empty(dev, NC_INT64, 4, xs, 0, &i64));
  nc_conv2d_desc p = {.stride = {1, 1}, .padding = {0, 0}, .dilation = {1, 1}, .groups = 1};
  CHECK_ERR(nc_conv2d(x, w, NULL, &p, &y), NC_ERR_SHAPE,
            "kernel 5x5 (5x5 dilated) is larger than the padded input 4x4");
  p.groups = 3;
  CHECK_ERR(nc_conv2d(x, w3, NULL, &p, &y), NC_ERR_SHAPE, "groups 3 does not divide the 4 input channels");
  p.groups = 4;
  CHECK_ERR(nc_conv2d(x, w3, NULL, &p, &y), NC_ERR_SHAPE, "groups 4 does not divide the 6 output channels");
  p.groups = 1;
  CHECK_ERR(nc_conv2d(x, w3, NULL, &p, &y), NC_ERR_SHAPE, "expects 1 input channels");
  p.stride[0] = 0;
  CHECK_ERR(nc_conv2d(x, w3, NULL, &p, &y), NC_ERR_ARG, "stride must be >= 1");
  p.stride[0] = 1;
  CHECK_ERR(nc_conv2d(i64, w3, NULL, &p, &y), NC_ERR_DTYPE, "int64");
  /* Padding makes room for the kernel. */
  p.padding[0] = p.padding[1] = 1;
  CHECK_OK(nc_conv2d(x, w, NULL, &p, &y));
  CHECK(y && y->shape[2] == 2 && y->shape[3] == 2);
  nc_tensor_release(y);
  nc_tensor_release(x), nc_tensor_release(w), nc_tensor_release(w3), nc_tensor_release(i64);
}

int main(void) {
  CHECK_OK(nc_init());
  nc_device *devs[2];
  int nd = ref_devices(devs);
  for (int d = 0; d < nd; d++) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(devs[d], NC_FLOAT32, &cases[i]);
    if (nc_device_info_of(devs[d])->fp64) run_case(devs[d], NC_FLOAT64, &cases[2]);
    test_errors(devs[d]);
  }
  /* The CPU backend's im2col + GEMM path, which builds with oneDNN keep for what it declines
   * (NETCL_DNNL=0): on OpenBLAS, and on the blocked C GEMM (NETCL_BLAS=0). */
  setenv("NETCL_DNNL", "0", 1);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(devs[0], NC_FLOAT32, &cases[i]);
  setenv("NETCL_BLAS", "0", 1);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(devs[0], NC_FLOAT32, &cases[i]);
  unsetenv("NETCL_BLAS");
  unsetenv("NETCL_DNNL");
  CHECK_DONE();
}

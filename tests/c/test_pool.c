/* Pooling: known values from PyTorch's definitions, random cases against direct loops (forward)
 * and the adjoint identity <dy, pool(x)> = <pool_backward(dy), x> (backward; exact for avg,
 * and for max given the recorded indices), OpenCL against the CPU backend, and errors. */
#include "check.h"
#include "linalg_ref.h"

static nc_device *cpu;

static void test_known(nc_device *dev) {
  double v[16];
  for (int i = 0; i < 16; i++) v[i] = i + 1;
  int64_t s[4] = {1, 1, 4, 4};
  nc_tensor *x = ref_tensor(dev, NC_FLOAT32, 4, s, v), *y = NULL, *idx = NULL;
  nc_pool2d_desc p = nc_pool2d_defaults(NC_POOL_MAX, 2, 2);
  CHECK_OK(nc_max_pool2d(x, &p, &y, &idx));
  double wy[4] = {6, 8, 14, 16}, wi[4] = {5, 7, 13, 15};
  CHECK(ref_tensor_error(y, wy, 4) == 0 && ref_tensor_error(idx, wi, 4) == 0);
  nc_tensor_release(y), nc_tensor_release(idx);
  p = nc_pool2d_defaults(NC_POOL_AVG, 2, 2);
  CHECK_OK(nc_avg_pool2d(x, &p, &y));
  double wa[4] = {3.5, 5.5, 11.5, 13.5};
  CHECK(ref_tensor_error(y, wa, 4) == 0);
  nc_tensor_release(y);
  p = nc_pool2d_defaults(NC_POOL_AVG, 3, 3);
  p.stride[0] = p.stride[1] = 2;
  p.padding[0] = p.padding[1] = 1;
  CHECK_OK(nc_avg_pool2d(x, &p, &y));
  double wp[4] = {14.0 / 9, (2 + 3 + 4 + 6 + 7 + 8) / 9.0, (5 + 6 + 9 + 10 + 13 + 14) / 9.0,
                  (6 + 7 + 8 + 10 + 11 + 12 + 14 + 15 + 16) / 9.0};
  CHECK(ref_tensor_error(y, wp, 4) < 1e-7);
  nc_tensor_release(y);
  p.count_include_pad = false;
  CHECK_OK(nc_avg_pool2d(x, &p, &y));
  double wn[4] = {3.5, 5, 9.5, 11};
  CHECK(ref_tensor_error(y, wn, 4) < 1e-7);
  nc_tensor_release(y);
  CHECK_OK(nc_adaptive_avg_pool2d(x, 3, 3, &y));
  double wd[9] = {3.5, 4.5, 5.5, 7.5, 8.5, 9.5, 11.5, 12.5, 13.5};
  CHECK(ref_tensor_error(y, wd, 9) < 1e-7);
  nc_tensor_release(y);
  /* NaN wins a max window. */
  v[5] = NAN;
  nc_tensor *xn = ref_tensor(dev, NC_FLOAT32, 4, s, v);
  p = nc_pool2d_defaults(NC_POOL_MAX, 2, 2);
  CHECK_OK(nc_max_pool2d(xn, &p, &y, &idx));
  double *got = ref_values(y), *gi = ref_values(idx);
  CHECK(got && isnan(got[0]) && got[1] == 8 && gi[0] == 5);
  free(got), free(gi);
  nc_tensor_release(y), nc_tensor_release(idx), nc_tensor_release(xn), nc_tensor_release(x);
}

/* Direct forward reference. */
static void reference(const nc_pool2d_desc *p, int64_t planes, int64_t h, int64_t w, int64_t oh, int64_t ow,
                      const double *x, double *y) {
  for (int64_t pl = 0; pl < planes; pl++)
    for (int64_t oy = 0; oy < oh; oy++)
      for (int64_t ox = 0; ox < ow; ox++) {
        double r;
        if (p->kind == NC_POOL_ADAPTIVE_AVG) {
          int64_t y0 = (int64_t)floor((double)oy * h / oh), y1 = (int64_t)ceil((double)(oy + 1) * h / oh);
          int64_t x0 = (int64_t)floor((double)ox * w / ow), x1 = (int64_t)ceil((double)(ox + 1) * w / ow);
          r = 0;
          for (int64_t a = y0; a < y1; a++)
            for (int64_t b = x0; b < x1; b++) r += x[(pl * h + a) * w + b];
          r /= (double)((y1 - y0) * (x1 - x0));
        } else {
          double best = -INFINITY, sum = 0;
          int64_t cnt = 0, cnt_pad = 0;
          for (int64_t i = 0; i < p->kernel[0]; i++)
            for (int64_t j = 0; j < p->kernel[1]; j++) {
              int64_t a = oy * p->stride[0] - p->padding[0] + i * p->dilation[0];
              int64_t b = ox * p->stride[1] - p->padding[1] + j * p->dilation[1];
              if (a < h + p->padding[0] && b < w + p->padding[1]) cnt_pad++;
              if (a < 0 || a >= h || b < 0 || b >= w) continue;
              double v = x[(pl * h + a) * w + b];
              if (v > best) best = v;
              sum += v;
              cnt++;
            }
          r = p->kind == NC_POOL_MAX ? best : sum / (double)(p->count_include_pad ? cnt_pad : cnt);
        }
        y[(pl * oh + oy) * ow + ox] = r;
      }
}

static double dot(const double *a, const double *b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

static void run_case(nc_device *dev, nc_dtype dt, nc_pool2d_desc p, int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  double *x = ref_random(n);
  nc_tensor *tx = ref_tensor(dev, dt, ndim, shape, x), *ty = NULL, *ti = NULL, *tdx = NULL;
  CHECK_OK(nc_pool2d(tx, &p, &ty, p.kind == NC_POOL_MAX ? &ti : NULL));
  if (!ty) return;
  int64_t oh = ty->shape[ndim - 2], ow = ty->shape[ndim - 1], ny = nc_tensor_numel(ty);
  int64_t planes = n / (shape[ndim - 2] * shape[ndim - 1]);
  double *want = malloc(sizeof(double) * (size_t)ny), *dy = ref_random(ny);
  reference(&p, planes, shape[ndim - 2], shape[ndim - 1], oh, ow, x, want);
  double tol = dt == NC_FLOAT64 ? 1e-13 : 1e-6;
  CHECK(ref_tensor_error(ty, want, ny) <= tol);
  nc_tensor *tdy = ref_tensor(dev, dt, ty->ndim, ty->shape, dy);
  CHECK_OK(nc_pool2d_backward(tdy, ti, ndim, shape, &p, &tdx));
  double *gx = ref_values(tdx), *gy = ref_values(ty);
  /* Adjoint identity, with the forward output as the device computed it. */
  double lhs = dot(dy, gy, ny), rhs = gx ? dot(gx, x, n) : NAN;
  CHECK(fabs(lhs - rhs) <= (dt == NC_FLOAT64 ? 1e-10 : 1e-4) * (1 + fabs(lhs)));
  if (dev != cpu) {
    /* The same inputs on the CPU backend give the same gradient. */
    nc_tensor *cx = ref_tensor(cpu, dt, ndim, shape, x), *cy = NULL, *ci = NULL, *cdx = NULL;
    nc_tensor *cdy = ref_tensor(cpu, dt, ty->ndim, ty->shape, dy);
    CHECK_OK(nc_pool2d(cx, &p, &cy, p.kind == NC_POOL_MAX ? &ci : NULL));
    CHECK_OK(nc_pool2d_backward(cdy, ci, ndim, shape, &p, &cdx));
    double *cg = ref_values(cdx);
    CHECK(cg && gx && ref_error(gx, cg, n) <= tol);
    if (ci) {
      double *i1 = ref_values(ti), *i2 = ref_values(ci);
      CHECK(ref_error(i1, i2, ny) == 0);
      free(i1), free(i2);
    }
    free(cg);
    nc_tensor_release(cx), nc_tensor_release(cy), nc_tensor_release(ci), nc_tensor_release(cdx),
        nc_tensor_release(cdy);
  }
  free(gx), free(gy), free(x), free(want), free(dy);
  nc_tensor_release(tx), nc_tensor_release(ty), nc_tensor_release(ti), nc_tensor_release(tdx),
      nc_tensor_release(tdy);
}

static void test_random(nc_device *dev) {
  int64_t s4[4] = {2, 3, 11, 9}, s3[3] = {4, 8, 7}, s1[4] = {1, 2, 16, 16};
  nc_pool2d_desc p = nc_pool2d_defaults(NC_POOL_MAX, 3, 3);
  p.stride[0] = p.stride[1] = 2;
  p.padding[0] = p.padding[1] = 1;
  run_case(dev, NC_FLOAT32, p, 4, s4);
  p = nc_pool2d_defaults(NC_POOL_MAX, 3, 2);
  p.stride[0] = 1, p.stride[1] = 2, p.padding[0] = 1, p.dilation[0] = 2, p.ceil_mode = true;
  run_case(dev, NC_FLOAT32, p, 4, s4);
  run_case(dev, NC_FLOAT32, p, 3, s3);
  p = nc_pool2d_defaults(NC_POOL_AVG, 3, 3);
  p.stride[0] = p.stride[1] = 2, p.padding[0] = p.padding[1] = 1, p.count_include_pad = false,
  p.ceil_mode = true;
  run_case(dev, NC_FLOAT32, p, 4, s4);
  p.count_include_pad = true;
  run_case(dev, NC_FLOAT32, p, 4, s1);
  p = nc_pool2d_defaults(NC_POOL_AVG, 2, 3);
  run_case(dev, NC_FLOAT32, p, 3, s3);
  nc_pool2d_desc ad = {.kind = NC_POOL_ADAPTIVE_AVG, .out_size = {5, 3}};
  run_case(dev, NC_FLOAT32, ad, 4, s4);
  ad.out_size[0] = ad.out_size[1] = 1;
  run_case(dev, NC_FLOAT32, ad, 4, s1);
  ad.out_size[0] = 6, ad.out_size[1] = 7;
  run_case(dev, NC_FLOAT32, ad, 3, s3);
  if (nc_device_info_of(dev)->fp64) {
    run_case(dev, NC_FLOAT64, p, 4, s4);
    run_case(dev, NC_FLOAT64, ad, 3, s3);
  }
}

static void test_errors(nc_device *dev) {
  int64_t s[4] = {1, 1, 4, 4}, s2[2] = {4, 4};
  nc_tensor *x, *x2, *y = NULL;
  CHECK_OK(nc_tensor_empty(dev, NC_FLOAT32, 4, s, 0, &x));
  CHECK_OK(nc_tensor_empty(dev, NC_FLOAT32, 2, s2, 0, &x2));
  nc_pool2d_desc p = nc_pool2d_defaults(NC_POOL_MAX, 5, 5);
  CHECK_ERR(nc_max_pool2d(x, &p, &y, NULL), NC_ERR_SHAPE, "kernel 5x5 is larger than the padded input 4x4");
  p = nc_pool2d_defaults(NC_POOL_MAX, 2, 2);
  p.padding[0] = 2;
  CHECK_ERR(nc_max_pool2d(x, &p, &y, NULL), NC_ERR_ARG,
            "padding 2 must be between 0 and half the kernel size 2");
  p.padding[0] = 0;
  CHECK_ERR(nc_max_pool2d(x2, &p, &y, NULL), NC_ERR_SHAPE, "needs a 3-D [C,H,W] or 4-D [N,C,H,W] input");
  CHECK_ERR(nc_adaptive_avg_pool2d(x, 0, 2, &y), NC_ERR_ARG, "output size must be positive");
  nc_tensor_release(x), nc_tensor_release(x2);
}

int main(void) {
  CHECK_OK(nc_init());
  cpu = nc_device_get(0);
  nc_device *devs[2];
  int nd = ref_devices(devs);
  for (int d = 0; d < nd; d++) {
    test_known(devs[d]);
    test_random(devs[d]);
    test_errors(devs[d]);
  }
  CHECK_DONE();
}

/* GEMM of bfloat16 and float16 operands through the C API (nc_gemm's alpha and beta, which the
 * Lua API does not expose, and nc_mm / nc_linear) on every device and on the blocked C GEMM:
 * against float64 sums of the stored values, within u |want| + 1e-6 (sum of |terms|) + tiny,
 * u = 2^-8 (bfloat16) or 2^-11 (float16), tiny half the subnormal spacing. Cases:
 * C = alpha A B^T + beta C into a transposed C, beta 0 over NaN, a batch with B broadcast,
 * K = 0, a linear with bias, and mixed dtypes refused. */
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "linalg_ref.h"

/* A tensor of dtype dt holding vals rounded to dt; vals are overwritten with the stored values. */
static nc_tensor *stored(nc_device *dev, nc_dtype dt, int ndim, const int64_t *shape, double *vals) {
  nc_tensor *f = ref_tensor(dev, NC_FLOAT32, ndim, shape, vals), *t = NULL, *back = NULL;
  CHECK_OK(nc_to(f, dev, dt, &t));
  CHECK_OK(nc_to(t, dev, NC_FLOAT32, &back));
  double *v = ref_values(back);
  int64_t n = nc_tensor_numel(t);
  if (v) memcpy(vals, v, sizeof(double) * (size_t)n);
  free(v);
  nc_tensor_release(f);
  nc_tensor_release(back);
  return t;
}

static double unit(nc_dtype dt) { return dt == NC_BFLOAT16 ? 0x1p-8 : 0x1p-11; }
/* half the spacing of the dtype's subnormals (a result below the smallest normal rounds to it) */
static double tiny(nc_dtype dt) { return dt == NC_BFLOAT16 ? 0x1p-134 : 0x1p-25; }

/* Checks t (dtype dt, any layout) against want[n] within the bound, absum[n] the sums of |terms|. */
static void check_values(const char *what, nc_device *dev, nc_dtype dt, nc_tensor *t, const double *want,
                         const double *absum, int64_t n) {
  CHECK(t && t->dtype == dt && nc_tensor_numel(t) == n);
  nc_tensor *f = NULL;
  CHECK_OK(nc_to(t, dev, NC_FLOAT32, &f));
  double *got = f ? ref_values(f) : NULL;
  int bad = 0;
  for (int64_t i = 0; got && i < n; i++) {
    const double d = fabs(got[i] - want[i]), bound = unit(dt) * fabs(want[i]) + 1e-6 * absum[i] + tiny(dt);
    if (!(d <= bound) && bad++ < 3)
      fprintf(stderr, "%s %s on %s: element %lld: got %.9g, want %.9g\n", what, nc_dtype_name(dt),
              nc_device_info_of(dev)->spec, (long long)i, got[i], want[i]);
  }
  CHECK(got && bad == 0);
  free(got);
  nc_tensor_release(f);
}

/* c (stored [n, m], viewed [m, n]) = alpha a [m, k] @ (w [n, k])^T + beta c; then beta 0 over NaN. */
static void test_alpha_beta(nc_device *dev, nc_dtype dt) {
  const int64_t m = 37, n = 23, k = 29;
  double *a = ref_random(m * k), *w = ref_random(n * k), *c0 = ref_random(n * m);
  int64_t sa[2] = {m, k}, sw[2] = {n, k}, sc[2] = {n, m};
  nc_tensor *ta = stored(dev, dt, 2, sa, a), *tw = stored(dev, dt, 2, sw, w),
            *tc = stored(dev, dt, 2, sc, c0);
  nc_tensor *wt = NULL, *ct = NULL;
  CHECK_OK(nc_tensor_transpose(tw, 0, 1, &wt));
  CHECK_OK(nc_tensor_transpose(tc, 0, 1, &ct));
  const double alpha = 1.5, beta = -0.75;
  double *want = malloc(sizeof(double) * (size_t)(m * n)), *absum = malloc(sizeof(double) * (size_t)(m * n));
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double s = 0, sabs = 0;
      for (int64_t p = 0; p < k; p++)
        s += a[i * k + p] * w[j * k + p], sabs += fabs(a[i * k + p] * w[j * k + p]);
      want[i * n + j] = alpha * s + beta * c0[j * m + i];
      absum[i * n + j] = fabs(alpha) * sabs + fabs(beta * c0[j * m + i]);
    }
  CHECK_OK(nc_gemm(ta, wt, ct, alpha, beta));
  /* ct's values in [m, n] order: read through a contiguous copy */
  nc_tensor *cc = NULL;
  CHECK_OK(nc_contiguous(ct, &cc));
  check_values("gemm alpha beta, transposed C", dev, dt, cc, want, absum, m * n);
  nc_tensor_release(cc);
  /* beta = 0: C is not read (NaN stays out) */
  CHECK_OK(nc_fill(ct, NAN));
  CHECK_OK(nc_gemm(ta, wt, ct, 2.0, 0.0));
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      const double prev = want[i * n + j] - beta * c0[j * m + i],
                   pabs = absum[i * n + j] - fabs(beta * c0[j * m + i]);
      want[i * n + j] = prev / alpha * 2.0;
      absum[i * n + j] = pabs / fabs(alpha) * 2.0;
    }
  CHECK_OK(nc_contiguous(ct, &cc));
  check_values("gemm beta 0 over NaN", dev, dt, cc, want, absum, m * n);
  nc_tensor_release(cc);
  nc_tensor_release(ta), nc_tensor_release(tw), nc_tensor_release(tc), nc_tensor_release(wt),
      nc_tensor_release(ct);
  free(a), free(w), free(c0), free(want), free(absum);
}

/* c [3, m, n] = 0.5 a [3, m, k] @ b [k, n] + 2 c (b broadcast over the batch). */
static void test_batched(nc_device *dev, nc_dtype dt) {
  const int64_t bt = 3, m = 13, n = 11, k = 40;
  double *a = ref_random(bt * m * k), *b = ref_random(k * n), *c0 = ref_random(bt * m * n);
  int64_t sa[3] = {bt, m, k}, sb[2] = {k, n}, sc[3] = {bt, m, n};
  nc_tensor *ta = stored(dev, dt, 3, sa, a), *tb = stored(dev, dt, 2, sb, b),
            *tc = stored(dev, dt, 3, sc, c0);
  double *want = malloc(sizeof(double) * (size_t)(bt * m * n)),
         *absum = malloc(sizeof(double) * (size_t)(bt * m * n));
  for (int64_t t = 0; t < bt; t++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0, sabs = 0;
        for (int64_t p = 0; p < k; p++) {
          const double x = a[(t * m + i) * k + p] * b[p * n + j];
          s += x, sabs += fabs(x);
        }
        const int64_t o = (t * m + i) * n + j;
        want[o] = 0.5 * s + 2 * c0[o];
        absum[o] = 0.5 * sabs + fabs(2 * c0[o]);
      }
  CHECK_OK(nc_gemm(ta, tb, tc, 0.5, 2.0));
  check_values("batched gemm, B broadcast", dev, dt, tc, want, absum, bt * m * n);
  nc_tensor_release(ta), nc_tensor_release(tb), nc_tensor_release(tc);
  free(a), free(b), free(c0), free(want), free(absum);
}

/* linear with bias over [2, 5, in], and K = 0 products. */
static void test_linear_and_empty(nc_device *dev, nc_dtype dt) {
  const int64_t r = 10, in = 33, out = 70;
  double *x = ref_random(r * in), *w = ref_random(out * in), *bias = ref_random(out);
  int64_t sx[3] = {2, 5, in}, sw[2] = {out, in};
  nc_tensor *tx = stored(dev, dt, 3, sx, x), *tw = stored(dev, dt, 2, sw, w),
            *tb = stored(dev, dt, 1, &out, bias);
  double *want = malloc(sizeof(double) * (size_t)(r * out)),
         *absum = malloc(sizeof(double) * (size_t)(r * out));
  for (int64_t i = 0; i < r; i++)
    for (int64_t o = 0; o < out; o++) {
      double s = bias[o], sabs = fabs(bias[o]);
      for (int64_t p = 0; p < in; p++)
        s += x[i * in + p] * w[o * in + p], sabs += fabs(x[i * in + p] * w[o * in + p]);
      want[i * out + o] = s;
      absum[i * out + o] = sabs;
    }
  nc_tensor *y = NULL;
  CHECK_OK(nc_linear(tx, tw, tb, &y));
  CHECK(y && y->ndim == 3 && y->shape[2] == out);
  check_values("linear with bias", dev, dt, y, want, absum, r * out);
  nc_tensor_release(y);
  /* K = 0: gemm with beta 0 gives zeros, with beta 1 leaves C; mm gives zeros */
  int64_t s30[2] = {3, 0}, s04[2] = {0, 4}, s34[2] = {3, 4};
  nc_tensor *e1, *e2, *c = NULL;
  CHECK_OK(nc_tensor_empty(dev, dt, 2, s30, 0, &e1));
  CHECK_OK(nc_tensor_empty(dev, dt, 2, s04, 0, &e2));
  CHECK_OK(nc_tensor_empty(dev, dt, 2, s34, 0, &c));
  double zeros[12] = {0}, ones[12];
  for (int i = 0; i < 12; i++) ones[i] = 1;
  CHECK_OK(nc_fill(c, 1.0));
  CHECK_OK(nc_gemm(e1, e2, c, 1.0, 1.0));
  check_values("gemm K = 0, beta 1", dev, dt, c, ones, zeros, 12);
  CHECK_OK(nc_gemm(e1, e2, c, 1.0, 0.0));
  check_values("gemm K = 0, beta 0", dev, dt, c, zeros, zeros, 12);
  nc_tensor_release(c);
  c = NULL;
  CHECK_OK(nc_mm(e1, e2, &c));
  check_values("mm K = 0", dev, dt, c, zeros, zeros, 12);
  nc_tensor_release(c), nc_tensor_release(e1), nc_tensor_release(e2);
  /* mixed dtypes are refused */
  nc_tensor *f32 = NULL, *other = NULL;
  CHECK_OK(nc_tensor_empty(dev, NC_FLOAT32, 2, sw, 0, &f32));
  CHECK_OK(nc_tensor_empty(dev, dt == NC_BFLOAT16 ? NC_FLOAT16 : NC_BFLOAT16, 1, &out, 0, &other));
  CHECK_ERR(nc_linear(tx, f32, NULL, &y), NC_ERR_DTYPE, "expected operands of one float dtype");
  CHECK_ERR(nc_linear(tx, tw, other, &y), NC_ERR_DTYPE, "expected operands of one float dtype");
  nc_tensor_release(f32), nc_tensor_release(other);
  nc_tensor_release(tx), nc_tensor_release(tw), nc_tensor_release(tb);
  free(x), free(w), free(bias), free(want), free(absum);
}

static void run_all(nc_device *dev) {
  const nc_dtype dts[2] = {NC_BFLOAT16, NC_FLOAT16};
  for (int i = 0; i < 2; i++) {
    test_alpha_beta(dev, dts[i]);
    test_batched(dev, dts[i]);
    test_linear_and_empty(dev, dts[i]);
  }
}

int main(void) {
  CHECK_OK(nc_init());
  nc_device *devs[2];
  int nd = ref_devices(devs);
  for (int d = 0; d < nd; d++) run_all(devs[d]);
  /* the blocked C GEMM under the CPU backend's conversions */
  setenv("NETCL_BLAS", "0", 1);
  run_all(devs[0]);
  unsetenv("NETCL_BLAS");
  CHECK_DONE();
}

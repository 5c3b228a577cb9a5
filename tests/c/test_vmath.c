/* The CPU backend's vectorizable float32 exp, log, tanh and erf (runtime/backend/cpu/vmath.h)
 * against libm in double: the largest error in ulps of the correctly rounded result over every
 * 257th float (all signs and exponents), and special values. Bounds: exp 1 ulp, log 1 ulp,
 * tanh 1.5 ulp, erf 1.5 ulp, 1 + erf 6 ulp (measured: 0.96, 0.75, 1.30, 1.35, 5.34; 1 + erf for
 * x < -1 is erfc(-x), two exps and a polynomial with no leading 1 to absorb their rounding).
 * Then the ops that use them (exp, log, tanh, sigmoid, silu, gelu, gelu_tanh, softmax,
 * log_softmax on float32 tensors) against the same formulas in double: relative error 1e-6
 * (gelu_tanh 3e-5: its exp argument, up to 1e3, is rounded to float first; gelu's reference
 * takes v / sqrt(2) rounded to float as the op does, since erfc's relative sensitivity to its
 * argument, 2 z^2, turns that rounding alone into 1e-5 near z = 8). */
#include <float.h>
#include <stdint.h>
#include "check.h"
#include "linalg_ref.h"
#include "backend/cpu/vmath.h"

/* |got - want| in units of the last place of want rounded to float (subnormal ulp at least). */
static double ulps(float got, double want) {
  if (isnan(want)) return isnan(got) ? 0 : INFINITY;
  if (isinf((float)want) || isinf(got)) return got == (float)want ? 0 : INFINITY;
  int e;
  frexp((double)(float)want, &e);
  double ulp = ldexp(1.0, (e - 24 > -149 ? e - 24 : -149));
  return fabs((double)got - want) / ulp;
}

typedef struct {
  const char *name;
  float (*f)(float);
  double (*ref)(double);
  double bound;
} fn_case;

static float vexp(float x) { return nc_vexpf(x); }
static float vlog(float x) { return nc_vlogf(x); }
static float vtanh(float x) { return nc_vtanhf(x); }
static float verf(float x) { return nc_verff(x); }
static float verf1p(float x) { return nc_verf1pf(x); }
static double erf1p(double x) { return x < -1 ? erfc(-x) : 1 + erf(x); }

static void test_sweep(void) {
  const fn_case cases[] = {{"exp", vexp, exp, 1},      {"log", vlog, log, 1},           {"tanh", vtanh, tanh, 1.5},
                           {"erf", verf, erf, 1.5}, {"1 + erf", verf1p, erf1p, 6}};
  for (int c = 0; c < 5; c++) {
    double worst = 0;
    float at = 0;
    for (uint64_t u = 0; u < (1ull << 32); u += 256 + 1) { /* odd step: every mantissa residue */
      const float x = nc_f32_from_bits((uint32_t)u);
      const double e = ulps(cases[c].f(x), cases[c].ref((double)x));
      if (e > worst) worst = e, at = x;
    }
    printf("%s: max error %.3f ulp (at %a)\n", cases[c].name, worst, (double)at);
    CHECK(worst <= cases[c].bound);
  }
  /* special values */
  const float inf = INFINITY;
  CHECK(nc_vexpf(inf) == inf && nc_vexpf(-inf) == 0 && isnan(nc_vexpf(NAN)) && nc_vexpf(0) == 1);
  CHECK(nc_vexpf(88.73f) == inf && nc_vexpf(-104.0f) == 0);
  CHECK(nc_vexpf(-100.0f) > 0 && ulps(nc_vexpf(-100.0f), exp(-100.0)) <= 2); /* subnormal */
  CHECK(nc_vlogf(0) == -inf && nc_vlogf(-0.0f) == -inf && isnan(nc_vlogf(-1)) && nc_vlogf(inf) == inf);
  CHECK(isnan(nc_vlogf(NAN)) && nc_vlogf(1) == 0 && ulps(nc_vlogf(FLT_TRUE_MIN), log(FLT_TRUE_MIN)) <= 2);
  CHECK(nc_vtanhf(inf) == 1 && nc_vtanhf(-inf) == -1 && isnan(nc_vtanhf(NAN)));
  CHECK(nc_vtanhf(0) == 0 && signbit(nc_vtanhf(-0.0f)) && nc_vtanhf(1e-30f) == 1e-30f);
  CHECK(nc_verff(inf) == 1 && nc_verff(-inf) == -1 && isnan(nc_verff(NAN)) && nc_verff(0) == 0);
  CHECK(signbit(nc_verff(-0.0f)) && nc_verff(4.0f) == 1 && nc_verff(-4.0f) == -1);
  CHECK(nc_verf1pf(-inf) == 0 && nc_verf1pf(inf) == 2 && isnan(nc_verf1pf(NAN)) && nc_verf1pf(0) == 1);
  CHECK(nc_verf1pf(-9.0f) > 0 && ulps(nc_verf1pf(-9.0f), erfc(9.0)) <= 2); /* 4e-37, no cancellation */
}

/* One op over a float32 tensor of n values against ref in double. */
static double op_error(nc_device *cpu, nc_op op, const double *x, int64_t n, double (*ref)(double)) {
  nc_tensor *t = ref_tensor(cpu, NC_FLOAT32, 1, &n, x), *y = NULL;
  double worst = INFINITY;
  if (nc_unary(op, t, &y) == NC_OK) {
    double *got = ref_values(y);
    worst = 0;
    for (int64_t i = 0; i < n; i++) {
      const double want = ref((double)(float)x[i]);
      const double e = fabs(got[i] - want) / fmax(fabs(want), 1e-30);
      worst = fmax(worst, e);
    }
    free(got);
  }
  nc_tensor_release(t), nc_tensor_release(y);
  return worst;
}

static double sigmoid(double v) { return 1 / (1 + exp(-v)); }
static double silu(double v) { return v / (1 + exp(-v)); }
/* 0.5 v (1 + tanh u) written as v / (1 + exp(-2u)), which keeps its digits for v << 0 */
static double gelu(double v) {
  const float z = (float)v * (float)0.70710678118654752440; /* as the float32 op rounds it */
  return 0.5 * v * erf1p((double)z);
}
static double gelu_tanh(double v) { return v / (1 + exp(-1.5957691216057308 * (v + 0.044715 * v * v * v))); }

static void test_ops(nc_device *cpu) {
  const int64_t n = 100000;
  double *x = ref_random(n), *pos = malloc(sizeof(double) * n);
  for (int64_t i = 0; i < n; i++) x[i] *= 30, pos[i] = fabs(x[i]) + 1e-3;
  struct {
    nc_op op;
    const double *x;
    double (*ref)(double);
    const char *name;
    double tol;
  } cases[] = {{NC_OP_EXP, x, exp, "exp", 1e-6},          {NC_OP_LOG, pos, log, "log", 1e-6},
               {NC_OP_TANH, x, tanh, "tanh", 1e-6},       {NC_OP_SIGMOID, x, sigmoid, "sigmoid", 1e-6},
               {NC_OP_SILU, x, silu, "silu", 1e-6},       {NC_OP_GELU_TANH, x, gelu_tanh, "gelu_tanh", 3e-5},
               {NC_OP_GELU, x, gelu, "gelu", 1e-6}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    double e = op_error(cpu, cases[c].op, cases[c].x, n, cases[c].ref);
    if (!(e <= cases[c].tol)) fprintf(stderr, "%s: relative error %g\n", cases[c].name, e);
    CHECK(e <= cases[c].tol);
  }
  /* softmax and log_softmax over rows of 37 (a remainder after the vector width) and 1000 */
  const int64_t widths[2] = {37, 1000};
  for (int w = 0; w < 2; w++) {
    const int64_t c = widths[w], r = n / c, shape[2] = {r, c};
    nc_tensor *t = ref_tensor(cpu, NC_FLOAT32, 2, shape, x);
    for (int lg = 0; lg < 2; lg++) {
      nc_tensor *y = NULL;
      CHECK_OK(nc_softmax(lg ? NC_OP_LOG_SOFTMAX : NC_OP_SOFTMAX, t, 1, &y));
      double *got = y ? ref_values(y) : NULL, worst = got ? 0 : INFINITY;
      for (int64_t i = 0; got && i < r; i++) {
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < c; j++) m = fmax(m, (double)(float)x[i * c + j]);
        for (int64_t j = 0; j < c; j++) s += exp((double)(float)x[i * c + j] - m);
        for (int64_t j = 0; j < c; j++) {
          const double v = (double)(float)x[i * c + j] - m, want = lg ? v - log(s) : exp(v) / s;
          /* log_softmax: error relative to the row's scale (values near 0 lose digits to the
           * subtraction, in any precision); softmax: relative, with x - max rounded to float
           * (an error of |x - max| * 2^-24 in the exponent: 3.6e-6 at x - max = -60) */
          const double err = fabs(got[i * c + j] - want),
                       e = lg ? err / (1 + fabs(m)) / 2e-6 : err / fmax(want, 1e-30) / (1.2e-7 * (4 + fabs(v)));
          worst = fmax(worst, e);
        }
      }
      /* worst: the largest error as a fraction of its bound (2e-6 of the row's scale for
       * log_softmax; 1.2e-7 * (4 + |x - max|) relative for softmax) */
      if (!(worst <= 1)) fprintf(stderr, "%s, rows of %lld: error %g of the bound\n", lg ? "log_softmax" : "softmax", (long long)c, worst);
      CHECK(worst <= 1);
      free(got);
      nc_tensor_release(y);
    }
    nc_tensor_release(t);
  }
  free(x), free(pos);
}

int main(void) {
  CHECK_OK(nc_init());
  test_sweep();
  test_ops(nc_device_get(0));
  CHECK_DONE();
}

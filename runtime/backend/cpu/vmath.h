/* float32 exp, log, tanh and erf that GCC vectorizes in `omp simd` loops: branch-free (selects
 * only), no libm calls, rounding by the 1.5*2^23 trick so SSE2 suffices. The polynomials are
 * Cephes's (expf, logf, tanhf). Accuracy against libm in double, over a sweep of every 64th
 * float (tests/c/test_vmath.c): exp and log within 2 ulp, tanh within 3 ulp; NaN, infinities,
 * zeros, overflow to inf and underflow to subnormals and 0 as libm. */
#ifndef NETCL_CPU_VMATH_H
#define NETCL_CPU_VMATH_H

#include <stdint.h>
#include "netcl/half.h" /* nc_f32_bits, nc_f32_from_bits */

static inline float nc_vexpf(float x) {
  x = x > 88.8f ? 88.8f : x; /* NaN compares false and passes through */
  x = x < -104.0f ? -104.0f : x;
  const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
  float n = (x * 1.44269504088896341f + magic) - magic;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f; /* ln 2 in two parts */
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  n = n == n ? n : 0.0f;
  /* 2^n as two factors, so that n from -150 to 128 gives subnormals and inf as it should */
  const int32_t ni = (int32_t)n, n1 = ni / 2, n2 = ni - n1;
  return p * nc_f32_from_bits((uint32_t)(n1 + 127) << 23) * nc_f32_from_bits((uint32_t)(n2 + 127) << 23);
}

static inline float nc_vlogf(float x) {
  const int sub = x < 1.17549435e-38f; /* subnormals (and 0, negatives: replaced below) */
  const float xs = sub ? x * 8388608.0f : x;
  const uint32_t ix = nc_f32_bits(xs);
  int32_t e = (int32_t)((ix >> 23) & 0xff) - 127 - (sub ? 23 : 0);
  float m = nc_f32_from_bits((ix & 0x007fffffu) | 0x3f800000u); /* [1, 2) */
  const int big = m > 1.41421356f;
  m = big ? m * 0.5f : m;
  e = big ? e + 1 : e;
  const float f = m - 1.0f, z = f * f, fe = (float)e;
  float y = 7.0376836292e-2f;
  y = y * f - 1.1514610310e-1f;
  y = y * f + 1.1676998740e-1f;
  y = y * f - 1.2420140846e-1f;
  y = y * f + 1.4249322787e-1f;
  y = y * f - 1.6668057665e-1f;
  y = y * f + 2.0000714765e-1f;
  y = y * f - 2.4999993993e-1f;
  y = y * f + 3.3333331174e-1f;
  y = y * f * z;
  y += -2.12194440e-4f * fe;
  y += -0.5f * z;
  float r = (f + y) + 0.693359375f * fe;
  r = x == 0.0f ? -__builtin_inff() : r;
  r = x < 0.0f ? __builtin_nanf("") : r;
  r = x == __builtin_inff() ? x : r;
  return x != x ? x : r;
}

static inline float nc_vtanhf(float x) {
  const float ax = x < 0.0f ? -x : x;
  /* |x| >= 0.625: 1 - 2 / (exp(2|x|) + 1), with x's sign */
  const float big = 1.0f - 2.0f / (nc_vexpf(2.0f * ax) + 1.0f);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  return ax >= 0.625f ? (x < 0.0f ? -big : big) : x == 0.0f ? x : small; /* keeps -0 */
}

/* erfc(a) for a >= 1 (NaN passes through): exp(-a^2) u s(u) with u = 1/a, s(u) = erfc(a) a exp(a^2)
 * one polynomial for a < 4 and one above (s(0) = 1/sqrt(pi)); exp(-a^2) as exp(-h^2) exp(-l(a + h))
 * with h = a cut to 12 significant bits (h^2 exact) and l = a - h, so that the rounding of a^2
 * (up to 1e-5 relative in exp for a near 10) is not amplified. Polynomials fitted for this file:
 * weighted least squares on Chebyshev nodes against libm's erfc in double (relative error of the
 * fits 5.2e-9 and 1.0e-9). */
static inline float nc_verfc_tail(float a) {
  const float u = 1.0f / a;
  float p = -4.684532434e-02f; /* 1 <= a < 4 */
  p = p * u + 3.183683455e-01f;
  p = p * u - 9.579898119e-01f;
  p = p * u + 1.658530354e+00f;
  p = p * u - 1.763374925e+00f;
  p = p * u + 1.062925220e+00f;
  p = p * u - 1.448299438e-01f;
  p = p * u - 2.618589103e-01f;
  p = p * u - 1.583039411e-03f;
  p = p * u + 5.642415881e-01f;
  float q = 1.224180341e+00f; /* a >= 4 */
  q = q * u - 1.160141587e+00f;
  q = q * u - 1.952685788e-02f;
  q = q * u + 4.281684756e-01f;
  q = q * u - 4.289502394e-04f;
  q = q * u - 2.820791006e-01f;
  q = q * u - 2.063710980e-07f;
  q = q * u + 5.641896129e-01f;
  const float h = nc_f32_from_bits(nc_f32_bits(a) & 0xfffff000u), l = a - h;
  const float e = nc_vexpf(-(h * h)) * nc_vexpf(-(l * (a + h)));
  return e * u * (a < 4.0f ? p : q);
}

/* |x| < 1: x + x q(x^2) (adding x q to x keeps the polynomial's rounding out of the leading term;
 * q fitted as above, relative error 1.2e-9). */
static inline float nc_verf_small(float x) {
  const float t = x * x;
  float q = 7.847259257687256e-05f;
  q = q * t - 8.008189033716917e-04f;
  q = q * t + 5.188099108636379e-03f;
  q = q * t - 2.6853691786527634e-02f;
  q = q * t + 1.128358244895935e-01f;
  q = q * t - 3.761262595653534e-01f;
  q = q * t + 1.2837916612625122e-01f;
  return x + x * q;
}

/* erf(x); NaN passes through, erf(+-inf) = +-1, erf(-0) = -0. */
static inline float nc_verff(float x) {
  const float ax = x < 0.0f ? -x : x, a = ax < 1.0f ? 1.0f : ax;
  const float big = 1.0f - nc_verfc_tail(a > 10.0f ? 10.0f : a);
  return ax < 1.0f ? nc_verf_small(x) : (x < 0.0f ? -big : big);
}

/* 1 + erf(x) without the cancellation of adding -1 + tiny for x << 0 (the normal CDF in GELU). */
static inline float nc_verf1pf(float x) {
  const float ax = x < 0.0f ? -x : x, a = ax < 1.0f ? 1.0f : ax;
  const float tail = nc_verfc_tail(a > 20.0f ? 20.0f : a); /* exp(-400): 0 */
  return ax < 1.0f ? 1.0f + nc_verf_small(x) : (x < 0.0f ? tail : 2.0f - tail);
}

#endif

/* float32 exp, log and tanh that GCC vectorizes in `omp simd` loops: branch-free (selects
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

#endif

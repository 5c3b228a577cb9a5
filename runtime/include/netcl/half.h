/* The 16-bit storage dtypes' bit conversions: bfloat16 (the top half of a float32) and IEEE 754
 * binary16 (float16). Narrowing rounds to nearest, ties to even; a value too large becomes an
 * infinity of its sign; float16's subnormals are produced and read exactly; a NaN stays a NaN,
 * made quiet, keeping the top bits of its payload. Widening to float32 is exact (every bfloat16
 * and float16 value is a float32; NaN payloads are kept as they are). The kernels in
 * kernels/half.cl are the same integer arithmetic, so both backends give the same bits.
 *
 * The scalar functions are inline so that the CPU backend's loops (cpu_half.c) vectorize; they
 * use integer operations and one exact int-to-float conversion only, so no rounding mode or
 * denormal flushing can change a result. */
#ifndef NETCL_HALF_H
#define NETCL_HALF_H

#include <stdint.h>
#include <string.h>
#include "dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

static inline uint32_t nc_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float nc_f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* float32 -> bfloat16 bits. */
static inline uint16_t nc_f32_to_bf16(float f) {
  const uint32_t u = nc_f32_bits(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; /* carries into the exponent: inf */
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : rounded);
}

/* bfloat16 bits -> float32 (exact). */
static inline float nc_bf16_to_f32(uint16_t h) { return nc_f32_from_bits((uint32_t)h << 16); }

/* float32 -> float16 bits. */
static inline uint16_t nc_f32_to_f16(float f) {
  const uint32_t u = nc_f32_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  /* |f| >= 65536 (or inf, NaN): inf, or a quiet NaN with the payload's top 10 bits */
  const uint32_t big = a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x3ffu) : 0x7c00u;
  /* normal results: rebias the exponent (127 -> 15) and round off 13 bits; [65520, 65536)
   * carries into the exponent and gives inf */
  const uint32_t normal = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
  /* |f| in (2^-25, 2^-14): a subnormal k 2^-24 (or, rounding up, the smallest normal) */
  const int32_t e = (int32_t)(a >> 23);
  const int32_t sh = 126 - e < 14 ? 14 : 126 - e > 24 ? 24 : 126 - e;
  const uint32_t m = (a & 0x7fffffu) | 0x800000u, k = m >> sh, rem = m & ((1u << sh) - 1u), half = 1u << (sh - 1);
  const uint32_t sub = k + (rem > half || (rem == half && (k & 1u)));
  const uint32_t r = a >= 0x47800000u ? big : a >= 0x38800000u ? normal : a > 0x33000000u ? sub : 0u;
  return (uint16_t)(sign | r);
}

/* float16 bits -> float32 (exact). */
static inline float nc_f16_to_f32(uint16_t h) {
  const uint32_t sign = ((uint32_t)h & 0x8000u) << 16, e = ((uint32_t)h >> 10) & 0x1fu, m = (uint32_t)h & 0x3ffu;
  const uint32_t normal = sign | ((e + 112u) << 23) | (m << 13), special = sign | 0x7f800000u | (m << 13);
  const uint32_t sub = sign | nc_f32_bits((float)m * 5.9604644775390625e-8f); /* m 2^-24, exact: m < 2^10 */
  return nc_f32_from_bits(e == 31u ? special : e == 0u ? sub : normal);
}

/* The bits of v in storage dtype dt (NC_BFLOAT16 or NC_FLOAT16). A float64 is first rounded to
 * float32 (so it is rounded twice; the result can differ from a direct rounding in the last
 * place when the float32 lands exactly on a tie). */
uint16_t nc_half_from_double(nc_dtype dt, double v);

/* The value of bits h of storage dtype dt, exactly. */
double nc_half_to_double(nc_dtype dt, uint16_t h);

#ifdef __cplusplus
}
#endif

#endif

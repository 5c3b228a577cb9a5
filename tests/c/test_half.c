/* The storage dtypes' scalar conversions (netcl/half.h) against known bit patterns, and all
 * 65536 bfloat16 and float16 patterns against a reference written from the formats' definitions
 * (ldexp), with every rounding midpoint between neighbours checked for ties to even. */
#include <math.h>
#include <stdint.h>
#include "check.h"
#include "netcl/netcl.h"

static float bits_f32(uint32_t u) { return nc_f32_from_bits(u); }

/* The value of float16 bits h from the definition of binary16. */
static double f16_ref(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
  return s ? -v : v;
}

/* The value of bfloat16 bits h: sign, 8-bit exponent (bias 127), 7-bit mantissa. */
static double bf16_ref(uint16_t h) {
  const int s = h >> 15, e = (h >> 7) & 0xff, m = h & 0x7f;
  double v = e == 0 ? ldexp(m, -133) : e == 255 ? (m ? NAN : INFINITY) : ldexp(128 + m, e - 134);
  return s ? -v : v;
}

static void test_known(void) {
  CHECK(nc_f32_to_bf16(1.0f) == 0x3f80 && nc_f32_to_f16(1.0f) == 0x3c00);
  CHECK(nc_f32_to_bf16(-2.0f) == 0xc000 && nc_f32_to_f16(-2.0f) == 0xc000);
  CHECK(nc_f32_to_f16(0.0f) == 0x0000 && nc_f32_to_f16(-0.0f) == 0x8000 && nc_f32_to_bf16(-0.0f) == 0x8000);
  CHECK(nc_f32_to_f16(65504.0f) == 0x7bff);                  /* the largest float16 */
  CHECK(nc_f32_to_f16(65519.996f) == 0x7bff);                /* below the midpoint to 65536 */
  CHECK(nc_f32_to_f16(65520.0f) == 0x7c00);                  /* the tie rounds to even: inf */
  CHECK(nc_f32_to_f16(1e6f) == 0x7c00 && nc_f32_to_f16(-1e6f) == 0xfc00);
  CHECK(nc_f32_to_f16(INFINITY) == 0x7c00 && nc_f32_to_bf16(-INFINITY) == 0xff80);
  CHECK(nc_f32_to_f16(0x1p-24f) == 0x0001);                  /* smallest subnormal */
  CHECK(nc_f32_to_f16(0x1p-25f) == 0x0000);                  /* half of it: tie to even, 0 */
  CHECK(nc_f32_to_f16(0x1.000002p-25f) == 0x0001);           /* just above the tie */
  CHECK(nc_f32_to_f16(0x3p-25f) == 0x0002);                  /* 1.5 subnormals: tie to even 2 */
  CHECK(nc_f32_to_f16(0x1p-14f) == 0x0400);                  /* smallest normal */
  CHECK(nc_f32_to_f16(0x1.ff8p-15f) == 0x03ff);              /* largest subnormal */
  CHECK(nc_f32_to_f16(0x1.ffcp-15f) == 0x0400);              /* its tie with 2^-14 rounds up (even) */
  CHECK(nc_f32_to_f16(0x1p-149f) == 0x0000 && nc_f32_to_f16(-0x1p-149f) == 0x8000); /* float32 subnormal */
  CHECK(nc_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80);           /* ties to even: down */
  CHECK(nc_f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82);       /* ties to even: up */
  CHECK(nc_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-23f) == 0x3f81); /* above the tie */
  CHECK(nc_f32_to_bf16(0x1.fffffep127f) == 0x7f80);           /* FLT_MAX rounds to inf */
  CHECK(nc_f32_to_bf16(0x1p-149f) == 0x0000 && nc_f32_to_bf16(0x1p-133f) == 0x0001); /* subnormals */
  CHECK(nc_f32_to_f16(3.14159265f) == 0x4248 && nc_f32_to_bf16(3.14159265f) == 0x4049);
  /* NaN: stays NaN, quiet, sign and top payload bits kept */
  CHECK(nc_f32_to_f16(NAN) == 0x7e00 && nc_f32_to_bf16(NAN) == 0x7fc0);
  CHECK(nc_f32_to_f16(bits_f32(0x7f800001u)) == 0x7e00);     /* signaling, payload below 10 bits */
  CHECK(nc_f32_to_bf16(bits_f32(0x7f800001u)) == 0x7fc0);    /* does not round into inf */
  CHECK(nc_f32_to_bf16(bits_f32(0xffffffffu)) == 0xffff);    /* does not wrap */
  CHECK(nc_f32_to_f16(bits_f32(0xff812000u)) == 0xfe09);
  CHECK(nc_f16_to_f32(0x3c00) == 1.0f && nc_f16_to_f32(0x7bff) == 65504.0f && nc_f16_to_f32(0x0001) == 0x1p-24f);
  CHECK(nc_f16_to_f32(0x8001) == -0x1p-24f && nc_f16_to_f32(0xfc00) == -INFINITY && isnan(nc_f16_to_f32(0x7c01)));
  CHECK(nc_bf16_to_f32(0x3f80) == 1.0f && nc_bf16_to_f32(0x0001) == 0x1p-133f);
  /* by dtype, float64 in */
  CHECK(nc_half_from_double(NC_BFLOAT16, 1.0) == 0x3f80 && nc_half_from_double(NC_FLOAT16, 65520.0) == 0x7c00);
  CHECK(nc_half_to_double(NC_FLOAT16, 0x0001) == ldexp(1, -24) && nc_half_to_double(NC_BFLOAT16, 0xc000) == -2.0);
}

/* kind: "f16" or "bf16"; enc/dec the functions under test, ref the definition. */
static void test_all_patterns(const char *kind, uint16_t (*enc)(float), float (*dec)(uint16_t),
                              double (*ref)(uint16_t), uint16_t quiet, uint16_t inf) {
  int bad_dec = 0, bad_round = 0, bad_nan = 0, bad_mid = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    const double r = ref((uint16_t)h);
    const float f = dec((uint16_t)h);
    if (isnan(r)) {
      /* NaN in, NaN out, made quiet when narrowed back; the payload's bits are kept */
      uint16_t back = enc(f);
      if (!isnan(f) || (back & 0x7fff) != ((h & 0x7fff) | quiet) || (back & 0x8000) != (h & 0x8000)) bad_nan++;
      continue;
    }
    if ((double)f != r || (signbit(f) != 0) != (h >> 15)) bad_dec++;
    if (enc(f) != h) bad_round++;
    /* the midpoint with the next pattern up in magnitude (exact in float32) rounds to the even
     * one of the two; a float32 ulp either side rounds to the nearer */
    const uint16_t next = (uint16_t)(h + 1);
    if (((h + 1) & 0x7fff) >= inf) continue; /* the largest finite: overflow is checked above */
    const double rn = ref(next);
    const float mid = (float)((r + rn) / 2), lo = nextafterf(mid, 0.0f), hi = nextafterf(mid, mid * 2.0f);
    const uint16_t even = (h & 1) ? next : (uint16_t)h;
    if ((double)mid != (r + rn) / 2 || enc(mid) != even || enc(lo) != h || enc(hi) != next) bad_mid++;
  }
  if (bad_dec || bad_round || bad_nan || bad_mid)
    fprintf(stderr, "%s: %d decodes, %d round trips, %d NaNs, %d midpoints wrong\n", kind, bad_dec, bad_round,
            bad_nan, bad_mid);
  CHECK(bad_dec == 0 && bad_round == 0 && bad_nan == 0 && bad_mid == 0);
}

/* Values between representable ones, against rounding by hand: the nearest of the two
 * neighbours found by exhaustive search of the positive patterns (ties to the even pattern). */
static void test_random_rounding(void) {
  uint32_t x = 12345;
  int bad = 0;
  for (int i = 0; i < 2000; i++) { /* the search below is linear: a few thousand values suffice */
    x = x * 1664525u + 1013904223u;
    /* magnitudes from 2^-30 to 2^17: subnormals, normals, overflow */
    float f = ldexpf(1.0f + (float)(x >> 9) * 0x1p-23f, (int)(x % 48) - 30);
    uint16_t lo = 0;
    for (uint16_t h = 0; h < 0x7c00; h++)
      if (f16_ref(h) <= f) lo = h;
    uint16_t want;
    if (f >= 65520.0f)
      want = 0x7c00;
    else {
      double a = f16_ref(lo), b = f16_ref((uint16_t)(lo + 1)), da = f - a, db = b - f;
      want = da < db ? lo : db < da ? (uint16_t)(lo + 1) : ((lo & 1) ? (uint16_t)(lo + 1) : lo);
    }
    if (nc_f32_to_f16(f) != want) bad++;
  }
  CHECK(bad == 0);
}

int main(void) {
  test_known();
  test_all_patterns("float16", nc_f32_to_f16, nc_f16_to_f32, f16_ref, 0x0200, 0x7c00);
  test_all_patterns("bfloat16", nc_f32_to_bf16, nc_bf16_to_f32, bf16_ref, 0x0040, 0x7f80);
  test_random_rounding();
  CHECK(nc_dtype_size(NC_BFLOAT16) == 2 && nc_dtype_size(NC_FLOAT16) == 2);
  CHECK(nc_dtype_is_storage(NC_BFLOAT16) && nc_dtype_is_storage(NC_FLOAT16) && !nc_dtype_is_storage(NC_FLOAT32));
  nc_dtype d;
  CHECK_OK(nc_dtype_parse("bfloat16", &d));
  CHECK(d == NC_BFLOAT16);
  CHECK_OK(nc_dtype_parse("half", &d));
  CHECK(d == NC_FLOAT16);
  CHECK(nc_dtype_promote(NC_BFLOAT16, NC_FLOAT16) == NC_FLOAT32 && nc_dtype_promote(NC_FLOAT16, NC_INT64) == NC_FLOAT16);
  CHECK_ERR(nc_op_check_dtype(NC_OP_CUMSUM, NC_BFLOAT16), NC_ERR_DTYPE,
            "dtype bfloat16 is a storage type; convert it with t:float() first");
  CHECK_OK(nc_op_check_dtype(NC_OP_ADD, NC_BFLOAT16)); /* the elementwise families take them */
  CHECK_OK(nc_op_check_dtype(NC_OP_SUM, NC_FLOAT16));  /* and the ops that widen them (NC_DT_WIDEN) */
  CHECK(nc_op_accepts(NC_OP_CONV2D, NC_BFLOAT16) && !nc_op_accepts(NC_OP_CONV2D, NC_INT32));
  CHECK_OK(nc_op_check_dtype(NC_OP_COPY, NC_FLOAT16));
  CHECK_DONE();
}

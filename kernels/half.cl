/* Conversions to and from the storage dtypes (bfloat16, float16), held as ushort bits: strided
 * copies named copy_<dst>_<src>, as core.cl's, for every pair with a storage dtype on one side.
 * Integer arithmetic only (no cl_khr_fp16), the same as netcl/half.h, so every device gives the
 * CPU backend's bits: round to nearest even, overflow to inf, float16 subnormals exact, NaN kept
 * (and made quiet when narrowing). Other dtypes pass through float32 (float64 rounds twice). */

inline ushort nc_to_bf16(float f) {
  uint u = as_uint(f);
  uint rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (ushort)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : rounded);
}

inline float nc_from_bf16(ushort h) { return as_float((uint)h << 16); }

inline ushort nc_to_f16(float f) {
  uint u = as_uint(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  uint big = a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x3ffu) : 0x7c00u;
  uint normal = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
  int e = (int)(a >> 23);
  int sh = 126 - e < 14 ? 14 : 126 - e > 24 ? 24 : 126 - e;
  uint m = (a & 0x7fffffu) | 0x800000u, k = m >> sh, rem = m & ((1u << sh) - 1u), tie = 1u << (sh - 1);
  uint sub = k + ((rem > tie || (rem == tie && (k & 1u))) ? 1u : 0u);
  uint r = a >= 0x47800000u ? big : a >= 0x38800000u ? normal : a > 0x33000000u ? sub : 0u;
  return (ushort)(sign | r);
}

inline float nc_from_f16(ushort h) {
  uint sign = ((uint)h & 0x8000u) << 16, e = ((uint)h >> 10) & 0x1fu, m = (uint)h & 0x3ffu;
  uint normal = sign | ((e + 112u) << 23) | (m << 13), special = sign | 0x7f800000u | (m << 13);
  uint sub = sign | as_uint((float)m * 0x1p-24f);
  return as_float(e == 31u ? special : e == 0u ? sub : normal);
}

/* Reading an element as float32, and writing a float32 as an element, per dtype name. */
#define READ_float32(x) (x)
#define READ_float64(x) ((float)(x))
#define READ_int32(x) ((float)(x))
#define READ_int64(x) ((float)(x))
#define READ_uint8(x) ((float)(x))
#define READ_bool(x) ((float)(x))
#define READ_bfloat16(x) nc_from_bf16(x)
#define READ_float16(x) nc_from_f16(x)
#define WRITE_float32(v) (v)
#define WRITE_float64(v) ((double)(v))
#define WRITE_int32(v) ((int)(v))
#define WRITE_int64(v) ((long)(v))
#define WRITE_uint8(v) ((uchar)(v))
#define WRITE_bool(v) ((uchar)((v) != 0))
#define WRITE_bfloat16(v) nc_to_bf16(v)
#define WRITE_float16(v) nc_to_f16(v)

/* 4-vectors of storage elements at p (4-element aligned) as float4, and back: NC_HALF_LOAD4(N, T,
 * p), NC_HALF_STORE4(N, T, p, r) (the elementwise kernels' vector loads: elementwise.cl). */
#define HALF_VEC4(N)                                                                               \
  inline float4 nc_load4_##N(__global const ushort *p) {                                          \
    const ushort4 h = *(__global const ushort4 *)p;                                                \
    return (float4)(READ_##N(h.s0), READ_##N(h.s1), READ_##N(h.s2), READ_##N(h.s3));               \
  }                                                                                                \
  inline void nc_store4_##N(__global ushort *p, float4 r) {                                        \
    *(__global ushort4 *)p = (ushort4)(WRITE_##N(r.s0), WRITE_##N(r.s1), WRITE_##N(r.s2), WRITE_##N(r.s3)); \
  }
HALF_VEC4(bfloat16)
HALF_VEC4(float16)
#define NC_HALF_LOAD4(N, T, p) nc_load4_##N(p)
#define NC_HALF_STORE4(N, T, p, r) nc_store4_##N((p), (r))

/* The copy kernels; a program that only wants the conversions (the storage dtypes' elementwise
 * build) defines NC_HALF_CONVERSIONS_ONLY. */
#ifndef NC_HALF_CONVERSIONS_ONLY
#define HALF_COPY_K(DN, DT, SN, ST)                                                                \
  __kernel void copy_##DN##_##SN(__global DT *d, nc_layout dl, __global const ST *s, nc_layout sl, long n) { \
    NC_GRID_LOOP(i, n) d[nc_offset(&dl, i)] = WRITE_##DN(READ_##SN(s[nc_offset(&sl, i)]));      \
  }

/* Same dtype: the bits move unchanged (a NaN keeps its payload). */
#define HALF_MOVE_K(N)                                                                             \
  __kernel void copy_##N##_##N(__global ushort *d, nc_layout dl, __global const ushort *s, nc_layout sl, long n) { \
    NC_GRID_LOOP(i, n) d[nc_offset(&dl, i)] = s[nc_offset(&sl, i)];                               \
  }

#ifdef NC_FP64
#define HALF_F64(DN) HALF_COPY_K(DN, ushort, float64, double) HALF_COPY_K(float64, double, DN, ushort)
#else
#define HALF_F64(DN)
#endif

/* Every copy with storage dtype DN on one side (and the other storage dtype as a source). */
#define HALF_ALL(DN, OTHER)                                                                        \
  HALF_COPY_K(DN, ushort, float32, float) HALF_COPY_K(float32, float, DN, ushort)                 \
  HALF_COPY_K(DN, ushort, int32, int) HALF_COPY_K(int32, int, DN, ushort)                         \
  HALF_COPY_K(DN, ushort, int64, long) HALF_COPY_K(int64, long, DN, ushort)                       \
  HALF_COPY_K(DN, ushort, uint8, uchar) HALF_COPY_K(uint8, uchar, DN, ushort)                     \
  HALF_COPY_K(DN, ushort, bool, uchar) HALF_COPY_K(bool, uchar, DN, ushort)                       \
  HALF_COPY_K(DN, ushort, OTHER, ushort) HALF_MOVE_K(DN) HALF_F64(DN)

HALF_ALL(bfloat16, float16)
HALF_ALL(float16, bfloat16)

/* Contiguous conversions between storage dtype N and float32, copy's path for contiguous tensors
 * (half_widen_<N>: float32 from N; half_narrow_<N>: N from float32). The host launches about
 * n / 4 items: when both element offsets are multiples of 4 (buffers are aligned), item q converts
 * elements 4q .. 4q + 3 (an 8-byte and a 16-byte access) and then 4(q + G) .. while any are left,
 * and items q < n % 4 the rest; otherwise single elements, strided by the grid. */
#define HALF_FAST_K(N)                                                                             \
  __kernel void half_widen_##N(__global float *d, long doff, __global const ushort *s, long soff, long n) { \
    const long g = get_global_size(0);                                                             \
    if (((doff | soff) & 3) == 0) {                                                                \
      const long nv = n >> 2;                                                                      \
      for (long q = get_global_id(0); q < nv; q += g)                                              \
        vstore4(nc_load4_##N(s + soff + 4 * q), 0, d + doff + 4 * q);                              \
      for (long q = get_global_id(0); q < (n & 3); q += g)                                         \
        d[doff + 4 * nv + q] = READ_##N(s[soff + 4 * nv + q]);                                     \
    } else {                                                                                       \
      NC_GRID_LOOP(i, n) d[doff + i] = READ_##N(s[soff + i]);                                      \
    }                                                                                              \
  }                                                                                                \
  __kernel void half_narrow_##N(__global ushort *d, long doff, __global const float *s, long soff, long n) { \
    const long g = get_global_size(0);                                                             \
    if (((doff | soff) & 3) == 0) {                                                                \
      const long nv = n >> 2;                                                                      \
      for (long q = get_global_id(0); q < nv; q += g)                                              \
        nc_store4_##N(d + doff + 4 * q, vload4(0, s + soff + 4 * q));                              \
      for (long q = get_global_id(0); q < (n & 3); q += g)                                         \
        d[doff + 4 * nv + q] = WRITE_##N(s[soff + 4 * nv + q]);                                    \
    } else {                                                                                       \
      NC_GRID_LOOP(i, n) d[doff + i] = WRITE_##N(s[soff + i]);                                     \
    }                                                                                              \
  }
HALF_FAST_K(bfloat16)
HALF_FAST_K(float16)
#endif

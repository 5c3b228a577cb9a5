/* fill, strided copy with dtype conversion, arange, uniform and normal draws.
 * Kernel names carry dtype names: fill_float32, copy_int64_float32 (dst, src), ... */

#define FILL_K(N, T)                                                              \
  __kernel void fill_##N(__global T *p, nc_layout l, T v, long n) {               \
    NC_GRID_LOOP(i, n) p[nc_offset(&l, i)] = v;                                   \
  }

#define ARANGE_K(N, T, CONV)                                                      \
  __kernel void arange_##N(__global T *p, long off, nc_acc start, nc_acc step, long n) { \
    NC_GRID_LOOP(i, n) p[off + i] = CONV(T, start + (nc_acc)i * step);            \
  }

#define COPY_K(DN, DT, SN, ST, CONV)                                              \
  __kernel void copy_##DN##_##SN(__global DT *d, nc_layout dl, __global const ST *s, nc_layout sl, long n) { \
    NC_GRID_LOOP(i, n) {                                                          \
      ST x = s[nc_offset(&sl, i)];                                                \
      d[nc_offset(&dl, i)] = CONV(DT, x);                                         \
    }                                                                             \
  }

#ifdef NC_FP64
#define COPY_FROM_F64(DN, DT, CONV) COPY_K(DN, DT, float64, double, CONV)
#else
#define COPY_FROM_F64(DN, DT, CONV)
#endif

#define COPY_FROM_ALL(DN, DT, CONV)                                               \
  COPY_K(DN, DT, float32, float, CONV)                                            \
  COPY_K(DN, DT, int32, int, CONV)                                                \
  COPY_K(DN, DT, int64, long, CONV)                                               \
  COPY_K(DN, DT, uint8, uchar, CONV)                                              \
  COPY_K(DN, DT, bool, uchar, CONV)                                               \
  COPY_FROM_F64(DN, DT, CONV)

#define ALL_FOR(N, T, CONV) FILL_K(N, T) ARANGE_K(N, T, CONV) COPY_FROM_ALL(N, T, CONV)

ALL_FOR(float32, float, NC_CONV_PLAIN)
ALL_FOR(int32, int, NC_CONV_PLAIN)
ALL_FOR(int64, long, NC_CONV_PLAIN)
ALL_FOR(uint8, uchar, NC_CONV_PLAIN)
ALL_FOR(bool, uchar, NC_CONV_BOOL)
#ifdef NC_FP64
ALL_FOR(float64, double, NC_CONV_PLAIN)
#endif
/* The storage dtypes' bits (the host converts the value; copies to and from them: half.cl). */
FILL_K(bfloat16, ushort)
FILL_K(float16, ushort)

/* Random draws: element i uses Philox counter (offset + i), the CPU backend's stream. */
__kernel void uniform_float32(__global float *p, long off, ulong seed, ulong offset, float a, float b, long n) {
  NC_GRID_LOOP(i, n) {
    uint4 w = nc_philox_element(seed, offset + (ulong)i);
    p[off + i] = a + (b - a) * nc_u24(w.x);
  }
}

__kernel void normal_float32(__global float *p, long off, ulong seed, ulong offset, float a, float b, long n) {
  NC_GRID_LOOP(i, n) {
    uint4 w = nc_philox_element(seed, offset + (ulong)i);
    float u1 = nc_u24(w.x) + 0x1p-24f, u2 = nc_u24(w.y);
    p[off + i] = a + b * (sqrt(-2.0f * log(u1)) * cos(6.2831853071795865f * u2));
  }
}

#ifdef NC_FP64
__kernel void uniform_float64(__global double *p, long off, ulong seed, ulong offset, double a, double b, long n) {
  NC_GRID_LOOP(i, n) {
    uint4 w = nc_philox_element(seed, offset + (ulong)i);
    p[off + i] = a + (b - a) * nc_u53(w.x, w.y);
  }
}

__kernel void normal_float64(__global double *p, long off, ulong seed, ulong offset, double a, double b, long n) {
  NC_GRID_LOOP(i, n) {
    uint4 w = nc_philox_element(seed, offset + (ulong)i);
    double u1 = nc_u53(w.x, w.y) + 0x1p-53, u2 = nc_u53(w.z, w.w);
    p[off + i] = a + b * (sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
  }
}
#endif

/* Same-dtype copies from a strided source into a contiguous destination, with 32-bit index math
 * (the host checks that every source offset and the count fit): strided_copy_<element size>.
 * The layout is the source's, with the dims merged where both sides allow, innermost last. With
 * vec set, the innermost dim has stride 1 and a multiple of 4 elements and every offset is a
 * multiple of 4: each work-item moves 4 elements, as one 4-vector on both sides. n counts
 * work-items' units (elements, or groups of 4 with vec). */
typedef struct {
  int ndim;
  int shape[8];
  int strides[8];
} nc_layout32;

#define STRIDED_COPY(N, T, T4)                                                                          \
  __kernel void strided_copy_##N(__global T *d, const long doff, __global const T *s, const long soff,  \
                                 const nc_layout32 l, const int n, const int vec) {                     \
    __global T *dp = d + doff;                                                                          \
    __global const T *sp = s + soff;                                                                    \
    for (int i = get_global_id(0); i < n; i += get_global_size(0)) {                                    \
      const int e = vec ? 4 * i : i;                                                                    \
      int rem = e, off = 0;                                                                             \
      for (int k = l.ndim - 1; k >= 0; k--) {                                                           \
        const int q = rem / l.shape[k];                                                                 \
        off += (rem - q * l.shape[k]) * l.strides[k];                                                   \
        rem = q;                                                                                        \
      }                                                                                                 \
      if (vec)                                                                                          \
        *(__global T4 *)(dp + e) = *(__global const T4 *)(sp + off);                                    \
      else                                                                                              \
        dp[e] = sp[off];                                                                                \
    }                                                                                                   \
  }

STRIDED_COPY(1, uchar, uchar4)
STRIDED_COPY(2, ushort, ushort4)
STRIDED_COPY(4, uint, uint4)
STRIDED_COPY(8, ulong, ulong4)

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

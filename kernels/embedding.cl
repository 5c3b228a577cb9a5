/* Embedding lookup and its backward scatter-add. Rows are gathered element-wise; the backward
 * adds with a compare-and-swap loop on the element's bits (OpenCL 1.2 has no float atomic
 * add), so repeated indices accumulate correctly; the order of additions, and so the last
 * bits, may vary between runs. -DREAL=double for float64 (backward needs 64-bit atomics). */
#ifndef REAL
#define REAL float
#endif


/* bad: the first out-of-range position + 1 (atomic min; starts at INT_MAX). */
#define EMB_FWD(NAME, IDX)                                                                                 \
  __kernel void NAME(__global const REAL *w, __global const IDX *idx, __global REAL *out, const long n,   \
                     const long v, const long d, __global int *bad) {                                      \
    NC_GRID_LOOP(e, n * d) {                                                                               \
      const long i = e / d, j = e - i * d, k = idx[i];                                                     \
      if (k < 0 || k >= v) {                                                                               \
        out[e] = 0;                                                                                        \
        if (j == 0) atomic_min(bad, (int)min(i + 1, (long)INT_MAX));                                       \
      } else {                                                                                             \
        out[e] = w[k * d + j];                                                                             \
      }                                                                                                    \
    }                                                                                                      \
  }

EMB_FWD(embedding_fwd_int64, long)
EMB_FWD(embedding_fwd_int32, int)

__kernel void embedding_zero(__global REAL *p, const long n) {
  NC_GRID_LOOP(i, n) p[i] = 0;
}

/* *p += v, atomically. */
#ifdef NC_REAL_DOUBLE
#ifdef cl_khr_int64_base_atomics
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable
inline void add_to(volatile __global double *p, double v) {
  union { ulong u; double f; } old, upd;
  do {
    old.f = *p;
    upd.f = old.f + v;
  } while (atom_cmpxchg((volatile __global ulong *)p, old.u, upd.u) != old.u);
}
#define NC_EMB_BACKWARD 1
#endif
#else
inline void add_to(volatile __global float *p, float v) {
  union { uint u; float f; } old, upd;
  do {
    old.f = *p;
    upd.f = old.f + v;
  } while (atomic_cmpxchg((volatile __global uint *)p, old.u, upd.u) != old.u);
}
#define NC_EMB_BACKWARD 1
#endif

#ifdef NC_EMB_BACKWARD
#define EMB_BWD(NAME, IDX)                                                                                \
  __kernel void NAME(__global const REAL *g, __global const IDX *idx, __global REAL *dw, const long n,    \
                     const long v, const long d, const long padding) {                                     \
    NC_GRID_LOOP(e, n * d) {                                                                               \
      const long i = e / d, j = e - i * d, k = idx[i];                                                     \
      if (k >= 0 && k < v && k != padding) add_to(dw + k * d + j, g[e]);                                   \
    }                                                                                                      \
  }
EMB_BWD(embedding_bwd_int64, long)
EMB_BWD(embedding_bwd_int32, int)
#endif

/* Bitonic sort of (key, position) pairs, one row per padded power-of-two segment of a scratch
 * buffer. The order is total (nan above everything, ties by position, padding last), so the
 * result is the unique sorted permutation that runtime/backend/cpu/sort.c's qsort gives too.
 * sort_init_<C> loads the rows; the host launches sort_step_<C> once per (k, j) stage. */

#define NC_PAD LONG_MAX
#define NO_NAN(v) false

#define SORT_K(N, T, ISNAN)                                                                       \
  inline bool before_##N(T ka, long ia, T kb, long ib, int desc) {                               \
    if (ia == NC_PAD) return false;                                                              \
    if (ib == NC_PAD) return true;                                                               \
    const bool na = ISNAN(ka), nb = ISNAN(kb);                                                   \
    if (na || nb) return (na && nb) ? ia < ib : (desc ? na : nb);                                \
    if (ka == kb) return ia < ib;                                                                \
    return desc ? ka > kb : ka < kb;                                                             \
  }                                                                                              \
                                                                                                 \
  __kernel void sort_init_##N(__global T *keys, __global long *pos, __global const T *x, nc_layout lx, long outer, \
                              long inner, long p2) {                                             \
    NC_GRID_LOOP(t, outer * p2) {                                                                \
      const long row = t / p2, j = t - row * p2;                                                 \
      if (j < inner) {                                                                           \
        keys[t] = x[nc_offset(&lx, row * inner + j)];                                            \
        pos[t] = j;                                                                              \
      } else {                                                                                   \
        keys[t] = 0;                                                                             \
        pos[t] = NC_PAD;                                                                         \
      }                                                                                          \
    }                                                                                            \
  }                                                                                              \
                                                                                                 \
  __kernel void sort_step_##N(__global T *keys, __global long *pos, long outer, long p2, long k, long j, int desc) { \
    const long pairs = p2 / 2;                                                                    \
    NC_GRID_LOOP(t, outer * pairs) {                                                              \
      const long row = t / pairs, q = t - row * pairs;                                             \
      const long i = 2 * j * (q / j) + q % j, l = i + j;                                         \
      __global T *kr = keys + row * p2;                                                          \
      __global long *pr = pos + row * p2;                                                        \
      const T ki = kr[i], kl = kr[l];                                                            \
      const long pi = pr[i], pl = pr[l];                                                         \
      const bool up = (i & k) == 0;                                                              \
      if (up ? before_##N(kl, pl, ki, pi, desc) : before_##N(ki, pi, kl, pl, desc)) {            \
        kr[i] = kl, kr[l] = ki;                                                                  \
        pr[i] = pl, pr[l] = pi;                                                                  \
      }                                                                                          \
    }                                                                                            \
  }

SORT_K(float32, float, isnan)
SORT_K(int64, long, NO_NAN)
#ifdef NC_FP64
SORT_K(float64, double, isnan)
#endif

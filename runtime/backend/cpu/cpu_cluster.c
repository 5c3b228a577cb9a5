/* CPU k-means steps (op-table KERNEL rows kmeans_assign and kmeans_update).
 *
 * kmeans_assign runs at GEMM speed: the points that need a search are taken in tiles of
 * KM_ROWS rows; for a tile, G = -2 X C^T comes from the host GEMM (OpenBLAS when the build has
 * it) into a buffer of KM_ROWS x K, and each row's best and second best of ||c||^2 + G[i, :]
 * are found while the buffer is still in cache; ||x||^2 is added to those two only. Memory:
 * the buffer, never N x K. The tiles are shared out over the pool's threads, each with its own
 * buffer and a single-threaded GEMM per tile (one parallel region per call, not two per tile).
 * With Hamerly's bounds, points whose bounds hold are settled first (one distance at most
 * each), and only the rest are gathered into tiles. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "cpu_linalg.h"
#include "netcl/threads.h"
#include "strided.h"

/* Buffer of about 256 KiB of float per tile (the GEMM result stays in L2). */
#define KM_BUF_ELEMS (1 << 16)

/* The best and second best of v[j] = cn[j] + g[j], j < k (k >= 1; ties: the lower index), in
 * three passes that vectorize, over a row still in cache: v and its minimum, the first index
 * holding it, the minimum of the others (INFINITY when k = 1). v may be g. */
#define KM_BEST_TWO(T)                                                                               \
  NC_CPU_CLONES static void best_two_##T(const T *cn, T *v, const T *g, int64_t k, T *b1, T *b2,    \
                                          int64_t *bi) {                                            \
    T m = INFINITY;                                                                                  \
    _Pragma("omp simd reduction(min : m)") for (int64_t j = 0; j < k; j++) {                         \
      v[j] = cn[j] + g[j];                                                                           \
      m = v[j] < m ? v[j] : m;                                                                       \
    }                                                                                                \
    int64_t at = 0;                                                                                  \
    while (at < k - 1 && v[at] != m) at++;                                                           \
    T m2 = INFINITY;                                                                                 \
    _Pragma("omp simd reduction(min : m2)") for (int64_t j = 0; j < k; j++) {                        \
      const T w = j == at ? (T)INFINITY : v[j];                                                      \
      m2 = w < m2 ? w : m2;                                                                          \
    }                                                                                                \
    *b1 = m, *b2 = m2, *bi = at;                                                                     \
  }
KM_BEST_TWO(float)
KM_BEST_TWO(double)

static inline const void *cptr(const nc_tensor *t) {
  return t ? (const char *)nc_cpu_base(t) + (size_t)t->offset * nc_dtype_size(t->dtype) : NULL;
}

#define KM_DEFINE(T, SFX, GEMM)                                                                              \
  static nc_status assign_##SFX(const nc_kernel_call *kc) {                                                  \
    const int64_t n = kc->i[0], d = kc->i[1], k = kc->i[2];                                                  \
    const T *x = cptr(kc->t[0]), *c = cptr(kc->t[1]), *bnd = cptr(kc->t[3]), *mv = cptr(kc->t[4]);          \
    const int64_t *lab = cptr(kc->t[2]);                                                                     \
    int64_t *out = (int64_t *)cptr(kc->t[5]);                                                                \
    T *dist = (T *)cptr(kc->t[6]);                                                                           \
    const int64_t rows = k >= KM_BUF_ELEMS / 16 ? 16 : (KM_BUF_ELEMS / k > 4096 ? 4096 : KM_BUF_ELEMS / k); \
    const int64_t slots = nc_get_num_threads();                                                              \
    T *cn = malloc(sizeof(T) * (size_t)k), *g = malloc(sizeof(T) * (size_t)(slots * rows * k));             \
    T *pack = lab ? malloc(sizeof(T) * (size_t)(slots * rows * d)) : NULL;                                   \
    int64_t *todo = lab ? malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1)) : NULL;                          \
    if (!cn || !g || (lab && (!pack || !todo))) {                                                            \
      free(cn), free(g), free(pack), free(todo);                                                             \
      return nc_error(NC_ERR_OOM, "out of host memory for the k-means tiles");                               \
    }                                                                                                        \
    for (int64_t j = 0; j < k; j++) {                                                                        \
      T s = 0;                                                                                               \
      for (int64_t e = 0; e < d; e++) s += c[j * d + e] * c[j * d + e];                                      \
      cn[j] = s;                                                                                             \
    }                                                                                                        \
    int64_t m = n;                                                                                           \
    if (lab) {                                                                                               \
      T maxmove = 0;                                                                                         \
      for (int64_t j = 0; j < k; j++) maxmove = mv[2 * j] > maxmove ? mv[2 * j] : maxmove;                  \
      /* The bounds test; out[i] = -1 marks a point to search. */                                            \
      NC_CPU_PARALLEL_FOR(n * d > 65536, schedule(dynamic), blk, (n + 1023) / 1024, {                        \
       for (int64_t i = blk * 1024; i < n && i < (blk + 1) * 1024; i++) {                                    \
        const int64_t a = lab[i];                                                                            \
        out[i] = -1;                                                                                         \
        if (a >= 0 && a < k) {                                                                               \
          T u = bnd[2 * i] + mv[2 * a];                                                                      \
          const T l = bnd[2 * i + 1] - maxmove, lim = mv[2 * a + 1] > l ? mv[2 * a + 1] : l;                 \
          if (u > lim) {                                                                                     \
            T s = 0;                                                                                         \
            for (int64_t e = 0; e < d; e++) {                                                                \
              const T t = x[i * d + e] - c[a * d + e];                                                       \
              s += t * t;                                                                                    \
            }                                                                                                \
            u = sqrt(s);                                                                                     \
          }                                                                                                  \
          if (!(u > lim)) {                                                                                  \
            out[i] = a;                                                                                      \
            dist[2 * i] = u;                                                                                 \
            dist[2 * i + 1] = l;                                                                             \
          }                                                                                                  \
        }                                                                                                    \
       }                                                                                                     \
      });                                                                                                    \
      m = 0;                                                                                                 \
      for (int64_t i = 0; i < n; i++)                                                                        \
        if (out[i] < 0) todo[m++] = i;                                                                       \
    }                                                                                                        \
    /* Slot q (one per thread, with its own buffers) takes tiles q, q + slots, ...; its GEMMs run  \
     * single-threaded inside the region. */                                                                 \
    const int64_t ntiles = (m + rows - 1) / rows;                                                            \
    int failed = 0;                                                                                          \
    NC_CPU_PARALLEL_FOR(slots > 1 && ntiles > 1, schedule(static, 1), q, slots, {                            \
      T *gq = g + q * rows * k, *pq = pack ? pack + q * rows * d : NULL;                                     \
      for (int64_t t = q; t < ntiles; t += slots) {                                                          \
        const int64_t r0 = t * rows, nr = m - r0 < rows ? m - r0 : rows;                                     \
        const T *a = x + r0 * d;                                                                             \
        if (lab) {                                                                                           \
          for (int64_t r = 0; r < nr; r++) memcpy(pq + r * d, x + todo[r0 + r] * d, sizeof(T) * (size_t)d);  \
          a = pq;                                                                                            \
        }                                                                                                    \
        if (GEMM(nr, k, d, (T)-2, a, d, 1, c, 1, d, (T)0, gq, k, 1) != NC_OK) {                              \
          _Pragma("omp atomic write") failed = 1;                                                            \
          break;                                                                                             \
        }                                                                                                    \
        for (int64_t r = 0; r < nr; r++) {                                                                   \
          const int64_t i = lab ? todo[r0 + r] : r0 + r;                                                     \
          T *gr = gq + r * k, b1, b2, xn = 0;                                                                \
          int64_t bi;                                                                                        \
          best_two_##T(cn, gr, gr, k, &b1, &b2, &bi);                                                        \
          for (int64_t e = 0; e < d; e++) xn += x[i * d + e] * x[i * d + e];                                 \
          b1 += xn, b2 += xn;                                                                                \
          out[i] = bi;                                                                                       \
          dist[2 * i] = sqrt(b1 > 0 ? b1 : 0);                                                               \
          dist[2 * i + 1] = sqrt(b2 > 0 ? b2 : 0);                                                           \
        }                                                                                                    \
      }                                                                                                      \
    });                                                                                                      \
    const nc_status st = failed ? nc_error(NC_ERR_OOM, "out of host memory in the k-means GEMM") : NC_OK;    \
    free(cn), free(g), free(pack), free(todo);                                                               \
    return st;                                                                                               \
  }                                                                                                          \
                                                                                                             \
  static void update_##SFX(const nc_kernel_call *kc) {                                                       \
    const int64_t n = kc->i[0], d = kc->i[1], k = kc->i[2], chunk = kc->i[3];                                \
    const T *x = cptr(kc->t[0]);                                                                             \
    const int64_t *lab = cptr(kc->t[1]);                                                                     \
    T *part = (T *)cptr(kc->t[2]);                                                                           \
    int64_t *cnt = (int64_t *)cptr(kc->t[3]);                                                                \
    NC_CPU_PARALLEL_FOR(kc->rows > 1, schedule(dynamic), p, kc->rows, {                                   \
      const int64_t i0 = p * chunk, i1 = i0 + chunk < n ? i0 + chunk : n;                                    \
      T *pp = part + p * k * d;                                                                              \
      int64_t *cp = cnt + p * k;                                                                             \
      memset(pp, 0, sizeof(T) * (size_t)(k * d));                                                            \
      memset(cp, 0, sizeof(int64_t) * (size_t)k);                                                            \
      for (int64_t i = i0; i < i1; i++) {                                                                    \
        const int64_t l = lab[i];                                                                            \
        if (l < 0 || l >= k) continue;                                                                       \
        cp[l]++;                                                                                             \
        for (int64_t e = 0; e < d; e++) pp[l * d + e] += x[i * d + e];                                       \
      }                                                                                                      \
    });                                                                                                      \
  }

KM_DEFINE(float, f32, nc_cpu_sgemm)
KM_DEFINE(double, f64, nc_cpu_dgemm)

/* t = {x, centroids, labels?, bounds?, moves?, out, dist}, i = {n, d, k}; contiguous. */
nc_status nc_cpu_kmeans_assign(const nc_kernel_call *k) {
  return k->t[0]->dtype == NC_FLOAT32 ? assign_f32(k) : assign_f64(k);
}

/* t = {x, labels, part [rows, k, d], counts [rows, k]}, i = {n, d, k, chunk}. */
nc_status nc_cpu_kmeans_update(const nc_kernel_call *k) {
  if (k->t[0]->dtype == NC_FLOAT32)
    update_f32(k);
  else
    update_f64(k);
  return NC_OK;
}

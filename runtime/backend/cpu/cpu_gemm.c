/* CPU GEMM: OpenBLAS (cblas_sgemm / cblas_dgemm) when found at configure time, otherwise, or
 * with NETCL_BLAS=0 in the environment, the blocked C GEMM of gemm_blocked.inc. Operands
 * arrive as raw strides; BLAS takes them directly when one of each operand's strides is 1
 * (plain or transposed), and packed copies otherwise. */
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "netcl/threads.h"
#include "cpu_linalg.h"
#include "strided.h"
#ifdef NC_HAVE_BLAS
#include <cblas.h>
#endif

#define MR 4
#define T float
#define NR 8
#define NAME(x) x##_f32
#include "gemm_blocked.inc"
#undef T
#undef NR
#undef NAME
#define T double
#define NR 4
#define NAME(x) x##_f64
#include "gemm_blocked.inc"
#undef T
#undef NR
#undef NAME

#ifdef NC_HAVE_BLAS
static bool use_blas(int64_t m, int64_t n, int64_t k) {
  const char *env = getenv("NETCL_BLAS");
  if (env && strcmp(env, "0") == 0) return false;
  return m < INT_MAX && n < INT_MAX && k < INT_MAX;
}
#endif

static nc_status gemm_any(bool f32, int64_t m, int64_t n, int64_t k, double alpha, const void *a, int64_t sam,
                          int64_t sak, const void *b, int64_t sbk, int64_t sbn, double beta, void *c,
                          int64_t csm, int64_t csn);

#ifdef NC_HAVE_BLAS
/* Dense row-major copy of an r x c matrix with strides (sr, sc); beta_src false leaves dst
 * uninitialized (NULL src). */
static void *dense_copy(bool f32, const void *src, int64_t r, int64_t c, int64_t sr, int64_t sc) {
  size_t es = f32 ? sizeof(float) : sizeof(double);
  void *d = malloc(es * (size_t)(r * c) + 1);
  if (!d || !src) return d;
  for (int64_t i = 0; i < r; i++)
    for (int64_t j = 0; j < c; j++) {
      if (f32)
        ((float *)d)[i * c + j] = ((const float *)src)[i * sr + j * sc];
      else
        ((double *)d)[i * c + j] = ((const double *)src)[i * sr + j * sc];
    }
  return d;
}

static void scatter_back(bool f32, const void *src, void *dst, int64_t r, int64_t c, int64_t sr, int64_t sc) {
  for (int64_t i = 0; i < r; i++)
    for (int64_t j = 0; j < c; j++) {
      if (f32)
        ((float *)dst)[i * sr + j * sc] = ((const float *)src)[i * c + j];
      else
        ((double *)dst)[i * sr + j * sc] = ((const double *)src)[i * c + j];
    }
}

/* How BLAS can read an r x c matrix with strides (sr, sc): row-major with leading dimension
 * *ld (trans false), transposed (trans true), or not at all (false). Strides of size-1 dims
 * do not matter and are normalized first. */
static bool blas_layout(int64_t r, int64_t c, int64_t sr, int64_t sc, bool *trans, int64_t *ld) {
  int64_t sr1 = r == 1 ? (c > 1 ? c : 1) : sr, sc1 = c == 1 ? 1 : sc;
  if (sc1 == 1 && sr1 >= (c > 1 ? c : 1)) return *trans = false, *ld = sr1, true;
  sr1 = r == 1 ? 1 : sr;
  sc1 = c == 1 ? (r > 1 ? r : 1) : sc;
  if (sr1 == 1 && sc1 >= (r > 1 ? r : 1)) return *trans = true, *ld = sc1, true;
  return false;
}

/* OpenBLAS runs single-threaded inside netcl's thread pool (runtime/core/threads.c): a GEMM
 * large enough is cut into one slab of C per thread (rows, or columns when C is wide), so BLAS
 * and the other CPU ops share one set of threads and none spin against each other
 * (docs/performance.md). */
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static void blas_init(void) { openblas_set_num_threads(1); }

#define SLAB_ALIGN 16

static void blas_call(bool f32, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                      int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc) {
  pthread_once(&blas_once, blas_init);
  const size_t es = f32 ? sizeof(float) : sizeof(double);
  const enum CBLAS_TRANSPOSE ota = ta ? CblasTrans : CblasNoTrans, otb = tb ? CblasTrans : CblasNoTrans;
  int slabs = nc_get_num_threads();
  const bool by_rows = m >= n;
  const int64_t along = by_rows ? m : n;
  /* below about 2 MFLOP per slab, one call is faster than a parallel region */
  while (slabs > 1 && (m * n * k / slabs < (1 << 20) || along / slabs < SLAB_ALIGN)) slabs--;
  int64_t per = (along + slabs - 1) / slabs;
  per = (per + SLAB_ALIGN - 1) / SLAB_ALIGN * SLAB_ALIGN;
  NC_CPU_PARALLEL_FOR(slabs > 1, schedule(dynamic, 1), s, slabs, {
    const int64_t lo = s * per, len = along - lo < per ? along - lo : per;
    if (len > 0) {
      const char *pa = a, *pb = b;
      char *pc = c;
      int64_t mm = m, nn = n;
      if (by_rows) {
        pa += (size_t)(lo * (ta ? 1 : lda)) * es, pc += (size_t)(lo * ldc) * es, mm = len;
      } else {
        pb += (size_t)(lo * (tb ? ldb : 1)) * es, pc += (size_t)lo * es, nn = len;
      }
      if (f32)
        cblas_sgemm(CblasRowMajor, ota, otb, (int)mm, (int)nn, (int)k, (float)alpha, (const float *)pa, (int)lda,
                    (const float *)pb, (int)ldb, (float)beta, (float *)pc, (int)ldc);
      else
        cblas_dgemm(CblasRowMajor, ota, otb, (int)mm, (int)nn, (int)k, alpha, (const double *)pa, (int)lda,
                    (const double *)pb, (int)ldb, beta, (double *)pc, (int)ldc);
    }
  });
}

static nc_status gemm_blas(bool f32, int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                           int64_t sam, int64_t sak, const void *b, int64_t sbk, int64_t sbn, double beta,
                           void *c, int64_t csm, int64_t csn) {
  bool tc;
  int64_t ldc;
  if (!blas_layout(m, n, csm, csn, &tc, &ldc)) {
    void *tmp = dense_copy(f32, beta != 0 ? c : NULL, m, n, csm, csn);
    if (!tmp) return nc_error(NC_ERR_OOM, "out of host memory for a GEMM temporary");
    nc_status s = gemm_blas(f32, m, n, k, alpha, a, sam, sak, b, sbk, sbn, beta, tmp, n, 1);
    if (s == NC_OK) scatter_back(f32, tmp, c, m, n, csm, csn);
    free(tmp);
    return s;
  }
  /* A column-major C is C^T = B^T A^T in row-major terms. */
  if (tc) return gemm_blas(f32, n, m, k, alpha, b, sbn, sbk, a, sak, sam, beta, c, ldc, 1);
  bool ta, tb;
  int64_t lda, ldb;
  void *pa = NULL, *pb = NULL;
  if (!blas_layout(m, k, sam, sak, &ta, &lda)) {
    if (!(pa = dense_copy(f32, a, m, k, sam, sak))) return nc_error(NC_ERR_OOM, "out of host memory");
    a = pa, ta = false, lda = k > 1 ? k : 1;
  }
  if (!blas_layout(k, n, sbk, sbn, &tb, &ldb)) {
    if (!(pb = dense_copy(f32, b, k, n, sbk, sbn))) {
      free(pa);
      return nc_error(NC_ERR_OOM, "out of host memory");
    }
    b = pb, tb = false, ldb = n > 1 ? n : 1;
  }
  blas_call(f32, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  free(pa);
  free(pb);
  return NC_OK;
}
#endif

static nc_status gemm_any(bool f32, int64_t m, int64_t n, int64_t k, double alpha, const void *a, int64_t sam,
                          int64_t sak, const void *b, int64_t sbk, int64_t sbn, double beta, void *c,
                          int64_t csm, int64_t csn) {
  if (m == 0 || n == 0) return NC_OK;
  if (k == 0) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        if (f32) {
          float *p = (float *)c + i * csm + j * csn;
          *p = beta == 0 ? 0.0f : (float)beta * *p;
        } else {
          double *p = (double *)c + i * csm + j * csn;
          *p = beta == 0 ? 0.0 : beta * *p;
        }
      }
    return NC_OK;
  }
#ifdef NC_HAVE_BLAS
  if (use_blas(m, n, k)) return gemm_blas(f32, m, n, k, alpha, a, sam, sak, b, sbk, sbn, beta, c, csm, csn);
#endif
  if (f32) return gemm_blocked_f32(m, n, k, (float)alpha, a, sam, sak, b, sbk, sbn, (float)beta, c, csm, csn);
  return gemm_blocked_f64(m, n, k, alpha, a, sam, sak, b, sbk, sbn, beta, c, csm, csn);
}

nc_status nc_cpu_sgemm(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t sam, int64_t sak,
                       const float *b, int64_t sbk, int64_t sbn, float beta, float *c, int64_t csm,
                       int64_t csn) {
  return gemm_any(true, m, n, k, alpha, a, sam, sak, b, sbk, sbn, beta, c, csm, csn);
}

nc_status nc_cpu_dgemm(int64_t m, int64_t n, int64_t k, double alpha, const double *a, int64_t sam,
                       int64_t sak, const double *b, int64_t sbk, int64_t sbn, double beta, double *c,
                       int64_t csm, int64_t csn) {
  return gemm_any(false, m, n, k, alpha, a, sam, sak, b, sbk, sbn, beta, c, csm, csn);
}

nc_status nc_cpu_gemm(const nc_gemm_desc *g) {
  bool f32 = g->c->dtype == NC_FLOAT32;
  void *a = nc_cpu_base(g->a), *b = nc_cpu_base(g->b), *c = nc_cpu_base(g->c);
  const void *bias = g->bias ? nc_cpu_base(g->bias) : NULL;
  for (int64_t bi = 0; bi < g->batch; bi++) {
    int64_t oa = g->a_off + bi * g->a_sb, ob = g->b_off + bi * g->b_sb, oc = g->c_off + bi * g->c_sb;
    double beta = g->beta;
    if (bias) {
      /* C = beta*C + bias first; the product then accumulates onto it. */
#pragma omp parallel for if (g->m * g->n > 32768)
      for (int64_t i = 0; i < g->m; i++)
        for (int64_t j = 0; j < g->n; j++) {
          int64_t ci = oc + i * g->c_sm + j * g->c_sn, bx = g->bias_off + i * g->bias_sm + j * g->bias_sn;
          if (f32) {
            float *p = (float *)c + ci;
            *p = (beta == 0 ? 0.0f : (float)beta * *p) + ((const float *)bias)[bx];
          } else {
            double *p = (double *)c + ci;
            *p = (beta == 0 ? 0.0 : beta * *p) + ((const double *)bias)[bx];
          }
        }
      beta = 1.0;
    }
    nc_status s;
    if (f32)
      s = nc_cpu_sgemm(g->m, g->n, g->k, (float)g->alpha, (const float *)a + oa, g->a_sm, g->a_sk,
                       (const float *)b + ob, g->b_sk, g->b_sn, (float)beta, (float *)c + oc, g->c_sm,
                       g->c_sn);
    else
      s = nc_cpu_dgemm(g->m, g->n, g->k, g->alpha, (const double *)a + oa, g->a_sm, g->a_sk,
                       (const double *)b + ob, g->b_sk, g->b_sn, beta, (double *)c + oc, g->c_sm, g->c_sn);
    NC_TRY(s);
  }
  return NC_OK;
}

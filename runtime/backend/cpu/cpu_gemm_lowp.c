/* bfloat16 and float16 products on the CPU, and the backend's GEMM entry (registered in
 * cpu_device.c), which sends them here and float32 and float64 ones to nc_cpu_gemm (cpu_gemm.c).
 *
 * For each batch entry, A's and B's slices are widened to dense float32 (exactly, with
 * cpu_half.c's row conversions), nc_cpu_sgemm sums the products into a float32 C, with alpha,
 * beta (on C's old values, widened) and the bias applied in float32, and that C is rounded once
 * into the result (to nearest, ties to even). An operand broadcast over the batch (batch stride
 * 0) is widened once. */
#include <stdlib.h>
#include "core/check.h"
#include "cpu_backend.h"
#include "cpu_linalg.h"
#include "strided.h"

/* The rows x cols matrix of dt at s (row stride sr, column stride sc) into the dense row-major
 * float32 d; a column-major source (sr == 1) is read along its columns. */
static void widen(nc_dtype dt, float *d, const uint16_t *s, int64_t rows, int64_t cols, int64_t sr,
                  int64_t sc) {
  const bool par = rows * cols > NC_CPU_PARALLEL_MIN;
  if (sc != 1 && sr == 1)
    NC_CPU_PARALLEL_FOR(par, , j, cols, { nc_cpu_half_to_f32(dt, d + j, cols, s + j * sc, 1, rows); });
  else
    NC_CPU_PARALLEL_FOR(par, , i, rows, { nc_cpu_half_to_f32(dt, d + i * cols, 1, s + i * sr, sc, cols); });
}

/* The reverse: the dense float32 s rounded into the rows x cols matrix of dt at d. */
static void narrow(nc_dtype dt, uint16_t *d, const float *s, int64_t rows, int64_t cols, int64_t sr,
                   int64_t sc) {
  const bool par = rows * cols > NC_CPU_PARALLEL_MIN;
  if (sc != 1 && sr == 1)
    NC_CPU_PARALLEL_FOR(par, , j, cols, { nc_cpu_f32_to_half(dt, d + j * sc, 1, s + j, cols, rows); });
  else
    NC_CPU_PARALLEL_FOR(par, , i, rows, { nc_cpu_f32_to_half(dt, d + i * sr, sc, s + i * cols, 1, cols); });
}

nc_status nc_cpu_gemm_lowp(const nc_gemm_desc *g) {
  const nc_dtype dt = g->c->dtype;
  const int64_t m = g->m, n = g->n, k = g->k;
  const uint16_t *a = nc_cpu_base(g->a), *b = nc_cpu_base(g->b);
  const uint16_t *bias = g->bias ? nc_cpu_base(g->bias) : NULL;
  uint16_t *c = nc_cpu_base(g->c);
  const int64_t bias_rows = bias && g->bias_sm != 0 ? m : 1; /* one row when broadcast over M */
  float *fa = malloc(sizeof(float) * (size_t)(m * k) + 1), *fb = malloc(sizeof(float) * (size_t)(k * n) + 1);
  float *fc = malloc(sizeof(float) * (size_t)(m * n) + 1);
  float *fbias = bias ? malloc(sizeof(float) * (size_t)(bias_rows * n) + 1) : NULL;
  nc_status s = NC_OK;
  if (!fa || !fb || !fc || (bias && !fbias)) {
    s = nc_error(NC_ERR_OOM, "out of host memory for the float32 temporaries of a %s GEMM",
                 nc_dtype_name(dt));
    goto done;
  }
  if (bias) widen(dt, fbias, bias + g->bias_off, bias_rows, n, g->bias_sm, g->bias_sn);
  for (int64_t bi = 0; bi < g->batch && s == NC_OK; bi++) {
    if (bi == 0 || g->a_sb != 0) widen(dt, fa, a + g->a_off + bi * g->a_sb, m, k, g->a_sm, g->a_sk);
    if (bi == 0 || g->b_sb != 0) widen(dt, fb, b + g->b_off + bi * g->b_sb, k, n, g->b_sk, g->b_sn);
    uint16_t *cb = c + g->c_off + bi * g->c_sb;
    float beta = (float)g->beta;
    if (beta != 0) widen(dt, fc, cb, m, n, g->c_sm, g->c_sn);
    if (bias) { /* C = beta C + bias first, as cpu_gemm.c does; the product then adds onto it */
      NC_CPU_PARALLEL_FOR(m * n > NC_CPU_PARALLEL_MIN, , i, m, {
        const float *br = fbias + (bias_rows > 1 ? i * n : 0);
        float *row = fc + i * n;
        for (int64_t j = 0; j < n; j++) row[j] = (beta == 0 ? 0.0f : beta * row[j]) + br[j];
      });
      beta = 1.0f;
    }
    s = nc_cpu_sgemm(m, n, k, (float)g->alpha, fa, k, 1, fb, n, 1, beta, fc, n, 1);
    if (s == NC_OK) narrow(dt, cb, fc, m, n, g->c_sm, g->c_sn);
  }
done:
  free(fa);
  free(fb);
  free(fc);
  free(fbias);
  return s;
}

nc_status nc_cpu_gemm_entry(const nc_gemm_desc *g) {
  return nc_dtype_is_storage(g->c->dtype) ? nc_cpu_gemm_lowp(g) : nc_cpu_gemm(g);
}

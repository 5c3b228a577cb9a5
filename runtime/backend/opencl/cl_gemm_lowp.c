/* bfloat16 and float16 products on OpenCL, and the backend's GEMM entry (registered in
 * cl_discover.c), which sends them here and float32 and float64 ones to nc_cl_gemm (cl_tune.c).
 *
 * bfloat16 products take the tensor-core kernel kernels/gemm_bf16.cl where the device has
 * bfloat16 mma.sync and the operands' rows are 16-byte aligned (nc_cl_gemm_bf16_mma, cl_gemm.c).
 * Otherwise: A and B, read through the descriptor's layout
 * (offsets, batch, row and column strides), are widened into contiguous float32 temporaries by
 * the backend's conversion copies (kernels/half.cl), and so are C (when beta is not 0) and the
 * bias; the float32 GEMM runs on those, summing the exact products in float32 and applying
 * alpha, beta and the bias in float32; its float32 result is then rounded once (to nearest, ties
 * to even) into C's strided storage. An operand broadcast over the batch (batch stride 0) is
 * widened once. */
#include "core/check.h"
#include "cl_linalg.h"

/* A contiguous float32 copy of the [batch, rows, cols] layout of t's storage at offset off with
 * strides (sb, sr, sc), and *view (may be NULL) the view itself, for writing back. */
static nc_status widen(const nc_tensor *t, bool copy, int64_t batch, int64_t rows, int64_t cols, int64_t off,
                       int64_t sb, int64_t sr, int64_t sc, nc_tensor **out, nc_tensor **view) {
  const int64_t shape[3] = {batch, rows, cols}, strides[3] = {sb, sr, sc};
  nc_tensor *v = NULL, *f = NULL;
  nc_status s = nc_tensor_from_storage(t->storage, t->dtype, 3, shape, strides, off, &v);
  if (s == NC_OK) s = nc_tensor_empty(nc_tensor_device(t), NC_FLOAT32, 3, shape, 0, &f);
  if (s == NC_OK && copy) s = nc_cl_copy(f, v);
  if (s == NC_OK && view) *view = nc_tensor_retain(v);
  nc_tensor_release(v);
  if (s != NC_OK) {
    nc_tensor_release(f);
    return s;
  }
  *out = f;
  return NC_OK;
}

nc_status nc_cl_gemm_lowp(const nc_gemm_desc *g) {
  nc_status native = NC_OK;
  if (nc_cl_gemm_bf16_mma(g, &native)) return native;
  const int64_t m = g->m, n = g->n, k = g->k;
  const int64_t ba = g->a_sb != 0 ? g->batch : 1, bb = g->b_sb != 0 ? g->batch : 1;
  /* the bias as the rows and columns it has: [1, n] when broadcast over M, and so on */
  const int64_t bias_rows = g->bias_sm != 0 ? m : 1, bias_cols = g->bias_sn != 0 ? n : 1;
  nc_tensor *fa = NULL, *fb = NULL, *fc = NULL, *fbias = NULL, *cv = NULL;
  nc_status s = widen(g->a, true, ba, m, k, g->a_off, g->a_sb, g->a_sm, g->a_sk, &fa, NULL);
  if (s == NC_OK) s = widen(g->b, true, bb, k, n, g->b_off, g->b_sb, g->b_sk, g->b_sn, &fb, NULL);
  if (s == NC_OK && g->bias)
    s = widen(g->bias, true, 1, bias_rows, bias_cols, g->bias_off, 0, g->bias_sm, g->bias_sn, &fbias, NULL);
  if (s == NC_OK)
    s = widen(g->c, g->beta != 0, g->batch, m, n, g->c_off, g->c_sb, g->c_sm, g->c_sn, &fc, &cv);
  if (s == NC_OK) {
    nc_gemm_desc f = *g;
    f.a = fa, f.b = fb, f.c = fc, f.bias = fbias;
    f.a_off = 0, f.a_sb = ba > 1 ? m * k : 0, f.a_sm = k, f.a_sk = 1;
    f.b_off = 0, f.b_sb = bb > 1 ? k * n : 0, f.b_sk = n, f.b_sn = 1;
    f.c_off = 0, f.c_sb = m * n, f.c_sm = n, f.c_sn = 1;
    f.bias_off = 0, f.bias_sm = g->bias_sm != 0 ? bias_cols : 0, f.bias_sn = g->bias_sn != 0 ? 1 : 0;
    /* float16 values (11 significant bits) are exact in tf32 but not in bfloat16: "medium"
     * would round them, so their products run at "high" at most */
    if (g->c->dtype == NC_FLOAT16 && f.precision == NC_PRECISION_MEDIUM) f.precision = NC_PRECISION_HIGH;
    s = nc_cl_gemm(&f);
  }
  if (s == NC_OK) s = nc_cl_copy(cv, fc);
  nc_tensor_release(fa);
  nc_tensor_release(fb);
  nc_tensor_release(fc);
  nc_tensor_release(fbias);
  nc_tensor_release(cv);
  return s;
}

nc_status nc_cl_gemm_entry(const nc_gemm_desc *g) {
  return nc_dtype_is_storage(g->c->dtype) ? nc_cl_gemm_lowp(g) : nc_cl_gemm(g);
}

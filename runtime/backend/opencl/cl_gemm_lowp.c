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
 * widened once.
 *
 * "medium" products of float32 tensors go the other way where that kernel takes them
 * (medium_as_bf16): their operands are rounded to bfloat16 temporaries first. */
#include "core/check.h"
#include "cl_linalg.h"

/* A copy in dtype dt of the [batch, rows, cols] layout of t's storage at offset off with strides
 * (sb, sr, sc), its rows ld apart (ld >= cols: the padding between rows is never written), in
 * *out; and *view (may be NULL), the source view itself, for writing back. */
static nc_status convert(const nc_tensor *t, nc_dtype dt, bool copy, int64_t batch, int64_t rows, int64_t cols,
                         int64_t ld, int64_t off, int64_t sb, int64_t sr, int64_t sc, nc_tensor **out,
                         nc_tensor **view) {
  const int64_t shape[3] = {batch, rows, cols}, strides[3] = {sb, sr, sc};
  const int64_t full[3] = {batch, rows, ld}, packed[3] = {rows * ld, ld, 1};
  nc_tensor *v = NULL, *f = NULL, *inner = NULL;
  nc_status s = nc_tensor_from_storage(t->storage, t->dtype, 3, shape, strides, off, &v);
  if (s == NC_OK) s = nc_tensor_empty(nc_tensor_device(t), dt, 3, full, 0, &f);
  if (s == NC_OK && copy) {
    s = nc_tensor_from_storage(f->storage, dt, 3, shape, packed, 0, &inner);
    if (s == NC_OK) s = nc_cl_copy(inner, v);
    nc_tensor_release(inner);
  }
  if (s == NC_OK && view) *view = nc_tensor_retain(v);
  nc_tensor_release(v);
  if (s != NC_OK) {
    nc_tensor_release(f);
    return s;
  }
  *out = f;
  return NC_OK;
}

/* A contiguous float32 copy of such a layout (convert with ld = cols). */
static nc_status widen(const nc_tensor *t, bool copy, int64_t batch, int64_t rows, int64_t cols, int64_t off,
                       int64_t sb, int64_t sr, int64_t sc, nc_tensor **out, nc_tensor **view) {
  return convert(t, NC_FLOAT32, copy, batch, rows, cols, cols, off, sb, sr, sc, out, view);
}

/* A "medium" product of float32 tensors as a product of bfloat16 ones: A and B rounded once to
 * bfloat16 (to nearest, ties to even: what "medium"'s float32 kernels do to each fragment) into
 * temporaries whose rows start 16-byte aligned, then kernels/gemm_bf16.cl with float32 sums
 * written to C in float32 (alpha, beta and the bias in float32). It reads half the bytes of the
 * float32-operand kernel for the cost of one pass over each operand. Whether it ran (the device
 * and g's shape suit that kernel, nc_cl_gemm_bf16_takes, with tiles enough to fill the device),
 * with its status in *st. */
static bool medium_as_bf16(const nc_gemm_desc *g, nc_status *st) {
  if (g->c->dtype != NC_FLOAT32 || g->precision != NC_PRECISION_MEDIUM || !nc_cl_gemm_bf16_takes(g)) return false;
  const int64_t m = g->m, n = g->n, k = g->k;
  /* Fewer 128 x 128 tiles than about two per compute unit: the float32 path's smaller tiles fill
   * the device better, and the conversions cost more than they save (H100: 4096 x 256 x 256 took
   * 39 us this way against 28 us; docs/performance.md). */
  if (10 * ((m + 127) / 128) * ((n + 127) / 128) * g->batch < 19 * nc_cl_compute_units(nc_tensor_device(g->c)))
    return false;
  const int64_t ba = g->a_sb != 0 ? g->batch : 1, bb = g->b_sb != 0 ? g->batch : 1;
  /* Each temporary keeps its operand's orientation, since the kernel reads every layout alike
   * and a transposing copy is slow (docs/performance.md): A as [M, K] or A^T as [K, M], B as
   * [K, N] or B^T as [N, K], its rows 8 bfloat16 (16 bytes) apart. */
  const bool a_mmaj = g->a_sm == 1 && g->a_sk != 1, b_kmaj = g->b_sk == 1 && g->b_sn != 1;
  const int64_t ar = a_mmaj ? k : m, ac = a_mmaj ? m : k, br = b_kmaj ? n : k, bc = b_kmaj ? k : n;
  const int64_t lda = (ac + 7) / 8 * 8, ldb = (bc + 7) / 8 * 8;
  nc_tensor *ha = NULL, *hb = NULL;
  nc_status s = convert(g->a, NC_BFLOAT16, true, ba, ar, ac, lda, g->a_off, g->a_sb,
                        a_mmaj ? g->a_sk : g->a_sm, a_mmaj ? g->a_sm : g->a_sk, &ha, NULL);
  if (s == NC_OK)
    s = convert(g->b, NC_BFLOAT16, true, bb, br, bc, ldb, g->b_off, g->b_sb, b_kmaj ? g->b_sn : g->b_sk,
                b_kmaj ? g->b_sk : g->b_sn, &hb, NULL);
  bool ran = true;
  if (s == NC_OK) {
    nc_gemm_desc f = *g;
    f.a = ha, f.b = hb;
    f.a_off = 0, f.a_sb = ba > 1 ? ar * lda : 0, f.a_sm = a_mmaj ? 1 : lda, f.a_sk = a_mmaj ? lda : 1;
    f.b_off = 0, f.b_sb = bb > 1 ? br * ldb : 0, f.b_sk = b_kmaj ? 1 : ldb, f.b_sn = b_kmaj ? ldb : 1;
    ran = nc_cl_gemm_bf16_mma(&f, &s);
  }
  nc_tensor_release(ha);
  nc_tensor_release(hb);
  if (ran) *st = s;
  return ran;
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
  if (nc_dtype_is_storage(g->c->dtype)) return nc_cl_gemm_lowp(g);
  nc_status s = NC_OK;
  if (medium_as_bf16(g, &s)) return s;
  return nc_cl_gemm(g);
}

/* GEMM: matmul/mm/bmm/linear/gemm on every device against a naive triple loop in double,
 * over the parity sizes, transposed and broadcast operands, batches, bias, alpha/beta, the
 * blocked C GEMM (NETCL_BLAS=0) and error messages. */
#include <stdlib.h>
#include "check.h"
#include "linalg_ref.h"

/* want[b, i, j] = sum_k A[b|0, i, k] B[b|0, k, j] for dense row-major A [ba, m, k], B [bb, k, n]. */
static double *naive(const double *a, const double *b, int64_t batch, int64_t ba, int64_t bb, int64_t m,
                     int64_t n, int64_t k) {
  double *c = calloc((size_t)(batch * m * n + 1), sizeof(double));
  for (int64_t t = 0; t < batch; t++) {
    const double *pa = a + (ba == 1 ? 0 : t) * m * k, *pb = b + (bb == 1 ? 0 : t) * k * n;
    for (int64_t i = 0; i < m; i++)
      for (int64_t p = 0; p < k; p++)
        for (int64_t j = 0; j < n; j++) c[(t * m + i) * n + j] += pa[i * k + p] * pb[p * n + j];
  }
  return c;
}

static double tol(nc_dtype dt, int64_t k) {
  return dt == NC_FLOAT64 ? 1e-12 : 2e-6 * sqrt((double)(k + 1)) + 1e-6;
}

/* a [m,k] @ b [k,n] where each operand is stored transposed when asked (read through a view). */
static void case_mm(nc_device *dev, nc_dtype dt, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  double *a = ref_random(m * k), *b = ref_random(k * n), *want = naive(a, b, 1, 1, 1, m, n, k);
  /* Store the transposed operand as [k,m] holding a^T, then view it back as [m,k]. */
  double *at = malloc(sizeof(double) * (size_t)(m * k + 1)),
         *bt = malloc(sizeof(double) * (size_t)(k * n + 1));
  for (int64_t i = 0; i < m; i++)
    for (int64_t p = 0; p < k; p++) at[p * m + i] = a[i * k + p];
  for (int64_t p = 0; p < k; p++)
    for (int64_t j = 0; j < n; j++) bt[j * k + p] = b[p * n + j];
  int64_t sa[2] = {m, k}, sat[2] = {k, m}, sb[2] = {k, n}, sbt[2] = {n, k};
  nc_tensor *ta_ = ta ? ref_tensor(dev, dt, 2, sat, at) : ref_tensor(dev, dt, 2, sa, a);
  nc_tensor *tb_ = tb ? ref_tensor(dev, dt, 2, sbt, bt) : ref_tensor(dev, dt, 2, sb, b);
  nc_tensor *va = NULL, *vb = NULL, *c = NULL;
  CHECK_OK(ta ? nc_tensor_transpose(ta_, 0, 1, &va) : nc_tensor_alias(ta_, &va));
  CHECK_OK(tb ? nc_tensor_transpose(tb_, 0, 1, &vb) : nc_tensor_alias(tb_, &vb));
  CHECK_OK(nc_mm(va, vb, &c));
  double e = ref_tensor_error(c, want, m * n);
  if (!(e <= tol(dt, k)))
    fprintf(stderr, "mm %s %s m=%lld n=%lld k=%lld ta=%d tb=%d: error %g\n", nc_device_info_of(dev)->spec,
            nc_dtype_name(dt), (long long)m, (long long)n, (long long)k, ta, tb, e);
  CHECK(e <= tol(dt, k));
  nc_tensor_release(va);
  nc_tensor_release(vb);
  nc_tensor_release(ta_);
  nc_tensor_release(tb_);
  nc_tensor_release(c);
  free(a), free(b), free(at), free(bt), free(want);
}

static void test_parity_sizes(nc_device *dev) {
  static const int64_t sizes[] = {1, 3, 17, 129, 1000};
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 5; j++)
      for (int l = 0; l < 5; l++) {
        int64_t m = sizes[i], n = sizes[j], k = sizes[l];
        if (m * n * k > 20000000) continue; /* 1000^3 once below */
        bool ta = (i + l) % 2, tb = (j + l) % 3 == 0;
        case_mm(dev, NC_FLOAT32, m, n, k, ta, tb);
      }
  case_mm(dev, NC_FLOAT32, 1000, 1000, 1000, false, false);
  for (int t = 0; t < 4; t++) case_mm(dev, NC_FLOAT32, 129, 17, 1000, t & 1, t & 2);
  if (nc_device_info_of(dev)->fp64)
    for (int t = 0; t < 4; t++) case_mm(dev, NC_FLOAT64, 67, 129, 33, t & 1, t & 2);
}

/* Batched and broadcast matmul: a [2,1,m,k] @ b [3,k,n] -> [2,3,m,n]; b is a strided
 * (every-other-column) view. */
static void test_broadcast(nc_device *dev) {
  int64_t m = 5, n = 7, k = 9;
  double *a = ref_random(2 * m * k), *bfull = ref_random(3 * k * 2 * n);
  double *b = malloc(sizeof(double) * (size_t)(3 * k * n));
  for (int64_t t = 0; t < 3; t++)
    for (int64_t p = 0; p < k; p++)
      for (int64_t j = 0; j < n; j++) b[(t * k + p) * n + j] = bfull[(t * k + p) * 2 * n + 2 * j];
  double *want = malloc(sizeof(double) * (size_t)(6 * m * n));
  for (int64_t x = 0; x < 2; x++)
    for (int64_t y = 0; y < 3; y++) {
      double *w = naive(a + x * m * k, b + y * k * n, 1, 1, 1, m, n, k);
      for (int64_t i = 0; i < m * n; i++) want[(x * 3 + y) * m * n + i] = w[i];
      free(w);
    }
  int64_t sa[4] = {2, 1, m, k}, sbf[3] = {3, k, 2 * n};
  nc_tensor *ta = ref_tensor(dev, NC_FLOAT32, 4, sa, a), *tbf = ref_tensor(dev, NC_FLOAT32, 3, sbf, bfull);
  nc_tensor *tb;
  CHECK_OK(nc_tensor_from_storage(tbf->storage, NC_FLOAT32, 3, (int64_t[]){3, k, n},
                                  (int64_t[]){k * 2 * n, 2 * n, 2}, 0, &tb));
  nc_tensor *c = NULL;
  CHECK_OK(nc_matmul(ta, tb, &c));
  CHECK(c && c->ndim == 4 && c->shape[0] == 2 && c->shape[1] == 3 && c->shape[2] == m && c->shape[3] == n);
  CHECK(ref_tensor_error(c, want, 6 * m * n) < 1e-5);
  nc_tensor_release(c);
  /* bmm with a transposed right operand: [3, n, k]^T(1,2). */
  nc_tensor *bt = NULL, *btt = NULL, *a3 = NULL;
  CHECK_OK(nc_tensor_transpose(tb, 1, 2, &bt)); /* [3, n, k] view */
  nc_tensor *btc = NULL;
  CHECK_OK(nc_contiguous(bt, &btc));
  CHECK_OK(nc_tensor_transpose(btc, 1, 2, &btt)); /* back to [3, k, n], strided */
  int64_t sa3[3] = {3, m, k};
  double *a3v = ref_random(3 * m * k);
  a3 = ref_tensor(dev, NC_FLOAT32, 3, sa3, a3v);
  CHECK_OK(nc_bmm(a3, btt, &c));
  double *want3 = naive(a3v, b, 3, 3, 3, m, n, k);
  CHECK(ref_tensor_error(c, want3, 3 * m * n) < 1e-5);
  nc_tensor_release(c);
  /* 1-D cases: vector @ matrix, matrix @ vector, dot. */
  int64_t sk = k, smk[2] = {m, k};
  double *v = ref_random(k), *mat = ref_random(m * k);
  nc_tensor *tv = ref_tensor(dev, NC_FLOAT32, 1, &sk, v), *tm = ref_tensor(dev, NC_FLOAT32, 2, smk, mat);
  double *wmv = naive(mat, v, 1, 1, 1, m, 1, k), *wdot = naive(v, v, 1, 1, 1, 1, 1, k);
  CHECK_OK(nc_matmul(tm, tv, &c));
  CHECK(c && c->ndim == 1 && c->shape[0] == m && ref_tensor_error(c, wmv, m) < 1e-5);
  nc_tensor_release(c);
  CHECK_OK(nc_matmul(tv, tv, &c));
  CHECK(c && c->ndim == 0 && ref_tensor_error(c, wdot, 1) < 1e-5);
  nc_tensor_release(c);
  nc_tensor *mt = NULL;
  CHECK_OK(nc_tensor_transpose(tm, 0, 1, &mt));  /* [k, m] */
  double *wvm = naive(v, mat, 1, 1, 1, 1, m, k); /* v @ mat^T... computed below by hand */
  for (int64_t j = 0; j < m; j++) {
    wvm[j] = 0;
    for (int64_t p = 0; p < k; p++) wvm[j] += v[p] * mat[j * k + p];
  }
  CHECK_OK(nc_matmul(tv, mt, &c));
  CHECK(c && c->ndim == 1 && c->shape[0] == m && ref_tensor_error(c, wvm, m) < 1e-5);
  nc_tensor_release(c);
  nc_tensor_release(mt), nc_tensor_release(tv), nc_tensor_release(tm);
  free(v), free(mat), free(wmv), free(wdot), free(wvm);
  nc_tensor_release(a3), nc_tensor_release(bt), nc_tensor_release(btt), nc_tensor_release(btc);
  nc_tensor_release(ta), nc_tensor_release(tb), nc_tensor_release(tbf);
  free(a), free(bfull), free(b), free(want), free(a3v), free(want3);
}

/* linear with bias over a 3-D input, and gemm with alpha/beta into a transposed output. */
static void test_linear_gemm(nc_device *dev) {
  int64_t in = 19, out = 23, r = 2 * 5;
  double *x = ref_random(r * in), *w = ref_random(out * in), *bias = ref_random(out);
  double *want = malloc(sizeof(double) * (size_t)(r * out));
  for (int64_t i = 0; i < r; i++)
    for (int64_t o = 0; o < out; o++) {
      double s = bias[o];
      for (int64_t p = 0; p < in; p++) s += x[i * in + p] * w[o * in + p];
      want[i * out + o] = s;
    }
  int64_t sx[3] = {2, 5, in}, sw[2] = {out, in};
  nc_tensor *tx = ref_tensor(dev, NC_FLOAT32, 3, sx, x), *tw = ref_tensor(dev, NC_FLOAT32, 2, sw, w);
  nc_tensor *tb = ref_tensor(dev, NC_FLOAT32, 1, &out, bias), *y = NULL;
  CHECK_OK(nc_linear(tx, tw, tb, &y));
  CHECK(y && y->ndim == 3 && y->shape[2] == out && ref_tensor_error(y, want, r * out) < 1e-5);
  nc_tensor_release(y);
  /* c^T (stored [n, m], viewed [m, n]) = 2 x @ w^T + 0.5 c. */
  double *c0 = ref_random(r * out), *want2 = malloc(sizeof(double) * (size_t)(r * out));
  for (int64_t i = 0; i < r; i++)
    for (int64_t o = 0; o < out; o++)
      want2[i * out + o] = 2 * (want[i * out + o] - bias[o]) + 0.5 * c0[o * r + i];
  int64_t sc[2] = {out, r}, sx2[2] = {r, in};
  nc_tensor *tc = ref_tensor(dev, NC_FLOAT32, 2, sc, c0), *ct = NULL, *wt = NULL, *x2 = NULL;
  CHECK_OK(nc_tensor_transpose(tc, 0, 1, &ct));
  CHECK_OK(nc_tensor_transpose(tw, 0, 1, &wt));
  CHECK_OK(nc_tensor_view(tx, 2, sx2, &x2));
  CHECK_OK(nc_gemm(x2, wt, ct, 2.0, 0.5));
  CHECK(ref_tensor_error(ct, want2, r * out) < 1e-5);
  /* beta = 0 ignores NaN already in the output. */
  CHECK_OK(nc_fill(ct, NAN));
  CHECK_OK(nc_gemm(x2, wt, ct, 1.0, 0.0));
  for (int64_t i = 0; i < r * out; i++) want2[i] = want[i] - bias[i % out];
  CHECK(ref_tensor_error(ct, want2, r * out) < 1e-5);
  CHECK_ERR(nc_gemm(x2, wt, tc, 1.0, 0.0), NC_ERR_SHAPE, "does not fit the product");
  nc_tensor_release(tc), nc_tensor_release(ct), nc_tensor_release(wt), nc_tensor_release(x2);
  nc_tensor_release(tx), nc_tensor_release(tw), nc_tensor_release(tb);
  free(x), free(w), free(bias), free(want), free(c0), free(want2);
}

static void test_errors(nc_device *dev) {
  int64_t s23[2] = {2, 3}, s45[2] = {4, 5};
  nc_tensor *a, *b, *c = NULL, *i64;
  CHECK_OK(nc_tensor_empty(dev, NC_FLOAT32, 2, s23, 0, &a));
  CHECK_OK(nc_tensor_empty(dev, NC_FLOAT32, 2, s45, 0, &b));
  CHECK_OK(nc_tensor_empty(dev, NC_INT64, 2, s45, 0, &i64));
  CHECK_ERR(nc_matmul(a, b, &c), NC_ERR_SHAPE, "inner dimensions 3 and 4 do not match ([2,3] @ [4,5])");
  CHECK_ERR(nc_mm(a, i64, &c), NC_ERR_DTYPE, "float32 and int64");
  CHECK_ERR(nc_bmm(a, b, &c), NC_ERR_SHAPE, "bmm needs 3-D operands");
  CHECK_ERR(nc_linear(a, b, NULL, &c), NC_ERR_SHAPE, "input features 3 do not match the weight's 5");
  CHECK_ERR(nc_set_matmul_precision("low"), NC_ERR_ARG, "unknown matmul precision 'low'");
  CHECK_OK(nc_set_matmul_precision("medium"));
  CHECK(strcmp(nc_get_matmul_precision(), "medium") == 0);
  CHECK_OK(nc_set_matmul_precision("highest"));
  /* Empty products: K = 0 gives zeros, M = 0 an empty result. */
  int64_t s30[2] = {3, 0}, s04[2] = {0, 4};
  nc_tensor *e1, *e2;
  CHECK_OK(nc_tensor_empty(dev, NC_FLOAT32, 2, s30, 0, &e1));
  CHECK_OK(nc_tensor_empty(dev, NC_FLOAT32, 2, s04, 0, &e2));
  CHECK_OK(nc_mm(e1, e2, &c));
  double zeros[12] = {0};
  CHECK(c && c->shape[0] == 3 && c->shape[1] == 4 && ref_tensor_error(c, zeros, 12) == 0);
  nc_tensor_release(c);
  nc_tensor_release(e1), nc_tensor_release(e2);
  nc_tensor_release(a), nc_tensor_release(b), nc_tensor_release(i64);
}

int main(void) {
  CHECK_OK(nc_init());
  nc_device *devs[2];
  int nd = ref_devices(devs);
  for (int d = 0; d < nd; d++) {
    test_parity_sizes(devs[d]);
    test_broadcast(devs[d]);
    test_linear_gemm(devs[d]);
    test_errors(devs[d]);
  }
  /* The blocked C GEMM, which builds without OpenBLAS use. */
  setenv("NETCL_BLAS", "0", 1);
  test_parity_sizes(devs[0]);
  test_broadcast(devs[0]);
  test_linear_gemm(devs[0]);
  unsetenv("NETCL_BLAS");
  CHECK_DONE();
}

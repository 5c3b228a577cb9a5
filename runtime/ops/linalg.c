/* matmul, mm, bmm, linear, gemm: shape rules, output allocation, and the reduction of any
 * batched, broadcast, transposed product to backend GEMM calls over raw strides. Operands are
 * float32, float64, bfloat16 or float16 (all of one dtype); the backends take the storage
 * dtypes as they are (docs/linalg.md, "Products of bfloat16 and float16"). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "backend/dispatch.h"
#include "core/check.h"
#include "support.h"
#include "core/device_impl.h"
#include "netcl/copy.h"
#include "netcl/creation.h"
#include "netcl/linalg.h"
#include "ops/support.h"

static void shape_str(const nc_tensor *t, char *buf, size_t n) {
  size_t len = 0;
  len += (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < t->ndim && len < n; i++)
    len += (size_t)snprintf(buf + len, n - len, "%s%lld", i ? "," : "", (long long)t->shape[i]);
  if (len < n) snprintf(buf + len, n - len, "]");
}

/* Operands of one float dtype: float32, float64, or a storage dtype (bfloat16, float16), whose
 * products the backends sum in float32 and round once into the result of that dtype. Nothing is
 * converted here: a mixed pair is an error. */
static nc_status check_operands(const nc_tensor *a, const nc_tensor *b) {
  if (a->dtype != b->dtype || !nc_dtype_is_float(a->dtype))
    return nc_error(NC_ERR_DTYPE,
                    "expected operands of one float dtype (float32, float64, bfloat16 or float16), "
                    "got %s and %s",
                    nc_dtype_name(a->dtype), nc_dtype_name(b->dtype));
  if (nc_tensor_device(a) != nc_tensor_device(b))
    return nc_error(NC_ERR_DEVICE, "operands are on different devices (%s and %s)",
                    nc_device_info_of(nc_tensor_device(a))->spec,
                    nc_device_info_of(nc_tensor_device(b))->spec);
  return NC_OK;
}

static nc_status inner_mismatch(const nc_tensor *a, const nc_tensor *b, int64_t ka, int64_t kb) {
  char sa[160], sb[160];
  shape_str(a, sa, sizeof sa);
  shape_str(b, sb, sizeof sb);
  return nc_error(NC_ERR_SHAPE, "inner dimensions %lld and %lld do not match (%s @ %s)", (long long)ka,
                  (long long)kb, sa, sb);
}

/* Runs C = alpha A B + beta C over operands already expanded to one batch shape
 * (batch dims = ndim - 2, equal in a, b, c). Batch dims that are laid out alike in all three
 * merge into one; any that remain are looped over here, one backend call per slice. */
static nc_status run_batched(nc_op op, const nc_tensor *a, const nc_tensor *b, nc_tensor *c, const nc_tensor *bias,
                             int64_t bias_sm, int64_t bias_sn, double alpha, double beta) {
  int nb = c->ndim - 2;
  int64_t shape[NC_MAX_DIMS] = {0}, sa[NC_MAX_DIMS] = {0}, sb[NC_MAX_DIMS] = {0}, sc[NC_MAX_DIMS] = {0};
  int n = 0;
  for (int d = 0; d < nb; d++) {
    if (c->shape[d] == 1) continue;
    if (n > 0 && sa[n - 1] == a->strides[d] * c->shape[d] && sb[n - 1] == b->strides[d] * c->shape[d] &&
        sc[n - 1] == c->strides[d] * c->shape[d]) {
      shape[n - 1] *= c->shape[d];
      sa[n - 1] = a->strides[d];
      sb[n - 1] = b->strides[d];
      sc[n - 1] = c->strides[d];
      continue;
    }
    shape[n] = c->shape[d];
    sa[n] = a->strides[d];
    sb[n] = b->strides[d];
    sc[n] = c->strides[d];
    n++;
  }
  nc_gemm_desc g = {.a = a,
                    .b = b,
                    .c = c,
                    .bias = bias,
                    .batch = n ? shape[n - 1] : 1,
                    .m = c->shape[nb],
                    .n = c->shape[nb + 1],
                    .k = a->shape[nb + 1],
                    .a_sb = n ? sa[n - 1] : 0,
                    .a_sm = a->strides[nb],
                    .a_sk = a->strides[nb + 1],
                    .b_sb = n ? sb[n - 1] : 0,
                    .b_sk = b->strides[nb],
                    .b_sn = b->strides[nb + 1],
                    .c_sb = n ? sc[n - 1] : 0,
                    .c_sm = c->strides[nb],
                    .c_sn = c->strides[nb + 1],
                    .bias_off = bias ? bias->offset : 0,
                    .bias_sm = bias_sm,
                    .bias_sn = bias_sn,
                    .alpha = alpha,
                    .beta = beta,
                    .precision = nc_matmul_precision_level()};
  if (g.m == 0 || g.n == 0 || g.batch == 0) return NC_OK;
  /* A batch over which b is broadcast (stride 0), with a's and c's rows continuing from one
   * batch entry into the next, is one product of batch x m rows: a linear layer's [B, T, in]
   * input is one GEMM of B T rows, not B GEMMs of T rows each. */
  if (n > 0 && g.batch > 1 && g.b_sb == 0 && g.a_sb == g.m * g.a_sm && g.c_sb == g.m * g.c_sm &&
      (!bias || g.bias_sm == 0)) {
    g.m *= g.batch;
    g.batch = 1;
    g.a_sb = g.c_sb = 0;
  }
  int64_t outer = 1;
  for (int d = 0; d < n - 1; d++) outer *= shape[d];
  if (outer == 0) return NC_OK;
  nc_storage_bump_version(c->storage);
  for (int64_t o = 0; o < outer; o++) {
    int64_t r = o, oa = a->offset, ob = b->offset, oc = c->offset;
    for (int d = n - 2; d >= 0; d--) {
      int64_t i = r % shape[d];
      r /= shape[d];
      oa += i * sa[d];
      ob += i * sb[d];
      oc += i * sc[d];
    }
    g.a_off = oa;
    g.b_off = ob;
    g.c_off = oc;
    NC_TRY(nc_bk_gemm(op, &g));
  }
  return NC_OK;
}

/* a [.., M, K] @ b [.., K, N] with batch dims broadcast into out [batch.., M, N]. */
static nc_status batched_product(nc_op op, nc_tensor *a, nc_tensor *b, nc_tensor *bias, nc_tensor **out) {
  int nb_a = a->ndim - 2, nb_b = b->ndim - 2, nb = nb_a > nb_b ? nb_a : nb_b;
  int64_t batch[NC_MAX_DIMS] = {0};
  for (int i = 0; i < nb; i++) {
    int ia = i - (nb - nb_a), ib = i - (nb - nb_b);
    int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      char s1[160], s2[160];
      shape_str(a, s1, sizeof s1);
      shape_str(b, s2, sizeof s2);
      return nc_error(NC_ERR_SHAPE, "batch dimensions of %s and %s cannot be broadcast", s1, s2);
    }
    batch[i] = da == 1 ? db : da;
  }
  int64_t m = a->shape[a->ndim - 2], k = a->shape[a->ndim - 1], n = b->shape[b->ndim - 1];
  int64_t sa[NC_MAX_DIMS] = {0}, sb[NC_MAX_DIMS] = {0}, sc[NC_MAX_DIMS] = {0};
  memcpy(sa, batch, sizeof(int64_t) * (size_t)nb);
  memcpy(sb, batch, sizeof(int64_t) * (size_t)nb);
  memcpy(sc, batch, sizeof(int64_t) * (size_t)nb);
  sa[nb] = m, sa[nb + 1] = k;
  sb[nb] = k, sb[nb + 1] = n;
  sc[nb] = m, sc[nb + 1] = n;
  nc_tensor *ea = NULL, *eb = NULL, *c = NULL;
  nc_status s = nc_tensor_expand(a, nb + 2, sa, &ea);
  if (s == NC_OK) s = nc_tensor_expand(b, nb + 2, sb, &eb);
  if (s == NC_OK) s = nc_tensor_empty(nc_tensor_device(a), a->dtype, nb + 2, sc, 0, &c);
  if (s == NC_OK && k == 0)
    s = bias ? nc_copy(c, bias) : nc_fill(c, 0.0);
  else if (s == NC_OK)
    s = run_batched(op, ea, eb, c, bias, 0, bias ? bias->strides[0] : 0, 1.0, 0.0);
  nc_tensor_release(ea);
  nc_tensor_release(eb);
  if (s != NC_OK) {
    nc_tensor_release(c);
    return s;
  }
  *out = c;
  return NC_OK;
}

nc_status nc_matmul(nc_tensor *a, nc_tensor *b, nc_tensor **out) {
  NC_TRY(check_operands(a, b));
  if (a->ndim == 0 || b->ndim == 0)
    return nc_error(NC_ERR_SHAPE, "matmul needs operands with at least 1 dim, got %d and %d dims", a->ndim,
                    b->ndim);
  int64_t ka = a->shape[a->ndim - 1], kb = b->shape[b->ndim >= 2 ? b->ndim - 2 : 0];
  if (ka != kb) return inner_mismatch(a, b, ka, kb);
  /* 1-D operands become a row (left) or a column (right); the added dim goes again after. */
  nc_tensor *a2 = NULL, *b2 = NULL, *r = NULL;
  nc_status s = a->ndim == 1 ? nc_tensor_unsqueeze(a, 0, &a2) : nc_tensor_alias(a, &a2);
  if (s == NC_OK) s = b->ndim == 1 ? nc_tensor_unsqueeze(b, 1, &b2) : nc_tensor_alias(b, &b2);
  if (s == NC_OK) s = batched_product(NC_OP_MATMUL, a2, b2, NULL, &r);
  nc_tensor_release(a2);
  nc_tensor_release(b2);
  NC_TRY(s);
  int drop_col = b->ndim == 1, drop_row = a->ndim == 1;
  if (!drop_col && !drop_row) {
    *out = r;
    return NC_OK;
  }
  int64_t shape[NC_MAX_DIMS];
  int nd = 0;
  for (int i = 0; i < r->ndim; i++) {
    if (drop_col && i == r->ndim - 1) continue;
    if (drop_row && i == r->ndim - 2) continue;
    shape[nd++] = r->shape[i];
  }
  s = nc_tensor_view(r, nd, shape, out);
  nc_tensor_release(r);
  return s;
}

nc_status nc_mm(nc_tensor *a, nc_tensor *b, nc_tensor **out) {
  NC_TRY(check_operands(a, b));
  if (a->ndim != 2 || b->ndim != 2)
    return nc_error(NC_ERR_SHAPE, "mm needs 2-D operands, got %d and %d dims", a->ndim, b->ndim);
  if (a->shape[1] != b->shape[0]) return inner_mismatch(a, b, a->shape[1], b->shape[0]);
  return batched_product(NC_OP_MM, a, b, NULL, out);
}

nc_status nc_bmm(nc_tensor *a, nc_tensor *b, nc_tensor **out) {
  NC_TRY(check_operands(a, b));
  if (a->ndim != 3 || b->ndim != 3)
    return nc_error(NC_ERR_SHAPE, "bmm needs 3-D operands, got %d and %d dims", a->ndim, b->ndim);
  if (a->shape[0] != b->shape[0])
    return nc_error(NC_ERR_SHAPE, "bmm needs equal batch sizes, got %lld and %lld", (long long)a->shape[0],
                    (long long)b->shape[0]);
  if (a->shape[2] != b->shape[1]) return inner_mismatch(a, b, a->shape[2], b->shape[1]);
  return batched_product(NC_OP_BMM, a, b, NULL, out);
}

nc_status nc_linear(nc_tensor *x, nc_tensor *weight, nc_tensor *bias, nc_tensor **out) {
  NC_TRY(check_operands(x, weight));
  if (weight->ndim != 2)
    return nc_error(NC_ERR_SHAPE, "linear needs a 2-D weight [out, in], got %d dims", weight->ndim);
  if (x->ndim < 1) return nc_error(NC_ERR_SHAPE, "linear needs an input with at least 1 dim");
  int64_t in = weight->shape[1], nout = weight->shape[0];
  if (x->shape[x->ndim - 1] != in) {
    char sx[160], sw[160];
    shape_str(x, sx, sizeof sx);
    shape_str(weight, sw, sizeof sw);
    return nc_error(NC_ERR_SHAPE, "input features %lld do not match the weight's %lld (input %s, weight %s)",
                    (long long)x->shape[x->ndim - 1], (long long)in, sx, sw);
  }
  if (bias) {
    NC_TRY(check_operands(x, bias));
    if (bias->ndim != 1 || bias->shape[0] != nout)
      return nc_error(NC_ERR_SHAPE, "linear bias must have shape [%lld]", (long long)nout);
  }
  /* The weight is read transposed through its strides. */
  nc_tensor *wt, *x2 = NULL, *r = NULL;
  NC_TRY(nc_tensor_transpose(weight, 0, 1, &wt));
  nc_status s = x->ndim == 1 ? nc_tensor_unsqueeze(x, 0, &x2) : nc_tensor_alias(x, &x2);
  if (s == NC_OK) s = batched_product(NC_OP_LINEAR, x2, wt, bias, &r);
  nc_tensor_release(wt);
  nc_tensor_release(x2);
  NC_TRY(s);
  if (x->ndim != 1) {
    *out = r;
    return NC_OK;
  }
  s = nc_tensor_view(r, 1, &nout, out);
  nc_tensor_release(r);
  return s;
}

/* True when two elements of t share an address (a broadcast or overlapping view). */
static bool overlaps(const nc_tensor *t) {
  int idx[NC_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] <= 1) continue;
    if (t->strides[i] == 0) return true;
    idx[n++] = i;
  }
  /* Sort dims by |stride|; each stride must exceed the span of all smaller ones. */
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && llabs(t->strides[idx[j]]) < llabs(t->strides[idx[j - 1]]); j--) {
      int tmp = idx[j];
      idx[j] = idx[j - 1];
      idx[j - 1] = tmp;
    }
  int64_t span = 0;
  for (int i = 0; i < n; i++) {
    if (llabs(t->strides[idx[i]]) <= span) return true;
    span += llabs(t->strides[idx[i]]) * (t->shape[idx[i]] - 1);
  }
  return false;
}

/* t (2-D, or 3-D with batch 1 or bt) as a [bt, rows, cols] view. */
static nc_status as_batch3(nc_tensor *t, int64_t bt, nc_tensor **out) {
  nc_tensor *u;
  if (t->ndim == 2)
    NC_TRY(nc_tensor_unsqueeze(t, 0, &u));
  else
    NC_TRY(nc_tensor_alias(t, &u));
  int64_t shape[3] = {bt, u->shape[1], u->shape[2]};
  nc_status s = nc_tensor_expand(u, 3, shape, out);
  nc_tensor_release(u);
  return s;
}

nc_status nc_gemm(nc_tensor *a, nc_tensor *b, nc_tensor *c, double alpha, double beta) {
  NC_TRY(check_operands(a, b));
  NC_TRY(check_operands(a, c));
  if (a->ndim < 2 || a->ndim > 3 || b->ndim < 2 || b->ndim > 3 || c->ndim < 2 || c->ndim > 3)
    return nc_error(NC_ERR_SHAPE, "gemm needs 2-D or 3-D operands, got %d, %d and %d dims", a->ndim, b->ndim,
                    c->ndim);
  int64_t ka = a->shape[a->ndim - 1], kb = b->shape[b->ndim - 2];
  if (ka != kb) return inner_mismatch(a, b, ka, kb);
  int64_t bt = c->ndim == 3 ? c->shape[0] : 1;
  bool batch_ok = (a->ndim == 2 || a->shape[0] == bt || a->shape[0] == 1) &&
                  (b->ndim == 2 || b->shape[0] == bt || b->shape[0] == 1);
  if (!batch_ok || c->shape[c->ndim - 2] != a->shape[a->ndim - 2] ||
      c->shape[c->ndim - 1] != b->shape[b->ndim - 1]) {
    char s1[160], s2[160], s3[160];
    shape_str(a, s1, sizeof s1);
    shape_str(b, s2, sizeof s2);
    shape_str(c, s3, sizeof s3);
    return nc_error(NC_ERR_SHAPE, "gemm output %s does not fit the product %s @ %s", s3, s1, s2);
  }
  if (overlaps(c)) return nc_error(NC_ERR_ARG, "gemm output has overlapping elements (a broadcast view)");
  if (ka == 0) {
    if (beta == 0) return nc_fill(c, 0.0);
    if (beta == 1) return NC_OK;
    return nc_error(NC_ERR_UNSUPPORTED, "gemm with K = 0 and beta other than 0 or 1");
  }
  nc_tensor *ea = NULL, *eb = NULL, *ec = NULL;
  nc_status s = as_batch3(a, bt, &ea);
  if (s == NC_OK) s = as_batch3(b, bt, &eb);
  if (s == NC_OK) s = as_batch3(c, bt, &ec);
  if (s == NC_OK) s = run_batched(NC_OP_MM, ea, eb, ec, NULL, 0, 0, alpha, beta);
  nc_tensor_release(ea);
  nc_tensor_release(eb);
  nc_tensor_release(ec);
  return s;
}

/* ---- precision: the mode set here travels to backends in each GEMM and convolution descriptor -- */
static const char *const precision_names[] = {"highest", "high", "medium"};
static atomic_int precision;

nc_status nc_set_matmul_precision(const char *mode) {
  for (int i = 0; i < 3; i++)
    if (mode && strcmp(mode, precision_names[i]) == 0) {
      atomic_store(&precision, i);
      return NC_OK;
    }
  return nc_error(NC_ERR_ARG, "unknown matmul precision '%s' (expected highest, high or medium)",
                  mode ? mode : "(null)");
}

const char *nc_get_matmul_precision(void) { return precision_names[atomic_load(&precision)]; }

nc_precision nc_matmul_precision_level(void) { return (nc_precision)atomic_load(&precision); }

const char *nc_matmul_precision_on(const nc_device *dev) {
  const int mode = atomic_load(&precision);
  const nc_device_info *i = nc_device_info_of(dev);
  if (mode == NC_PRECISION_MEDIUM && __atomic_load_n(&i->bf16_mma, __ATOMIC_ACQUIRE)) return "medium";
  return mode == NC_PRECISION_HIGHEST || !__atomic_load_n(&i->tf32, __ATOMIC_ACQUIRE) ? "highest" : "high";
}

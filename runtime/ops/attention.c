/* Rotary embeddings and fused attention, ops defined by their op-table rows (netcl/table_ops.h):
 * rope, flash_attention and flash_attention's two backward ops. Each checks shapes, dtypes and
 * numbers, takes its inputs contiguous (themselves when they already are, at any offset),
 * allocates its results and runs its backend kernel. docs/transformer.md describes them. */
#include <math.h>
#include "backend/dispatch.h"
#include "core/check.h"
#include "support.h"
#include "netcl/copy.h"
#include "netcl/creation.h"
#include "netcl/table_ops.h"

#define ATT_MAX_D 256 /* the kernels' local arrays hold one row of this many elements */
#define ROPE_CHUNK 4096 /* pairs per OpenCL work-group */

static void release_all(nc_tensor **t, int n) {
  for (int i = 0; i < n; i++) nc_tensor_release(t[i]);
}

/* Contiguous versions of in[0 .. n) (NULL entries stay NULL); releases them on failure. */
static nc_status contiguous_all(nc_tensor **in, nc_tensor **out, int n) {
  for (int i = 0; i < n; i++) out[i] = NULL;
  for (int i = 0; i < n; i++) {
    nc_status s = in[i] ? nc_contiguous(in[i], &out[i]) : NC_OK;
    if (s != NC_OK) {
      release_all(out, i);
      return s;
    }
  }
  return NC_OK;
}

static nc_status check_float(const char *what, const nc_tensor *t, const nc_tensor *like) {
  NC_TRY(nc_check_not_storage(t, NULL));
  if (!nc_dtype_is_float(t->dtype))
    return nc_error(NC_ERR_DTYPE, "%s must be float32 or float64, got %s", what, nc_dtype_name(t->dtype));
  if (like && t->dtype != like->dtype)
    return nc_error(NC_ERR_DTYPE, "%s is %s but q is %s", what, nc_dtype_name(t->dtype), nc_dtype_name(like->dtype));
  if (like && nc_tensor_device(t) != nc_tensor_device(like))
    return nc_error(NC_ERR_DEVICE, "%s is on another device than q", what);
  return NC_OK;
}

/* ---- rope ----------------------------------------------------------------------------------------- */
nc_status nc_rope(nc_tensor *x, nc_tensor *positions, double theta, bool inverse, nc_tensor **out) {
  NC_TRY(check_float("x", x, NULL));
  if (x->ndim < 2) return nc_error(NC_ERR_SHAPE, "x must be [..., T, head_dim], got %d dims", x->ndim);
  const int64_t t = x->shape[x->ndim - 2], dh = x->shape[x->ndim - 1];
  if (dh % 2 != 0) return nc_error(NC_ERR_SHAPE, "head_dim (the last dim) must be even, got %lld", (long long)dh);
  if (positions->ndim != 1 || positions->shape[0] != t)
    return nc_error(NC_ERR_SHAPE, "positions must be [%lld] (one per row of x's dim %d)", (long long)t, x->ndim - 1);
  if (positions->dtype != NC_INT64 && positions->dtype != NC_INT32)
    return nc_error(NC_ERR_DTYPE, "positions must be int64 or int32, got %s", nc_dtype_name(positions->dtype));
  if (nc_tensor_device(positions) != nc_tensor_device(x))
    return nc_error(NC_ERR_DEVICE, "positions are on another device than x");
  if (!(theta > 0) || !isfinite(theta)) return nc_error(NC_ERR_ARG, "theta must be a finite number > 0, got %g", theta);
  nc_device *dev = nc_tensor_device(x);
  nc_tensor *xc, *pc = NULL, *y = NULL;
  NC_TRY(nc_contiguous(x, &xc));
  nc_status s = positions->dtype == NC_INT64 ? nc_contiguous(positions, &pc) : nc_to(positions, dev, NC_INT64, &pc);
  if (s == NC_OK) s = nc_tensor_empty(dev, x->dtype, x->ndim, x->shape, 0, &y);
  const int64_t npairs = nc_tensor_numel(x) / 2;
  if (s == NC_OK && npairs > 0) {
    nc_kernel_call k = {.op = NC_OP_ROPE,
                        .nt = 3,
                        .t = {xc, pc, y},
                        .ni = 5,
                        .i = {t, dh, npairs, ROPE_CHUNK, inverse},
                        .nf = 1,
                        .f = {theta},
                        .rows = (npairs + ROPE_CHUNK - 1) / ROPE_CHUNK};
    s = nc_bk_kernel(&k);
  }
  nc_tensor_release(xc);
  nc_tensor_release(pc);
  if (s != NC_OK) {
    nc_tensor_release(y);
    return s;
  }
  *out = y;
  return NC_OK;
}

/* ---- flash attention ------------------------------------------------------------------------------ */
typedef struct {
  int64_t b, h, hkv, tq, tk, d;
  double scale;
} att_geometry;

static nc_status attention_geometry(const nc_tensor *q, const nc_tensor *k, const nc_tensor *v, bool causal,
                                    double scale, att_geometry *g) {
  NC_TRY(check_float("q", q, NULL));
  NC_TRY(check_float("k", k, q));
  NC_TRY(check_float("v", v, q));
  if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
    return nc_error(NC_ERR_SHAPE, "q, k and v must be [batch, heads, T, head_dim] (4 dims), got %d, %d and %d",
                    q->ndim, k->ndim, v->ndim);
  for (int i = 0; i < 4; i++)
    if (k->shape[i] != v->shape[i])
      return nc_error(NC_ERR_SHAPE, "k and v must have the same shape (dim %d: %lld and %lld)", i,
                      (long long)k->shape[i], (long long)v->shape[i]);
  *g = (att_geometry){q->shape[0], q->shape[1], k->shape[1], q->shape[2], k->shape[2], q->shape[3], scale};
  if (k->shape[0] != g->b)
    return nc_error(NC_ERR_SHAPE, "k has batch %lld but q has %lld", (long long)k->shape[0], (long long)g->b);
  if (k->shape[3] != g->d)
    return nc_error(NC_ERR_SHAPE, "k has head_dim %lld but q has %lld", (long long)k->shape[3], (long long)g->d);
  if (g->hkv <= 0 || g->h % g->hkv != 0)
    return nc_error(NC_ERR_SHAPE, "k and v's heads (%lld) must divide q's (%lld)", (long long)g->hkv, (long long)g->h);
  if (g->d > ATT_MAX_D)
    return nc_error(NC_ERR_UNSUPPORTED, "head_dim %lld is over the supported %d", (long long)g->d, ATT_MAX_D);
  if (g->d == 0) return nc_error(NC_ERR_SHAPE, "head_dim must be > 0");
  if (causal && g->tk < g->tq)
    return nc_error(NC_ERR_SHAPE, "causal attention needs at least as many keys as queries (%lld keys, %lld queries)",
                    (long long)g->tk, (long long)g->tq);
  if (g->tk == 0 && g->tq > 0 && g->b * g->h > 0) return nc_error(NC_ERR_SHAPE, "attention needs at least one key");
  if (!isfinite(scale) || scale < 0) return nc_error(NC_ERR_ARG, "scale must be a finite number >= 0, got %g", scale);
  if (scale == 0) g->scale = 1 / sqrt((double)g->d);
  return NC_OK;
}

static nc_kernel_call attention_call(nc_op op, const att_geometry *g, bool causal) {
  return (nc_kernel_call){.op = op,
                          .ni = 6,
                          .i = {g->h, g->hkv, g->tq, g->tk, g->d, causal},
                          .nf = 1,
                          .f = {g->scale},
                          .rows = g->b * g->h * g->tq,
                          .precision = nc_matmul_precision_level()};
}

nc_status nc_flash_attention(nc_tensor *q, nc_tensor *k, nc_tensor *v, bool causal, double scale, nc_tensor **lse,
                             nc_tensor **out) {
  att_geometry g = {0};
  NC_TRY(attention_geometry(q, k, v, causal, scale, &g));
  nc_device *dev = nc_tensor_device(q);
  nc_tensor *in[3] = {q, k, v}, *c[3], *r[2] = {NULL, NULL};
  NC_TRY(contiguous_all(in, c, 3));
  nc_status s = nc_tensor_empty(dev, q->dtype, 4, q->shape, 0, &r[0]);
  if (s == NC_OK) s = nc_tensor_empty(dev, q->dtype, 3, q->shape, 0, &r[1]);
  if (s == NC_OK && nc_tensor_numel(q) > 0) {
    nc_kernel_call kc = attention_call(NC_OP_FLASH_ATTENTION, &g, causal);
    kc.nt = 5;
    kc.t[0] = c[0], kc.t[1] = c[1], kc.t[2] = c[2], kc.t[3] = r[0], kc.t[4] = r[1];
    s = nc_bk_kernel(&kc);
  }
  release_all(c, 3);
  if (s != NC_OK) {
    release_all(r, 2);
    return s;
  }
  *out = r[0];
  if (lse) *lse = r[1]; else nc_tensor_release(r[1]);
  return NC_OK;
}

/* The two backward ops: dout like q, lse and delta [B, H, Tq]; the result has shape (ndim, shape). */
static nc_status attention_backward(nc_op op, nc_tensor *dout, nc_tensor *q, nc_tensor *k, nc_tensor *v,
                                    nc_tensor *lse, nc_tensor *delta, bool causal, double scale, int ndim,
                                    const int64_t *shape, nc_tensor **out) {
  att_geometry g = {0};
  NC_TRY(attention_geometry(q, k, v, causal, scale, &g));
  NC_TRY(check_float("dout", dout, q));
  NC_TRY(check_float("lse", lse, q));
  NC_TRY(check_float("delta", delta, q));
  bool ok = dout->ndim == 4 && lse->ndim == 3 && delta->ndim == 3;
  for (int i = 0; ok && i < 4; i++) ok = dout->shape[i] == q->shape[i];
  for (int i = 0; ok && i < 3; i++) ok = lse->shape[i] == q->shape[i] && delta->shape[i] == q->shape[i];
  if (!ok)
    return nc_error(NC_ERR_SHAPE, "dout must have q's shape and lse and delta q's first three dims [%lld, %lld, %lld]",
                    (long long)g.b, (long long)g.h, (long long)g.tq);
  nc_device *dev = nc_tensor_device(q);
  nc_tensor *in[6] = {dout, q, k, v, lse, delta}, *c[6], *r = NULL;
  NC_TRY(contiguous_all(in, c, 6));
  nc_status s = nc_tensor_empty(dev, q->dtype, ndim, shape, 0, &r);
  if (s == NC_OK && nc_tensor_numel(r) > 0) {
    if (nc_tensor_numel(q) == 0) {
      s = nc_fill(r, 0.0); /* keys no query sees */
    } else {
      nc_kernel_call kc = attention_call(op, &g, causal);
      kc.nt = 7;
      for (int i = 0; i < 6; i++) kc.t[i] = c[i];
      kc.t[6] = r;
      if (op == NC_OP_FLASH_ATTENTION_BWD_KV) kc.rows = g.b * g.hkv * g.tk; /* one per key row */
      s = nc_bk_kernel(&kc);
    }
  }
  release_all(c, 6);
  if (s != NC_OK) {
    nc_tensor_release(r);
    return s;
  }
  *out = r;
  return NC_OK;
}

nc_status nc_flash_attention_backward_q(nc_tensor *dout, nc_tensor *q, nc_tensor *k, nc_tensor *v, nc_tensor *lse,
                                        nc_tensor *delta, bool causal, double scale, nc_tensor **out) {
  return attention_backward(NC_OP_FLASH_ATTENTION_BWD_Q, dout, q, k, v, lse, delta, causal, scale, 4, q->shape, out);
}

nc_status nc_flash_attention_backward_kv(nc_tensor *dout, nc_tensor *q, nc_tensor *k, nc_tensor *v, nc_tensor *lse,
                                         nc_tensor *delta, bool causal, double scale, nc_tensor **out) {
  if (k->ndim != 4) return nc_error(NC_ERR_SHAPE, "k must be [batch, kv_heads, T, head_dim], got %d dims", k->ndim);
  const int64_t shape[5] = {2, k->shape[0], k->shape[1], k->shape[2], k->shape[3]};
  return attention_backward(NC_OP_FLASH_ATTENTION_BWD_KV, dout, q, k, v, lse, delta, causal, scale, 5, shape, out);
}

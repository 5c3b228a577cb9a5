/* Matrix products: matmul (mm and bmm are its 2-D and 3-D cases) and linear. Gradients are
 * products with transposed views, read through their strides without copies.
 *
 * Products of bfloat16 or float16 operands: the gradient of a storage-dtype value is float32
 * (tape.c, grad_dtype), so their rules widen the saved operands (exactly) and the incoming
 * gradient (float32 already, unless it is the seed or a gradient passed to backward) to float32
 * and multiply in float32: the input gradients are float32, with no rounding to the storage
 * dtype. */
#include "core/check.h"
#include "netcl/autograd_ops.h"
#include "netcl/copy.h"
#include "netcl/linalg.h"
#include "record.h"
#include "scope.h"

static nc_tensor *matmul(ag_scope *S, nc_tensor *a, nc_tensor *b) {
  if (!ag_ok(S)) return NULL;
  nc_tensor *r = NULL;
  return ag_take(S, nc_matmul(a, b, &r), &r);
}

/* t with its last two dims swapped (a view). */
static nc_tensor *mT(ag_scope *S, nc_tensor *t) {
  if (!ag_ok(S)) return NULL;
  nc_tensor *r = NULL;
  return ag_take(S, nc_tensor_transpose(t, t->ndim - 2, t->ndim - 1, &r), &r);
}

static nc_tensor *unsqueeze(ag_scope *S, nc_tensor *t, int dim) {
  if (!ag_ok(S)) return NULL;
  nc_tensor *r = NULL;
  return ag_take(S, nc_tensor_unsqueeze(t, dim, &r), &r);
}

/* matmul with 1-D operands made 2-D (a row [1,K], a column [K,1]) and g viewed to match:
 * then da = g b^T and db = a^T g, summed over broadcast batch dims, and viewed back. */
static nc_status matmul_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  nc_tensor *a = ag_widen(&S, ag_saved(&S, c, 0)), *b = ag_widen(&S, ag_saved(&S, c, 1));
  g = ag_widen(&S, g);
  if (!ag_ok(&S)) return ag_end(&S);
  nc_tensor *a2 = a->ndim == 1 ? unsqueeze(&S, a, 0) : a, *b2 = b->ndim == 1 ? unsqueeze(&S, b, 1) : b;
  nc_tensor *g2 = g;
  if (ag_ok(&S) && (a->ndim == 1 || b->ndim == 1)) { /* g without the removed dims: view it with them */
    int64_t shape[NC_MAX_DIMS];
    int n;
    nc_status s = nc_broadcast_shapes(a2->ndim - 2, a2->shape, b2->ndim - 2, b2->shape, &n, shape);
    if (s != NC_OK) ag_fail(&S, s);
    shape[n++] = a2->shape[a2->ndim - 2];
    shape[n++] = b2->shape[b2->ndim - 1];
    g2 = ag_reshape(&S, g, n, shape);
  }
  if (nc_ag_needs_grad(c, 0)) {
    nc_tensor *da = ag_reduce_to(&S, matmul(&S, g2, mT(&S, b2)), a2);
    gi[0] = ag_keep(&S, a->ndim == 1 ? ag_reshape(&S, da, 1, a->shape) : da);
  }
  if (nc_ag_needs_grad(c, 1)) {
    nc_tensor *db = ag_reduce_to(&S, matmul(&S, mT(&S, a2), g2), b2);
    gi[1] = ag_keep(&S, b->ndim == 1 ? ag_reshape(&S, db, 1, b->shape) : db);
  }
  return ag_end(&S);
}

typedef nc_status (*product_fn)(nc_tensor *, nc_tensor *, nc_tensor **);

static nc_status product(nc_tape *t, const char *op, product_fn fn, nc_node *a, nc_node *b, nc_node **out) {
  nc_tensor *y;
  NC_TRY(fn(nc_node_value(a), nc_node_value(b), &y));
  nc_node *in[2] = {a, b};
  nc_ag_ctx *c;
  NC_TRY(ag_output(t, op, matmul_rule, 2, in, y, out, &c));
  if (c) {
    nc_ag_save(c, nc_node_value(a));
    nc_ag_save(c, nc_node_value(b));
  }
  return NC_OK;
}

nc_status nc_ag_matmul(nc_tape *t, nc_node *a, nc_node *b, nc_node **out) {
  return product(t, "matmul", nc_matmul, a, b, out);
}
nc_status nc_ag_mm(nc_tape *t, nc_node *a, nc_node *b, nc_node **out) {
  return product(t, "mm", nc_mm, a, b, out);
}
nc_status nc_ag_bmm(nc_tape *t, nc_node *a, nc_node *b, nc_node **out) {
  return product(t, "bmm", nc_bmm, a, b, out);
}

/* ---- linear ------------------------------------------------------------------------------------- */
/* y = x W^T + b: dx = g W, dW = g^T x over all leading positions, db = g summed over them. */
static nc_status linear_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  nc_tensor *x = ag_widen(&S, ag_saved(&S, c, 0)), *w = ag_widen(&S, ag_saved(&S, c, 1));
  g = ag_widen(&S, g);
  if (!ag_ok(&S)) return ag_end(&S);
  int64_t out = w->shape[0], in = w->shape[1];
  if (nc_ag_needs_grad(c, 0)) gi[0] = ag_keep(&S, matmul(&S, g, w));
  if (nc_ag_needs_grad(c, 1)) {
    int64_t gs[2] = {-1, out}, xs[2] = {-1, in};
    nc_tensor *gf = ag_reshape(&S, g, 2, gs), *xf = ag_reshape(&S, x, 2, xs);
    gi[1] = ag_keep(&S, matmul(&S, mT(&S, gf), xf));
  }
  if (nc_ag_n_inputs(c) == 3 && nc_ag_needs_grad(c, 2))
    gi[2] = ag_keep(&S, ag_reduce_to(&S, g, nc_ag_input_value(c, 2)));
  return ag_end(&S);
}

nc_status nc_ag_linear(nc_tape *t, nc_node *x, nc_node *weight, nc_node *bias, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_linear(nc_node_value(x), nc_node_value(weight), bias ? nc_node_value(bias) : NULL, &y));
  nc_node *in[3] = {x, weight, bias};
  nc_ag_ctx *c;
  NC_TRY(ag_output(t, "linear", linear_rule, bias ? 3 : 2, in, y, out, &c));
  if (c) {
    nc_ag_save(c, nc_node_value(x));
    nc_ag_save(c, nc_node_value(weight));
  }
  return NC_OK;
}

/* Views and copies. A view's output shares its input's storage; its gradient is the inverse
 * re-arrangement of the output's gradient (itself a view where possible), or for views that
 * drop elements (narrow, select) the gradient written into zeros of the input's shape. */
#include <string.h>
#include "core/check.h"
#include "netcl/autograd_ops.h"
#include "netcl/copy.h"
#include "record.h"
#include "scope.h"

/* The input's shape (a header field: valid even if the input's values changed since). */
static const nc_tensor *input(nc_ag_ctx *c) { return nc_ag_input_value(c, 0); }

static nc_status identity_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  gi[0] = nc_tensor_retain(g);
  return NC_OK;
}

/* view, reshape, flatten, squeeze, unsqueeze: the gradient takes the input's shape back. */
static nc_status reshape_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  gi[0] = ag_keep(&S, ag_reshape(&S, g, input(c)->ndim, input(c)->shape));
  return ag_end(&S);
}

static nc_status record_reshape(nc_tape *t, const char *op, nc_node *x, nc_tensor *y, nc_node **out) {
  nc_ag_ctx *c;
  return ag_output(t, op, reshape_rule, 1, &x, y, out, &c);
}

nc_status nc_ag_view(nc_tape *t, nc_node *x, int ndim, const int64_t *shape, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_tensor_view(nc_node_value(x), ndim, shape, &y));
  return record_reshape(t, "view", x, y, out);
}

nc_status nc_ag_reshape(nc_tape *t, nc_node *x, int ndim, const int64_t *shape, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_reshape(nc_node_value(x), ndim, shape, &y));
  return record_reshape(t, "reshape", x, y, out);
}

nc_status nc_ag_squeeze(nc_tape *t, nc_node *x, int dim, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_tensor_squeeze(nc_node_value(x), dim, &y));
  return record_reshape(t, "squeeze", x, y, out);
}

nc_status nc_ag_unsqueeze(nc_tape *t, nc_node *x, int dim, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_tensor_unsqueeze(nc_node_value(x), dim, &y));
  return record_reshape(t, "unsqueeze", x, y, out);
}

nc_status nc_ag_flatten(nc_tape *t, nc_node *x, int d1, int d2, nc_node **out) {
  const nc_tensor *v = nc_node_value(x);
  int64_t shape[NC_MAX_DIMS];
  int n = 0;
  if (v->ndim == 0) {
    shape[n++] = 1;
  } else {
    if (d1 < 0 || d2 >= v->ndim || d1 > d2)
      return nc_error(NC_ERR_INDEX, "flatten: dims %d..%d do not fit a tensor of %d dims", d1, d2, v->ndim);
    for (int i = 0; i < d1; i++) shape[n++] = v->shape[i];
    int64_t m = 1;
    for (int i = d1; i <= d2; i++) m *= v->shape[i];
    shape[n++] = m;
    for (int i = d2 + 1; i < v->ndim; i++) shape[n++] = v->shape[i];
  }
  nc_tensor *y;
  NC_TRY(nc_reshape(nc_node_value(x), n, shape, &y));
  return record_reshape(t, "flatten", x, y, out);
}

/* ---- transpose, permute ------------------------------------------------------------------------- */
static nc_status transpose_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  const int64_t *ip = nc_ag_iparams(c);
  return nc_tensor_transpose(g, (int)ip[0], (int)ip[1], &gi[0]);
}

nc_status nc_ag_transpose(nc_tape *t, nc_node *x, int d1, int d2, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_tensor_transpose(nc_node_value(x), d1, d2, &y));
  nc_ag_ctx *c;
  NC_TRY(ag_output(t, "transpose", transpose_rule, 1, &x, y, out, &c));
  if (c) {
    nc_ag_iparams(c)[0] = d1;
    nc_ag_iparams(c)[1] = d2;
  }
  return NC_OK;
}

/* iparams hold the inverse permutation. */
static nc_status permute_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  int inv[NC_MAX_DIMS];
  for (int i = 0; i < g->ndim; i++) inv[i] = (int)nc_ag_iparams(c)[i];
  return nc_tensor_permute(g, inv, &gi[0]);
}

nc_status nc_ag_permute(nc_tape *t, nc_node *x, const int *dims, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_tensor_permute(nc_node_value(x), dims, &y));
  nc_ag_ctx *c;
  NC_TRY(ag_output(t, "permute", permute_rule, 1, &x, y, out, &c));
  if (c)
    for (int i = 0; i < y->ndim; i++) nc_ag_iparams(c)[dims[i]] = i;
  return NC_OK;
}

/* ---- narrow, select ------------------------------------------------------------------------------ */
/* iparams: [0] 0 = narrow, 1 = select; [1] dim; [2] start or index; [3] length. */
static nc_status slice_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  const int64_t *ip = nc_ag_iparams(c);
  ag_scope S = AG_SCOPE;
  nc_tensor *z = ag_zeros(&S, g, input(c)->ndim, input(c)->shape), *part;
  if (ag_ok(&S)) {
    nc_status s = ip[0] ? nc_tensor_select(z, (int)ip[1], ip[2], &part)
                        : nc_tensor_narrow(z, (int)ip[1], ip[2], ip[3], &part);
    if (s == NC_OK) {
      s = nc_copy(part, g);
      nc_tensor_release(part);
    }
    if (s != NC_OK) ag_fail(&S, s);
  }
  gi[0] = ag_keep(&S, z);
  return ag_end(&S);
}

static nc_status record_slice(nc_tape *t, const char *op, nc_node *x, nc_tensor *y, int kind, int dim,
                              int64_t at, int64_t len, nc_node **out) {
  nc_ag_ctx *c;
  NC_TRY(ag_output(t, op, slice_rule, 1, &x, y, out, &c));
  if (c) {
    int64_t *ip = nc_ag_iparams(c);
    ip[0] = kind;
    ip[1] = dim;
    ip[2] = at;
    ip[3] = len;
  }
  return NC_OK;
}

nc_status nc_ag_narrow(nc_tape *t, nc_node *x, int dim, int64_t start, int64_t len, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_tensor_narrow(nc_node_value(x), dim, start, len, &y));
  return record_slice(t, "narrow", x, y, 0, dim, start, len, out);
}

nc_status nc_ag_select(nc_tape *t, nc_node *x, int dim, int64_t index, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_tensor_select(nc_node_value(x), dim, index, &y));
  return record_slice(t, "select", x, y, 1, dim, index, 0, out);
}

/* ---- expand ----------------------------------------------------------------------------------- */
static nc_status expand_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  return nc_ag_reduce_to(g, input(c)->ndim, input(c)->shape, &gi[0]);
}

nc_status nc_ag_expand(nc_tape *t, nc_node *x, int ndim, const int64_t *shape, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_tensor_expand(nc_node_value(x), ndim, shape, &y));
  nc_ag_ctx *c;
  return ag_output(t, "expand", expand_rule, 1, &x, y, out, &c);
}

/* ---- contiguous, clone ---------------------------------------------------------------------------- */
nc_status nc_ag_contiguous(nc_tape *t, nc_node *x, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_contiguous(nc_node_value(x), &y));
  nc_ag_ctx *c;
  return ag_output(t, "contiguous", identity_rule, 1, &x, y, out, &c);
}

nc_status nc_ag_clone(nc_tape *t, nc_node *x, nc_node **out) {
  nc_tensor *v = nc_node_value(x), *y;
  NC_TRY(nc_to(v, nc_tensor_device(v), v->dtype, &y));
  nc_ag_ctx *c;
  return ag_output(t, "clone", identity_rule, 1, &x, y, out, &c);
}

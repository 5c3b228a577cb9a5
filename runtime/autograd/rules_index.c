/* Index and join ops: index_select, gather, scatter_add, cat, stack, split, chunk. Gradients of
 * selections are scatter-adds of the output's gradient into zeros (repeated indices add up);
 * gradients of joins are views of the output's gradient. */
#include <stdlib.h>
#include "core/check.h"
#include "netcl/autograd_ops.h"
#include "netcl/copy.h"
#include "netcl/index.h"
#include "netcl/join.h"
#include "record.h"
#include "scope.h"

static nc_tensor *scatter_into_zeros(ag_scope *S, const nc_tensor *like, int dim, nc_tensor *idx,
                                     nc_tensor *src) {
  nc_tensor *z = ag_zeros(S, src, like->ndim, like->shape), *r = NULL;
  if (!ag_ok(S)) return NULL;
  return ag_take(S, nc_scatter_add(z, dim, idx, src, &r), &r);
}

/* ---- index_select ---------------------------------------------------------------------------- */
/* iparams: [0] dim; saved: idx (1-D). idx is viewed along dim and expanded to g's shape, so
 * that the scatter-add puts g's slice j at row idx[j]. */
static nc_status index_select_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  int dim = (int)nc_ag_iparams(c)[0];
  nc_tensor *idx = ag_saved(&S, c, 0);
  int64_t shape[NC_MAX_DIMS];
  for (int i = 0; i < g->ndim; i++) shape[i] = i == dim ? g->shape[i] : 1;
  nc_tensor *along = ag_expand(&S, ag_reshape(&S, idx, g->ndim, shape), g);
  gi[0] = ag_keep(&S, scatter_into_zeros(&S, nc_ag_input_value(c, 0), dim, along, g));
  return ag_end(&S);
}

/* The forward half shared with gather: y made from x by idx along dim. */
static nc_status record_indexed(nc_tape *t, const char *op, nc_backward_fn rule, nc_node *x, int dim,
                                nc_tensor *idx, nc_tensor *y, nc_node **out) {
  nc_ag_ctx *c;
  NC_TRY(ag_output(t, op, rule, 1, &x, y, out, &c));
  if (c) {
    nc_ag_iparams(c)[0] = dim;
    nc_ag_save(c, idx);
  }
  return NC_OK;
}

nc_status nc_ag_index_select(nc_tape *t, nc_node *x, int dim, nc_tensor *idx, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_index_select(nc_node_value(x), dim, idx, &y));
  return record_indexed(t, "index_select", index_select_rule, x, dim, idx, y, out);
}

/* ---- gather ------------------------------------------------------------------------------------ */
static nc_status gather_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  nc_tensor *idx = ag_saved(&S, c, 0);
  gi[0] = ag_keep(&S, scatter_into_zeros(&S, nc_ag_input_value(c, 0), (int)nc_ag_iparams(c)[0], idx, g));
  return ag_end(&S);
}

nc_status nc_ag_gather(nc_tape *t, nc_node *x, int dim, nc_tensor *idx, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_gather(nc_node_value(x), dim, idx, &y));
  return record_indexed(t, "gather", gather_rule, x, dim, idx, y, out);
}

/* ---- scatter_add ---------------------------------------------------------------------------------- */
/* out = x + scatter(src): dx = g; dsrc = g gathered at idx, in the idx-sized leading block of
 * src (elements of src beyond idx's sizes are not scattered, so get 0). */
static nc_status scatter_add_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  int dim = (int)nc_ag_iparams(c)[0];
  nc_tensor *idx = ag_saved(&S, c, 0), *picked = NULL;
  gi[0] = ag_keep(&S, g);
  if (ag_ok(&S)) ag_take(&S, nc_gather(g, dim, idx, &picked), &picked);
  const nc_tensor *src = nc_ag_input_value(c, 1);
  bool same = ag_ok(&S) && picked->ndim == src->ndim;
  for (int i = 0; same && i < src->ndim; i++) same = picked->shape[i] == src->shape[i];
  if (same || !ag_ok(&S)) {
    gi[1] = ag_keep(&S, picked);
    return ag_end(&S);
  }
  nc_tensor *z = ag_zeros(&S, g, src->ndim, src->shape), *block = NULL;
  if (ag_ok(&S)) {
    nc_status s = nc_tensor_alias(z, &block);
    for (int i = 0; s == NC_OK && i < src->ndim; i++) {
      nc_tensor *n;
      s = nc_tensor_narrow(block, i, 0, picked->shape[i], &n);
      if (s == NC_OK) {
        nc_tensor_release(block);
        block = n;
      }
    }
    if (s == NC_OK) s = nc_copy(block, picked);
    nc_tensor_release(block);
    if (s != NC_OK) ag_fail(&S, s);
  }
  gi[1] = ag_keep(&S, z);
  return ag_end(&S);
}

nc_status nc_ag_scatter_add(nc_tape *t, nc_node *x, int dim, nc_tensor *idx, nc_node *src, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_scatter_add(nc_node_value(x), dim, idx, nc_node_value(src), &y));
  nc_node *in[2] = {x, src};
  nc_ag_ctx *c;
  NC_TRY(ag_output(t, "scatter_add", scatter_add_rule, 2, in, y, out, &c));
  if (c) {
    nc_ag_iparams(c)[0] = dim;
    nc_ag_save(c, idx);
  }
  return NC_OK;
}

/* ---- cat, stack ---------------------------------------------------------------------------------- */
/* iparams: [0] dim, [1] 1 for stack. Input i's gradient is its slice of g: a view. */
static nc_status join_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  int dim = (int)nc_ag_iparams(c)[0];
  bool stack = nc_ag_iparams(c)[1];
  int64_t at = 0;
  for (int i = 0; i < nc_ag_n_inputs(c); i++) {
    const nc_tensor *v = nc_ag_input_value(c, i);
    nc_status s;
    if (stack) {
      s = nc_tensor_select(g, dim, i, &gi[i]);
    } else if (v->ndim == 1 && v->shape[0] == 0 && g->ndim != 1) { /* skipped by cat */
      s = nc_tensor_empty(nc_tensor_device(g), g->dtype, 1, v->shape, 0, &gi[i]);
    } else {
      s = nc_tensor_narrow(g, dim, at, v->shape[dim], &gi[i]);
      at += v->shape[dim];
    }
    if (s != NC_OK) return s;
    if (!nc_ag_needs_grad(c, i)) { /* the engine would drop it anyway */
      nc_tensor_release(gi[i]);
      gi[i] = NULL;
    }
  }
  return NC_OK;
}

static nc_status join(nc_tape *t, bool stack, int n, nc_node *const *xs, int dim, nc_node **out) {
  if (n < 1) return nc_error(NC_ERR_ARG, "%s needs at least one node", stack ? "stack" : "cat");
  nc_tensor **vs = malloc(sizeof *vs * (size_t)n), *y;
  if (!vs) return nc_error(NC_ERR_OOM, "out of host memory");
  for (int i = 0; i < n; i++) vs[i] = nc_node_value(xs[i]);
  nc_status s = stack ? nc_stack(n, vs, dim, &y) : nc_cat(n, vs, dim, &y);
  free(vs);
  if (s != NC_OK) return s;
  nc_ag_ctx *c;
  NC_TRY(ag_output(t, stack ? "stack" : "cat", join_rule, n, xs, y, out, &c));
  if (c) {
    nc_ag_iparams(c)[0] = dim;
    nc_ag_iparams(c)[1] = stack;
  }
  return NC_OK;
}

nc_status nc_ag_cat(nc_tape *t, int n, nc_node *const *xs, int dim, nc_node **out) {
  return join(t, false, n, xs, dim, out);
}
nc_status nc_ag_stack(nc_tape *t, int n, nc_node *const *xs, int dim, nc_node **out) {
  return join(t, true, n, xs, dim, out);
}

/* ---- split ---------------------------------------------------------------------------------------- */
nc_status nc_ag_split(nc_tape *t, nc_node *x, int dim, int n, const int64_t *sizes, nc_node **parts) {
  const nc_tensor *v = nc_node_value(x);
  if (dim < 0 || dim >= v->ndim)
    return nc_error(NC_ERR_INDEX, "split: dim %d out of range for %d dims", dim, v->ndim);
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0) return nc_error(NC_ERR_ARG, "split: size %lld is negative", (long long)sizes[i]);
    total += sizes[i];
  }
  if (total != v->shape[dim])
    return nc_error(NC_ERR_SHAPE, "split: sizes add up to %lld, but dim %d has size %lld", (long long)total,
                    dim, (long long)v->shape[dim]);
  int64_t at = 0;
  for (int i = 0; i < n; i++) {
    nc_status s = nc_ag_narrow(t, x, dim, at, sizes[i], &parts[i]);
    if (s != NC_OK) {
      while (i-- > 0) nc_node_release(parts[i]);
      return s;
    }
    at += sizes[i];
  }
  return NC_OK;
}

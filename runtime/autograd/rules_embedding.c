/* Embedding lookup: the weight's gradient scatter-adds the output's gradient rows into the rows
 * the indices named (the embedding op's backward kernel). */
#include "core/check.h"
#include "netcl/autograd_ops.h"
#include "netcl/embedding.h"
#include "record.h"
#include "scope.h"

/* iparams: [0] padding_idx; saved: idx. */
static nc_status embedding_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  nc_tensor *idx = ag_saved(&S, c, 0), *r = NULL;
  const nc_tensor *w = nc_ag_input_value(c, 0);
  if (ag_ok(&S) && ag_take(&S, nc_embedding_backward(g, idx, w->shape[0], nc_ag_iparams(c)[0], &r), &r))
    gi[0] = ag_keep(&S, r);
  return ag_end(&S);
}

nc_status nc_ag_embedding(nc_tape *t, nc_node *weight, nc_tensor *idx, int64_t padding_idx, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_embedding(nc_node_value(weight), idx, &y));
  nc_ag_ctx *c;
  NC_TRY(ag_output(t, "embedding", embedding_rule, 1, &weight, y, out, &c));
  if (c) {
    nc_ag_iparams(c)[0] = padding_idx;
    nc_ag_save(c, idx);
  }
  return NC_OK;
}

/* Rotary embeddings and flash attention. rope's gradient is the opposite rotation (the same op
 * with inverse set); flash attention's comes from its two fused backward ops, which recompute
 * the probabilities block by block from the saved log-sum-exp. */
#include "core/check.h"
#include "netcl/autograd_ops.h"
#include "netcl/table_ops.h"
#include "netcl/tensor.h"
#include "record.h"
#include "scope.h"

/* ---- rope ----------------------------------------------------------------------------------------- */
/* params: [0] theta; iparams: [0] inverse; saved: positions. */
static nc_status rope_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  nc_tensor *pos = ag_saved(&S, c, 0), *r;
  if (ag_ok(&S)) gi[0] = ag_keep(&S, ag_take(&S, nc_rope(g, pos, nc_ag_params(c)[0], !nc_ag_iparams(c)[0], &r), &r));
  return ag_end(&S);
}

nc_status nc_ag_rope(nc_tape *t, nc_node *x, nc_tensor *positions, double theta, bool inverse, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_rope(nc_node_value(x), positions, theta, inverse, &y));
  nc_ag_ctx *c;
  NC_TRY(ag_output(t, "rope", rope_rule, 1, &x, y, out, &c));
  if (c) {
    nc_ag_params(c)[0] = theta;
    nc_ag_iparams(c)[0] = inverse;
    nc_ag_save(c, positions);
  }
  return NC_OK;
}

/* ---- flash attention ------------------------------------------------------------------------------ */
/* params: [0] scale; iparams: [0] causal; saved: q, k, v, out, lse. delta = rowsum(g * out). */
static nc_status flash_attention_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  const double scale = nc_ag_params(c)[0];
  const bool causal = nc_ag_iparams(c)[0] != 0;
  nc_tensor *q = ag_saved(&S, c, 0), *k = ag_saved(&S, c, 1), *v = ag_saved(&S, c, 2);
  nc_tensor *o = ag_saved(&S, c, 3), *lse = ag_saved(&S, c, 4), *r;
  const int last = 3;
  nc_tensor *delta = ag_reduce(&S, NC_OP_SUM, ag_mul(&S, g, o), 1, &last, false, NULL);
  if (ag_ok(&S) && nc_ag_needs_grad(c, 0))
    gi[0] = ag_keep(&S, ag_take(&S, nc_flash_attention_backward_q(g, q, k, v, lse, delta, causal, scale, &r), &r));
  if (ag_ok(&S) && (nc_ag_needs_grad(c, 1) || nc_ag_needs_grad(c, 2))) {
    nc_tensor *dkv = ag_take(&S, nc_flash_attention_backward_kv(g, q, k, v, lse, delta, causal, scale, &r), &r);
    for (int i = 0; i < 2 && ag_ok(&S); i++) {
      if (!nc_ag_needs_grad(c, 1 + i)) continue;
      nc_tensor *part = ag_take(&S, nc_tensor_select(dkv, 0, i, &r), &r);
      gi[1 + i] = ag_keep(&S, part);
    }
  }
  return ag_end(&S);
}

nc_status nc_ag_flash_attention(nc_tape *t, nc_node *q, nc_node *k, nc_node *v, bool causal, double scale,
                                nc_node **out) {
  nc_tensor *y, *lse;
  NC_TRY(nc_flash_attention(nc_node_value(q), nc_node_value(k), nc_node_value(v), causal, scale, &lse, &y));
  nc_node *in[3] = {q, k, v};
  nc_ag_ctx *c;
  nc_status s = ag_output(t, "flash_attention", flash_attention_rule, 3, in, y, out, &c);
  if (s == NC_OK && c) {
    nc_ag_params(c)[0] = scale;
    nc_ag_iparams(c)[0] = causal;
    for (int i = 0; i < 3; i++) nc_ag_save(c, nc_node_value(in[i]));
    nc_ag_save(c, nc_node_value(*out));
    nc_ag_save(c, lse);
  }
  nc_tensor_release(lse);
  return s;
}

/* softmax and log_softmax along one dim, from the saved output alone. */
#include "core/check.h"
#include "netcl/autograd_ops.h"
#include "record.h"
#include "scope.h"

/* iparams: [0] op, [1] dim; saved: y.
 * softmax:     dx = y (g - sum(g y))
 * log_softmax: dx = g - exp(y) sum(g)   (sums along dim) */
static nc_status softmax_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  nc_op op = (nc_op)nc_ag_iparams(c)[0];
  int dim = (int)nc_ag_iparams(c)[1];
  nc_tensor *y = ag_widen(&S, ag_saved(&S, c, 0)), *d; /* storage dtypes: float32 gradients */
  g = ag_widen(&S, g);
  if (op == NC_OP_SOFTMAX) {
    nc_tensor *dot = ag_sum_keep(&S, ag_mul(&S, g, y), 1, &dim);
    d = ag_mul(&S, y, ag_bin(&S, NC_OP_SUB, AG_T(g), AG_T(dot)));
  } else {
    nc_tensor *total = ag_sum_keep(&S, g, 1, &dim);
    d = ag_bin(&S, NC_OP_SUB, AG_T(g), AG_T(ag_mul(&S, ag_un(&S, NC_OP_EXP, y), total)));
  }
  gi[0] = ag_keep(&S, d);
  return ag_end(&S);
}

nc_status nc_ag_softmax(nc_tape *t, nc_op op, nc_node *x, int dim, nc_node **out) {
  if (op != NC_OP_SOFTMAX && op != NC_OP_LOG_SOFTMAX)
    return nc_error(NC_ERR_ARG, "nc_ag_softmax takes softmax or log_softmax");
  nc_tensor *y;
  NC_TRY(nc_softmax(op, nc_node_value(x), dim, &y));
  nc_ag_ctx *c;
  NC_TRY(ag_output(t, nc_op_get(op)->name, softmax_rule, 1, &x, y, out, &c));
  if (c) {
    nc_ag_iparams(c)[0] = op;
    nc_ag_iparams(c)[1] = dim;
    nc_ag_save(c, nc_node_value(*out));
  }
  return NC_OK;
}

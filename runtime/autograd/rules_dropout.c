/* Dropout: a Philox Bernoulli mask, so the same seed drops the same elements on every backend. */
#include "core/check.h"
#include "netcl/autograd_ops.h"
#include "netcl/creation.h"
#include "record.h"
#include "scope.h"

/* saved: the scaled mask (0 or 1 / (1 - p)), or nothing for the identity: dx = g * mask. */
static nc_status dropout_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  if (!nc_ag_iparams(c)[0]) {
    gi[0] = nc_tensor_retain(g);
    return NC_OK;
  }
  ag_scope S = AG_SCOPE;
  gi[0] = ag_keep(&S, ag_mul(&S, g, ag_saved(&S, c, 0)));
  return ag_end(&S);
}

nc_status nc_ag_dropout(nc_tape *t, nc_node *x, double p, bool training, nc_rng *g, nc_node **out) {
  if (!(p >= 0 && p <= 1)) return nc_error(NC_ERR_ARG, "dropout probability %g is outside [0, 1]", p);
  nc_tensor *v = nc_node_value(x), *y, *mask = NULL;
  if (!nc_dtype_is_float(v->dtype))
    return nc_error(NC_ERR_DTYPE, "dropout takes float tensors, not %s", nc_dtype_name(v->dtype));
  bool drops = training && p > 0;
  if (drops) {
    /* mask = bernoulli(1 - p) / (1 - p); p == 1 keeps nothing (scale 0 instead of 1/0) */
    nc_tensor *keep;
    NC_TRY(nc_tensor_empty(nc_tensor_device(v), v->dtype, v->ndim, v->shape, 0, &keep));
    nc_status s = nc_bernoulli(keep, g, NULL, 1 - p);
    if (s == NC_OK)
      s = nc_binary(NC_OP_MUL, nc_operand_tensor(keep),
                    nc_operand_scalar(nc_scalar_float(p < 1 ? 1 / (1 - p) : 0)), &mask);
    nc_tensor_release(keep);
    if (s != NC_OK) return s;
    s = nc_binary(NC_OP_MUL, nc_operand_tensor(v), nc_operand_tensor(mask), &y);
    if (s != NC_OK) {
      nc_tensor_release(mask);
      return s;
    }
  } else {
    NC_TRY(nc_tensor_alias(v, &y)); /* the identity, as a new node over the same values */
  }
  nc_ag_ctx *c;
  nc_status s = ag_output(t, "dropout", dropout_rule, 1, &x, y, out, &c);
  if (s == NC_OK && c) {
    nc_ag_iparams(c)[0] = drops;
    if (drops) nc_ag_save(c, mask);
  }
  nc_tensor_release(mask);
  return s;
}

/* conv2d: the input and weight gradients are the conv ops' backward kernels; the bias gradient
 * is the output gradient summed over N, H and W. */
#include <stdlib.h>
#include "core/check.h"
#include "netcl/autograd_ops.h"
#include "netcl/conv.h"
#include "record.h"
#include "scope.h"

/* user: the geometry (nc_conv2d_desc); saved: x, weight. Storage-dtype weight and g are widened
 * (ag_widen), and x goes to the weight gradient as it is beside the float32 g (the op widens it
 * where its backend cannot take it so): the gradients are the float32 ops' on the stored values,
 * float32. */
static nc_status conv2d_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  const nc_conv2d_desc *p = nc_ag_user(c);
  nc_tensor *x = ag_saved(&S, c, 0), *w = ag_widen(&S, ag_saved(&S, c, 1)), *r = NULL;
  g = ag_widen(&S, g);
  if (ag_ok(&S) && nc_ag_needs_grad(c, 0) && ag_take(&S, nc_conv2d_backward_input(g, w, x->shape, p, &r), &r))
    gi[0] = ag_keep(&S, r);
  if (ag_ok(&S) && nc_ag_needs_grad(c, 1) &&
      ag_take(&S, nc_conv2d_backward_weight(g, x, w->shape, p, &r), &r))
    gi[1] = ag_keep(&S, r);
  if (nc_ag_n_inputs(c) == 3 && nc_ag_needs_grad(c, 2)) {
    int dims[3] = {0, 2, 3};
    gi[2] = ag_keep(&S, ag_reduce(&S, NC_OP_SUM, g, 3, dims, false, NULL));
  }
  return ag_end(&S);
}

nc_status nc_ag_conv2d(nc_tape *t, nc_node *x, nc_node *weight, nc_node *bias, const nc_conv2d_desc *params,
                       nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_conv2d(nc_node_value(x), nc_node_value(weight), bias ? nc_node_value(bias) : NULL, params, &y));
  nc_conv2d_desc *p = malloc(sizeof *p);
  if (!p) {
    nc_tensor_release(y);
    return nc_error(NC_ERR_OOM, "out of host memory recording conv2d");
  }
  *p = *params;
  nc_node *in[3] = {x, weight, bias};
  nc_ag_ctx *c;
  nc_status s = ag_output(t, "conv2d", conv2d_rule, bias ? 3 : 2, in, y, out, &c);
  if (s != NC_OK || !c) {
    free(p);
    return s;
  }
  nc_ag_set_user(c, p, free);
  nc_ag_save(c, nc_node_value(x));
  nc_ag_save(c, nc_node_value(weight));
  return NC_OK;
}

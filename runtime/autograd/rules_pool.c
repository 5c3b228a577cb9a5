/* 2-D pooling (max, average, adaptive average): gradients by the pooling ops' backward kernels;
 * max pooling routes each output gradient to the position its forward picked. */
#include <stdlib.h>
#include "netcl/autograd_ops.h"
#include "netcl/pool.h"
#include "record.h"
#include "scope.h"

/* user: the geometry (nc_pool2d_desc); saved: the max positions (max pooling). */
static nc_status pool_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  const nc_pool2d_desc *p = nc_ag_user(c);
  const nc_tensor *x = nc_ag_input_value(c, 0);
  nc_tensor *idx = p->kind == NC_POOL_MAX ? ag_saved(&S, c, 0) : NULL, *r = NULL;
  g = ag_widen(&S, g); /* a storage dtype's gradient is float32 */
  if (ag_ok(&S) && ag_take(&S, nc_pool2d_backward(g, idx, x->ndim, x->shape, p, &r), &r))
    gi[0] = ag_keep(&S, r);
  return ag_end(&S);
}

nc_status nc_ag_pool2d(nc_tape *t, nc_node *x, const nc_pool2d_desc *params, nc_node **out) {
  static const char *const names[] = {"max_pool2d", "avg_pool2d", "adaptive_avg_pool2d"};
  if (params->kind < NC_POOL_MAX || params->kind > NC_POOL_ADAPTIVE_AVG)
    return nc_error(NC_ERR_ARG, "unknown pooling kind %d", params->kind);
  nc_pool2d_desc *p = malloc(sizeof *p);
  if (!p) return nc_error(NC_ERR_OOM, "out of host memory recording %s", names[params->kind]);
  *p = *params;
  nc_tensor *y, *idx = NULL;
  nc_status s = nc_pool2d(nc_node_value(x), params, &y, params->kind == NC_POOL_MAX ? &idx : NULL);
  nc_ag_ctx *c = NULL;
  if (s == NC_OK) s = ag_output(t, names[params->kind], pool_rule, 1, &x, y, out, &c);
  if (c) {
    nc_ag_set_user(c, p, free);
    if (idx) nc_ag_save(c, idx);
  } else {
    free(p);
  }
  nc_tensor_release(idx);
  return s;
}

#include "record.h"

nc_status ag_output(nc_tape *t, const char *op, nc_backward_fn fn, int n, nc_node *const *in, nc_tensor *y,
                    nc_node **out, nc_ag_ctx **ctx) {
  *ctx = NULL;
  nc_node *o;
  nc_status s = nc_node_new(y, false, &o);
  nc_tensor_release(y);
  if (s != NC_OK) return s;
  if (nc_ag_should_record(t, n, in)) {
    s = nc_tape_record(t, op, fn, n, in, o, ctx);
    if (s != NC_OK) {
      nc_node_release(o);
      return s;
    }
  }
  *out = o;
  return NC_OK;
}

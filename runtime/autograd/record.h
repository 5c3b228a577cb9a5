/* The forward half of a differentiable op (autograd-internal): wrapping the pure op's result in
 * a node and recording it when that is useful. */
#ifndef NETCL_AUTOGRAD_RECORD_H
#define NETCL_AUTOGRAD_RECORD_H

#include "netcl/autograd.h"

/* Wraps y (taking its reference, also on failure) into a new node *out. When recording onto t
 * is useful (nc_ag_should_record), records op with rule fn and inputs in[0..n); *ctx is then the
 * entry's context, to save what the rule needs, and NULL otherwise: with no tape, or no input
 * that needs a gradient, nothing is recorded or saved. */
nc_status ag_output(nc_tape *t, const char *op, nc_backward_fn fn, int n, nc_node *const *in, nc_tensor *y,
                    nc_node **out, nc_ag_ctx **ctx);

#endif

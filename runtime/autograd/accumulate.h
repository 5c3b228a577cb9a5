/* Gradient accumulation (autograd-internal). */
#ifndef NETCL_AUTOGRAD_ACCUMULATE_H
#define NETCL_AUTOGRAD_ACCUMULATE_H

#include "netcl/tensor.h"

/* *out = a + b (same shape). */
nc_status nc_ag_accumulate(nc_tensor *a, nc_tensor *b, nc_tensor **out);

#endif

/* Filling tensors: constants, ranges and random draws. All run on the tensor's device. */
#ifndef NETCL_CREATION_H
#define NETCL_CREATION_H

#include "random.h"
#include "tensor.h"

/* t[...] = value (converted to t's dtype). Any layout. */
nc_status nc_fill(nc_tensor *t, double value);

/* t[i] = start + i * step over the flat (row-major) index. */
nc_status nc_arange_fill(nc_tensor *t, double start, double step);

/* Uniform on [lo, hi) and normal(mean, std), consuming numel(t) counters of g. Floating
 * dtypes only (NC_ERR_DTYPE otherwise). */
nc_status nc_uniform(nc_tensor *t, nc_rng *g, double lo, double hi);
nc_status nc_normal(nc_tensor *t, nc_rng *g, double mean, double std);

#endif

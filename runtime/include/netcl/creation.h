/* Filling tensors: constants, ranges and random draws. All run on the tensor's device. */
#ifndef NETCL_CREATION_H
#define NETCL_CREATION_H

#include "random.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* t[...] = value (converted to t's dtype). Any layout. */
nc_status nc_fill(nc_tensor *t, double value);

/* t[i] = start + i * step over the flat (row-major) index. */
nc_status nc_arange_fill(nc_tensor *t, double start, double step);

/* Uniform on [lo, hi) and normal(mean, std), consuming numel(t) counters of g. Floating
 * dtypes only (NC_ERR_DTYPE otherwise). */
nc_status nc_uniform(nc_tensor *t, nc_rng *g, double lo, double hi);
nc_status nc_normal(nc_tensor *t, nc_rng *g, double mean, double std);

/* The draws below work on any dtype and layout; element i (flat, row-major) uses counter
 * offset + i, so every backend gives the same values. */

/* t[i] = 1 with probability p[i] (p: float32 or float64, broadcast to t's shape; values
 * outside [0, 1] act as 0 or 1), or with probability prob when p is NULL (0 <= prob <= 1). */
nc_status nc_bernoulli(nc_tensor *t, nc_rng *g, nc_tensor *p, double prob);

/* Integers uniform on [lo, hi) (lo < hi). */
nc_status nc_randint(nc_tensor *t, nc_rng *g, int64_t lo, int64_t hi);

/* A uniformly random permutation of 0 .. n-1 into the 1-D t of size n (sorts random keys). */
nc_status nc_randperm(nc_tensor *t, nc_rng *g);

#ifdef __cplusplus
}
#endif

#endif

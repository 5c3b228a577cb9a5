/* Joining and splitting tensors along a dim (0-based): cat and stack copy into a new tensor;
 * split and chunk return views. */
#ifndef NETCL_JOIN_H
#define NETCL_JOIN_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Concatenation of n tensors along dim; all have one ndim and equal sizes outside dim (1-D
 * empty tensors are skipped, as in PyTorch). The dtype is the promotion of all. */
nc_status nc_cat(int n, nc_tensor *const *ts, int dim, nc_tensor **out);

/* The n tensors (one shape) stacked along a new dim (0..ndim). */
nc_status nc_stack(int n, nc_tensor *const *ts, int dim, nc_tensor **out);

/* Views of consecutive slices of dim with the given sizes (their sum is x's size there). parts
 * receives n new references. */
nc_status nc_split(nc_tensor *x, int dim, int n, const int64_t *sizes, nc_tensor **parts);

/* Sizes of the pieces splitting len into pieces of `size` (the last may be smaller): fills at
 * most max entries and returns the count (0 for len 0). size must be > 0. */
int nc_split_sizes(int64_t len, int64_t size, int64_t *sizes, int max);

#ifdef __cplusplus
}
#endif

#endif

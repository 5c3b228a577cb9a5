/* Ops driven by index tensors: index_select, gather, scatter_add, one_hot. Index tensors hold
 * 0-based positions as int64 (int32 is accepted and widened). Positions are checked before any
 * kernel runs, which waits for the device once per call: an out-of-range position is
 * NC_ERR_INDEX ("index 12 is out of range for dim 2 of size 10"), another dtype NC_ERR_DTYPE.
 * Dims are 0-based. Results are deterministic (scatter_add adds in index order). */
#ifndef NETCL_INDEX_H
#define NETCL_INDEX_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x's entries at positions idx (1-D) along dim: out has x's shape with dim resized to len(idx). */
nc_status nc_index_select(nc_tensor *x, int dim, nc_tensor *idx, nc_tensor **out);
nc_status nc_index_select_into(nc_tensor *dst, nc_tensor *x, int dim, nc_tensor *idx);

/* out[..., j, ...] = x[..., idx[..., j, ...], ...] along dim. idx has x's ndim and no larger
 * sizes than x outside dim; out has idx's shape. */
nc_status nc_gather(nc_tensor *x, int dim, nc_tensor *idx, nc_tensor **out);
nc_status nc_gather_into(nc_tensor *dst, nc_tensor *x, int dim, nc_tensor *idx);

/* x + src scattered along dim: out[..., idx[..., j, ...], ...] += src[..., j, ...]. idx has x's
 * ndim and no larger sizes than src, nor than x outside dim. src takes x's dtype. In place when
 * dst is x. */
nc_status nc_scatter_add(nc_tensor *x, int dim, nc_tensor *idx, nc_tensor *src, nc_tensor **out);
nc_status nc_scatter_add_into(nc_tensor *dst, nc_tensor *x, int dim, nc_tensor *idx, nc_tensor *src);

/* int64 one-hot rows of n classes: out[..., c] = (idx[...] == c). n < 0 takes max(idx) + 1. */
nc_status nc_one_hot(nc_tensor *idx, int64_t n, nc_tensor **out);

#ifdef __cplusplus
}
#endif

#endif

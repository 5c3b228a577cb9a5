/* Sorting along a dim (0-based). The order is total and the same on every backend: numbers by
 * value with nan above +inf, equal values by position, so results (and their int64 positions)
 * are deterministic and stable. */
#ifndef NETCL_SORT_H
#define NETCL_SORT_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* values (x's dtype) and indices (int64 positions in x) of x sorted along dim. Either output
 * pointer may be NULL when not wanted. */
nc_status nc_sort(nc_tensor *x, int dim, bool descending, nc_tensor **values, nc_tensor **indices);

/* The k largest (or smallest) entries along dim, in sorted order. 0 <= k <= size of dim. */
nc_status nc_topk(nc_tensor *x, int64_t k, int dim, bool largest, nc_tensor **values, nc_tensor **indices);

#ifdef __cplusplus
}
#endif

#endif

/* Reductions over any set of dims (sum mean prod max min argmax argmin var std norm logsumexp
 * any all), cumulative sums, and softmax / log_softmax, on any device and layout.
 *
 * Dims are 0-based. Results: sum, prod and cumsum keep float dtypes and give int64 for integer
 * and bool inputs; mean, var, std, norm, logsumexp and softmax give float32 for integer and bool
 * inputs; max and min keep the dtype; argmax and argmin give int64 positions (0-based, counted
 * row-major over the reduced dims; the first of equal values; nan counts as the extreme); any
 * and all give bool. nan propagates through every reduction except any/all and argmax/argmin.
 * Reductions are deterministic: the same inputs give the same bits on a device, every run.
 * An empty reduction gives the identity (sum 0, prod 1, any false, all true, logsumexp -inf,
 * mean and var nan); max, min, argmax and argmin of nothing are NC_ERR_SHAPE.
 *
 * _into forms write into dst of any layout (shape as the result; castable as for elementwise
 * ops). Errors: NC_ERR_INDEX (dim out of range or repeated), NC_ERR_SHAPE, NC_ERR_DTYPE. */
#ifndef NETCL_REDUCE_H
#define NETCL_REDUCE_H

#include "op_desc.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif


/* p = 2, correction = 1. */
nc_reduce_args nc_reduce_defaults(void);

/* op over dims[0..ndims) of x (ndims == 0: every dim). keepdim keeps reduced dims as size 1.
 * args may be NULL (defaults). */
nc_status nc_reduce(nc_op op, nc_tensor *x, int ndims, const int *dims, bool keepdim,
                    const nc_reduce_args *args, nc_tensor **out);
nc_status nc_reduce_into(nc_op op, nc_tensor *dst, nc_tensor *x, int ndims, const int *dims, bool keepdim,
                         const nc_reduce_args *args);

/* max or min (op) along dim with the positions: values (x's dtype) and indices (int64). */
nc_status nc_reduce_indexed(nc_op op, nc_tensor *x, int dim, bool keepdim, nc_tensor **values,
                            nc_tensor **indices);

/* Inclusive prefix sum along dim. */
nc_status nc_cumsum(nc_tensor *x, int dim, nc_tensor **out);
nc_status nc_cumsum_into(nc_tensor *dst, nc_tensor *x, int dim);

/* softmax or log_softmax (op) along dim, computed as exp(x - max) / sum: stable for any
 * magnitude. */
nc_status nc_softmax(nc_op op, nc_tensor *x, int dim, nc_tensor **out);
nc_status nc_softmax_into(nc_op op, nc_tensor *dst, nc_tensor *x, int dim);

#ifdef __cplusplus
}
#endif

#endif

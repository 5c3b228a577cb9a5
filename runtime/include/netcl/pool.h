/* 2-D pooling over NCHW (or CHW) tensors, float32 or float64: max (with indices), average and
 * adaptive average, each with its backward op. */
#ifndef NETCL_POOL_H
#define NETCL_POOL_H

#include <stdbool.h>
#include "op_desc.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif


/* Defaults for max/avg pooling with kernel (kh, kw): stride = kernel, padding 0, dilation 1,
 * floor mode, count_include_pad true. */
nc_pool2d_desc nc_pool2d_defaults(int kind, int64_t kh, int64_t kw);

/* y = pool(x); for max pooling *indices (int64, shaped like y) receives the flat h*W+w
 * position of each maximum in its input plane (pass NULL for avg kinds). NaN wins a max
 * window, as in PyTorch. Errors: padding larger than half the kernel, an output size < 1,
 * x not 3-D or 4-D. */
nc_status nc_pool2d(nc_tensor *x, const nc_pool2d_desc *params, nc_tensor **out, nc_tensor **indices);

/* Shorthands for nc_pool2d. */
nc_status nc_max_pool2d(nc_tensor *x, const nc_pool2d_desc *params, nc_tensor **out, nc_tensor **indices);
nc_status nc_avg_pool2d(nc_tensor *x, const nc_pool2d_desc *params, nc_tensor **out);
nc_status nc_adaptive_avg_pool2d(nc_tensor *x, int64_t oh, int64_t ow, nc_tensor **out);

/* dx (shaped like the forward input, input_shape) from dy; max pooling needs the indices. */
nc_status nc_pool2d_backward(nc_tensor *dy, nc_tensor *indices, int input_ndim, const int64_t *input_shape,
                             const nc_pool2d_desc *params, nc_tensor **dx);
nc_status nc_max_pool2d_backward(nc_tensor *dy, nc_tensor *indices, int input_ndim,
                                 const int64_t *input_shape, const nc_pool2d_desc *params, nc_tensor **dx);
nc_status nc_avg_pool2d_backward(nc_tensor *dy, int input_ndim, const int64_t *input_shape,
                                 const nc_pool2d_desc *params, nc_tensor **dx);
nc_status nc_adaptive_avg_pool2d_backward(nc_tensor *dy, int input_ndim, const int64_t *input_shape,
                                          nc_tensor **dx);

#ifdef __cplusplus
}
#endif

#endif

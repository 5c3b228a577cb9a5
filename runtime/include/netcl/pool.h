/* 2-D pooling over NCHW (or CHW) tensors, float32 or float64: max (with indices), average and
 * adaptive average, each with its backward op. */
#ifndef NETCL_POOL_H
#define NETCL_POOL_H

#include <stdbool.h>
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { NC_POOL_MAX = 0, NC_POOL_AVG = 1, NC_POOL_ADAPTIVE_AVG = 2 };

typedef struct nc_pool2d_desc {
  int kind;                                              /* NC_POOL_* */
  int64_t kernel[2], stride[2], padding[2], dilation[2]; /* (h, w); max and avg */
  bool ceil_mode;                                        /* max and avg: output size rounds up */
  bool count_include_pad;                                /* avg: padded positions count in the divisor */
  int64_t out_size[2];                                   /* adaptive: the output size; max/avg: derived */
  /* derived by nc_pool2d_plan */
  int64_t planes, h, w, oh, ow; /* planes = N*C */
} nc_pool2d_desc;

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

/* Normalization layers, float32 or float64: batch norm, layer norm and RMS norm. Forward ops
 * return what the backward op needs (mean and inverse std); backward ops are fused kernels
 * that return the input gradient and the affine gradients together. */
#ifndef NETCL_NORM_H
#define NETCL_NORM_H

#include <stdbool.h>
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x [N, C, *]. training: normalizes with the batch mean and biased variance, returns them in
 * *save_mean and *save_invstd ([C]), and when running_mean/running_var ([C]) are given,
 * updates them in place: r = (1 - momentum) r + momentum * stat, with the unbiased variance.
 * Inference (training false): normalizes with the running stats (required), and *save_mean,
 * *save_invstd are the running mean and 1/sqrt(running_var + eps). weight, bias: [C] or NULL.
 * Errors: fewer than 2 values per channel in training. */
nc_status nc_batch_norm(nc_tensor *x, nc_tensor *weight, nc_tensor *bias, nc_tensor *running_mean,
                        nc_tensor *running_var, bool training, double momentum, double eps, nc_tensor **y,
                        nc_tensor **save_mean, nc_tensor **save_invstd);

/* Gradients of batch norm given the saved mean/invstd. training selects the formula (batch
 * statistics depend on x; running ones do not). dx, dweight, dbias may be NULL when not
 * wanted; dweight/dbias need weight. */
nc_status nc_batch_norm_backward(nc_tensor *dy, nc_tensor *x, nc_tensor *weight, nc_tensor *save_mean,
                                 nc_tensor *save_invstd, bool training, nc_tensor **dx, nc_tensor **dweight,
                                 nc_tensor **dbias);

/* Layer norm over the last `normalized_ndim` dims of x; weight and bias (or NULL) have those
 * dims' shape. *mean and *rstd have x's leading dims. */
nc_status nc_layer_norm(nc_tensor *x, int normalized_ndim, nc_tensor *weight, nc_tensor *bias, double eps,
                        nc_tensor **y, nc_tensor **mean, nc_tensor **rstd);
nc_status nc_layer_norm_backward(nc_tensor *dy, nc_tensor *x, int normalized_ndim, nc_tensor *weight,
                                 nc_tensor *mean, nc_tensor *rstd, nc_tensor **dx, nc_tensor **dweight,
                                 nc_tensor **dbias);

/* RMS norm: y = x / sqrt(mean(x^2) + eps) * weight over the last `normalized_ndim` dims. */
nc_status nc_rms_norm(nc_tensor *x, int normalized_ndim, nc_tensor *weight, double eps, nc_tensor **y,
                      nc_tensor **rstd);
nc_status nc_rms_norm_backward(nc_tensor *dy, nc_tensor *x, int normalized_ndim, nc_tensor *weight,
                               nc_tensor *rstd, nc_tensor **dx, nc_tensor **dweight);

#ifdef __cplusplus
}
#endif

#endif

/* 2-D convolution over NCHW tensors (float32 or float64), forward and the two gradients that
 * autograd composes: input and weight (the bias gradient is a sum of dy over N, H, W). */
#ifndef NETCL_CONV_H
#define NETCL_CONV_H

#include "op_desc.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif


/* Checks x [N,C,H,W] and weight [O, C/groups, KH, KW] against the parameters and fills the
 * derived fields of p. Errors (NC_ERR_SHAPE/ARG) name the problem: "groups 3 does not divide
 * the 4 input channels", "kernel 5x5 (dilated) is larger than the padded input 4x4", ... */
nc_status nc_conv2d_plan(nc_conv2d_desc *p, const nc_tensor *x, const nc_tensor *weight);

/* y [N, O, OH, OW] = conv2d(x, weight) + bias (bias [O] or NULL). */
nc_status nc_conv2d(nc_tensor *x, nc_tensor *weight, nc_tensor *bias, const nc_conv2d_desc *params,
                    nc_tensor **out);

/* d loss / d x [N,C,H,W] from dy [N,O,OH,OW] and weight. input_shape gives (N, C, H, W): the
 * output size does not determine H and W when stride > 1. */
nc_status nc_conv2d_backward_input(nc_tensor *dy, nc_tensor *weight, const int64_t input_shape[4],
                                   const nc_conv2d_desc *params, nc_tensor **dx);

/* d loss / d weight [O, C/groups, KH, KW] from dy and x. weight_shape gives (O, C/g, KH, KW). */
nc_status nc_conv2d_backward_weight(nc_tensor *dy, nc_tensor *x, const int64_t weight_shape[4],
                                    const nc_conv2d_desc *params, nc_tensor **dw);

#ifdef __cplusplus
}
#endif

#endif

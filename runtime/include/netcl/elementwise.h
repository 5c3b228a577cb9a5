/* Elementwise ops: unary math, binary arithmetic and comparisons with NumPy broadcasting and
 * PyTorch type promotion, clamp, where and masked_fill, on any device and any layout.
 *
 * Every op has two forms. nc_X(..., &out) allocates a contiguous result on the inputs' device.
 * nc_X_into(dst, ...) writes into an existing tensor of any layout (in-place ops pass an input
 * as dst): dst must have the broadcast shape, must not be an expanded view, and must be able to
 * hold the result dtype (a float result needs a float dst; an integer result an integer or float
 * dst). Inputs may overlap dst; they are copied first when their layouts differ from dst's.
 *
 * Promotion: bool < uint8 < int32 < int64 < float32 < float64. A scalar does not widen a tensor
 * of its own kind: an integer scalar keeps an integer tensor's dtype (bool becomes int64), a
 * float scalar keeps a float tensor's dtype and turns integer or bool tensors into float32.
 * Results follow the op's rule in the op table (div and the math functions give floats,
 * comparisons give bool). Errors: NC_ERR_SHAPE (shapes cannot be broadcast), NC_ERR_DTYPE (an
 * op does not take a dtype), NC_ERR_DEVICE (operands on different devices). */
#ifndef NETCL_ELEMENTWISE_H
#define NETCL_ELEMENTWISE_H

#include "op_desc.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif


/* The dtype holding a tensor of dtype d combined with scalar s (rules above). */
nc_dtype nc_dtype_with_scalar(nc_dtype d, nc_scalar s);

/* NumPy broadcasting of two shapes. Errors: NC_ERR_SHAPE ("shapes [2,3] and [4] cannot be
 * broadcast"). */
nc_status nc_broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b, int *ndim, int64_t *shape);

/* The dtype op gives for operands a and b (b unused for unary ops): promotion, then the op's
 * result rule. Errors: NC_ERR_DTYPE when the op does not take the promoted dtype. */
nc_status nc_result_dtype(nc_op op, const nc_operand *a, const nc_operand *b, nc_dtype *out);

/* Unary family (abs, exp, relu, isnan, ...; not clamp). */
nc_status nc_unary(nc_op op, nc_tensor *x, nc_tensor **out);
nc_status nc_unary_into(nc_op op, nc_tensor *dst, nc_tensor *x);

/* clamp(x, lo, hi); a NULL bound is open. Float bounds on an integer tensor give float32. */
nc_status nc_clamp(nc_tensor *x, const nc_scalar *lo, const nc_scalar *hi, nc_tensor **out);
nc_status nc_clamp_into(nc_tensor *dst, nc_tensor *x, const nc_scalar *lo, const nc_scalar *hi);

/* Binary family (add sub mul div pow maximum minimum eq ne lt le gt ge); at least one operand
 * is a tensor. An integer tensor raised to a negative integer scalar is NC_ERR_ARG. */
nc_status nc_binary(nc_op op, nc_operand a, nc_operand b, nc_tensor **out);
nc_status nc_binary_into(nc_op op, nc_tensor *dst, nc_operand a, nc_operand b);

/* cond ? a : b with cond a bool tensor; all three broadcast together. */
nc_status nc_where(nc_tensor *cond, nc_operand a, nc_operand b, nc_tensor **out);
nc_status nc_where_into(nc_tensor *dst, nc_tensor *cond, nc_operand a, nc_operand b);

/* x with value where mask (bool, broadcast to x's shape) is true; value takes x's dtype. */
nc_status nc_masked_fill(nc_tensor *x, nc_tensor *mask, nc_scalar value, nc_tensor **out);
nc_status nc_masked_fill_into(nc_tensor *dst, nc_tensor *x, nc_tensor *mask, nc_scalar value);

#ifdef __cplusplus
}
#endif

#endif

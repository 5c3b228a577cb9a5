/* Matrix products: matmul (batched, broadcasting), mm, bmm, linear. Operands are float32 or
 * float64 tensors of one dtype on one device; transposed and expanded operands are read
 * through their strides, without copies. Results are new contiguous tensors (one reference
 * to the caller). Gradients are these same products on transposed views (autograd composes
 * them), so there is no separate backward op. */
#ifndef NETCL_LINALG_H
#define NETCL_LINALG_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* PyTorch's matmul: 1-D @ 1-D is a dot product (0-dim result); a 1-D left operand is a row
 * and a 1-D right operand a column (the added dim is removed again); otherwise the last two
 * dims multiply and the leading (batch) dims broadcast. Errors: NC_ERR_SHAPE ("inner
 * dimensions 3 and 4 do not match ([2,3] @ [4,5])", batch dims that do not broadcast, 0-dim
 * operands), NC_ERR_DTYPE, NC_ERR_DEVICE (operands on different devices). */
nc_status nc_matmul(nc_tensor *a, nc_tensor *b, nc_tensor **out);

/* [M,K] @ [K,N] -> [M,N]; both operands must be 2-D. */
nc_status nc_mm(nc_tensor *a, nc_tensor *b, nc_tensor **out);

/* [B,M,K] @ [B,K,N] -> [B,M,N]; both operands 3-D with the same B (no broadcasting). */
nc_status nc_bmm(nc_tensor *a, nc_tensor *b, nc_tensor **out);

/* x @ weight^T + bias: x [..., in] (at least 1-D), weight [out, in], bias [out] or NULL.
 * Result [..., out]. */
nc_status nc_linear(nc_tensor *x, nc_tensor *weight, nc_tensor *bias, nc_tensor **out);

/* c = alpha * a @ b + beta * c, in place: a [M,K] or [B,M,K], b [K,N] or [B,K,N] (batch
 * dims broadcast), c [M,N] or [B,M,N] with non-overlapping elements (any strides). With
 * beta = 0, c's old values are not read (NaN there does not propagate). */
nc_status nc_gemm(nc_tensor *a, nc_tensor *b, nc_tensor *c, double alpha, double beta);

/* Matmul precision, process-wide: "highest" (float32 throughout, the default), "high" or
 * "medium". Float32 matrix products and all three convolution passes on a device with tensor
 * cores (NVIDIA OpenCL devices of compute capability 8.0 or later) then round their inputs,
 * to tf32 (10 mantissa bits) under "high" (nc_device_info.tf32), to bfloat16 (7 mantissa bits)
 * under "medium" (nc_device_info.bf16_mma; tf32 where only that is there), and accumulate in
 * float32. Every other device, and float64, keeps float32 arithmetic.
 * Errors: NC_ERR_ARG for another name. */
nc_status nc_set_matmul_precision(const char *mode);
const char *nc_get_matmul_precision(void);
/* What products run at on dev under the current mode: "medium" (bfloat16 tensor cores), "high"
 * (tf32 tensor cores) or "highest". */
const char *nc_matmul_precision_on(const nc_device *dev);

#ifdef __cplusplus
}
#endif

#endif

/* The descriptor types of the op dispatch contract: the values an op hands to a backend
 * besides tensors (numbers given with tensors, reduction arguments, convolution and pooling
 * geometry, loss reductions). They belong to the backend dispatch layer: the ops' headers
 * (elementwise.h, reduce.h, conv.h, pool.h, loss.h) include this one, and backends include it
 * without seeing any op. */
#ifndef NETCL_OP_DESC_H
#define NETCL_OP_DESC_H

#include <stdbool.h>
#include <stdint.h>
#include "optable.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A number given with a tensor: an integer (exact to 64 bits) or a real. (The constructors
 * below avoid compound literals, which C++ does not have.) */
typedef struct {
  bool is_int;
  int64_t i;
  double f;
} nc_scalar;

static inline nc_scalar nc_scalar_int(int64_t v) {
  nc_scalar s = {true, v, (double)v};
  return s;
}
static inline nc_scalar nc_scalar_float(double v) {
  nc_scalar s = {false, 0, v};
  return s;
}

/* A tensor, or (t == NULL) the scalar s. */
typedef struct {
  nc_tensor *t;
  nc_scalar s;
} nc_operand;

static inline nc_operand nc_operand_tensor(nc_tensor *t) {
  nc_operand o = {t, {false, 0, 0.0}};
  return o;
}
static inline nc_operand nc_operand_scalar(nc_scalar s) {
  nc_operand o = {NULL, s};
  return o;
}

typedef struct {
  double p; /* norm: the order; 2 (Euclidean), 1, INFINITY (max |x|), -INFINITY, 0 (count of nonzeros), any */
  double correction; /* var, std: the divisor is n - correction (1: unbiased, 0: population) */
} nc_reduce_args;

/* The matmul precision the ops layer hands to backends with each GEMM and convolution
 * (nc_set_matmul_precision): HIGHEST is float32 throughout; HIGH and MEDIUM let a backend with
 * reduced-precision matrix units use them (tf32 inputs, float32 accumulation). */
typedef enum { NC_PRECISION_HIGHEST = 0, NC_PRECISION_HIGH, NC_PRECISION_MEDIUM } nc_precision;

/* Geometry of one convolution; nc_conv2d_plan fills the derived fields. */
typedef struct nc_conv2d_desc {
  int64_t stride[2], padding[2], dilation[2]; /* (h, w); stride, dilation >= 1, padding >= 0 */
  int64_t groups;                             /* >= 1, divides C_in and C_out */
  /* derived */
  int64_t n, c_in, h, w; /* input */
  int64_t c_out, kh, kw; /* weight [c_out, c_in / groups, kh, kw] */
  int64_t oh, ow;        /* output */
  nc_precision precision; /* the process-wide matmul precision when planned */
} nc_conv2d_desc;

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

typedef enum { NC_REDUCTION_NONE = 0, NC_REDUCTION_MEAN = 1, NC_REDUCTION_SUM = 2 } nc_reduction;

#ifdef __cplusplus
}
#endif

#endif

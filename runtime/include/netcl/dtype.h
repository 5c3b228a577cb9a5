/* Element types. */
#ifndef NETCL_DTYPE_H
#define NETCL_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  NC_FLOAT32 = 0,
  NC_FLOAT64,
  NC_INT32,
  NC_INT64,
  NC_UINT8,
  NC_BOOL,     /* one byte, 0 or 1 */
  NC_BFLOAT16, /* a storage dtype (see nc_dtype_is_storage): bfloat16 bits, as uint16_t */
  NC_FLOAT16,  /* a storage dtype: IEEE 754 binary16 bits, as uint16_t */
  NC_DTYPE_COUNT
} nc_dtype;

size_t nc_dtype_size(nc_dtype d);
const char *nc_dtype_name(nc_dtype d);         /* "float32", ... */
/* also "float", "double", "long", "int", "byte", "half" (float16) and "bf16" */
nc_status nc_dtype_parse(const char *name, nc_dtype *out);
bool nc_dtype_is_float(nc_dtype d); /* float32, float64, bfloat16, float16 */
/* Storage dtypes (bfloat16, float16) are held and moved (creation, copies and conversions,
 * views, transfers, files); the ops that compute on them do it in float32 and round once into
 * the storage dtype: the matrix products, the elementwise unary and binary ops, the comparisons,
 * the activations and batch norm (netcl/optable.h, NC_DT_STORAGE), and, widening their operands
 * in the op layer (NC_DT_WIDEN), convolution, pooling, the other normalizations, the float
 * reductions, softmax and cross_entropy. Every other op says so (nc_op_check_dtype) and asks
 * for a conversion to float32 first. */
bool nc_dtype_is_storage(nc_dtype d);
bool nc_dtype_valid(int d);

/* The smaller dtype that holds both (PyTorch order: bool < uint8 < int32 < int64 < float16,
 * bfloat16 < float32 < float64; float16 with bfloat16 gives float32). */
nc_dtype nc_dtype_promote(nc_dtype a, nc_dtype b);

#ifdef __cplusplus
}
#endif

#endif

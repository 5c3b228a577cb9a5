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
  NC_BOOL, /* one byte, 0 or 1 */
  NC_DTYPE_COUNT
} nc_dtype;

size_t nc_dtype_size(nc_dtype d);
const char *nc_dtype_name(nc_dtype d);         /* "float32", ... */
nc_status nc_dtype_parse(const char *name, nc_dtype *out); /* also "float", "double", "long", "int" */
bool nc_dtype_is_float(nc_dtype d);
bool nc_dtype_valid(int d);

/* The smaller dtype that holds both (PyTorch order: bool < uint8 < int32 < int64 < float32 <
 * float64). */
nc_dtype nc_dtype_promote(nc_dtype a, nc_dtype b);

#ifdef __cplusplus
}
#endif

#endif

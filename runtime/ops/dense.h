/* Operand preparation shared by the layer ops (ops-internal). */
#ifndef NETCL_OPS_DENSE_H
#define NETCL_OPS_DENSE_H

#include "netcl/copy.h"

/* t itself (retained) when it is contiguous from element 0 of its storage, else a dense copy:
 * backend layer kernels index buffers from their start, without strides or offsets. NULL
 * gives NULL. */
static inline nc_status nc_dense_operand(nc_tensor *t, nc_tensor **out) {
  *out = NULL;
  if (!t) return NC_OK;
  if (t->offset == 0 && nc_tensor_is_contiguous(t)) {
    *out = nc_tensor_retain(t);
    return NC_OK;
  }
  return nc_to(t, nc_tensor_device(t), t->dtype, out);
}

#endif

/* PyTorch-style text form of a tensor. */
#ifndef NETCL_FORMAT_H
#define NETCL_FORMAT_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Formats t ("tensor([...], dtype=float32, device=cpu)"); large tensors are elided with "...".
 * *out is malloc'd; the caller frees it. */
nc_status nc_tensor_format(nc_tensor *t, char **out);

#ifdef __cplusplus
}
#endif

#endif

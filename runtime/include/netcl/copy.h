/* Copies between layouts, dtypes and devices. */
#ifndef NETCL_COPY_H
#define NETCL_COPY_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst[...] = src[...], converting dtype; shapes must match, or src must broadcast to dst.
 * dst and src may live on different devices. */
nc_status nc_copy(nc_tensor *dst, nc_tensor *src);

/* A contiguous tensor with t's values: t itself (retained) when already contiguous. */
nc_status nc_contiguous(nc_tensor *t, nc_tensor **out);

/* A contiguous copy on dev with dtype. */
nc_status nc_to(nc_tensor *t, nc_device *dev, nc_dtype dtype, nc_tensor **out);

/* nc_to without waiting for a read to the host: when dev is the CPU backend and t lives on a
 * device with a queue, the result's values arrive through nc_storage_read_async, and the result
 * is pending until they land (nc_storage_is_ready, nc_storage_wait on its storage; any use of it
 * waits first). The read sees t as the work queued before the call leaves it. Every other pair
 * of devices gives nc_to, whose writes to a device never wait anyway. */
nc_status nc_to_async(nc_tensor *t, nc_device *dev, nc_dtype dtype, nc_tensor **out);

/* view when possible, else a contiguous copy viewed with shape (one size may be -1). */
nc_status nc_reshape(nc_tensor *t, int ndim, const int64_t *shape, nc_tensor **out);

/* Reads any tensor's values to host memory as a contiguous array of its dtype. */
nc_status nc_read_values(nc_tensor *t, void *dst, size_t nbytes);

#ifdef __cplusplus
}
#endif

#endif

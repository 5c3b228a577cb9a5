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

/* view when possible, else a contiguous copy viewed with shape (one size may be -1). */
nc_status nc_reshape(nc_tensor *t, int ndim, const int64_t *shape, nc_tensor **out);

/* Reads any tensor's values to host memory as a contiguous array of its dtype. */
nc_status nc_read_values(nc_tensor *t, void *dst, size_t nbytes);

#ifdef __cplusplus
}
#endif

#endif

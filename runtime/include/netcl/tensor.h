/* Tensors: a header (dtype, shape, strides in elements, offset) over refcounted storage.
 * Views share the storage. Functions that return a new tensor give the caller one reference. */
#ifndef NETCL_TENSOR_H
#define NETCL_TENSOR_H

#include <stdbool.h>
#include <stdint.h>
#include "device.h"
#include "dtype.h"
#include "storage.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NC_MAX_DIMS 8

typedef struct nc_tensor {
  nc_dtype dtype;
  int ndim;
  int64_t shape[NC_MAX_DIMS];
  int64_t strides[NC_MAX_DIMS]; /* in elements; may be 0 (expand) */
  int64_t offset;               /* in elements */
  nc_storage *storage;
  int refcount;
} nc_tensor;

/* Checks a shape (0 <= ndim <= NC_MAX_DIMS, sizes >= 0, numel fits in int64). */
nc_status nc_shape_check(int ndim, const int64_t *shape);

/* Uninitialized contiguous tensor. flags: NC_ALLOC_*. */
nc_status nc_tensor_empty(nc_device *dev, nc_dtype dtype, int ndim, const int64_t *shape,
                          unsigned flags, nc_tensor **out);

/* A tensor over existing storage (retained) with the given layout; the layout must fit. */
nc_status nc_tensor_from_storage(nc_storage *s, nc_dtype dtype, int ndim, const int64_t *shape,
                                 const int64_t *strides, int64_t offset, nc_tensor **out);

nc_tensor *nc_tensor_retain(nc_tensor *t);
void nc_tensor_release(nc_tensor *t);

int64_t nc_tensor_numel(const nc_tensor *t);
size_t nc_tensor_nbytes(const nc_tensor *t); /* numel * element size */
bool nc_tensor_is_contiguous(const nc_tensor *t);
nc_device *nc_tensor_device(const nc_tensor *t);
void nc_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);

/* Views (share storage). Dimensions are 0-based. nc_tensor_view accepts one -1 size and fails
 * with NC_ERR_SHAPE when the layout cannot be viewed without a copy (nc_reshape copies). */
nc_status nc_tensor_view(nc_tensor *t, int ndim, const int64_t *shape, nc_tensor **out);
nc_status nc_tensor_transpose(nc_tensor *t, int d1, int d2, nc_tensor **out);
nc_status nc_tensor_permute(nc_tensor *t, const int *dims, nc_tensor **out);
nc_status nc_tensor_narrow(nc_tensor *t, int dim, int64_t start, int64_t len, nc_tensor **out);
nc_status nc_tensor_select(nc_tensor *t, int dim, int64_t index, nc_tensor **out);
nc_status nc_tensor_expand(nc_tensor *t, int ndim, const int64_t *shape, nc_tensor **out);
nc_status nc_tensor_squeeze(nc_tensor *t, int dim /* -1 = all size-1 dims */, nc_tensor **out);
nc_status nc_tensor_unsqueeze(nc_tensor *t, int dim, nc_tensor **out);
nc_status nc_tensor_alias(nc_tensor *t, nc_tensor **out); /* a new header, same layout */

/* Resolves one -1 in shape against numel; checks the product. */
nc_status nc_shape_infer(int64_t numel, int ndim, int64_t *shape);

/* Strides that view t (any layout) with the new shape without copying, if they exist. */
bool nc_view_strides(const nc_tensor *t, int ndim, const int64_t *shape, int64_t *strides);

/* Host transfers of a contiguous tensor's bytes. */
nc_status nc_tensor_write_host(nc_tensor *t, const void *src, size_t nbytes);
nc_status nc_tensor_read_host(const nc_tensor *t, void *dst, size_t nbytes);
/* nc_tensor_read_host without waiting (nc_storage_read_start): finish with nc_read_wait(out);
 * t (its storage) and dst must stay alive until then. */
nc_status nc_tensor_read_host_start(const nc_tensor *t, void *dst, size_t nbytes, nc_read *out);

#ifdef __cplusplus
}
#endif

#endif

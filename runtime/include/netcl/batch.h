/* Assembling batches for data loaders. */
#ifndef NETCL_BATCH_H
#define NETCL_BATCH_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst[k] = src[rows[k]] along dim 0, for k < n: dst has shape [n, src.shape[1:]...] and src's
 * dtype, on any device. rows are 0-based. With src in CPU memory, rows are gathered with
 * memcpy (into dst directly, or into one staging buffer written to dst's device in a single
 * transfer); otherwise each row is one device copy. Errors: NC_ERR_SHAPE, NC_ERR_DTYPE,
 * NC_ERR_INDEX (a row out of range), NC_ERR_OOM, device errors. */
nc_status nc_gather_rows(nc_tensor *dst, nc_tensor *src, const int64_t *rows, int64_t n);

#ifdef __cplusplus
}
#endif

#endif

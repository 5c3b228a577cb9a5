/* IDX files (the MNIST family's format), plain or gzip-compressed: a 4-byte magic (0, 0, type,
 * number of dims), the dims as big-endian 32-bit integers, then big-endian row-major data.
 * Element types map to netcl dtypes as: 0x08 unsigned byte -> uint8; 0x09 signed byte, 0x0B
 * 16-bit and 0x0C 32-bit integers -> int32 (netcl has no narrower signed type); 0x0D float ->
 * float32; 0x0E double -> float64. */
#ifndef NETCL_IDX_H
#define NETCL_IDX_H

#include <stddef.h>
#include "device.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads path (gzip is recognized by its magic, whatever the file's name) into a new tensor on
 * dev. Errors: NC_ERR_IO, NC_ERR_FORMAT (bad magic, an unknown type, 0 dims, data shorter or
 * longer than the dims need, a corrupt gzip stream; the message starts with the path),
 * NC_ERR_UNSUPPORTED (more dims than NC_MAX_DIMS), NC_ERR_OOM. */
nc_status nc_idx_load(const char *path, nc_device *dev, nc_tensor **out);

/* The same from a buffer of len bytes holding a whole file (not retained). */
nc_status nc_idx_parse(const void *buf, size_t len, nc_device *dev, nc_tensor **out);

#ifdef __cplusplus
}
#endif

#endif

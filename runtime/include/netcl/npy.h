/* NumPy .npy files (format versions 1.0, 2.0 and 3.0): one array with dtype f2 (float16) f4
 * f8 i4 i8 u1 or b1, little-endian. (NumPy has no bfloat16: saving one is NC_ERR_DTYPE.) */
#ifndef NETCL_NPY_H
#define NETCL_NPY_H

#include <stddef.h>
#include "device.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads path into a new contiguous tensor on dev (Fortran-ordered files are transposed into
 * row-major order). Errors: NC_ERR_IO, NC_ERR_FORMAT (bad magic, malformed header, data
 * shorter or longer than the shape needs, booleans other than 0/1; the message starts with
 * the path), NC_ERR_UNSUPPORTED (a valid dtype netcl has no type for, big-endian data),
 * NC_ERR_OOM. */
nc_status nc_npy_load(const char *path, nc_device *dev, nc_tensor **out);

/* A CPU tensor over the file itself, mapped with mmap (private: writes to the tensor change
 * copy-on-write pages, never the file), so a dataset larger than memory is paged in as it is
 * read. Column-major files and data not aligned for their dtype are read into memory instead,
 * as nc_npy_load does. Errors as nc_npy_load. */
nc_status nc_npy_map(const char *path, nc_tensor **out);

/* The same from a buffer of len bytes holding a whole file (not retained). */
nc_status nc_npy_parse(const void *buf, size_t len, nc_device *dev, nc_tensor **out);

/* Writes t (any device and layout) as a format 1.0 file in C order, atomically (temporary
 * file, fsync, rename). Errors: NC_ERR_IO, NC_ERR_OOM, or a device read error. */
nc_status nc_npy_save(const char *path, nc_tensor *t);

#ifdef __cplusplus
}
#endif

#endif

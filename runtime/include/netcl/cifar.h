/* CIFAR-10 binary batches (data_batch_1.bin ... data_batch_5.bin, test_batch.bin): records of
 * 3073 bytes, a label byte (0..9) then a 32x32 image as 1024 red, 1024 green and 1024 blue bytes,
 * each plane row-major. */
#ifndef NETCL_CIFAR_H
#define NETCL_CIFAR_H

#include <stddef.h>
#include "device.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NC_CIFAR10_RECORD 3073

/* The records of a buffer holding one batch file: *x uint8 [n, 3, 32, 32] and *y int64 [n] on
 * dev. Errors: NC_ERR_FORMAT (empty, a size that is not a whole number of records, a label
 * above 9: the message names the record), NC_ERR_OOM. */
nc_status nc_cifar10_parse(const void *buf, size_t len, nc_device *dev, nc_tensor **x, nc_tensor **y);

/* The records of n files, in order, as one pair of tensors (files are mapped, not read).
 * Errors as nc_cifar10_parse, prefixed by the file's path, and NC_ERR_IO. */
nc_status nc_cifar10_load(const char *const *paths, int n, nc_device *dev, nc_tensor **x, nc_tensor **y);

#ifdef __cplusplus
}
#endif

#endif

/* Shared by the file-reader fuzz targets (safetensors, npy, idx): the CPU device, and the
 * properties every reader must have. A violated property aborts. */
#ifndef NETCL_FUZZ_READER_H
#define NETCL_FUZZ_READER_H

#include "fuzz_common.h"

static nc_device *fuzz_cpu(void) {
  static nc_device *cpu;
  if (!cpu) fuzz_require(nc_init() == NC_OK && nc_device_find("cpu", &cpu) == NC_OK, "a CPU device");
  return cpu;
}

/* Clears the last message, so that a failure which sets none is noticed. */
static void fuzz_reset(void) { nc_error(NC_OK, "%s", ""); }

/* A reader either succeeds or fails with a message. */
static void fuzz_check_status(nc_status s) {
  fuzz_accepted = s == NC_OK;
  if (s != NC_OK)
    fuzz_require(nc_last_error()[0] && strcmp(nc_last_error(), "no error") != 0, "a failure explains itself");
}

/* Every value of a tensor a reader returned can be read back. */
static void fuzz_touch(nc_tensor *t) {
  size_t n = nc_tensor_nbytes(t);
  void *buf = malloc(n ? n : 1);
  if (!buf) return;
  fuzz_require(nc_read_values(t, buf, n) == NC_OK, "the tensor reads back");
  free(buf);
}

#endif

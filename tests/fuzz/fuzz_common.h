/* Shared by the reader fuzz targets: the CPU device, and the rule every target checks (a
 * failure always leaves a message). */
#ifndef NETCL_FUZZ_COMMON_H
#define NETCL_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "netcl/netcl.h"

static nc_device *fuzz_cpu(void) {
  static nc_device *cpu;
  if (!cpu && (nc_init() != NC_OK || nc_device_find("cpu", &cpu) != NC_OK)) {
    fprintf(stderr, "fuzz: no CPU device: %s\n", nc_last_error());
    abort();
  }
  return cpu;
}

/* The status of the last input, for the replay test's check of the corpus names: "ok-*"
 * inputs must load and "bad-*" inputs must fail. */
int nc_fuzz_last_status;

/* Clears the last message, so a failure that sets none is noticed. */
static void fuzz_reset(void) { nc_error(NC_OK, "%s", ""); }

static void fuzz_check_failure(nc_status s) {
  nc_fuzz_last_status = (int)s;
  if (s == NC_OK) return;
  const char *msg = nc_last_error();
  if (!msg[0] || !strcmp(msg, "no error")) {
    fprintf(stderr, "fuzz: %s without a message\n", nc_status_name(s));
    abort();
  }
}

/* Reads every value back: a tensor a reader returned must be fully readable. */
static void fuzz_touch(nc_tensor *t) {
  size_t n = nc_tensor_nbytes(t);
  void *buf = malloc(n ? n : 1);
  if (!buf) return;
  if (nc_read_values(t, buf, n) != NC_OK) abort();
  free(buf);
}

#endif

/* Storages filled with a known byte pattern, for the C tests of copies and reads: pattern(seed)
 * differs from seed to seed at every offset, so a copy from the wrong place or of the wrong age
 * shows. */
#ifndef NETCL_TEST_FILL_H
#define NETCL_TEST_FILL_H

#include <stdint.h>
#include <stdlib.h>
#include "check.h"
#include "netcl/netcl.h"

static void pattern(uint8_t *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 131u + seed * 17u + (i >> 8));
}

/* A new storage of n bytes on dev holding pattern(seed). */
static nc_storage *filled(nc_device *dev, size_t n, unsigned seed) {
  uint8_t *p = malloc(n);
  pattern(p, n, seed);
  nc_storage *s = NULL;
  CHECK_OK(nc_storage_new(dev, n, 0, &s));
  CHECK_OK(nc_storage_write(s, 0, p, n));
  free(p);
  return s;
}

#endif

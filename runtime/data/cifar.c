/* CIFAR-10 binary batches (netcl/cifar.h). */
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "io/file.h"
#include "netcl/cifar.h"

#define PIXELS (NC_CIFAR10_RECORD - 1)

static nc_status check(const unsigned char *p, size_t len) {
  if (len == 0) return nc_error(NC_ERR_FORMAT, "empty file: a CIFAR-10 batch holds records of %d bytes", NC_CIFAR10_RECORD);
  if (len % NC_CIFAR10_RECORD)
    return nc_error(NC_ERR_FORMAT,
                    "%zu bytes are not a whole number of CIFAR-10 records (%d bytes: a label and 3x32x32 pixels; "
                    "%zu bytes left over: truncated?)",
                    len, NC_CIFAR10_RECORD, len % NC_CIFAR10_RECORD);
  for (size_t r = 0; r < len / NC_CIFAR10_RECORD; r++)
    if (p[r * NC_CIFAR10_RECORD] > 9)
      return nc_error(NC_ERR_FORMAT, "record %zu has label %d; CIFAR-10 labels are 0..9 (is this CIFAR-100?)", r + 1,
                      p[r * NC_CIFAR10_RECORD]);
  return NC_OK;
}

/* Records [at, at + count) of the host buffers from p. */
static void unpack(const unsigned char *p, size_t count, unsigned char *xs, int64_t *ys) {
  for (size_t r = 0; r < count; r++) {
    ys[r] = p[r * NC_CIFAR10_RECORD];
    memcpy(xs + r * PIXELS, p + r * NC_CIFAR10_RECORD + 1, PIXELS);
  }
}

static nc_status make(nc_device *dev, size_t n, const unsigned char *xs, const int64_t *ys, nc_tensor **x,
                      nc_tensor **y) {
  const int64_t xshape[4] = {(int64_t)n, 3, 32, 32}, yshape = (int64_t)n;
  nc_tensor *tx = NULL, *ty = NULL;
  nc_status s = nc_tensor_empty(dev, NC_UINT8, 4, xshape, 0, &tx);
  if (s == NC_OK) s = nc_tensor_empty(dev, NC_INT64, 1, &yshape, 0, &ty);
  if (s == NC_OK) s = nc_tensor_write_host(tx, xs, n * PIXELS);
  if (s == NC_OK) s = nc_tensor_write_host(ty, ys, n * sizeof(int64_t));
  if (s != NC_OK) {
    nc_tensor_release(tx);
    nc_tensor_release(ty);
    return s;
  }
  *x = tx;
  *y = ty;
  return NC_OK;
}

static nc_status alloc_host(size_t n, unsigned char **xs, int64_t **ys) {
  *xs = malloc(n * PIXELS);
  *ys = malloc(n * sizeof(int64_t));
  if (!*xs || !*ys) {
    free(*xs);
    free(*ys);
    return nc_error(NC_ERR_OOM, "out of host memory for %zu CIFAR-10 records", n);
  }
  return NC_OK;
}

nc_status nc_cifar10_parse(const void *buf, size_t len, nc_device *dev, nc_tensor **x, nc_tensor **y) {
  NC_TRY(check(buf, len));
  size_t n = len / NC_CIFAR10_RECORD;
  unsigned char *xs;
  int64_t *ys;
  NC_TRY(alloc_host(n, &xs, &ys));
  unpack(buf, n, xs, ys);
  nc_status s = make(dev, n, xs, ys, x, y);
  free(xs);
  free(ys);
  return s;
}

nc_status nc_cifar10_load(const char *const *paths, int n, nc_device *dev, nc_tensor **x, nc_tensor **y) {
  if (n < 1) return nc_error(NC_ERR_ARG, "no CIFAR-10 files given");
  nc_file_view *v = calloc((size_t)n, sizeof *v);
  if (!v) return nc_error(NC_ERR_OOM, "out of host memory");
  nc_status s = NC_OK;
  size_t total = 0;
  int opened = 0;
  for (; s == NC_OK && opened < n; opened++) {
    s = nc_file_view_open(paths[opened], &v[opened]);
    if (s != NC_OK) break;
    s = check(v[opened].data, v[opened].size);
    if (s != NC_OK) nc_error_prefix(s, "%s", paths[opened]);
    total += v[opened].size / NC_CIFAR10_RECORD;
  }
  unsigned char *xs = NULL;
  int64_t *ys = NULL;
  if (s == NC_OK) s = alloc_host(total, &xs, &ys);
  if (s == NC_OK) {
    size_t at = 0;
    for (int i = 0; i < n; i++) {
      size_t count = v[i].size / NC_CIFAR10_RECORD;
      unpack(v[i].data, count, xs + at * PIXELS, ys + at);
      at += count;
    }
    s = make(dev, total, xs, ys, x, y);
    free(xs);
    free(ys);
  }
  for (int i = 0; i < opened && i < n; i++) nc_file_view_close(&v[i]);
  free(v);
  return s;
}

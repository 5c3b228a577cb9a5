#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "netcl/batch.h"
#include "netcl/copy.h"

static nc_status check(const nc_tensor *dst, const nc_tensor *src, const int64_t *rows, int64_t n) {
  if (src->ndim < 1) return nc_error(NC_ERR_SHAPE, "gather_rows: the source has no rows (0 dims)");
  bool ok = dst->ndim == src->ndim && dst->shape[0] == n;
  for (int d = 1; ok && d < src->ndim; d++) ok = dst->shape[d] == src->shape[d];
  if (!ok)
    return nc_error(NC_ERR_SHAPE, "gather_rows: the destination must be [%lld, <source row shape>]",
                    (long long)n);
  if (dst->dtype != src->dtype)
    return nc_error(NC_ERR_DTYPE, "gather_rows: dtypes differ (%s into %s)", nc_dtype_name(src->dtype),
                    nc_dtype_name(dst->dtype));
  for (int64_t k = 0; k < n; k++)
    if (rows[k] < 0 || rows[k] >= src->shape[0])
      return nc_error(NC_ERR_INDEX, "gather_rows: row %lld is out of range for %lld rows", (long long)rows[k],
                      (long long)src->shape[0]);
  return NC_OK;
}

static nc_status gather_per_row(nc_tensor *dst, nc_tensor *src, const int64_t *rows, int64_t n) {
  nc_status s = NC_OK;
  for (int64_t k = 0; k < n && s == NC_OK; k++) {
    nc_tensor *from = NULL, *to = NULL;
    s = nc_tensor_select(src, 0, rows[k], &from);
    if (s == NC_OK) s = nc_tensor_select(dst, 0, k, &to);
    if (s == NC_OK) s = nc_copy(to, from);
    nc_tensor_release(from);
    nc_tensor_release(to);
  }
  return s;
}

nc_status nc_gather_rows(nc_tensor *dst, nc_tensor *src, const int64_t *rows, int64_t n) {
  NC_TRY(check(dst, src, rows, n));
  if (n == 0 || nc_tensor_numel(dst) == 0) return NC_OK;
  const char *base = nc_storage_host_ptr(src->storage);
  if (!base || !nc_tensor_is_contiguous(src)) return gather_per_row(dst, src, rows, n);
  size_t esize = nc_dtype_size(src->dtype), row = (size_t)(nc_tensor_numel(src) / src->shape[0]) * esize;
  base += (size_t)src->offset * esize;
  char *host = nc_storage_host_ptr(dst->storage);
  bool direct = host && nc_tensor_is_contiguous(dst);
  char *buf = direct ? host + (size_t)dst->offset * esize : malloc(row * (size_t)n);
  if (!buf) return nc_error(NC_ERR_OOM, "gather_rows: out of host memory staging %zu bytes", row * (size_t)n);
  for (int64_t k = 0; k < n; k++) memcpy(buf + (size_t)k * row, base + (size_t)rows[k] * row, row);
  if (direct) {
    nc_storage_bump_version(dst->storage);
    return NC_OK;
  }
  /* One transfer for the whole batch; the write stages buf, so it can be freed at once. */
  nc_status s;
  if (nc_tensor_is_contiguous(dst)) {
    s = nc_tensor_write_host(dst, buf, row * (size_t)n);
    if (s == NC_OK) nc_storage_bump_version(dst->storage);
  } else {
    nc_tensor *tmp = NULL;
    s = nc_tensor_empty(nc_tensor_device(dst), dst->dtype, dst->ndim, dst->shape, 0, &tmp);
    if (s == NC_OK) s = nc_tensor_write_host(tmp, buf, row * (size_t)n);
    if (s == NC_OK) s = nc_copy(dst, tmp);
    nc_tensor_release(tmp);
  }
  free(buf);
  return s;
}

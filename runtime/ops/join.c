/* cat, stack (copies into slices of a new tensor) and split (views). */
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "support.h"
#include "netcl/join.h"

/* PyTorch skips 1-D empty tensors in cat whatever the others' rank. */
static bool skipped(const nc_tensor *t) { return t->ndim == 1 && t->shape[0] == 0; }

nc_status nc_cat(int n, nc_tensor *const *ts, int dim, nc_tensor **out) {
  if (n <= 0) return nc_error(NC_ERR_ARG, "cat needs at least one tensor");
  const nc_tensor *ref = NULL;
  nc_dtype dt = ts[0]->dtype;
  for (int i = 0; i < n; i++) {
    dt = nc_dtype_promote(dt, ts[i]->dtype);
    if (!ref && !skipped(ts[i])) ref = ts[i];
  }
  if (!ref) ref = ts[0];
  if (ref->ndim == 0) return nc_error(NC_ERR_SHAPE, "cat cannot join 0-dim tensors (stack them instead)");
  NC_TRY(nc_check_dim(dim, ref->ndim));
  nc_device *dev = nc_tensor_device(ts[0]);
  NC_TRY(nc_check_devices(dev, n, ts));
  int64_t shape[NC_MAX_DIMS], total = 0;
  memcpy(shape, ref->shape, sizeof shape);
  for (int i = 0; i < n; i++) {
    const nc_tensor *t = ts[i];
    if (skipped(t) && t != ref) continue;
    bool ok = t->ndim == ref->ndim;
    for (int d = 0; ok && d < t->ndim; d++) ok = d == dim || t->shape[d] == ref->shape[d];
    if (!ok) {
      char a[128], b[128];
      return nc_error(NC_ERR_SHAPE, "tensor %d has shape %s, which does not match %s outside dim %d", i + 1,
                      nc_shape_str(t->ndim, t->shape, a, sizeof a),
                      nc_shape_str(ref->ndim, ref->shape, b, sizeof b), dim + 1);
    }
    total += t->shape[dim];
  }
  shape[dim] = total;
  nc_tensor *r;
  NC_TRY(nc_tensor_empty(dev, dt, ref->ndim, shape, 0, &r));
  nc_status s = NC_OK;
  int64_t off = 0;
  for (int i = 0; i < n && s == NC_OK; i++) {
    if ((skipped(ts[i]) && ts[i] != ref) || ts[i]->shape[dim] == 0) continue;
    nc_tensor *slice;
    s = nc_tensor_narrow(r, dim, off, ts[i]->shape[dim], &slice);
    if (s == NC_OK) s = nc_copy(slice, ts[i]);
    nc_tensor_release(slice);
    off += ts[i]->shape[dim];
  }
  if (s != NC_OK)
    nc_tensor_release(r);
  else
    *out = r;
  return s;
}

nc_status nc_stack(int n, nc_tensor *const *ts, int dim, nc_tensor **out) {
  if (n <= 0) return nc_error(NC_ERR_ARG, "stack needs at least one tensor");
  for (int i = 1; i < n; i++) {
    bool ok = ts[i]->ndim == ts[0]->ndim;
    for (int d = 0; ok && d < ts[0]->ndim; d++) ok = ts[i]->shape[d] == ts[0]->shape[d];
    if (!ok) {
      char a[128], b[128];
      return nc_error(NC_ERR_SHAPE, "stack needs tensors of one shape; tensor %d has shape %s, tensor 1 %s",
                      i + 1, nc_shape_str(ts[i]->ndim, ts[i]->shape, a, sizeof a),
                      nc_shape_str(ts[0]->ndim, ts[0]->shape, b, sizeof b));
    }
  }
  if (ts[0]->ndim == NC_MAX_DIMS)
    return nc_error(NC_ERR_SHAPE, "stack adds a dim to tensors that have %d already", NC_MAX_DIMS);
  NC_TRY(nc_check_dim(dim, ts[0]->ndim + 1));
  nc_tensor **u = calloc((size_t)n, sizeof *u);
  if (!u) return nc_error(NC_ERR_OOM, "out of host memory");
  nc_status s = NC_OK;
  for (int i = 0; i < n && s == NC_OK; i++) s = nc_tensor_unsqueeze(ts[i], dim, &u[i]);
  if (s == NC_OK) s = nc_cat(n, u, dim, out);
  for (int i = 0; i < n; i++) nc_tensor_release(u[i]);
  free(u);
  return s;
}

nc_status nc_split(nc_tensor *x, int dim, int n, const int64_t *sizes, nc_tensor **parts) {
  if (x->ndim == 0) return nc_error(NC_ERR_SHAPE, "cannot split a 0-dim tensor");
  NC_TRY(nc_check_dim(dim, x->ndim));
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0) return nc_error(NC_ERR_ARG, "split size %lld is negative", (long long)sizes[i]);
    total += sizes[i];
  }
  if (total != x->shape[dim])
    return nc_error(NC_ERR_SHAPE, "split sizes add up to %lld but dim %d has size %lld", (long long)total,
                    dim + 1, (long long)x->shape[dim]);
  int64_t off = 0;
  for (int i = 0; i < n; i++) {
    nc_status s = nc_tensor_narrow(x, dim, off, sizes[i], &parts[i]);
    if (s != NC_OK) {
      while (i--) nc_tensor_release(parts[i]);
      return s;
    }
    off += sizes[i];
  }
  return NC_OK;
}

int nc_split_sizes(int64_t len, int64_t size, int64_t *sizes, int max) {
  int n = 0;
  for (int64_t off = 0; off < len && n < max; off += size) sizes[n++] = len - off < size ? len - off : size;
  return n;
}

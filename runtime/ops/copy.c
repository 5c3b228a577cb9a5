#include <stdlib.h>
#include <string.h>
#include "backend/dispatch.h"
#include "core/check.h"
#include "core/device_impl.h"
#include "netcl/copy.h"

/* src viewed with dst's shape: same shape, or broadcast (expand) to it. */
static nc_status broadcast_to(nc_tensor *src, const nc_tensor *dst, nc_tensor **out) {
  bool same = src->ndim == dst->ndim;
  for (int i = 0; same && i < dst->ndim; i++) same = src->shape[i] == dst->shape[i];
  if (same) return nc_tensor_alias(src, out);
  nc_status s = nc_tensor_expand(src, dst->ndim, dst->shape, out);
  if (s != NC_OK) return nc_error(NC_ERR_SHAPE, "copy: source shape cannot be broadcast to the destination's");
  return s;
}

/* Element range [lo, hi] a layout touches (numel > 0). */
static void extent(const nc_tensor *t, int64_t *lo, int64_t *hi) {
  *lo = *hi = t->offset;
  for (int i = 0; i < t->ndim; i++) {
    int64_t span = (t->shape[i] - 1) * t->strides[i];
    if (span < 0) *lo += span;
    else *hi += span;
  }
}

/* Whether two views of one storage may share elements (byte ranges intersect). */
static bool overlaps(const nc_tensor *a, const nc_tensor *b) {
  int64_t alo, ahi, blo, bhi;
  extent(a, &alo, &ahi);
  extent(b, &blo, &bhi);
  int64_t ea = (int64_t)nc_dtype_size(a->dtype), eb = (int64_t)nc_dtype_size(b->dtype);
  return alo * ea < (bhi + 1) * eb && blo * eb < (ahi + 1) * ea;
}

static bool same_layout(const nc_tensor *a, const nc_tensor *b) {
  if (a->dtype != b->dtype || a->offset != b->offset || a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i] || (a->shape[i] > 1 && a->strides[i] != b->strides[i])) return false;
  return true;
}

/* Between peer devices (nc_device_peers): contiguous values in dst's dtype move device to
 * device, queued without waiting; a cast or a layout change runs on the source's device before
 * and on the destination's after. */
static nc_status copy_peer(nc_tensor *dst, nc_tensor *s) {
  nc_device *dd = nc_tensor_device(dst), *sd = nc_tensor_device(s);
  nc_tensor *dense = NULL, *target = NULL;
  nc_status st = NC_OK;
  if (nc_tensor_is_contiguous(s) && s->dtype == dst->dtype) dense = nc_tensor_retain(s);
  else st = nc_to(s, sd, dst->dtype, &dense);
  if (st == NC_OK && nc_tensor_is_contiguous(dst)) target = nc_tensor_retain(dst);
  else if (st == NC_OK) st = nc_tensor_empty(dd, dst->dtype, dst->ndim, dst->shape, 0, &target);
  size_t es = nc_dtype_size(dst->dtype);
  if (st == NC_OK)
    st = nc_storage_copy_peer(target->storage, (size_t)target->offset * es, dense->storage, (size_t)dense->offset * es,
                              nc_tensor_nbytes(target));
  if (st == NC_OK && target != dst) st = nc_bk_copy(dst, target);
  nc_tensor_release(target);
  nc_tensor_release(dense);
  return st;
}

nc_status nc_copy(nc_tensor *dst, nc_tensor *src) {
  nc_tensor *s;
  NC_TRY(broadcast_to(src, dst, &s));
  nc_status st = NC_OK;
  if (nc_tensor_numel(dst) == 0) goto done;
  nc_storage_bump_version(dst->storage);
  nc_device *dd = nc_tensor_device(dst), *sd = nc_tensor_device(s);
  if (dd == sd) {
    if (dst->storage == s->storage && overlaps(dst, s)) {
      if (same_layout(dst, s)) goto done; /* t:copy_(t) */
      /* Kernels (and clEnqueueCopyBuffer) need disjoint operands: go through a copy. */
      nc_tensor *tmp = NULL;
      st = nc_to(s, sd, s->dtype, &tmp);
      if (st == NC_OK) st = nc_bk_copy(dst, tmp);
      nc_tensor_release(tmp);
      goto done;
    }
    st = nc_bk_copy(dst, s);
    goto done;
  }
  if (nc_device_peers(dd, sd)) {
    st = copy_peer(dst, s);
    goto done;
  }
  /* Between devices: values go through the host, already in dst's dtype. The write stages
   * the host array, so it can be freed at once. */
  nc_tensor *dense = NULL, *tmp = NULL;
  void *host = NULL;
  st = nc_to(s, sd, dst->dtype, &dense);
  size_t nbytes = dense ? nc_tensor_nbytes(dense) : 0;
  if (st == NC_OK && !(host = malloc(nbytes ? nbytes : 1)))
    st = nc_error(NC_ERR_OOM, "out of host memory staging %zu bytes", nbytes);
  if (st == NC_OK) st = nc_tensor_read_host(dense, host, nbytes);
  if (st == NC_OK && nc_tensor_is_contiguous(dst)) {
    st = nc_tensor_write_host(dst, host, nbytes);
  } else if (st == NC_OK) {
    st = nc_tensor_empty(dd, dst->dtype, dst->ndim, dst->shape, 0, &tmp);
    if (st == NC_OK) st = nc_tensor_write_host(tmp, host, nbytes);
    if (st == NC_OK) st = nc_bk_copy(dst, tmp);
  }
  free(host);
  nc_tensor_release(tmp);
  nc_tensor_release(dense);
done:
  nc_tensor_release(s);
  return st;
}

nc_status nc_to(nc_tensor *t, nc_device *dev, nc_dtype dtype, nc_tensor **out) {
  nc_tensor *r;
  NC_TRY(nc_tensor_empty(dev, dtype, t->ndim, t->shape, 0, &r));
  nc_status s = nc_copy(r, t);
  if (s != NC_OK) {
    nc_tensor_release(r);
    return s;
  }
  *out = r;
  return NC_OK;
}

nc_status nc_to_async(nc_tensor *t, nc_device *dev, nc_dtype dtype, nc_tensor **out) {
  nc_device *sd = nc_tensor_device(t);
  if (sd == dev || dev->info.kind != NC_DEVICE_CPU) return nc_to(t, dev, dtype, out);
  nc_tensor *dense = NULL, *r = NULL;
  /* the values in dtype, contiguous, on t's device (t itself when it is so already) */
  nc_status s = dtype == t->dtype ? nc_contiguous(t, &dense) : nc_to(t, sd, dtype, &dense);
  if (s == NC_OK) s = nc_tensor_empty(dev, dtype, t->ndim, t->shape, 0, &r);
  if (s == NC_OK)
    s = nc_storage_read_async(dense->storage, (size_t)dense->offset * nc_dtype_size(dtype), r->storage, 0,
                              nc_tensor_nbytes(r));
  nc_tensor_release(dense); /* the queue is in order: later work cannot reach the read's source */
  if (s != NC_OK) {
    nc_tensor_release(r);
    return s;
  }
  *out = r;
  return NC_OK;
}

nc_status nc_contiguous(nc_tensor *t, nc_tensor **out) {
  if (nc_tensor_is_contiguous(t)) {
    *out = nc_tensor_retain(t);
    return NC_OK;
  }
  return nc_to(t, nc_tensor_device(t), t->dtype, out);
}

nc_status nc_reshape(nc_tensor *t, int ndim, const int64_t *shape, nc_tensor **out) {
  int64_t sh[NC_MAX_DIMS], strides[NC_MAX_DIMS];
  if (ndim < 0 || ndim > NC_MAX_DIMS)
    return nc_error(NC_ERR_SHAPE, "a tensor has 0 to %d dims, got %d", NC_MAX_DIMS, ndim);
  if (ndim) memcpy(sh, shape, sizeof(int64_t) * (size_t)ndim);
  NC_TRY(nc_shape_infer(nc_tensor_numel(t), ndim, sh));
  if (nc_view_strides(t, ndim, sh, strides)) return nc_tensor_view(t, ndim, sh, out);
  nc_tensor *c;
  NC_TRY(nc_to(t, nc_tensor_device(t), t->dtype, &c));
  nc_status s = nc_tensor_view(c, ndim, sh, out);
  nc_tensor_release(c);
  return s;
}

nc_status nc_read_values(nc_tensor *t, void *dst, size_t nbytes) {
  nc_tensor *c;
  NC_TRY(nc_contiguous(t, &c));
  nc_status s = nc_tensor_read_host(c, dst, nbytes);
  nc_tensor_release(c);
  return s;
}

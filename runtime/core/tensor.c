#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "netcl/tensor.h"

nc_status nc_shape_check(int ndim, const int64_t *shape) {
  if (ndim < 0 || ndim > NC_MAX_DIMS)
    return nc_error(NC_ERR_SHAPE, "a tensor has 0 to %d dims, got %d", NC_MAX_DIMS, ndim);
  /* Sizes of 0 count as 1: a zero-size tensor still gets contiguous strides, which must not
   * overflow either. */
  int64_t span = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return nc_error(NC_ERR_SHAPE, "size %lld at dim %d is negative", (long long)shape[i], i + 1);
    int64_t s = shape[i] ? shape[i] : 1;
    if (span > INT64_MAX / s) return nc_error(NC_ERR_SHAPE, "shape has more than 2^63 elements");
    span *= s;
  }
  return NC_OK;
}

void nc_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    strides[i] = s;
    s *= shape[i] > 0 ? shape[i] : 1;
  }
}

static int64_t numel_of(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}

static nc_status new_header(nc_storage *s, nc_dtype dtype, int ndim, const int64_t *shape,
                            const int64_t *strides, int64_t offset, nc_tensor **out) {
  nc_tensor *t = calloc(1, sizeof *t);
  if (!t) return nc_error(NC_ERR_OOM, "out of host memory for a tensor header");
  t->dtype = dtype;
  t->ndim = ndim;
  if (ndim) {
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    memcpy(t->strides, strides, sizeof(int64_t) * (size_t)ndim);
  }
  t->offset = offset;
  t->storage = nc_storage_retain(s);
  t->refcount = 1;
  *out = t;
  return NC_OK;
}

nc_status nc_tensor_empty(nc_device *dev, nc_dtype dtype, int ndim, const int64_t *shape,
                          unsigned flags, nc_tensor **out) {
  if (!nc_dtype_valid(dtype)) return nc_error(NC_ERR_DTYPE, "invalid dtype %d", (int)dtype);
  NC_TRY(nc_shape_check(ndim, shape));
  int64_t numel = numel_of(ndim, shape);
  size_t esize = nc_dtype_size(dtype);
  if ((uint64_t)numel > SIZE_MAX / esize) return nc_error(NC_ERR_OOM, "tensor too large");
  nc_storage *s;
  NC_TRY(nc_storage_new(dev, (size_t)numel * esize, flags, &s));
  int64_t strides[NC_MAX_DIMS];
  nc_contiguous_strides(ndim, shape, strides);
  nc_status st = new_header(s, dtype, ndim, shape, strides, 0, out);
  nc_storage_release(s);
  return st;
}

nc_status nc_tensor_from_storage(nc_storage *s, nc_dtype dtype, int ndim, const int64_t *shape,
                                 const int64_t *strides, int64_t offset, nc_tensor **out) {
  if (!nc_dtype_valid(dtype)) return nc_error(NC_ERR_DTYPE, "invalid dtype %d", (int)dtype);
  NC_TRY(nc_shape_check(ndim, shape));
  if (offset < 0) return nc_error(NC_ERR_ARG, "negative storage offset %lld", (long long)offset);
  /* The extent the layout touches must lie inside the storage. */
  int64_t lo = offset, hi = offset;
  bool empty = false;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == 0) empty = true;
    int64_t span = (shape[i] - 1) * strides[i];
    if (span < 0) lo += span; else hi += span;
  }
  size_t esize = nc_dtype_size(dtype);
  if (!empty && (lo < 0 || (uint64_t)(hi + 1) * esize > nc_storage_nbytes(s)))
    return nc_error(NC_ERR_INDEX, "layout reaches outside its storage of %zu bytes", nc_storage_nbytes(s));
  return new_header(s, dtype, ndim, shape, strides, offset, out);
}

nc_tensor *nc_tensor_retain(nc_tensor *t) {
  __atomic_add_fetch(&t->refcount, 1, __ATOMIC_RELAXED);
  return t;
}

void nc_tensor_release(nc_tensor *t) {
  if (!t || __atomic_sub_fetch(&t->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
  nc_storage_release(t->storage);
  free(t);
}

int64_t nc_tensor_numel(const nc_tensor *t) { return numel_of(t->ndim, t->shape); }
size_t nc_tensor_nbytes(const nc_tensor *t) { return (size_t)nc_tensor_numel(t) * nc_dtype_size(t->dtype); }
nc_device *nc_tensor_device(const nc_tensor *t) { return nc_storage_device(t->storage); }

bool nc_tensor_is_contiguous(const nc_tensor *t) {
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] == 0) return true;
    if (t->shape[i] != 1 && t->strides[i] != s) return false;
    s *= t->shape[i];
  }
  return true;
}

static nc_status derived(nc_tensor *t, int ndim, const int64_t *shape, const int64_t *strides,
                         int64_t offset, nc_tensor **out) {
  return new_header(t->storage, t->dtype, ndim, shape, strides, offset, out);
}

static nc_status check_dim(const nc_tensor *t, int dim, int ndim) {
  if (dim < 0 || dim >= ndim)
    return nc_error(NC_ERR_INDEX, "dim %d out of range for a tensor with %d dims", dim + 1, t->ndim);
  return NC_OK;
}

nc_status nc_shape_infer(int64_t numel, int ndim, int64_t *shape) {
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == -1) {
      if (infer >= 0) return nc_error(NC_ERR_SHAPE, "only one size may be -1");
      infer = i;
    } else if (shape[i] < 0) {
      return nc_error(NC_ERR_SHAPE, "size %lld at dim %d is negative", (long long)shape[i], i + 1);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      return nc_error(NC_ERR_SHAPE, "cannot infer the -1 size: %lld elements do not divide into %lld",
                      (long long)numel, (long long)known);
    shape[infer] = numel / known;
    known = numel;
  }
  if (known != numel)
    return nc_error(NC_ERR_SHAPE, "shape has %lld elements but the tensor has %lld", (long long)known,
                    (long long)numel);
  return NC_OK;
}

/* Walks old dims in chunks whose elements are laid out with uniform stride, and splits each
 * chunk into the new sizes (the rule PyTorch's view uses). */
bool nc_view_strides(const nc_tensor *t, int ndim, const int64_t *shape, int64_t *strides) {
  int64_t numel = nc_tensor_numel(t);
  if (numel == 0 || t->ndim == 0) {
    nc_contiguous_strides(ndim, shape, strides);
    return true;
  }
  int view_d = ndim - 1;
  int64_t chunk_base_stride = t->strides[t->ndim - 1];
  int64_t tensor_numel = 1, view_numel = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    tensor_numel *= t->shape[d];
    if (d == 0 || (t->shape[d - 1] != 1 && t->strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = t->strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

nc_status nc_tensor_view(nc_tensor *t, int ndim, const int64_t *shape_in, nc_tensor **out) {
  if (ndim < 0 || ndim > NC_MAX_DIMS)
    return nc_error(NC_ERR_SHAPE, "a tensor has 0 to %d dims, got %d", NC_MAX_DIMS, ndim);
  int64_t shape[NC_MAX_DIMS], strides[NC_MAX_DIMS];
  if (ndim) memcpy(shape, shape_in, sizeof(int64_t) * (size_t)ndim);
  NC_TRY(nc_shape_infer(nc_tensor_numel(t), ndim, shape));
  if (!nc_view_strides(t, ndim, shape, strides))
    return nc_error(NC_ERR_SHAPE, "view of a non-contiguous tensor would need a copy "
                                  "(use reshape, or contiguous() first)");
  return derived(t, ndim, shape, strides, t->offset, out);
}

nc_status nc_tensor_alias(nc_tensor *t, nc_tensor **out) {
  return derived(t, t->ndim, t->shape, t->strides, t->offset, out);
}

nc_status nc_tensor_transpose(nc_tensor *t, int d1, int d2, nc_tensor **out) {
  NC_TRY(check_dim(t, d1, t->ndim));
  NC_TRY(check_dim(t, d2, t->ndim));
  int64_t shape[NC_MAX_DIMS], strides[NC_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  memcpy(strides, t->strides, sizeof strides);
  shape[d1] = t->shape[d2];
  shape[d2] = t->shape[d1];
  strides[d1] = t->strides[d2];
  strides[d2] = t->strides[d1];
  return derived(t, t->ndim, shape, strides, t->offset, out);
}

nc_status nc_tensor_permute(nc_tensor *t, const int *dims, nc_tensor **out) {
  int64_t shape[NC_MAX_DIMS], strides[NC_MAX_DIMS];
  bool seen[NC_MAX_DIMS] = {false};
  for (int i = 0; i < t->ndim; i++) {
    NC_TRY(check_dim(t, dims[i], t->ndim));
    if (seen[dims[i]]) return nc_error(NC_ERR_ARG, "permute: dim %d appears twice", dims[i] + 1);
    seen[dims[i]] = true;
    shape[i] = t->shape[dims[i]];
    strides[i] = t->strides[dims[i]];
  }
  return derived(t, t->ndim, shape, strides, t->offset, out);
}

nc_status nc_tensor_narrow(nc_tensor *t, int dim, int64_t start, int64_t len, nc_tensor **out) {
  NC_TRY(check_dim(t, dim, t->ndim));
  if (start < 0 || len < 0 || start > t->shape[dim] || len > t->shape[dim] - start)
    return nc_error(NC_ERR_INDEX, "narrow of %lld elements from position %lld is outside dim %d of size %lld",
                    (long long)len, (long long)start + 1, dim + 1, (long long)t->shape[dim]);
  int64_t shape[NC_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  shape[dim] = len;
  return derived(t, t->ndim, shape, t->strides, t->offset + start * t->strides[dim], out);
}

nc_status nc_tensor_select(nc_tensor *t, int dim, int64_t index, nc_tensor **out) {
  if (t->ndim == 0) return nc_error(NC_ERR_INDEX, "cannot index a 0-dim tensor");
  NC_TRY(check_dim(t, dim, t->ndim));
  if (index < 0 || index >= t->shape[dim])
    return nc_error(NC_ERR_INDEX, "index %lld is out of range for dim %d of size %lld",
                    (long long)index + 1, dim + 1, (long long)t->shape[dim]);
  int64_t shape[NC_MAX_DIMS], strides[NC_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < t->ndim; i++)
    if (i != dim) {
      shape[n] = t->shape[i];
      strides[n++] = t->strides[i];
    }
  return derived(t, n, shape, strides, t->offset + index * t->strides[dim], out);
}

nc_status nc_tensor_expand(nc_tensor *t, int ndim, const int64_t *shape_in, nc_tensor **out) {
  if (ndim < t->ndim || ndim > NC_MAX_DIMS)
    return nc_error(NC_ERR_SHAPE, "expand to %d dims from %d dims", ndim, t->ndim);
  int64_t shape[NC_MAX_DIMS], strides[NC_MAX_DIMS];
  int lead = ndim - t->ndim;
  for (int i = 0; i < ndim; i++) {
    int64_t want = shape_in[i];
    if (i < lead) {
      if (want < 0) return nc_error(NC_ERR_SHAPE, "expand: size -1 is not allowed for a new leading dim %d", i + 1);
      shape[i] = want;
      strides[i] = 0;
      continue;
    }
    int64_t have = t->shape[i - lead];
    if (want == -1) want = have;
    if (want == have) {
      shape[i] = have;
      strides[i] = t->strides[i - lead];
    } else if (have == 1 && want >= 0) {
      shape[i] = want;
      strides[i] = 0;
    } else {
      return nc_error(NC_ERR_SHAPE, "expand: size %lld at dim %d cannot become %lld (only size-1 dims expand)",
                      (long long)have, i - lead + 1, (long long)want);
    }
  }
  NC_TRY(nc_shape_check(ndim, shape));
  return derived(t, ndim, shape, strides, t->offset, out);
}

nc_status nc_tensor_squeeze(nc_tensor *t, int dim, nc_tensor **out) {
  int64_t shape[NC_MAX_DIMS], strides[NC_MAX_DIMS];
  int n = 0;
  if (dim >= 0) NC_TRY(check_dim(t, dim, t->ndim));
  for (int i = 0; i < t->ndim; i++) {
    bool drop = t->shape[i] == 1 && (dim < 0 || dim == i);
    if (!drop) {
      shape[n] = t->shape[i];
      strides[n++] = t->strides[i];
    }
  }
  return derived(t, n, shape, strides, t->offset, out);
}

nc_status nc_tensor_unsqueeze(nc_tensor *t, int dim, nc_tensor **out) {
  if (t->ndim == NC_MAX_DIMS) return nc_error(NC_ERR_SHAPE, "unsqueeze: already %d dims", NC_MAX_DIMS);
  NC_TRY(check_dim(t, dim, t->ndim + 1));
  int64_t shape[NC_MAX_DIMS], strides[NC_MAX_DIMS];
  for (int i = 0, j = 0; i <= t->ndim; i++) {
    if (i == dim) {
      shape[i] = 1;
      strides[i] = (i < t->ndim) ? t->strides[i] * t->shape[i] : 1;
    } else {
      shape[i] = t->shape[j];
      strides[i] = t->strides[j++];
    }
  }
  return derived(t, t->ndim + 1, shape, strides, t->offset, out);
}

nc_status nc_tensor_write_host(nc_tensor *t, const void *src, size_t nbytes) {
  if (!nc_tensor_is_contiguous(t))
    return nc_error(NC_ERR_ARG, "host write into a non-contiguous tensor");
  if (nbytes != nc_tensor_nbytes(t))
    return nc_error(NC_ERR_SHAPE, "host write of %zu bytes into a tensor of %zu bytes", nbytes, nc_tensor_nbytes(t));
  return nc_storage_write(t->storage, (size_t)t->offset * nc_dtype_size(t->dtype), src, nbytes);
}

nc_status nc_tensor_read_host(const nc_tensor *t, void *dst, size_t nbytes) {
  if (!nc_tensor_is_contiguous(t))
    return nc_error(NC_ERR_ARG, "host read from a non-contiguous tensor");
  if (nbytes != nc_tensor_nbytes(t))
    return nc_error(NC_ERR_SHAPE, "host read of %zu bytes from a tensor of %zu bytes", nbytes, nc_tensor_nbytes(t));
  return nc_storage_read(t->storage, (size_t)t->offset * nc_dtype_size(t->dtype), dst, nbytes);
}

nc_status nc_tensor_read_host_start(const nc_tensor *t, void *dst, size_t nbytes, nc_read *out) {
  *out = (nc_read){NULL, NULL};
  if (!nc_tensor_is_contiguous(t))
    return nc_error(NC_ERR_ARG, "host read from a non-contiguous tensor");
  if (nbytes != nc_tensor_nbytes(t))
    return nc_error(NC_ERR_SHAPE, "host read of %zu bytes from a tensor of %zu bytes", nbytes, nc_tensor_nbytes(t));
  return nc_storage_read_start(t->storage, (size_t)t->offset * nc_dtype_size(t->dtype), dst, nbytes, out);
}

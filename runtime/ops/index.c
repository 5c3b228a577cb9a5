/* index_select, gather, scatter_add and one_hot: index checks, shapes, then one backend call. */
#include <string.h>
#include "core/check.h"
#include "support.h"
#include "netcl/creation.h"
#include "netcl/index.h"
#include "netcl/reduce.h"

/* idx as int64 (int32 widened). */
static nc_status index_tensor(nc_tensor *idx, nc_tensor **out) {
  if (idx->dtype == NC_INT64) {
    *out = nc_tensor_retain(idx);
    return NC_OK;
  }
  if (idx->dtype != NC_INT32)
    return nc_error(NC_ERR_DTYPE, "the index tensor must be int64 (or int32), got %s",
                    nc_dtype_name(idx->dtype));
  return nc_to(idx, nc_tensor_device(idx), NC_INT64, out);
}

static nc_status read_int64(nc_op op, nc_tensor *idx, int64_t *v) {
  nc_tensor *r;
  NC_TRY(nc_reduce(op, idx, 0, NULL, false, NULL, &r));
  nc_status s = nc_read_values(r, v, sizeof *v);
  nc_tensor_release(r);
  return s;
}

nc_status nc_check_indices(nc_tensor *idx, int64_t size, int dim) {
  if (nc_tensor_numel(idx) == 0) return NC_OK;
  nc_tensor *i64;
  NC_TRY(index_tensor(idx, &i64));
  int64_t lo = 0, hi = 0;
  nc_status s = read_int64(NC_OP_MIN, i64, &lo);
  if (s == NC_OK) s = read_int64(NC_OP_MAX, i64, &hi);
  nc_tensor_release(i64);
  NC_TRY(s);
  if (lo < 0 || hi >= size)
    return nc_error(NC_ERR_INDEX, "index %lld is out of range for dim %d of size %lld",
                    (long long)(lo < 0 ? lo : hi), dim + 1, (long long)size);
  return NC_OK;
}

/* Runs the backend into dst (or a new tensor of shape/dtype), through a temporary when dst's
 * dtype differs. For scatter_add the destination first receives base. */
static nc_status run_index(nc_op op, nc_tensor *dst, nc_tensor *base, nc_tensor *x, nc_tensor *idx, int dim,
                           int ndim, const int64_t *shape, nc_dtype dt, nc_tensor **out) {
  nc_device *dev = nc_tensor_device(x);
  nc_tensor *ts[3] = {dst, idx, base};
  NC_TRY(nc_check_devices(dev, 3, ts));
  if (dst) NC_TRY(nc_check_dst(dst, ndim, shape, dt));
  nc_tensor *target = dst, *xin = NULL, *iin = NULL;
  nc_status s = NC_OK;
  if (!dst || dst->dtype != dt) s = nc_tensor_empty(dev, dt, ndim, shape, 0, &target);
  if (s == NC_OK && base && !nc_same_layout(base, target)) s = nc_copy(target, base);
  if (s == NC_OK) s = nc_input_for(x, dt, target, &xin);
  if (s == NC_OK) s = nc_input_for(idx, NC_INT64, target, &iin);
  if (s == NC_OK && nc_tensor_numel(target) > 0) {
    nc_storage_bump_version(target->storage);
    s = nc_bk_index(op, target, xin, iin, dim);
  }
  if (s == NC_OK && target != dst && dst) s = nc_copy(dst, target);
  nc_tensor_release(xin);
  nc_tensor_release(iin);
  if (target != dst && (dst || s != NC_OK))
    nc_tensor_release(target);
  else if (!dst)
    *out = target;
  return s;
}

static nc_status need_dims(const nc_tensor *x, const char *op) {
  if (x->ndim == 0) return nc_error(NC_ERR_SHAPE, "%s needs a tensor with at least one dim", op);
  return NC_OK;
}

static nc_status index_select_impl(nc_tensor *dst, nc_tensor *x, int dim, nc_tensor *idx, nc_tensor **out) {
  NC_TRY(need_dims(x, "index_select"));
  NC_TRY(nc_check_dim(dim, x->ndim));
  if (idx->ndim > 1) return nc_error(NC_ERR_SHAPE, "the index tensor must have 1 dim, got %d", idx->ndim);
  nc_tensor *i64, *flat = NULL;
  NC_TRY(index_tensor(idx, &i64));
  int64_t n = nc_tensor_numel(i64), shape[NC_MAX_DIMS];
  nc_status s = nc_check_indices(i64, x->shape[dim], dim);
  if (s == NC_OK) s = nc_tensor_view(i64, 1, &n, &flat);
  memcpy(shape, x->shape, sizeof shape);
  shape[dim] = n;
  if (s == NC_OK) s = run_index(NC_OP_INDEX_SELECT, dst, NULL, x, flat, dim, x->ndim, shape, x->dtype, out);
  nc_tensor_release(flat);
  nc_tensor_release(i64);
  return s;
}

nc_status nc_index_select(nc_tensor *x, int dim, nc_tensor *idx, nc_tensor **out) {
  return index_select_impl(NULL, x, dim, idx, out);
}
nc_status nc_index_select_into(nc_tensor *dst, nc_tensor *x, int dim, nc_tensor *idx) {
  return index_select_impl(dst, x, dim, idx, NULL);
}

/* idx's sizes must not exceed limit's, except at skip (-1: none). */
static nc_status check_within(const nc_tensor *idx, const nc_tensor *limit, int skip, const char *what) {
  if (idx->ndim != limit->ndim)
    return nc_error(NC_ERR_SHAPE, "the index tensor has %d dims but %s has %d", idx->ndim, what, limit->ndim);
  for (int d = 0; d < idx->ndim; d++)
    if (d != skip && idx->shape[d] > limit->shape[d]) {
      char a[128], b[128];
      return nc_error(NC_ERR_SHAPE, "the index tensor's shape %s is larger than %s's %s at dim %d",
                      nc_shape_str(idx->ndim, idx->shape, a, sizeof a), what,
                      nc_shape_str(limit->ndim, limit->shape, b, sizeof b), d + 1);
    }
  return NC_OK;
}

static nc_status gather_impl(nc_tensor *dst, nc_tensor *x, int dim, nc_tensor *idx, nc_tensor **out) {
  NC_TRY(need_dims(x, "gather"));
  NC_TRY(nc_check_dim(dim, x->ndim));
  NC_TRY(check_within(idx, x, dim, "the input"));
  nc_tensor *i64;
  NC_TRY(index_tensor(idx, &i64));
  nc_status s = nc_check_indices(i64, x->shape[dim], dim);
  if (s == NC_OK) s = run_index(NC_OP_GATHER, dst, NULL, x, i64, dim, i64->ndim, i64->shape, x->dtype, out);
  nc_tensor_release(i64);
  return s;
}

nc_status nc_gather(nc_tensor *x, int dim, nc_tensor *idx, nc_tensor **out) {
  return gather_impl(NULL, x, dim, idx, out);
}
nc_status nc_gather_into(nc_tensor *dst, nc_tensor *x, int dim, nc_tensor *idx) {
  return gather_impl(dst, x, dim, idx, NULL);
}

static nc_status scatter_add_impl(nc_tensor *dst, nc_tensor *x, int dim, nc_tensor *idx, nc_tensor *src,
                                  nc_tensor **out) {
  NC_TRY(need_dims(x, "scatter_add"));
  NC_TRY(nc_check_dim(dim, x->ndim));
  NC_TRY(check_within(idx, src, -1, "the source"));
  NC_TRY(check_within(idx, x, dim, "the input"));
  nc_tensor *i64;
  NC_TRY(index_tensor(idx, &i64));
  nc_status s = nc_check_indices(i64, x->shape[dim], dim);
  if (s == NC_OK) s = run_index(NC_OP_SCATTER_ADD, dst, x, src, i64, dim, x->ndim, x->shape, x->dtype, out);
  nc_tensor_release(i64);
  return s;
}

nc_status nc_scatter_add(nc_tensor *x, int dim, nc_tensor *idx, nc_tensor *src, nc_tensor **out) {
  return scatter_add_impl(NULL, x, dim, idx, src, out);
}
nc_status nc_scatter_add_into(nc_tensor *dst, nc_tensor *x, int dim, nc_tensor *idx, nc_tensor *src) {
  return scatter_add_impl(dst, x, dim, idx, src, NULL);
}

nc_status nc_one_hot(nc_tensor *idx, int64_t n, nc_tensor **out) {
  if (!nc_op_accepts(NC_OP_ONE_HOT, idx->dtype))
    return nc_error(NC_ERR_DTYPE, "one_hot takes integer class indices, got %s", nc_dtype_name(idx->dtype));
  if (idx->ndim == NC_MAX_DIMS)
    return nc_error(NC_ERR_SHAPE, "one_hot adds a dim to a tensor that has %d already", NC_MAX_DIMS);
  nc_device *dev = nc_tensor_device(idx);
  nc_tensor *i64 = NULL, *col = NULL, *classes = NULL, *eq = NULL;
  nc_status s =
      idx->dtype == NC_INT64 ? (i64 = nc_tensor_retain(idx), NC_OK) : nc_to(idx, dev, NC_INT64, &i64);
  if (s == NC_OK && n < 0) {
    if (nc_tensor_numel(i64) == 0)
      s = nc_error(NC_ERR_SHAPE, "one_hot cannot infer the class count from an empty tensor");
    else if ((s = read_int64(NC_OP_MAX, i64, &n)) == NC_OK)
      n += 1;
  }
  if (s == NC_OK && nc_tensor_numel(i64) > 0) {
    int64_t lo = 0, hi = 0;
    s = read_int64(NC_OP_MIN, i64, &lo);
    if (s == NC_OK) s = read_int64(NC_OP_MAX, i64, &hi);
    if (s == NC_OK && (lo < 0 || hi >= n))
      s = nc_error(NC_ERR_INDEX, "class index %lld is out of range for %lld classes",
                   (long long)(lo < 0 ? lo : hi), (long long)n);
  }
  if (s == NC_OK) s = nc_tensor_unsqueeze(i64, i64->ndim, &col);
  if (s == NC_OK) s = nc_tensor_empty(dev, NC_INT64, 1, &n, 0, &classes);
  if (s == NC_OK) s = nc_arange_fill(classes, 0, 1);
  if (s == NC_OK) s = nc_binary(NC_OP_EQ, nc_operand_tensor(col), nc_operand_tensor(classes), &eq);
  if (s == NC_OK) s = nc_to(eq, dev, NC_INT64, out);
  nc_tensor_release(eq);
  nc_tensor_release(classes);
  nc_tensor_release(col);
  nc_tensor_release(i64);
  return s;
}

/* sort and topk: the backend orders positions along the last dim of a transposed view; values
 * are then gathered from x in its own dtype. */
#include "core/check.h"
#include "support.h"
#include "netcl/sort.h"

static nc_status sort_impl(nc_tensor *x, int dim, bool desc, int64_t k, nc_tensor **values,
                           nc_tensor **indices) {
  NC_TRY(nc_op_check_dtype(NC_OP_SORT, x->dtype));
  NC_TRY(nc_check_dim(dim, x->ndim));
  nc_device *dev = nc_tensor_device(x);
  const nc_dtype cdt = nc_dtype_is_float(x->dtype) ? x->dtype : NC_INT64;
  int64_t one = 1;
  nc_tensor *xv = NULL, *xc = NULL, *xt = NULL, *pos = NULL, *posk = NULL, *back = NULL, *idx = NULL,
            *vals = NULL;
  /* a 0-dim tensor sorts as one element */
  nc_status s = x->ndim ? nc_tensor_alias(x, &xv) : nc_tensor_view(x, 1, &one, &xv);
  const int last = xv->ndim - 1;
  if (s == NC_OK && k > xv->shape[dim])
    s = nc_error(NC_ERR_ARG, "k = %lld is larger than dim %d of size %lld", (long long)k, dim + 1,
                 (long long)xv->shape[dim]);
  if (s == NC_OK) s = nc_input_for(xv, cdt, NULL, &xc);
  if (s == NC_OK) s = nc_tensor_transpose(xc, dim, last, &xt);
  if (s == NC_OK) s = nc_tensor_empty(dev, NC_INT64, xt->ndim, xt->shape, 0, &pos);
  if (s == NC_OK && nc_tensor_numel(pos) > 0) s = nc_bk_sort(NC_OP_SORT, pos, xt, desc);
  if (s == NC_OK) s = nc_tensor_narrow(pos, last, 0, k < 0 ? xt->shape[last] : k, &posk);
  if (s == NC_OK) s = nc_tensor_transpose(posk, dim, last, &back);
  if (s == NC_OK) s = nc_contiguous(back, &idx);
  if (s == NC_OK && values) s = nc_tensor_empty(dev, x->dtype, idx->ndim, idx->shape, 0, &vals);
  if (s == NC_OK && values && nc_tensor_numel(vals) > 0)
    s = nc_bk_index(NC_OP_GATHER, vals, xv, idx, dim);
  if (s == NC_OK && x->ndim == 0) { /* back to 0 dims */
    nc_tensor *a = NULL, *b = NULL;
    s = nc_tensor_view(idx, 0, NULL, &a);
    if (s == NC_OK && vals) s = nc_tensor_view(vals, 0, NULL, &b);
    nc_tensor_release(idx);
    nc_tensor_release(vals);
    idx = a;
    vals = b;
  }
  nc_tensor_release(back);
  nc_tensor_release(posk);
  nc_tensor_release(pos);
  nc_tensor_release(xt);
  nc_tensor_release(xc);
  nc_tensor_release(xv);
  if (s != NC_OK) {
    nc_tensor_release(idx);
    nc_tensor_release(vals);
    return s;
  }
  if (indices)
    *indices = idx;
  else
    nc_tensor_release(idx);
  if (values) *values = vals;
  return NC_OK;
}

nc_status nc_sort(nc_tensor *x, int dim, bool descending, nc_tensor **values, nc_tensor **indices) {
  return sort_impl(x, dim, descending, -1, values, indices);
}

nc_status nc_topk(nc_tensor *x, int64_t k, int dim, bool largest, nc_tensor **values, nc_tensor **indices) {
  if (k < 0) return nc_error(NC_ERR_ARG, "k = %lld is negative", (long long)k);
  return sort_impl(x, dim, largest, k, values, indices);
}

/* OpenCL index family (kernels/index.cl) and sort (kernels/sort.cl). */
#include "core/check.h"
#include "cl_backend.h"

nc_status nc_cl_index(nc_op op, nc_tensor *out, const nc_tensor *x, const nc_tensor *idx, int dim) {
  nc_device *dev = nc_tensor_device(out);
  NC_TRY(nc_cl_check_dtype(dev, out->dtype));
  const nc_cl_handle *k;
  NC_TRY(nc_cl_handle_get(dev, op == NC_OP_SCATTER_ADD ? NC_CL_K_SCATTER_ADD : NC_CL_K_TAKE, out->dtype, &k));
  nc_cl_layout lo, lx, li;
  nc_cl_layout_of(out, &lo);
  nc_cl_layout_of(x, &lx);
  nc_cl_layout_of(idx, &li);
  cl_mem mo = nc_cl_mem(out), mx = nc_cl_mem(x), mi = nc_cl_mem(idx);
  cl_int cop = (cl_int)op, cdim = dim;
  cl_long n = nc_tensor_numel(out);
  nc_cl_arg a[] = {NC_CL_ARG(cop), NC_CL_ARG(mo), NC_CL_ARG(lo),   NC_CL_ARG(mx), NC_CL_ARG(lx),
                   NC_CL_ARG(mi),  NC_CL_ARG(li), NC_CL_ARG(cdim), NC_CL_ARG(n)};
  const bool has_op = op != NC_OP_SCATTER_ADD;
  return nc_cl_launch(dev, k->kernel, has_op ? 9 : 8, has_op ? a : a + 1, nc_cl_grid(dev, n), k->local);
}

nc_status nc_cl_sort(nc_tensor *indices, const nc_tensor *x, bool descending) {
  nc_device *dev = nc_tensor_device(indices);
  const nc_dtype dt = x->dtype;
  NC_TRY(nc_cl_check_dtype(dev, dt));
  cl_long inner = x->shape[x->ndim - 1], outer = nc_tensor_numel(x) / inner, p2 = 1;
  while (p2 < inner) p2 <<= 1;
  int64_t total = outer * p2, shape2[2] = {outer, p2};
  nc_tensor *keys = NULL, *pos = NULL, *src = NULL, *dst = NULL;
  const nc_cl_handle *init, *step;
  nc_status s = nc_cl_handle_get(dev, NC_CL_K_SORT_INIT, dt, &init);
  if (s == NC_OK) s = nc_cl_handle_get(dev, NC_CL_K_SORT_STEP, dt, &step);
  if (s == NC_OK) s = nc_tensor_empty(dev, dt, 1, &total, 0, &keys);
  if (s == NC_OK) s = nc_tensor_empty(dev, NC_INT64, 2, shape2, 0, &pos);
  if (s == NC_OK) {
    nc_cl_layout lx;
    nc_cl_layout_of(x, &lx);
    cl_mem mk = nc_cl_mem(keys), mp = nc_cl_mem(pos), mx = nc_cl_mem(x);
    nc_cl_arg a[] = {NC_CL_ARG(mk),    NC_CL_ARG(mp),    NC_CL_ARG(mx), NC_CL_ARG(lx),
                     NC_CL_ARG(outer), NC_CL_ARG(inner), NC_CL_ARG(p2)};
    s = nc_cl_launch(dev, init->kernel, 7, a, nc_cl_grid(dev, total), init->local);
    cl_int desc = descending;
    for (cl_long kk = 2; kk <= p2 && s == NC_OK; kk <<= 1)
      for (cl_long j = kk >> 1; j > 0 && s == NC_OK; j >>= 1) {
        nc_cl_arg b[] = {NC_CL_ARG(mk), NC_CL_ARG(mp), NC_CL_ARG(outer), NC_CL_ARG(p2),
                         NC_CL_ARG(kk), NC_CL_ARG(j),  NC_CL_ARG(desc)};
        s = nc_cl_launch(dev, step->kernel, 7, b, nc_cl_grid(dev, total / 2), step->local);
      }
  }
  /* The first `inner` positions of each padded row are the answer. */
  int64_t shape[2] = {outer, inner}, strides[2] = {p2, 1}, cstrides[2] = {inner, 1};
  if (s == NC_OK) s = nc_tensor_from_storage(pos->storage, NC_INT64, 2, shape, strides, 0, &src);
  if (s == NC_OK)
    s = nc_tensor_from_storage(indices->storage, NC_INT64, 2, shape, cstrides, indices->offset, &dst);
  if (s == NC_OK) s = nc_cl_copy(dst, src);
  nc_tensor_release(dst);
  nc_tensor_release(src);
  nc_tensor_release(pos);
  nc_tensor_release(keys);
  return s;
}

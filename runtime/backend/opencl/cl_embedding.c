/* OpenCL embedding: kernels/embedding.cl. Out-of-range indices are found on the device and
 * reported through a one-int buffer, which the op reads at the next sync point. */
#include <limits.h>
#include <stdio.h>
#include "core/check.h"
#include "cl_linalg.h"

/* A device int32 holding INT_MAX, for kernels that atomic-min a bad position into it. */
nc_status nc_cl_flag_new(nc_device *dev, nc_tensor **out) {
  int64_t one = 1;
  NC_TRY(nc_tensor_empty(dev, NC_INT32, 1, &one, 0, out));
  int32_t v = INT_MAX;
  nc_status s = nc_tensor_write_host(*out, &v, sizeof v);
  if (s != NC_OK) nc_tensor_release(*out);
  return s;
}

void nc_cl_flag_verdict(nc_tensor *flag, nc_index_verdict *bad) { *bad = (nc_index_verdict){0, flag}; }

nc_status nc_cl_embedding(const nc_tensor *weight, const nc_tensor *idx, nc_tensor *out, nc_index_verdict *bad) {
  nc_device *dev = nc_tensor_device(out);
  NC_TRY(nc_cl_check_real(dev, out->dtype));
  const nc_cl_handle *k;
  NC_TRY(nc_cl_handle_get(dev, idx->dtype == NC_INT64 ? NC_CL_K_EMBEDDING_FWD_INT64 : NC_CL_K_EMBEDDING_FWD_INT32,
                          out->dtype, &k));
  nc_tensor *flag;
  NC_TRY(nc_cl_flag_new(dev, &flag));
  cl_long n = nc_tensor_numel(idx), v = weight->shape[0], d = weight->shape[1];
  cl_mem wm = nc_cl_mem(weight), im = nc_cl_mem(idx), om = nc_cl_mem(out), fm = nc_cl_mem(flag);
  nc_cl_arg args[] = {NC_CL_ARG(wm), NC_CL_ARG(im), NC_CL_ARG(om), NC_CL_ARG(n),
                      NC_CL_ARG(v),  NC_CL_ARG(d),  NC_CL_ARG(fm)};
  nc_status s = nc_cl_launch(dev, k->kernel, 7, args, nc_cl_global_size(dev, n * d), 0);
  if (s == NC_OK)
    nc_cl_flag_verdict(flag, bad);
  else
    nc_tensor_release(flag);
  return s;
}

nc_status nc_cl_embedding_backward(const nc_tensor *dout, const nc_tensor *idx, int64_t padding_idx,
                                   nc_tensor *dweight) {
  nc_device *dev = nc_tensor_device(dweight);
  NC_TRY(nc_cl_check_real(dev, dweight->dtype));
  const nc_cl_handle *zero, *k;
  NC_TRY(nc_cl_handle_get(dev, NC_CL_K_EMBEDDING_ZERO, dweight->dtype, &zero));
  if (nc_cl_handle_get(dev, idx->dtype == NC_INT64 ? NC_CL_K_EMBEDDING_BWD_INT64 : NC_CL_K_EMBEDDING_BWD_INT32,
                       dweight->dtype, &k) != NC_OK)
    return nc_error(NC_ERR_UNSUPPORTED,
                    "embedding backward in %s needs 64-bit atomics (cl_khr_int64_base_atomics) on %s",
                    nc_dtype_name(dweight->dtype), dev->info.name);
  cl_long total = nc_tensor_numel(dweight), n = nc_tensor_numel(idx), v = dweight->shape[0],
          d = dweight->shape[1];
  cl_long pad = padding_idx;
  cl_mem gm = nc_cl_mem(dout), im = nc_cl_mem(idx), wm = nc_cl_mem(dweight);
  nc_cl_arg zargs[] = {NC_CL_ARG(wm), NC_CL_ARG(total)};
  NC_TRY(nc_cl_launch(dev, zero->kernel, 2, zargs, nc_cl_global_size(dev, total), 0));
  nc_cl_arg args[] = {NC_CL_ARG(gm), NC_CL_ARG(im), NC_CL_ARG(wm), NC_CL_ARG(n),
                      NC_CL_ARG(v),  NC_CL_ARG(d),  NC_CL_ARG(pad)};
  return nc_cl_launch(dev, k->kernel, 7, args, nc_cl_global_size(dev, n * d), 0);
}

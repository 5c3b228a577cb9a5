/* OpenCL random family on kernels/random.cl. */
#include "core/check.h"
#include "cl_backend.h"

nc_status nc_cl_sample(nc_op op, nc_tensor *out, const nc_tensor *p, uint64_t seed, uint64_t offset,
                       int64_t lo, uint64_t range) {
  nc_device *dev = nc_tensor_device(out);
  NC_TRY(nc_cl_check_dtype(dev, out->dtype));
  const nc_cl_handle *k;
  cl_mem mo = nc_cl_mem(out);
  cl_long off = out->offset, n = nc_tensor_numel(out), clo = lo;
  cl_ulong sd = seed, of = offset, rg = range;
  const size_t global = nc_cl_grid(dev, n);
  if (op == NC_OP_BERNOULLI) {
    NC_TRY(nc_cl_handle_get(dev, NC_CL_K_BERNOULLI, out->dtype, &k));
    nc_cl_layout lp;
    nc_cl_layout_of(p, &lp);
    cl_mem mp = nc_cl_mem(p);
    nc_cl_arg a[] = {NC_CL_ARG(mo), NC_CL_ARG(off), NC_CL_ARG(mp), NC_CL_ARG(lp),
                     NC_CL_ARG(sd), NC_CL_ARG(of),  NC_CL_ARG(n)};
    return nc_cl_launch(dev, k->kernel, 7, a, global, k->local);
  }
  if (op != NC_OP_RANDINT) return nc_error(NC_ERR_UNSUPPORTED, "opencl sample: %s", nc_op_get(op)->name);
  NC_TRY(nc_cl_handle_get(dev, NC_CL_K_RANDINT, NC_INT64, &k));
  nc_cl_arg a[] = {NC_CL_ARG(mo), NC_CL_ARG(off), NC_CL_ARG(clo), NC_CL_ARG(rg),
                   NC_CL_ARG(sd), NC_CL_ARG(of),  NC_CL_ARG(n)};
  return nc_cl_launch(dev, k->kernel, 7, a, global, k->local);
}

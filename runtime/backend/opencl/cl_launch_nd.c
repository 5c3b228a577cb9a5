/* Multi-dimensional kernel launches (tiled kernels index work-groups in 2-D and 3-D). */
#include "core/check.h"
#include "cl_backend.h"

nc_status nc_cl_launch_nd(nc_device *dev, cl_kernel k, int nargs, const nc_cl_arg *args, int dims,
                          const size_t *global, const size_t *local) {
  nc_cl_device *cd;
  NC_TRY(nc_cl_ready(dev, &cd));
  for (int d = 0; d < dims; d++)
    if (global[d] == 0) return NC_OK;
  pthread_mutex_lock(&dev->lock);
  cl_int err = CL_SUCCESS;
  for (int i = 0; i < nargs && err == CL_SUCCESS; i++)
    err = nc_cl.clSetKernelArg(k, (cl_uint)i, args[i].size, args[i].value);
  cl_event *ev = nc_cl_profile_event(cd);
  if (err == CL_SUCCESS)
    err = nc_cl.clEnqueueNDRangeKernel(cd->queue, k, (cl_uint)dims, NULL, global, local, 0, NULL, ev);
  if (err == CL_SUCCESS && ev) nc_cl_profile_record(cd, k, dims, global);
  nc_status q = err == CL_SUCCESS ? nc_cl_enqueued(dev, cd) : NC_OK;
  pthread_mutex_unlock(&dev->lock);
  if (err != CL_SUCCESS) return nc_cl_fail(err, "launching a kernel", dev);
  return q;
}

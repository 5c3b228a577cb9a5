/* OpenCL pooling: kernels/pool.cl, one grid-stride launch per call. */
#include "core/check.h"
#include "cl_linalg.h"

/* Mirrors nc_pool in kernels/pool.cl. */
typedef struct {
  cl_long planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
  cl_int count_include_pad, pad_;
} cl_pool;

static cl_pool geometry(const nc_pool2d_desc *p) {
  return (cl_pool){p->planes,
                   p->h,
                   p->w,
                   p->oh,
                   p->ow,
                   p->kernel[0],
                   p->kernel[1],
                   p->stride[0],
                   p->stride[1],
                   p->padding[0],
                   p->padding[1],
                   p->dilation[0],
                   p->dilation[1],
                   p->count_include_pad,
                   0};
}

nc_status nc_cl_pool2d(const nc_pool2d_desc *p, const nc_tensor *x, nc_tensor *y, nc_tensor *indices) {
  nc_device *dev = nc_tensor_device(y);
  NC_TRY(nc_cl_check_real(dev, y->dtype));
  cl_pool geo = geometry(p);
  cl_mem xm = nc_cl_mem(x), ym = nc_cl_mem(y);
  cl_long total = p->planes * p->oh * p->ow;
  const nc_cl_handle *k;
  if (p->kind == NC_POOL_MAX) {
    NC_TRY(nc_cl_handle_get(dev, NC_CL_K_MAX_POOL_FWD, y->dtype, &k));
    cl_mem im = nc_cl_mem(indices);
    nc_cl_arg args[] = {NC_CL_ARG(geo), NC_CL_ARG(xm), NC_CL_ARG(ym), NC_CL_ARG(im)};
    return nc_cl_launch(dev, k->kernel, 4, args, nc_cl_global_size(dev, total), 0);
  }
  NC_TRY(nc_cl_handle_get(dev, NC_CL_K_AVG_POOL_FWD, y->dtype, &k));
  cl_int adaptive = p->kind == NC_POOL_ADAPTIVE_AVG;
  nc_cl_arg args[] = {NC_CL_ARG(geo), NC_CL_ARG(adaptive), NC_CL_ARG(xm), NC_CL_ARG(ym)};
  return nc_cl_launch(dev, k->kernel, 4, args, nc_cl_global_size(dev, total), 0);
}

nc_status nc_cl_pool2d_backward(const nc_pool2d_desc *p, const nc_tensor *dy, const nc_tensor *indices,
                                nc_tensor *dx) {
  nc_device *dev = nc_tensor_device(dx);
  NC_TRY(nc_cl_check_real(dev, dx->dtype));
  cl_pool geo = geometry(p);
  cl_mem dym = nc_cl_mem(dy), dxm = nc_cl_mem(dx);
  cl_long total = p->planes * p->h * p->w;
  const nc_cl_handle *k;
  if (p->kind == NC_POOL_MAX) {
    NC_TRY(nc_cl_handle_get(dev, NC_CL_K_MAX_POOL_BWD, dx->dtype, &k));
    cl_mem im = nc_cl_mem(indices);
    nc_cl_arg args[] = {NC_CL_ARG(geo), NC_CL_ARG(dym), NC_CL_ARG(im), NC_CL_ARG(dxm)};
    return nc_cl_launch(dev, k->kernel, 4, args, nc_cl_global_size(dev, total), 0);
  }
  NC_TRY(nc_cl_handle_get(dev, NC_CL_K_AVG_POOL_BWD, dx->dtype, &k));
  cl_int adaptive = p->kind == NC_POOL_ADAPTIVE_AVG;
  nc_cl_arg args[] = {NC_CL_ARG(geo), NC_CL_ARG(adaptive), NC_CL_ARG(dym), NC_CL_ARG(dxm)};
  return nc_cl_launch(dev, k->kernel, 4, args, nc_cl_global_size(dev, total), 0);
}

/* The generic launcher of the ops defined by their op-table row (KERNEL(name, sig)): the row's
 * kernel column names "<program>.cl:<kernel>", built for the first tensor's dtype (REAL is
 * double for float64), or for the storage dtype of a tensor the row reads as it is; its handle is
 * resolved once, by op id and that dtype. The arguments follow one convention (cl_backend.h), so
 * such an op needs no host code of its own. */
#include "cl_linalg.h"
#include "core/check.h"

typedef union {
  cl_float f;
  cl_double d;
} real_arg;

nc_status nc_cl_kernel_call(const nc_kernel_call *c) {
  const nc_tensor *first = NULL;
  for (int i = 0; i < c->nt && !first; i++) first = c->t[i];
  nc_device *dev = nc_tensor_device(first);
  /* The build: REAL for the first tensor's dtype, or a storage dtype's build ("half+<program>",
   * REAL float) where a row takes a tensor of that dtype as it is (relu_backward's y). */
  nc_dtype build = first->dtype;
  for (int i = 0; i < c->nt; i++)
    if (c->t[i] && nc_dtype_is_storage(c->t[i]->dtype)) build = c->t[i]->dtype;
  NC_TRY(nc_cl_check_real(dev, nc_dtype_is_storage(build) ? NC_FLOAT32 : first->dtype));
  nc_cl_arg args[2 * NC_KERNEL_MAX_TENSORS + 2 * NC_KERNEL_MAX_SCALARS];
  cl_mem mem[NC_KERNEL_MAX_TENSORS];
  cl_long off[NC_KERNEL_MAX_TENSORS], ints[NC_KERNEL_MAX_SCALARS];
  real_arg reals[NC_KERNEL_MAX_SCALARS];
  int na = 0;
  for (int i = 0; i < c->nt; i++) {
    mem[i] = nc_cl_mem(c->t[i] ? c->t[i] : first);
    off[i] = c->t[i] ? (cl_long)c->t[i]->offset : -1;
    args[na++] = NC_CL_ARG(mem[i]);
    args[na++] = NC_CL_ARG(off[i]);
  }
  for (int i = 0; i < c->ni; i++) {
    ints[i] = (cl_long)c->i[i];
    args[na++] = NC_CL_ARG(ints[i]);
  }
  for (int i = 0; i < c->nf; i++) {
    if (first->dtype == NC_FLOAT64)
      reals[i].d = c->f[i], args[na++] = (nc_cl_arg){sizeof reals[i].d, &reals[i].d};
    else
      reals[i].f = (cl_float)c->f[i], args[na++] = (nc_cl_arg){sizeof reals[i].f, &reals[i].f};
  }
  if (c->rows <= 0) return NC_OK;
  const nc_cl_handle *h;
  int64_t groups = 0;
  size_t ls = 256;
  NC_TRY(nc_cl_attention_tiled(c, &h, &groups, &ls));
  if (!h) NC_TRY(nc_cl_kmeans_tiled(c, &h, &groups));
  if (h) {
    size_t global = (size_t)groups * ls;
    return nc_cl_launch_nd(dev, h->kernel, na, args, 1, &global, &ls);
  }
  NC_TRY(nc_cl_handle_get(dev, c->op, build, &h));
  ls = nc_cl_group_size(dev);
  size_t global = (size_t)c->rows * ls;
  return nc_cl_launch_nd(dev, h->kernel, na, args, 1, &global, &ls);
}

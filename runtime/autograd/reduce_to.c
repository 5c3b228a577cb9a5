/* nc_ag_reduce_to: the gradient of a broadcast, for every broadcasting op's rule. */
#include "core/check.h"
#include "netcl/autograd.h"
#include "netcl/copy.h"
#include "netcl/reduce.h"

nc_status nc_ag_reduce_to(nc_tensor *grad, int ndim, const int64_t *shape, nc_tensor **out) {
  int lead = grad->ndim - ndim;
  if (lead < 0)
    return nc_error(NC_ERR_SHAPE, "a gradient of %d dims cannot be reduced to %d dims", grad->ndim, ndim);
  int dims[NC_MAX_DIMS], n = 0;
  for (int i = 0; i < grad->ndim; i++) {
    if (i < lead)
      dims[n++] = i;
    else if (shape[i - lead] != grad->shape[i]) {
      if (shape[i - lead] != 1)
        return nc_error(NC_ERR_SHAPE, "a gradient of size %lld at dim %d cannot be reduced to size %lld",
                        (long long)grad->shape[i], i, (long long)shape[i - lead]);
      dims[n++] = i;
    }
  }
  if (n == 0) { /* leading dims always count, so this is the same shape */
    *out = nc_tensor_retain(grad);
    return NC_OK;
  }
  nc_tensor *sum;
  NC_TRY(nc_reduce(NC_OP_SUM, grad, n, dims, true, NULL, &sum));
  nc_status s = nc_reshape(sum, ndim, shape, out);
  nc_tensor_release(sum);
  return s;
}

/* ema_update (netcl/table_ops.h, an op defined by its op-table row): the momentum update of a
 * target network's parameters, target = momentum target + (1 - momentum) online, in place and in
 * one launch over however many elements target has (netcl.ssl keeps a momentum encoder's
 * parameters, and the online encoder's, as views of one flat buffer each). */
#include <math.h>
#include "backend/dispatch.h"
#include "core/check.h"
#include "support.h"
#include "netcl/copy.h"
#include "netcl/table_ops.h"

/* Elements per work-group: 16 per work-item of a 256-wide group. */
#define EMA_CHUNK 4096

nc_status nc_ema_update(nc_tensor *target, nc_tensor *online, double momentum, nc_tensor **out) {
  NC_TRY(nc_check_not_storage(target, online));
  if (!nc_op_accepts(NC_OP_EMA_UPDATE, target->dtype))
    return nc_error(NC_ERR_DTYPE, "expected a float32 or float64 target, got %s", nc_dtype_name(target->dtype));
  if (online->dtype != target->dtype)
    return nc_error(NC_ERR_DTYPE, "online is %s but target is %s", nc_dtype_name(online->dtype),
                    nc_dtype_name(target->dtype));
  if (nc_tensor_device(online) != nc_tensor_device(target))
    return nc_error(NC_ERR_DEVICE, "online and target are on different devices");
  bool same = online->ndim == target->ndim;
  for (int d = 0; same && d < target->ndim; d++) same = online->shape[d] == target->shape[d];
  if (!same) return nc_error(NC_ERR_SHAPE, "online's shape differs from target's");
  if (!nc_tensor_is_contiguous(target))
    return nc_error(NC_ERR_ARG, "target must be contiguous (it is updated in place)");
  if (!(momentum >= 0 && momentum <= 1)) return nc_error(NC_ERR_ARG, "momentum must be in [0, 1], got %g", momentum);
  const int64_t n = nc_tensor_numel(target);
  nc_tensor *oc;
  NC_TRY(nc_contiguous(online, &oc));
  nc_status s = NC_OK;
  if (n > 0) {
    nc_kernel_call k = {.op = NC_OP_EMA_UPDATE,
                        .nt = 2,
                        .t = {target, oc},
                        .ni = 2,
                        .i = {n, EMA_CHUNK},
                        .nf = 1,
                        .f = {momentum},
                        .rows = (n + EMA_CHUNK - 1) / EMA_CHUNK};
    s = nc_bk_kernel(&k);
    if (s == NC_OK) nc_storage_bump_version(target->storage);
  }
  nc_tensor_release(oc);
  if (s != NC_OK) return s;
  *out = nc_tensor_retain(target);
  return NC_OK;
}

/* kmeans_assign's tiled kernel (kernels/cluster.cl: kmeans_assign_tiled, 128 points per group of
 * 256 items) where the device's work-groups and local memory hold it (float64 needs 60 KB, more
 * than a 48 KB GPU has); else the op-table row's kernel runs. NETCL_KMEANS_TILED=0 turns the tiled
 * kernel off (tests of the row kernel, comparisons). */
#include <stdlib.h>
#include <string.h>
#include "cl_linalg.h"
#include "core/check.h"

#define KT_LS 256
#define KT_P 128 /* kernels/cluster.cl */

nc_status nc_cl_kmeans_tiled(const nc_kernel_call *c, const nc_cl_handle **out, int64_t *groups) {
  *out = NULL;
  if (c->op != NC_OP_KMEANS_ASSIGN) return NC_OK;
  const char *env = getenv("NETCL_KMEANS_TILED");
  if (env && strcmp(env, "0") == 0) return NC_OK;
  const nc_tensor *x = c->t[0];
  nc_device *dev = nc_tensor_device(x);
  if (dev->info.max_work_group_size < KT_LS) return NC_OK;
  const size_t es = x->dtype == NC_FLOAT64 ? 8 : 4;
  /* tiles, cn, red (REAL); mi, needs (int) */
  const size_t need = (size_t)(32 * (KT_P + 1) + 32 * 65 + 64 + KT_LS) * es + (size_t)(KT_P * 16 + KT_P) * 4;
  cl_ulong have = 0;
  nc_cl_device *cd = dev->impl;
  if (nc_cl.clGetDeviceInfo(cd->id, CL_DEVICE_LOCAL_MEM_SIZE, sizeof have, &have, NULL) != CL_SUCCESS || need > have)
    return NC_OK;
  const nc_cl_handle *h;
  NC_TRY(nc_cl_handle_get(dev, NC_CL_K_KMEANS_ASSIGN_TILED, x->dtype, &h));
  if (h->local < KT_LS) return NC_OK;
  *groups = (c->i[0] + KT_P - 1) / KT_P; /* i: n, d, k */
  *out = h;
  return NC_OK;
}

/* The k-means kernels OpenCL runs instead of the op-table rows' where they fit (kernels/cluster.cl):
 * - kmeans_assign_tiled (128 points per group of 256 items) where the device's work-groups and
 *   local memory hold it (float64 needs 60 KB, more than a 48 KB GPU has). NETCL_KMEANS_TILED=0
 *   turns it off (tests of the row kernel, comparisons).
 * - kmeans_update_sliced (one group per chunk of points and slice of clusters, sums in local
 *   memory) with the GPU access pattern (nc_cl_gpu_pattern), for d up to 2048 (float32) or 1024
 *   (float64). The row kernel, one group per chunk, suits CPU devices. */
#include <stdlib.h>
#include <string.h>
#include "cl_linalg.h"
#include "core/check.h"

#define KT_LS 256
#define KT_P 128 /* kernels/cluster.cl */
#define KU_LANES 4
#define KU_MAXS 256

static bool fits(nc_device *dev, size_t need) {
  const nc_cl_device *cd = dev->impl;
  return dev->info.max_work_group_size >= KT_LS && need <= cd->local_mem;
}

static nc_status assign_tiled(const nc_kernel_call *c, const nc_cl_handle **out, int64_t *groups) {
  const char *env = getenv("NETCL_KMEANS_TILED");
  if (env && strcmp(env, "0") == 0) return NC_OK;
  const nc_tensor *x = c->t[0];
  nc_device *dev = nc_tensor_device(x);
  const size_t es = x->dtype == NC_FLOAT64 ? 8 : 4;
  /* tiles, cn, red (REAL); mi, needs (int) */
  if (!fits(dev, (size_t)(32 * (KT_P + 1) + 32 * 65 + 64 + KT_LS) * es + (size_t)(KT_P * 16 + KT_P) * 4)) return NC_OK;
  const nc_cl_handle *h;
  NC_TRY(nc_cl_handle_get(dev, NC_CL_K_KMEANS_ASSIGN_TILED, x->dtype, &h));
  if (h->local < KT_LS) return NC_OK;
  *groups = (c->i[0] + KT_P - 1) / KT_P; /* i: n, d, k */
  *out = h;
  return NC_OK;
}

static nc_status update_sliced(const nc_kernel_call *c, const nc_cl_handle **out, int64_t *groups) {
  const nc_tensor *x = c->t[0];
  nc_device *dev = nc_tensor_device(x);
  if (!nc_cl_gpu_pattern(dev)) return NC_OK;
  const int64_t d = c->i[1], k = c->i[2]; /* i: n, d, k, chunk */
  const int64_t elems = x->dtype == NC_FLOAT64 ? 4096 : 8192; /* KU_ELEMS */
  const size_t es = x->dtype == NC_FLOAT64 ? 8 : 4;
  if (d < 1 || d > elems / KU_LANES || !fits(dev, (size_t)elems * es + (KU_LANES * KU_MAXS + 4 * KT_LS + KT_LS) * 4))
    return NC_OK;
  const nc_cl_handle *h;
  NC_TRY(nc_cl_handle_get(dev, NC_CL_K_KMEANS_UPDATE_SLICED, x->dtype, &h));
  if (h->local < KT_LS) return NC_OK;
  int64_t ks = elems / (KU_LANES * d);
  if (ks > KU_MAXS) ks = KU_MAXS;
  *groups = c->rows * ((k + ks - 1) / ks); /* rows: the chunks */
  *out = h;
  return NC_OK;
}

nc_status nc_cl_kmeans_tiled(const nc_kernel_call *c, const nc_cl_handle **out, int64_t *groups) {
  *out = NULL;
  if (c->op == NC_OP_KMEANS_ASSIGN) return assign_tiled(c, out, groups);
  if (c->op == NC_OP_KMEANS_UPDATE) return update_sliced(c, out, groups);
  return NC_OK;
}

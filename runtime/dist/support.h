/* Helpers shared by the collectives of runtime/dist/ (one process, and MPI). */
#ifndef NC_DIST_SUPPORT_H
#define NC_DIST_SUPPORT_H

#include "netcl/dist.h"

/* NC_ERR_DTYPE unless dt is one the collectives combine (mean: float only). */
nc_status nc_dist_check_dtype(nc_dtype dt, nc_reduce_op op, const char *what);
/* acc[i] = acc[i] op src[i] (sum for sum and mean; max propagates NaN). */
void nc_dist_combine(void *acc, const void *src, int64_t n, nc_dtype dt, nc_reduce_op op);
/* acc[i] /= count (float dtypes). */
void nc_dist_scale(void *acc, int64_t n, nc_dtype dt, int count);
/* Writes a dense host array into t (any layout); the write is queued, not waited for. */
nc_status nc_dist_write_back(nc_tensor *t, const void *host, size_t nbytes);

#endif

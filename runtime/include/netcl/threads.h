/* The CPU thread pool: one pool of worker threads runs every parallel CPU loop of libnetcl and,
 * with OpenBLAS, every GEMM (docs/performance.md). */
#ifndef NETCL_THREADS_H
#define NETCL_THREADS_H

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Threads a parallel CPU loop uses, the caller included. The default is NETCL_NUM_THREADS if
 * set, else OMP_NUM_THREADS (its first number), else the number of CPUs this process may run
 * on. */
int nc_get_num_threads(void);

/* Sets it for the whole process (1 = every loop runs on the calling thread). Error
 * NC_ERR_ARG for n < 1 or n > 1024. */
nc_status nc_set_num_threads(int n);

#ifdef __cplusplus
}
#endif

#endif

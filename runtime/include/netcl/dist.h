/* Collectives over tensors: between devices of one process (device to device between peers,
 * nc_device_peers; else staged through host memory), and
 * between processes through MPI (built when CMake finds MPI; otherwise every nc_mpi_* call but
 * nc_mpi_available fails with NC_ERR_UNSUPPORTED). docs/distributed.md describes both. */
#ifndef NETCL_DIST_H
#define NETCL_DIST_H

#include <stdbool.h>
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { NC_REDUCE_SUM = 0, NC_REDUCE_MEAN, NC_REDUCE_MAX } nc_reduce_op;

/* "sum" | "mean" | "max" -> op; NC_ERR_ARG naming the accepted ones otherwise. */
nc_status nc_reduce_op_parse(const char *name, nc_reduce_op *out);

/* ---- one process, several devices ------------------------------------------------------------- */
/* In place: every ts[i] becomes op over all of them. The tensors must have one shape and dtype
 * (float32, float64, int32 or int64; mean: float only) and lie on n distinct devices. When every
 * device is a peer of ts[0]'s, the tensors are copied device to device to ts[0]'s device,
 * combined there in rank order by the device's ops and copied back, all queued without waiting.
 * Otherwise values are read to host memory, combined there in rank order (the same bits on every
 * device) and written back; the writes are queued without waiting, so they overlap each other
 * and later work. */
nc_status nc_group_all_reduce(nc_tensor **ts, int n, nc_reduce_op op);

/* The same all-reduce split so that it can start before every tensor is ready (gradient
 * buckets while backward still runs): begin for a group of n positions; add queues the copy of
 * position i's tensor (0-based; same shape and dtype as the others, a distinct device) to the
 * first added tensor's device when the two are peers, else its read to the host (and the reads
 * of those added before), and returns without waiting, t being retained until finish; finish
 * combines in position order (the same bits as nc_group_all_reduce; on the host after waiting
 * for the reads) and queues the copies or write-backs. Every
 * position must have been added. finish frees r, also when it fails; free abandons a reduction
 * (waiting for its reads in flight, writing nothing back). */
typedef struct nc_group_reduce nc_group_reduce;
nc_status nc_group_reduce_begin(int n, nc_reduce_op op, nc_group_reduce **out);
nc_status nc_group_reduce_add(nc_group_reduce *r, int i, nc_tensor *t);
int nc_group_reduce_added(const nc_group_reduce *r); /* positions added so far */
nc_status nc_group_reduce_finish(nc_group_reduce *r);
void nc_group_reduce_free(nc_group_reduce *r);
/* In place: every ts[i] becomes a copy of ts[root] (0-based): device to device when every device
 * is a peer of root's, else read once to the host and written to each. */
nc_status nc_group_broadcast(nc_tensor **ts, int n, int root);

/* ---- several processes: MPI --------------------------------------------------------------------- */
bool nc_mpi_available(void);
/* Initializes MPI once (a second call only reports). local_rank: the rank among the processes of
 * this host. timeout_s: how long a collective waits for the other ranks before failing (> 0). */
nc_status nc_mpi_init(double timeout_s, int *rank, int *size, int *local_rank, int *local_size);
bool nc_mpi_initialized(void);
/* In place on every rank; shapes and dtypes are checked across ranks first (a mismatch is an
 * error on every rank, naming each rank's shape). */
nc_status nc_mpi_all_reduce(nc_tensor *t, nc_reduce_op op);
/* The same split so that it overlaps other work (gradient buckets while backward runs): start
 * checks the call against every rank (as nc_mpi_all_reduce does), queues the device->host read
 * of t (retained until finish) and returns; the MPI_Iallreduce of each started reduction is
 * launched, in start order on every rank, as soon as its read has completed (checked by later
 * starts and finishes, never waited for there) or at finish at the latest. finish waits for it
 * (within the timeout), then queues the write-back into t. finish frees h, also when it fails.
 * Blocking collectives launch every started reduction first, so the ranks' orders agree. */
typedef struct nc_mpi_reduce nc_mpi_reduce;
nc_status nc_mpi_all_reduce_start(nc_tensor *t, nc_reduce_op op, nc_mpi_reduce **out);
nc_status nc_mpi_all_reduce_finish(nc_mpi_reduce *h);
nc_status nc_mpi_broadcast(nc_tensor *t, int root);
nc_status nc_mpi_barrier(void);
/* out: a new tensor [size, t's shape...] on t's device, rank r's tensor at index r; on every rank
 * when root < 0, else on root only (*out = NULL elsewhere). */
nc_status nc_mpi_gather(nc_tensor *t, int root, nc_tensor **out);
/* Ends MPI (at exit, or when asked); later calls fail. */
nc_status nc_mpi_finalize(void);

#ifdef __cplusplus
}
#endif

#endif

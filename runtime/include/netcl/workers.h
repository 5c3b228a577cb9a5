/* Data-loader worker processes and the shared-memory ring they write batches into.
 *
 * The ring is one POSIX shared-memory segment (shm_open, then mmap MAP_SHARED) cut into
 * workers * prefetch fixed slots, unlinked as soon as it is mapped: the workers reach it through
 * the mapping they inherit, and no name is left behind whatever happens to the processes.
 * Batch b (0-based) belongs to worker b % workers, which writes it into that worker's slot
 * (b / workers) % prefetch; each slot carries the sequence number b + 1 of the batch it holds
 * (0: empty). Two socket pairs per worker carry the wake-ups: "batch b is ready" to the main
 * process, and "a slot is free again" back to the worker (a worker holds at most prefetch batches
 * the main process has not taken). The main process sees a worker's death as the end of its
 * socket.
 *
 * A forked worker must never touch a driver: nc_ring_fork's child has every device but the CPU
 * backend replaced by one that refuses all use (OpenCL drivers are not fork-safe), runs its CPU
 * ops on one thread (so OpenMP and OpenBLAS never wait on the parent's thread pools, which do
 * not exist in the child), ignores SIGINT (the main process handles Ctrl-C and ends the
 * workers), and is killed when the main process dies. */
#ifndef NETCL_WORKERS_H
#define NETCL_WORKERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nc_ring nc_ring;

/* A ring for `workers` workers (1..256) with `prefetch` slots each (1..64), each slot able to
 * hold slot_bytes of payload. Errors: NC_ERR_ARG, NC_ERR_IO (shm_open, mmap, socketpair), NC_ERR_OOM. */
nc_status nc_ring_create(int workers, int prefetch, size_t slot_bytes, nc_ring **out);

/* Forks worker w (0-based, each once). In the parent *pid is the child's pid; in the child it is
 * 0 and the process has become a worker (see above). */
nc_status nc_ring_fork(nc_ring *r, int w, int *pid);

/* Worker side. acquire waits until batch b's slot is free and gives its payload area;
 * NC_ERR_IO when the main process has gone (the worker should then exit). publish hands the
 * slot to the main process: len bytes of a packed batch, or of an error message. */
nc_status nc_ring_acquire(nc_ring *r, int64_t b, void **payload, size_t *capacity);
nc_status nc_ring_publish(nc_ring *r, int64_t b, size_t len, bool is_error);
/* Ends a worker process at once (stdout and stderr flushed, no atexit handlers, no finalizers:
 * the parent's state must not be torn down from a copy of it). */
void nc_worker_exit(int code);

/* Main side. wait blocks until batch b is ready and gives its payload (valid until release);
 * a worker that ended without delivering it is an NC_ERR_IO error saying how it ended (the
 * signal that killed it, or its exit status). release gives the slot back to its worker. */
nc_status nc_ring_wait(nc_ring *r, int64_t b, const void **payload, size_t *len, bool *is_error);
nc_status nc_ring_release(nc_ring *r, int64_t b);
/* The pid of worker w (0 once it has been reaped or was never forked). */
int nc_ring_pid(const nc_ring *r, int w);
/* Kills (SIGKILL) and reaps every worker still running, closes the sockets and unmaps the ring.
 * Safe on NULL; no zombie is left. */
void nc_ring_destroy(nc_ring *r);

/* Batches in a slot: the tensors' dtypes, shapes and bytes. pack_size is the bytes a batch of
 * these tensors needs. pack fails with NC_ERR_ARG when it does not fit in capacity (the tensors
 * are read to the host: CPU tensors are copied). unpack makes new tensors on dev, written
 * asynchronously (through pinned staging buffers on OpenCL), so the payload can be released at
 * once; *n receives the count (at most max). */
size_t nc_batch_pack_size(int n, nc_tensor *const *tensors);
nc_status nc_batch_pack(int n, nc_tensor *const *tensors, void *buf, size_t capacity, size_t *len);
nc_status nc_batch_unpack(const void *buf, size_t len, nc_device *dev, int max, nc_tensor **out, int *n);

#ifdef __cplusplus
}
#endif

#endif

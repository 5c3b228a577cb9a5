/* Storage: a refcounted device buffer that tensors view. */
#ifndef NETCL_STORAGE_H
#define NETCL_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nc_storage nc_storage;

enum {
  NC_ALLOC_DEFAULT = 0,
  NC_ALLOC_PERSISTENT = 1 /* long-lived: parameters, optimizer state */
};

/* New storage of nbytes (0 is legal) on dev; refcount 1. Errors: NC_ERR_OOM. */
nc_status nc_storage_new(nc_device *dev, size_t nbytes, unsigned flags, nc_storage **out);

/* Wraps host memory the caller owns as CPU-backend storage without copying. release(ud) is
 * called when the last reference goes (may be NULL). */
nc_status nc_storage_wrap_host(void *ptr, size_t nbytes, void (*release)(void *ud), void *ud,
                               nc_storage **out);

nc_storage *nc_storage_retain(nc_storage *s);
void nc_storage_release(nc_storage *s);

nc_device *nc_storage_device(const nc_storage *s);
size_t nc_storage_nbytes(const nc_storage *s);

/* Backend handle of the buffer (cl_mem for OpenCL, a host pointer for the CPU backend). */
void *nc_storage_handle(const nc_storage *s);

/* Host pointer of CPU-backend storage, NULL for other devices. */
void *nc_storage_host_ptr(const nc_storage *s);

/* Bumped by every in-place write; autograd uses it to detect changes to saved tensors. */
uint64_t nc_storage_version(const nc_storage *s);
void nc_storage_bump_version(nc_storage *s);

/* Copies nbytes of host memory into the storage at byte offset off. Asynchronous on devices
 * with a queue: src may be reused as soon as this returns (it is staged). */
nc_status nc_storage_write(nc_storage *s, size_t off, const void *src, size_t nbytes);

/* Copies nbytes at byte offset off to host memory; waits for queued work. */
nc_status nc_storage_read(const nc_storage *s, size_t off, void *dst, size_t nbytes);

/* Copies nbytes at byte offset src_off of src into dst at byte offset dst_off, device to device,
 * when their devices are peers (nc_device_peers). Queued without waiting, after the work queued
 * on either device before it; the work queued on either afterwards sees the copy. Errors:
 * NC_ERR_INDEX (a range outside a storage), NC_ERR_STATE (the devices are not peers). */
nc_status nc_storage_copy_peer(nc_storage *dst, size_t dst_off, const nc_storage *src, size_t src_off, size_t nbytes);

/* ---- reads that do not wait --------------------------------------------------------------------
 * nc_storage_read_async copies nbytes at byte offset off of src into the host storage dst (a
 * CPU-backend storage) at byte offset dst_off, and returns as soon as the copy is enqueued: on
 * an OpenCL device, a non-blocking read into a pinned staging buffer, behind the work already
 * queued (so it sees src as that work leaves it, whatever is enqueued after). dst is then
 * pending until the bytes land: every access to its data (nc_storage_handle, _host_ptr, _read,
 * _write, a further read_async into it, its last release) first waits for them, so a result is
 * never read early, whether or not the caller waits. A new async read into a pending dst waits
 * for the previous one first. src may be released at once.
 * The read completes before returning when src is host memory (the CPU backend) or when the
 * device's pinned staging memory is all taken by pending reads; then it also reads the
 * device's pending checks (as nc_storage_read does). Otherwise those checks are read at the
 * device's next sync point. nc_device_sync completes every pending read of the device.
 * Errors: NC_ERR_INDEX (a range outside a storage), NC_ERR_ARG (dst is not host memory), and
 * the device's failure to start the read. */
nc_status nc_storage_read_async(const nc_storage *src, size_t off, nc_storage *dst, size_t dst_off, size_t nbytes);

/* Whether s has no pending read (its bytes have landed, or none was started). Never waits. */
bool nc_storage_is_ready(const nc_storage *s);

/* Waits for s's pending read, if any, and returns its failure (an access that has no status to
 * return, such as nc_storage_handle, waits the same way but cannot report one). */
nc_status nc_storage_wait(const nc_storage *s);

/* A read to the host in flight (nc_storage_read_start). */
typedef struct nc_read {
  nc_device *dev; /* NULL when the read is complete (or was never started) */
  void *ticket;
} nc_read;

/* nc_storage_read without waiting: the read is queued behind the device's work and the call
 * returns; dst must stay valid, and the storage alive, until nc_read_wait(out). Devices without
 * a queue (the CPU backend) read at once. On failure nothing is in flight (out->dev is NULL). */
nc_status nc_storage_read_start(const nc_storage *s, size_t off, void *dst, size_t nbytes, nc_read *out);
/* Whether the read has completed (never waits). */
bool nc_read_done(const nc_read *r);
/* Waits for the read (once; a second call, or one on a read that never started, returns NC_OK),
 * then reports the device-side checks pending on its device, as a blocking read does. Holds no
 * lock while it waits: other threads go on queueing work on the device. */
nc_status nc_read_wait(nc_read *r);

#ifdef __cplusplus
}
#endif

#endif

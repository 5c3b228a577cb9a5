/* The device structure and the small device interface that storage and the memory pools need
 * (allocation, copies to and from the host, sync, counters), shared by core and the backends.
 * Core knows no op: a device's op implementations live in its dispatch table
 * (runtime/backend/dispatch.h), which core only carries as an opaque pointer. Backends make
 * devices and hand them to the registry (runtime/backend/registry.c), which registers them here. */
#ifndef NETCL_CORE_DEVICE_IMPL_H
#define NETCL_CORE_DEVICE_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include "netcl/device.h"
#include "netcl/memory.h"
#include "netcl/storage.h"

struct nc_pool;
struct nc_dispatch;
struct nc_pending_check;

typedef struct nc_device_iface {
  const char *name;
  /* Raw buffers (the pool caches them). alloc may fail with NC_ERR_OOM. */
  nc_status (*alloc)(nc_device *d, size_t nbytes, void **handle);
  void (*release)(nc_device *d, void *handle);
  void *(*host_ptr)(nc_device *d, void *handle); /* NULL when not host-addressable */
  /* write is asynchronous and stages src; read waits for queued work. */
  nc_status (*write)(nc_device *d, void *handle, size_t off, const void *src, size_t n);
  nc_status (*read)(nc_device *d, void *handle, size_t off, void *dst, size_t n);
  nc_status (*sync)(nc_device *d);
  /* Backend counters merged into nc_memory_stats (programs built/loaded, pinned bytes); may be
   * NULL. */
  void (*stats)(nc_device *d, nc_memory_stats *st);
  /* Builds (or loads from the disk cache) every kernel program the device uses; NULL when the
   * backend compiles nothing. */
  nc_status (*warmup)(nc_device *d);
  /* At process exit, after the queue is drained and the pool's cache released: releases every
   * object the backend made (kernels, programs, queue, context); later use of the device fails
   * with NC_ERR_STATE. May be NULL. */
  void (*shutdown)(nc_device *d);
  /* Reads that do not wait (nc_storage_read_async); all three NULL when the backend's reads
   * complete at once. read_start enqueues a copy of n bytes at off into the host memory dst and
   * returns its token, or NULL when it could not start one (no pinned memory left: the caller
   * reads blocking); dst must stay valid until read_end. read_ready says whether the bytes are
   * in dst; read_end waits for them, frees the token and returns the read's failure. sync and
   * shutdown complete every pending read (its bytes land in dst; read_end then only frees). */
  nc_status (*read_start)(nc_device *d, void *handle, size_t off, void *dst, size_t n, void **token);
  bool (*read_ready)(nc_device *d, void *token);
  nc_status (*read_end)(nc_device *d, void *token);
  /* Device-to-device copies (nc_storage_copy_peer), both NULL when the backend has none. peers
   * says whether a and b (two devices of this backend) can copy between each other without the
   * host; peer_copy queues a copy of n bytes from src's buffer to dst's, ordered after the work
   * queued on both and before the work queued on either later, and returns without waiting. */
  bool (*peers)(nc_device *a, nc_device *b);
  nc_status (*peer_copy)(nc_device *dst, void *dst_handle, size_t dst_off, nc_device *src, void *src_handle,
                         size_t src_off, size_t n);
} nc_device_iface;

struct nc_device {
  nc_device_info info;
  const nc_device_iface *iface;
  const struct nc_dispatch *dispatch; /* the backend's op table (opaque to core) */
  void *impl;                         /* backend state */
  struct nc_pool *pool;       /* BufferPool */
  struct nc_pool *persistent; /* PersistentBufferPool */
  pthread_mutex_t lock;       /* serializes launches from several threads */
  struct nc_pending_check *pending; /* device-side checks not read yet (nc_device_defer_check) */
  int npending;
  atomic_uint_fast64_t host_reads, syncs; /* reads to the host and syncs (nc_memory_stats) */
  atomic_uint_fast64_t async_reads;       /* reads started without waiting (nc_storage_read_async) */
  uint64_t memory_limit;      /* nc_memory_limit_set (0: none); atomic loads and stores */
};

/* Adds a device to the list (takes ownership of dev; called by the backend registry only, while
 * nc_init runs). */
nc_status nc_device_register(nc_device *dev);
/* The registered devices, in registration order (nc_device_get and friends call nc_init first). */
int nc_device_list(nc_device ***out);

/* nc_storage_wrap_host on a given (host-addressable) device; the public function, which needs
 * the CPU device and so the registry, lives there. */
nc_status nc_storage_wrap_host_on(nc_device *dev, void *ptr, size_t nbytes, void (*release)(void *ud),
                                  void *ud, struct nc_storage **out);

/* A check a kernel made on the device: the int32 at byte `off` of `flag` holds INT32_MAX when all
 * was well, else a 1-based position the reporter turns into an error. The device reads the
 * flags at its next sync point (nc_device_sync, a read to the host: nc_storage_read), so an op
 * that validates its inputs on the device does not wait for its kernels; the first failed check
 * makes that call fail with report(ud, position)'s error, and the later ones are dropped. Retains
 * flag; takes ud (free_ud(ud) when done, may be NULL) even on failure. At most
 * NC_PENDING_MAX checks wait: the next one reads them at once. */
#define NC_PENDING_MAX 64
typedef nc_status (*nc_check_report)(void *ud, int64_t position);
nc_status nc_device_defer_check(nc_device *dev, nc_storage *flag, size_t off, nc_check_report report, void *ud,
                                void (*free_ud)(void *));
/* Reads every pending check of dev (each read waits for the queue up to its kernels). */
nc_status nc_device_flush_checks(nc_device *dev);

#endif

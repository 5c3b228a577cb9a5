#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include "core/check.h"
#include "netcl/storage.h"
#include "device_impl.h"
#include "pool.h"

struct nc_storage {
  nc_device *dev;
  nc_block *block;  /* NULL for zero bytes and for wrapped host memory */
  void *handle;
  void *host;
  size_t nbytes;
  atomic_int refcount;
  atomic_uint_fast64_t version;
  void (*release)(void *ud);
  void *ud;
  /* A pending read into this (host) storage: the source device's token, NULL when none.
   * read_dev is written before the token is published and read after it is seen. */
  _Atomic(void *) reading;
  nc_device *read_dev;
};

/* ---- pending reads ------------------------------------------------------------------------------
 * Settling a storage's pending read (waiting for it and dropping its token) happens once, under
 * one of a few striped locks: a second thread that finds the token waits for the first. The
 * fast path, no pending read, is one acquire load. */
#define READ_LOCKS 16
static pthread_mutex_t read_locks[READ_LOCKS] = {
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER};

static pthread_mutex_t *read_lock_of(const nc_storage *s) {
  return &read_locks[((uintptr_t)s >> 6) % READ_LOCKS];
}

static nc_status settle_read(const nc_storage *cs) {
  nc_storage *s = (nc_storage *)cs; /* the token is mutable state of a const storage */
  if (!atomic_load_explicit(&s->reading, memory_order_acquire)) return NC_OK;
  pthread_mutex_t *m = read_lock_of(s);
  pthread_mutex_lock(m);
  void *token = atomic_load_explicit(&s->reading, memory_order_relaxed);
  nc_status st = NC_OK;
  if (token) {
    st = s->read_dev->iface->read_end(s->read_dev, token);
    atomic_store_explicit(&s->reading, NULL, memory_order_release);
  }
  pthread_mutex_unlock(m);
  return st;
}

nc_status nc_storage_new(nc_device *dev, size_t nbytes, unsigned flags, nc_storage **out) {
  nc_storage *s = calloc(1, sizeof *s);
  if (!s) return nc_error(NC_ERR_OOM, "out of host memory for a storage header");
  s->dev = dev;
  s->nbytes = nbytes;
  atomic_init(&s->refcount, 1);
  atomic_init(&s->version, 0);
  if (nbytes > 0) {
    struct nc_pool *p = (flags & NC_ALLOC_PERSISTENT) ? dev->persistent : dev->pool;
    nc_status st = nc_pool_alloc(p, nbytes, &s->block);
    if (st != NC_OK) {
      free(s);
      return st;
    }
    s->handle = s->block->handle;
    s->host = s->block->host;
  }
  *out = s;
  return NC_OK;
}

nc_status nc_storage_wrap_host_on(nc_device *dev, void *ptr, size_t nbytes, void (*release)(void *ud),
                                  void *ud, nc_storage **out) {
  if (!ptr && nbytes) return nc_error(NC_ERR_ARG, "wrapping a NULL host pointer of %zu bytes", nbytes);
  nc_storage *s = calloc(1, sizeof *s);
  if (!s) return nc_error(NC_ERR_OOM, "out of host memory for a storage header");
  s->dev = dev;
  s->handle = s->host = ptr;
  s->nbytes = nbytes;
  s->release = release;
  s->ud = ud;
  atomic_init(&s->refcount, 1);
  atomic_init(&s->version, 0);
  *out = s;
  return NC_OK;
}

nc_storage *nc_storage_retain(nc_storage *s) {
  atomic_fetch_add(&s->refcount, 1);
  return s;
}

void nc_storage_release(nc_storage *s) {
  if (!s || atomic_fetch_sub(&s->refcount, 1) != 1) return;
  (void)settle_read(s); /* the read writes into the memory about to be freed */
  if (s->block) nc_pool_free(s->block);
  if (s->release) s->release(s->ud);
  free(s);
}

nc_device *nc_storage_device(const nc_storage *s) { return s->dev; }
size_t nc_storage_nbytes(const nc_storage *s) { return s->nbytes; }
/* The two ways to the bytes: both wait for a pending read first. */
void *nc_storage_handle(const nc_storage *s) {
  (void)settle_read(s);
  return s->handle;
}
void *nc_storage_host_ptr(const nc_storage *s) {
  (void)settle_read(s);
  return s->host;
}
uint64_t nc_storage_version(const nc_storage *s) { return atomic_load(&s->version); }
void nc_storage_bump_version(nc_storage *s) { atomic_fetch_add(&s->version, 1); }

static nc_status check_range(const nc_storage *s, size_t off, size_t n, const char *what) {
  if (off > s->nbytes || n > s->nbytes - off)
    return nc_error(NC_ERR_INDEX, "%s of %zu bytes at offset %zu is outside a storage of %zu bytes",
                    what, n, off, s->nbytes);
  return NC_OK;
}

nc_status nc_storage_write(nc_storage *s, size_t off, const void *src, size_t nbytes) {
  NC_TRY(check_range(s, off, nbytes, "write"));
  if (nbytes == 0) return NC_OK;
  NC_TRY(settle_read(s));
  return s->dev->iface->write(s->dev, s->handle, off, src, nbytes);
}

nc_status nc_storage_read(const nc_storage *s, size_t off, void *dst, size_t nbytes) {
  NC_TRY(check_range(s, off, nbytes, "read"));
  if (nbytes == 0) return NC_OK;
  NC_TRY(settle_read(s));
  NC_TRY(nc_device_flush_checks(s->dev));
  atomic_fetch_add(&s->dev->host_reads, 1);
  return s->dev->iface->read(s->dev, s->handle, off, dst, nbytes);
}

/* Here rather than in device.c, which calls into this file: the copy below needs it. */
bool nc_device_peers(nc_device *a, nc_device *b) {
  return a && b && a != b && a->iface == b->iface && a->iface->peers && a->iface->peers(a, b);
}

nc_status nc_storage_copy_peer(nc_storage *dst, size_t dst_off, const nc_storage *src, size_t src_off, size_t nbytes) {
  NC_TRY(check_range(src, src_off, nbytes, "device-to-device copy"));
  NC_TRY(check_range(dst, dst_off, nbytes, "device-to-device copy destination"));
  if (!nc_device_peers(dst->dev, src->dev))
    return nc_error(NC_ERR_STATE, "no device-to-device copy from %s to %s: they are not peers", src->dev->info.name,
                    dst->dev->info.name);
  if (nbytes == 0) return NC_OK;
  return dst->dev->iface->peer_copy(dst->dev, dst->handle, dst_off, src->dev, src->handle, src_off, nbytes);
}

/* Starts a read of src into host memory through the device's read_start: *token is the read in
 * flight, or NULL when none started (host memory, a device without a queue, no pinned memory
 * left: the caller reads at once). A status with a token reports a failure of the queue behind
 * a read that did start. */
static nc_status begin_read(const nc_storage *src, size_t off, void *dst, size_t nbytes, void **token) {
  nc_device *dev = src->dev;
  *token = NULL;
  nc_status st = NC_OK;
  if (dev->iface->read_start && !src->host) st = dev->iface->read_start(dev, src->handle, off, dst, nbytes, token);
  if (*token) atomic_fetch_add(&dev->async_reads, 1);
  return st;
}

nc_status nc_storage_read_async(const nc_storage *src, size_t off, nc_storage *dst, size_t dst_off, size_t nbytes) {
  NC_TRY(check_range(src, off, nbytes, "async read"));
  NC_TRY(check_range(dst, dst_off, nbytes, "async read destination"));
  if (nbytes && !dst->host)
    return nc_error(NC_ERR_ARG, "an async read needs host memory to read into, and %s is not host memory",
                    dst->dev->info.name);
  if (nbytes == 0) return NC_OK;
  NC_TRY(settle_read(dst)); /* one pending read per storage: the previous one lands first */
  nc_storage_bump_version(dst);
  char *host = (char *)dst->host + dst_off;
  void *token;
  nc_status st = begin_read(src, off, host, nbytes, &token);
  if (token) {
    dst->read_dev = src->dev;
    atomic_store_explicit(&dst->reading, token, memory_order_release);
  }
  if (token || st != NC_OK) return st;
  return nc_storage_read(src, off, host, nbytes);
}

bool nc_storage_is_ready(const nc_storage *cs) {
  nc_storage *s = (nc_storage *)cs;
  if (!atomic_load_explicit(&s->reading, memory_order_acquire)) return true;
  pthread_mutex_t *m = read_lock_of(s);
  pthread_mutex_lock(m);
  void *token = atomic_load_explicit(&s->reading, memory_order_relaxed);
  bool ready = !token || s->read_dev->iface->read_ready(s->read_dev, token);
  pthread_mutex_unlock(m);
  return ready;
}

nc_status nc_storage_wait(const nc_storage *s) { return settle_read(s); }

/* nc_storage_read_start uses the same device entries as nc_storage_read_async, with the
 * caller's memory as the destination and the caller keeping the token (the nc_read). */
nc_status nc_storage_read_start(const nc_storage *s, size_t off, void *dst, size_t nbytes, nc_read *out) {
  *out = (nc_read){NULL, NULL};
  NC_TRY(check_range(s, off, nbytes, "read"));
  if (nbytes == 0) return NC_OK;
  void *token;
  nc_status st = begin_read(s, off, dst, nbytes, &token);
  if (token) *out = (nc_read){s->dev, token};
  if (token || st != NC_OK) return st;
  return nc_storage_read(s, off, dst, nbytes); /* no queue, or no pinned memory left: read now */
}

bool nc_read_done(const nc_read *r) { return !r->dev || r->dev->iface->read_ready(r->dev, r->ticket); }

nc_status nc_read_wait(nc_read *r) {
  nc_device *dev = r->dev;
  if (!dev) return NC_OK;
  r->dev = NULL;
  nc_status s = dev->iface->read_end(dev, r->ticket);
  r->ticket = NULL;
  /* the checks a blocking read reports before it reads, reported after this one */
  return s == NC_OK ? nc_device_flush_checks(dev) : s;
}

/* ---- checks made on the device, read at the next sync point ------------------------------------ */
typedef struct nc_pending_check {
  nc_storage *flag;
  size_t off;
  nc_check_report report;
  void *ud;
  void (*free_ud)(void *);
  struct nc_pending_check *next;
} nc_pending_check;

static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;

/* Reads one check's flag (unless an earlier one failed), then frees it. */
static nc_status settle(nc_pending_check *p, nc_status s) {
  if (s == NC_OK) {
    int32_t v = INT32_MAX;
    s = nc_storage_read(p->flag, p->off, &v, sizeof v);
    if (s == NC_OK && v != INT32_MAX) s = p->report(p->ud, v);
  }
  nc_storage_release(p->flag);
  if (p->free_ud) p->free_ud(p->ud);
  free(p);
  return s;
}

nc_status nc_device_defer_check(nc_device *dev, nc_storage *flag, size_t off, nc_check_report report, void *ud,
                                void (*free_ud)(void *)) {
  nc_status s = check_range(flag, off, sizeof(int32_t), "check flag read");
  nc_pending_check *p = s == NC_OK ? malloc(sizeof *p) : NULL;
  if (!p) {
    if (free_ud) free_ud(ud);
    return s != NC_OK ? s : nc_error(NC_ERR_OOM, "out of host memory for a pending check");
  }
  *p = (nc_pending_check){nc_storage_retain(flag), off, report, ud, free_ud, NULL};
  pthread_mutex_lock(&pending_lock);
  p->next = dev->pending;
  dev->pending = p;
  const bool full = ++dev->npending >= NC_PENDING_MAX;
  pthread_mutex_unlock(&pending_lock);
  return full ? nc_device_flush_checks(dev) : NC_OK;
}

nc_status nc_device_flush_checks(nc_device *dev) {
  pthread_mutex_lock(&pending_lock);
  nc_pending_check *p = dev->pending, *order = NULL;
  dev->pending = NULL;
  dev->npending = 0;
  pthread_mutex_unlock(&pending_lock);
  while (p) { /* newest first: reverse, to report the oldest failure */
    nc_pending_check *next = p->next;
    p->next = order;
    order = p;
    p = next;
  }
  nc_status s = NC_OK;
  while (order) {
    nc_pending_check *next = order->next;
    s = settle(order, s);
    order = next;
  }
  return s;
}

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
};

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
  if (s->block) nc_pool_free(s->block);
  if (s->release) s->release(s->ud);
  free(s);
}

nc_device *nc_storage_device(const nc_storage *s) { return s->dev; }
size_t nc_storage_nbytes(const nc_storage *s) { return s->nbytes; }
void *nc_storage_handle(const nc_storage *s) { return s->handle; }
void *nc_storage_host_ptr(const nc_storage *s) { return s->host; }
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
  return s->dev->iface->write(s->dev, s->handle, off, src, nbytes);
}

nc_status nc_storage_read(const nc_storage *s, size_t off, void *dst, size_t nbytes) {
  NC_TRY(check_range(s, off, nbytes, "read"));
  if (nbytes == 0) return NC_OK;
  NC_TRY(nc_device_flush_checks(s->dev));
  atomic_fetch_add(&s->dev->host_reads, 1);
  return s->dev->iface->read(s->dev, s->handle, off, dst, nbytes);
}

nc_status nc_storage_read_start(const nc_storage *s, size_t off, void *dst, size_t nbytes, nc_read *out) {
  *out = (nc_read){NULL, NULL};
  NC_TRY(check_range(s, off, nbytes, "read"));
  if (nbytes == 0) return NC_OK;
  const nc_device_iface *io = s->dev->iface;
  if (!io->read_start) return nc_storage_read(s, off, dst, nbytes);
  atomic_fetch_add(&s->dev->host_reads, 1);
  NC_TRY(io->read_start(s->dev, s->handle, off, dst, nbytes, &out->ticket));
  out->dev = s->dev;
  return NC_OK;
}

bool nc_read_done(const nc_read *r) {
  return !r->dev || !r->dev->iface->read_done || r->dev->iface->read_done(r->dev, r->ticket);
}

nc_status nc_read_wait(nc_read *r) {
  nc_device *dev = r->dev;
  if (!dev) return NC_OK;
  r->dev = NULL;
  nc_status s = dev->iface->read_wait(dev, r->ticket);
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

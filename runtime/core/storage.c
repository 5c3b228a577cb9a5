#include <stdatomic.h>
#include <stdlib.h>
#include "core/check.h"
#include "netcl/storage.h"
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
  return s->dev->iface->read(s->dev, s->handle, off, dst, nbytes);
}

/* BufferPool: a size-class caching allocator over a backend's raw buffers (core-internal). */
#ifndef NETCL_CORE_POOL_H
#define NETCL_CORE_POOL_H

#include "device_impl.h"

typedef struct nc_block {
  void *handle;
  void *host; /* host address for host-addressable backends */
  size_t size; /* class size actually allocated */
  struct nc_pool *pool;
  struct nc_block *next;
} nc_block;

/* caching = false gives the persistent pool: exact sizes, released to the driver on free. */
nc_status nc_pool_new(nc_device *dev, bool caching, struct nc_pool **out);
nc_status nc_pool_alloc(struct nc_pool *p, size_t nbytes, nc_block **out);
void nc_pool_free(nc_block *b);

#endif

/* Device memory: caching buffer pools and their statistics. */
#ifndef NETCL_MEMORY_H
#define NETCL_MEMORY_H

#include <stdint.h>
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint64_t in_use;          /* bytes handed out by the buffer pool (size-class rounded) */
  uint64_t cached;          /* bytes kept for reuse */
  uint64_t peak;            /* highest in_use */
  uint64_t hits, misses;    /* allocations served from the cache / by the driver */
  uint64_t persistent_in_use; /* bytes in the persistent pool (parameters, optimizer state) */
  uint64_t pinned_bytes;    /* page-locked host staging bytes held */
  uint64_t programs_built;  /* OpenCL programs compiled from source */
  uint64_t programs_loaded; /* OpenCL programs loaded from the on-disk binary cache */
  uint64_t host_reads;      /* reads from the device to the host (each waits for queued work) */
  uint64_t syncs;           /* nc_device_sync calls */
  uint64_t async_reads;     /* reads to the host started without waiting (nc_storage_read_async) */
} nc_memory_stats;

nc_status nc_memory_stats_get(nc_device *dev, nc_memory_stats *out);

/* Returns every cached (unused) buffer of the device to the driver. */
void nc_memory_empty_cache(nc_device *dev);

/* A cap on the bytes a device's pools hold (in use plus cached, both pools), enforced by the
 * allocator: an allocation past it fails as the driver running out would (cache freed, pressure
 * hooks, one retry, then NC_ERR_OOM). 0 removes the cap. NETCL_MEMORY_LIMIT_MB sets the starting
 * cap of every device. */
void nc_memory_limit_set(nc_device *dev, uint64_t bytes);
uint64_t nc_memory_limit_get(nc_device *dev);

/* Memory-pressure hooks: on an allocation failure the pool frees its cache, calls every hook
 * (the Lua binding runs a full garbage collection), then retries once. */
typedef void (*nc_pressure_fn)(void *ud);
nc_status nc_pressure_register(nc_pressure_fn fn, void *ud);
void nc_pressure_unregister(nc_pressure_fn fn, void *ud);

#ifdef __cplusplus
}
#endif

#endif

/* Devices: the CPU backend (always present) and every OpenCL device the ICD loader finds. */
#ifndef NETCL_DEVICE_H
#define NETCL_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nc_device nc_device;

typedef enum { NC_DEVICE_CPU = 0, NC_DEVICE_OPENCL } nc_device_kind;

typedef struct {
  char name[256];
  char vendor[256];
  char driver_version[128];
  char spec[32];          /* "cpu" or "opencl:P:D": accepted by nc_device_find */
  nc_device_kind kind;
  bool is_gpu;
  uint64_t memory;        /* bytes of global memory */
  uint64_t max_alloc;     /* largest single buffer in bytes */
  int compute_units;
  size_t max_work_group_size;
  bool fp64;
  bool tf32; /* tf32 tensor cores (mma.sync) that "high" matmul precision uses */
  bool bf16_mma; /* bfloat16 tensor cores (mma.sync m16n8k16) that "medium" matmul precision uses */
} nc_device_info;

/* Discovers devices on first call (thread-safe). Fails only if the CPU backend cannot start. */
nc_status nc_init(void);

/* Number of devices; index 0 is always the CPU backend. */
int nc_device_count(void);
nc_device *nc_device_get(int index);

/* Looks a device up by spec: NULL or "" = default (NETCL_DEVICE if set, else the first OpenCL
 * GPU, else the CPU backend), "cpu", "gpu", "opencl" (first OpenCL device), "opencl:P:D"
 * (platform P, device D, 0-based). Errors: NC_ERR_ARG for a malformed spec, NC_ERR_DEVICE when
 * no device matches. */
nc_status nc_device_find(const char *spec, nc_device **out);

const nc_device_info *nc_device_info_of(const nc_device *dev);

/* Builds and caches every kernel program for the device (netcl-lua --warmup); *seconds gets
 * the time it took (may be NULL). */
nc_status nc_device_warmup(nc_device *dev, double *seconds);

/* Whether a and b (distinct devices) copy to each other device to device, with no host memory
 * in between: OpenCL devices of one platform, which share a context. Starts both devices. */
bool nc_device_peers(nc_device *a, nc_device *b);

/* Waits for all work queued on the device. */
nc_status nc_device_sync(nc_device *dev);

/* Waits for the work queued on every device (a device not yet started has none); returns the
 * first failure. Closing a Lua state calls it, so no queued command outlives the state. */
nc_status nc_sync_all(void);

#ifdef __cplusplus
}
#endif

#endif

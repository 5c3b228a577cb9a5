/* Device discovery (the CPU backend first, always, then every OpenCL device) and look-up by
 * index or spec. Core keeps the device list; nothing in core calls up into this file. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "core/pool.h"
#include "cpu/cpu_backend.h"
#ifdef NC_HAVE_OPENCL
#include "opencl/cl_backend.h"
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static nc_status init_status = NC_OK;
static char init_error[512];

static nc_status add_device(nc_device *dev) {
  NC_TRY(nc_pool_new(dev, true, &dev->pool));
  NC_TRY(nc_pool_new(dev, false, &dev->persistent));
  return nc_device_register(dev);
}

/* At process exit: every device's queue drained (a driver thread still compiling or running a
 * kernel while the exit handlers tear the driver down crashes: PoCL did), its cached buffers
 * released, then its backend objects, last device first. Live tensors keep their buffers. */
static void shutdown_devices(void) {
  nc_device **devices;
  for (int i = nc_device_list(&devices) - 1; i >= 0; i--) {
    nc_device *d = devices[i];
    (void)d->iface->sync(d);
    nc_memory_empty_cache(d);
    if (d->iface->shutdown) d->iface->shutdown(d);
  }
}

static void discover(void) {
  nc_device *cpu;
  nc_status s = nc_cpu_device_create(&cpu);
  if (s == NC_OK) s = add_device(cpu);
  if (s != NC_OK) {
    init_status = s;
    snprintf(init_error, sizeof init_error, "%s", nc_last_error());
    return;
  }
#ifdef NC_HAVE_OPENCL
  /* A missing driver or loader is not an error: the CPU backend serves. NETCL_OPENCL=0 hides
   * OpenCL devices altogether. */
  const char *env = getenv("NETCL_OPENCL");
  if (!env || strcmp(env, "0") != 0) nc_opencl_discover(add_device);
#endif
  /* after discovery, so that it runs before the exit handlers of the drivers loaded by it */
  atexit(shutdown_devices);
}

nc_status nc_init(void) {
  pthread_once(&once, discover);
  if (init_status != NC_OK) return nc_error(init_status, "netcl: starting the CPU backend failed: %s", init_error);
  return NC_OK;
}

const char *nc_version(void) { return NC_VERSION_STRING; }

int nc_device_count(void) {
  nc_device **devices;
  return nc_init() == NC_OK ? nc_device_list(&devices) : 0;
}

nc_device *nc_device_get(int index) {
  nc_device **devices;
  if (nc_init() != NC_OK || index < 0 || index >= nc_device_list(&devices)) return NULL;
  return devices[index];
}

nc_status nc_storage_wrap_host(void *ptr, size_t nbytes, void (*release)(void *ud), void *ud, nc_storage **out) {
  NC_TRY(nc_init());
  return nc_storage_wrap_host_on(nc_device_get(0), ptr, nbytes, release, ud, out);
}

static nc_device *first_opencl(bool gpu_only) {
  nc_device **devices;
  int n = nc_device_list(&devices);
  for (int i = 0; i < n; i++)
    if (devices[i]->info.kind == NC_DEVICE_OPENCL && (!gpu_only || devices[i]->info.is_gpu)) return devices[i];
  return NULL;
}

static nc_status find_spec(const char *spec, nc_device **out) {
  nc_device **devices;
  int n_devices = nc_device_list(&devices);
  if (strcmp(spec, "cpu") == 0) return *out = devices[0], NC_OK;
  if (strcmp(spec, "gpu") == 0) {
    if ((*out = first_opencl(true))) return NC_OK;
    return nc_error(NC_ERR_DEVICE, "no OpenCL GPU found (devices: %d; see --list-devices)", n_devices);
  }
  if (strcmp(spec, "opencl") == 0) {
    if ((*out = first_opencl(false))) return NC_OK;
    return nc_error(NC_ERR_DEVICE, "no OpenCL device found (is an ICD such as pocl-opencl-icd installed?)");
  }
  int p, d, used = 0;
  if (sscanf(spec, "opencl:%d:%d%n", &p, &d, &used) == 2 && spec[used] == '\0' && p >= 0 && d >= 0) {
    for (int i = 0; i < n_devices; i++)
      if (strcmp(devices[i]->info.spec, spec) == 0) return *out = devices[i], NC_OK;
    return nc_error(NC_ERR_DEVICE, "no OpenCL device %s (see --list-devices)", spec);
  }
  return nc_error(NC_ERR_ARG, "bad device spec '%s' (expected cpu, gpu, opencl or opencl:P:D)", spec);
}

nc_status nc_device_find(const char *spec, nc_device **out) {
  NC_TRY(nc_init());
  if (spec && *spec) return find_spec(spec, out);
  const char *env = getenv("NETCL_DEVICE");
  if (env && *env) {
    nc_status s = find_spec(env, out);
    return s == NC_OK ? s : nc_error_prefix(s, "NETCL_DEVICE");
  }
  *out = first_opencl(true);
  if (!*out) *out = nc_device_get(0);
  return NC_OK;
}

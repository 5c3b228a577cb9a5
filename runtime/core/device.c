#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/check.h"
#include "device_impl.h"

#define NC_MAX_DEVICES 64

static nc_device *devices[NC_MAX_DEVICES];
static int n_devices;

nc_status nc_device_register(nc_device *dev) {
  if (n_devices == NC_MAX_DEVICES)
    return nc_error(NC_ERR_DEVICE, "too many devices (at most %d)", NC_MAX_DEVICES);
  pthread_mutex_init(&dev->lock, NULL);
  devices[n_devices++] = dev;
  return NC_OK;
}

int nc_device_count(void) {
  return nc_init() == NC_OK ? n_devices : 0;
}

nc_device *nc_device_get(int index) {
  if (nc_init() != NC_OK || index < 0 || index >= n_devices) return NULL;
  return devices[index];
}

const nc_device_info *nc_device_info_of(const nc_device *dev) { return &dev->info; }

nc_status nc_device_sync(nc_device *dev) { return dev->backend->sync(dev); }

nc_status nc_device_warmup(nc_device *dev, double *seconds) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  nc_status s = dev->backend->warmup ? dev->backend->warmup(dev) : NC_OK;
  clock_gettime(CLOCK_MONOTONIC, &b);
  if (seconds) *seconds = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
  return s;
}

static nc_device *first_opencl(bool gpu_only) {
  for (int i = 0; i < n_devices; i++)
    if (devices[i]->info.kind == NC_DEVICE_OPENCL && (!gpu_only || devices[i]->info.is_gpu))
      return devices[i];
  return NULL;
}

static nc_status find_spec(const char *spec, nc_device **out) {
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
  if (!*out) *out = devices[0];
  return NC_OK;
}

/* The device list and the device interface's entry points. Devices are made by the backends
 * and registered by runtime/backend/registry.c, which also looks them up by spec. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "core/check.h"
#include "device_impl.h"

#define NC_MAX_DEVICES 64

static nc_device *devices[NC_MAX_DEVICES];
static int n_devices;

int nc_device_list(nc_device ***out) {
  *out = devices;
  return n_devices;
}

nc_status nc_device_register(nc_device *dev) {
  if (n_devices == NC_MAX_DEVICES)
    return nc_error(NC_ERR_DEVICE, "too many devices (at most %d)", NC_MAX_DEVICES);
  pthread_mutex_init(&dev->lock, NULL);
  devices[n_devices++] = dev;
  return NC_OK;
}

const nc_device_info *nc_device_info_of(const nc_device *dev) { return &dev->info; }

nc_status nc_device_sync(nc_device *dev) {
  atomic_fetch_add(&dev->syncs, 1);
  NC_TRY(dev->iface->sync(dev));
  return nc_device_flush_checks(dev);
}

nc_status nc_sync_all(void) {
  nc_status first = NC_OK;
  char msg[512] = "";
  for (int i = 0; i < n_devices; i++) {
    nc_status s = devices[i]->iface->sync(devices[i]);
    if (s != NC_OK && first == NC_OK) {
      first = s;
      snprintf(msg, sizeof msg, "%s", nc_last_error());
    }
  }
  return first == NC_OK ? NC_OK : nc_error(first, "%s", msg);
}

nc_status nc_device_warmup(nc_device *dev, double *seconds) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  nc_status s = dev->iface->warmup ? dev->iface->warmup(dev) : NC_OK;
  clock_gettime(CLOCK_MONOTONIC, &b);
  if (seconds) *seconds = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
  return s;
}



/* Device discovery: the CPU backend first (always), then every OpenCL device. */
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
}

nc_status nc_init(void) {
  pthread_once(&once, discover);
  if (init_status != NC_OK) return nc_error(init_status, "netcl: starting the CPU backend failed: %s", init_error);
  return NC_OK;
}

const char *nc_version(void) { return NC_VERSION_STRING; }

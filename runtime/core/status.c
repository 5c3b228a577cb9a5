#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "netcl/status.h"

/* 4 KiB: room for an OpenCL build log after its message */
static _Thread_local char last_error[4096];

const char *nc_last_error(void) { return last_error[0] ? last_error : "no error"; }

const char *nc_status_name(nc_status s) {
  static const char *const names[] = {
      "NC_OK",     "NC_ERR_ARG",    "NC_ERR_SHAPE", "NC_ERR_DTYPE",       "NC_ERR_INDEX", "NC_ERR_OOM",
      "NC_ERR_DEVICE", "NC_ERR_IO", "NC_ERR_FORMAT", "NC_ERR_UNSUPPORTED", "NC_ERR_STATE"};
  if ((unsigned)s < sizeof names / sizeof names[0]) return names[s];
  return "NC_ERR_UNKNOWN";
}

nc_status nc_error(nc_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return s;
}

nc_status nc_error_prefix(nc_status s, const char *fmt, ...) {
  char prefix[512], old[sizeof last_error];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, last_error, sizeof old);
  snprintf(last_error, sizeof last_error, "%.400s: %.3600s", prefix, old);
  return s;
}

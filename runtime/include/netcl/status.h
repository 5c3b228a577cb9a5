/* Status codes and the last-error message. Every fallible libnetcl function returns an
 * nc_status and, on failure, leaves a human-readable message for nc_last_error(). */
#ifndef NETCL_STATUS_H
#define NETCL_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  NC_OK = 0,
  NC_ERR_ARG,         /* a bad argument: negative size, unknown name, ... */
  NC_ERR_SHAPE,       /* shapes that do not fit together */
  NC_ERR_DTYPE,       /* a dtype the operation does not take */
  NC_ERR_INDEX,       /* an index or dimension out of range */
  NC_ERR_OOM,         /* out of host or device memory */
  NC_ERR_DEVICE,      /* the driver or device failed */
  NC_ERR_IO,          /* a file could not be read or written */
  NC_ERR_FORMAT,      /* a file or string is malformed */
  NC_ERR_UNSUPPORTED, /* a valid request this build or device cannot do */
  NC_ERR_STATE        /* an object in the wrong state (freed, already consumed, ...) */
} nc_status;

/* Message for the last failure on this thread. Never NULL; valid until the next failure. */
const char *nc_last_error(void);

/* Short name of a status code ("NC_ERR_SHAPE"). */
const char *nc_status_name(nc_status s);

/* Sets this thread's message (printf format) and returns s, so `return nc_error(...)` reads well. */
nc_status nc_error(nc_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends to the current message ("...: context"); returns s. */
nc_status nc_error_prefix(nc_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif

#endif

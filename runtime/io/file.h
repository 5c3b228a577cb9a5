/* Whole-file access shared by the file readers and writers (runtime/io, runtime/data):
 * a read-only view of a file's bytes, and atomic replacement of a file. Internal header. */
#ifndef NETCL_IO_FILE_H
#define NETCL_IO_FILE_H

#include <stddef.h>
#include "netcl/status.h"

/* The bytes of a file: mapped for regular files, read into memory for pipes and devices. */
typedef struct {
  const unsigned char *data;
  size_t size;
  void *map;   /* mmap'd region, or NULL */
  void *owned; /* malloc'd copy, or NULL */
} nc_file_view;

/* Errors: NC_ERR_IO naming the path and the system's reason. */
nc_status nc_file_view_open(const char *path, nc_file_view *v);
void nc_file_view_close(nc_file_view *v);

/* A file being written under a temporary name in the destination's folder; commit makes it
 * appear under the final name in one step, so readers never see half a file and a crash
 * leaves the old file intact. */
typedef struct {
  int fd;
  char *path;
  char *tmp;
} nc_atomic_file;

nc_status nc_atomic_open(const char *path, nc_atomic_file *f);
nc_status nc_atomic_write(nc_atomic_file *f, const void *buf, size_t n);
/* fsync, close, rename over path, fsync the folder. Always releases f; on failure the
 * temporary file is removed. */
nc_status nc_atomic_commit(nc_atomic_file *f);
/* Closes and removes the temporary file (for error paths). */
void nc_atomic_abort(nc_atomic_file *f);

#endif

/* Whole-file reads and atomic writes for the tokenizer's files. */
#ifndef NETCL_TEXT_TEXT_FILE_H
#define NETCL_TEXT_TEXT_FILE_H

#include <stddef.h>
#include "netcl/status.h"

/* Reads the whole file into a malloc'd, NUL-terminated buffer (*len excludes the NUL).
 * NC_ERR_IO names the path and the system's reason. */
nc_status nc_text_read_file(const char *path, char **data, size_t *len);

/* Writes data to a temporary file beside path, fsyncs it and renames it over path, so a
 * reader sees the old file or the new one, never a partial one. */
nc_status nc_text_write_atomic(const char *path, const char *data, size_t len);

#endif

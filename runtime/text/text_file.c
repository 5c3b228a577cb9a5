#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "text/text_file.h"

nc_status nc_text_read_file(const char *path, char **data, size_t *len) {
  *data = NULL;
  *len = 0;
  if (!path) return nc_error(NC_ERR_ARG, "the path is missing");
  FILE *f = fopen(path, "rb");
  if (!f) return nc_error(NC_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  size_t cap = 1 << 16, n = 0;
  struct stat st;
  /* The size is a hint only: pipes and files that change while read are handled by growing. */
  if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) cap = (size_t)st.st_size + 1;
  char *buf = malloc(cap);
  if (!buf) {
    fclose(f);
    return nc_error(NC_ERR_OOM, "out of memory reading '%s' (%zu bytes)", path, cap);
  }
  for (;;) {
    if (n + 1 >= cap) {
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        fclose(f);
        return nc_error(NC_ERR_OOM, "out of memory reading '%s'", path);
      }
      buf = nb;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - 1 - n, f);
    n += got;
    if (got == 0) break;
  }
  int err = ferror(f);
  int saved = errno;
  fclose(f);
  if (err) {
    free(buf);
    return nc_error(NC_ERR_IO, "cannot read '%s': %s", path, strerror(saved));
  }
  buf[n] = 0;
  *data = buf;
  *len = n;
  return NC_OK;
}

nc_status nc_text_write_atomic(const char *path, const char *data, size_t len) {
  if (!path) return nc_error(NC_ERR_ARG, "the path is missing");
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 16);
  if (!tmp) return nc_error(NC_ERR_OOM, "out of memory");
  snprintf(tmp, plen + 16, "%s.tmp.XXXXXX", path);
  int fd = mkstemp(tmp);
  if (fd < 0) {
    nc_status s =
        nc_error(NC_ERR_IO, "cannot create a temporary file beside '%s': %s", path, strerror(errno));
    free(tmp);
    return s;
  }
  /* mkstemp makes the file private (0600); a saved tokenizer is ordinary, shareable data. */
  fchmod(fd, 0644);
  size_t off = 0;
  int ok = 1;
  while (ok && off < len) {
    ssize_t w = write(fd, data + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      ok = 0;
    else
      off += (size_t)w;
  }
  int saved = errno;
  if (ok && fsync(fd) != 0) {
    ok = 0;
    saved = errno;
  }
  if (close(fd) != 0 && ok) {
    ok = 0;
    saved = errno;
  }
  if (ok && rename(tmp, path) != 0) {
    ok = 0;
    saved = errno;
  }
  if (!ok) {
    unlink(tmp);
    free(tmp);
    return nc_error(NC_ERR_IO, "cannot write '%s': %s", path, strerror(saved));
  }
  free(tmp);
  return NC_OK;
}

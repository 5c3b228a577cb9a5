#include "io/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static nc_status io_error(const char *what, const char *path) {
  return nc_error(NC_ERR_IO, "%s: %s %s", path, what, strerror(errno));
}

/* Pipes and character devices have no size to map: read them to the end. */
static nc_status read_all(int fd, const char *path, nc_file_view *v) {
  size_t cap = 1 << 16, n = 0;
  unsigned char *buf = malloc(cap);
  if (!buf) return nc_error(NC_ERR_OOM, "%s: out of host memory reading the file", path);
  for (;;) {
    if (n == cap) {
      unsigned char *b = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
      if (!b) {
        free(buf);
        return nc_error(NC_ERR_OOM, "%s: out of host memory reading the file", path);
      }
      buf = b;
      cap *= 2;
    }
    ssize_t r = read(fd, buf + n, cap - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      nc_status s = io_error("cannot read:", path);
      free(buf);
      return s;
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  v->data = v->owned = buf;
  v->size = n;
  return NC_OK;
}

nc_status nc_file_view_open(const char *path, nc_file_view *v) {
  memset(v, 0, sizeof *v);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open:", path);
  struct stat st;
  nc_status s = NC_OK;
  if (fstat(fd, &st) != 0) {
    s = io_error("cannot stat:", path);
  } else if (S_ISDIR(st.st_mode)) {
    s = nc_error(NC_ERR_IO, "%s: is a directory", path);
  } else if (!S_ISREG(st.st_mode)) {
    s = read_all(fd, path, v);
  } else if (st.st_size == 0) {
    v->data = (const unsigned char *)"";
  } else if ((uintmax_t)st.st_size > SIZE_MAX) {
    s = nc_error(NC_ERR_IO, "%s: file too large to map", path);
  } else {
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      s = io_error("cannot map:", path);
    } else {
      v->map = m;
      v->data = m;
      v->size = (size_t)st.st_size;
    }
  }
  close(fd);
  return s;
}

void nc_file_view_close(nc_file_view *v) {
  if (v->map) munmap(v->map, v->size);
  free(v->owned);
  memset(v, 0, sizeof *v);
}

/* ---- atomic replacement ------------------------------------------------------------------ */

static atomic_uint tmp_counter;

/* Whether name is "<base>.tmp.<pid>.<counter>.<ns>", a temporary of nc_atomic_open for the
 * target base, and if so, its writer's pid. */
static bool own_temporary(const char *name, const char *base, size_t nbase, long *pid) {
  if (strncmp(name, base, nbase) != 0 || strncmp(name + nbase, ".tmp.", 5) != 0) return false;
  unsigned counter;
  long ns;
  int end = -1;
  if (sscanf(name + nbase + 5, "%ld.%u.%ld%n", pid, &counter, &ns, &end) != 3) return false;
  return end >= 0 && name[nbase + 5 + (size_t)end] == 0 && *pid > 0;
}

/* Removes the temporaries that killed writers left for the target path: those named as
 * nc_atomic_open names them for this path (no other file), whose writer process is gone (no
 * such pid; this process's own are never touched) and whose lock no one holds (a writer holds
 * one on its temporary until it closes it, which guards against a pid that another PID
 * namespace on the same host reuses). Best effort: errors leave a file where it is. */
static void remove_stale_temporaries(const char *path) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  size_t nbase = strlen(base), ndir = slash ? (size_t)(slash - path) + 1 : 0;
  char *dirname = malloc(ndir + 2), *full = NULL;
  if (!dirname) return;
  if (ndir) memcpy(dirname, path, ndir);
  dirname[ndir] = 0;
  DIR *d = opendir(ndir ? dirname : ".");
  if (!d) {
    free(dirname);
    return;
  }
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    long pid;
    if (!own_temporary(e->d_name, base, nbase, &pid) || pid == (long)getpid()) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive, or not ours to ask */
    size_t n = ndir + strlen(e->d_name) + 1;
    char *p = realloc(full, n);
    if (!p) break;
    full = p;
    snprintf(full, n, "%s%s", dirname, e->d_name);
    int fd = open(full, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) unlink(full);
    close(fd);
  }
  closedir(d);
  free(full);
  free(dirname);
}

nc_status nc_atomic_open(const char *path, nc_atomic_file *f) {
  f->fd = -1;
  f->path = strdup(path);
  size_t n = strlen(path) + 64;
  f->tmp = malloc(n);
  if (!f->path || !f->tmp) {
    free(f->path);
    free(f->tmp);
    return nc_error(NC_ERR_OOM, "out of host memory");
  }
  /* O_EXCL with a fresh name rather than mkstemp: mkstemp creates mode 0600, and the result
   * should get the same permissions (0666 less the umask) as any newly created file. */
  for (int attempt = 0; attempt < 100; attempt++) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(f->tmp, n, "%s.tmp.%ld.%u.%ld", path, (long)getpid(), atomic_fetch_add(&tmp_counter, 1),
             (long)(ts.tv_nsec % 1000000));
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (f->fd >= 0) {
      /* the lock marks the temporary as being written (remove_stale_temporaries); it goes
       * with the descriptor, at close or when the process dies */
      (void)flock(f->fd, LOCK_EX | LOCK_NB);
      remove_stale_temporaries(path);
      return NC_OK;
    }
    if (errno != EEXIST) break;
  }
  nc_status s = io_error("cannot create a temporary file for writing:", path);
  free(f->path);
  free(f->tmp);
  f->path = f->tmp = NULL;
  return s;
}

nc_status nc_atomic_write(nc_atomic_file *f, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(f->fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return io_error("cannot write:", f->path);
    p += w;
    n -= (size_t)w;
  }
  return NC_OK;
}

static void release(nc_atomic_file *f) {
  free(f->path);
  free(f->tmp);
  f->path = f->tmp = NULL;
  f->fd = -1;
}

void nc_atomic_abort(nc_atomic_file *f) {
  if (f->fd >= 0) close(f->fd);
  if (f->tmp) unlink(f->tmp);
  release(f);
}

/* The rename is durable only once the folder's entry is on disk too. */
static void sync_folder(const char *path) {
  char *dir = strdup(path);
  if (!dir) return;
  char *slash = strrchr(dir, '/');
  const char *d = dir;
  if (!slash)
    d = ".";
  else if (slash == dir)
    slash[1] = 0;
  else
    *slash = 0;
  int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
  free(dir);
}

nc_status nc_atomic_commit(nc_atomic_file *f) {
  nc_status s = NC_OK;
  if (fsync(f->fd) != 0) s = io_error("cannot flush to disk:", f->path);
  if (close(f->fd) != 0 && s == NC_OK) s = io_error("cannot close:", f->path);
  f->fd = -1;
  if (s == NC_OK && rename(f->tmp, f->path) != 0)
    s = io_error("cannot rename the temporary file into place:", f->path);
  if (s != NC_OK) {
    unlink(f->tmp);
  } else {
    sync_folder(f->path);
  }
  release(f);
  return s;
}

/* Data-loader worker processes and their shared-memory ring (netcl/workers.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "backend/dispatch.h"
#include "core/check.h"
#include "core/device_impl.h"
#include "netcl/threads.h"
#include "netcl/workers.h"

#define SLOT_HEADER 64
#define ALIGN 64

typedef struct {
  _Atomic uint64_t seq; /* b + 1 of the batch held, 0: empty */
  uint64_t len;
  uint32_t is_error;
} slot_header;

typedef struct {
  int pid;
  int ready_rd, ready_wr; /* worker -> main: batch numbers (int64) */
  int free_rd, free_wr;   /* main -> worker: one byte per slot given back */
} worker;

struct nc_ring {
  unsigned char *base;
  size_t map_bytes, slot_bytes, stride;
  int workers, prefetch, self; /* self: this process's worker index, -1 in the main process */
  pid_t parent;
  worker *w;
};

static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

static slot_header *slot_of(const nc_ring *r, int64_t b) {
  int w = (int)(b % r->workers);
  int64_t k = (b / r->workers) % r->prefetch;
  return (slot_header *)(r->base + ((size_t)w * (size_t)r->prefetch + (size_t)k) * r->stride);
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

nc_status nc_ring_create(int workers, int prefetch, size_t slot_bytes, nc_ring **out) {
  if (workers < 1 || workers > 256) return nc_error(NC_ERR_ARG, "workers must be in 1..256, got %d", workers);
  if (prefetch < 1 || prefetch > 64) return nc_error(NC_ERR_ARG, "prefetch must be in 1..64, got %d", prefetch);
  size_t stride = round_up(slot_bytes, ALIGN) + SLOT_HEADER, nslots = (size_t)workers * (size_t)prefetch;
  if (slot_bytes > ((size_t)1 << 40) || stride > SIZE_MAX / nslots)
    return nc_error(NC_ERR_ARG, "slots of %zu bytes are too large", slot_bytes);
  /* The registry is complete before any fork, so a worker never runs device discovery. */
  NC_TRY(nc_init());
  nc_ring *r = calloc(1, sizeof *r);
  worker *w = calloc((size_t)workers, sizeof *w);
  if (!r || !w) {
    free(r);
    free(w);
    return nc_error(NC_ERR_OOM, "out of host memory");
  }
  r->w = w;
  r->workers = workers;
  r->prefetch = prefetch;
  r->slot_bytes = round_up(slot_bytes, ALIGN);
  r->stride = stride;
  r->map_bytes = stride * nslots;
  r->self = -1;
  r->parent = getpid();
  for (int i = 0; i < workers; i++) w[i].ready_rd = w[i].ready_wr = w[i].free_rd = w[i].free_wr = -1;
  static _Atomic unsigned counter;
  char name[64];
  snprintf(name, sizeof name, "/netcl-ring-%ld-%u", (long)getpid(), atomic_fetch_add(&counter, 1));
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    nc_ring_destroy(r);
    return nc_error(NC_ERR_IO, "shm_open %s: %s", name, strerror(errno));
  }
  /* Unlinked at once: the mapping (inherited by the workers) keeps the memory, and nothing can
   * leak a name, however the processes end. */
  shm_unlink(name);
  int err = ftruncate(fd, (off_t)r->map_bytes) ? errno : 0;
  void *p = err ? MAP_FAILED : mmap(NULL, r->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (!err && p == MAP_FAILED) err = errno;
  close(fd);
  if (err) {
    nc_ring_destroy(r);
    return nc_error(NC_ERR_IO, "mapping %zu bytes of shared memory for %d x %d slots: %s", r->map_bytes, workers,
                    prefetch, strerror(err));
  }
  r->base = p;
  /* Socket pairs rather than pipes: writes with MSG_NOSIGNAL, so writing to a worker that has
   * ended is an EPIPE error, not a SIGPIPE that would end the main process. */
  for (int i = 0; i < workers; i++) {
    int a[2], b[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, a)) {
      nc_ring_destroy(r);
      return nc_error(NC_ERR_IO, "socketpair: %s", strerror(errno));
    }
    w[i].ready_rd = a[0], w[i].ready_wr = a[1];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, b)) {
      nc_ring_destroy(r);
      return nc_error(NC_ERR_IO, "socketpair: %s", strerror(errno));
    }
    w[i].free_rd = b[0], w[i].free_wr = b[1];
  }
  *out = r;
  return NC_OK;
}

/* ---- the worker's process ------------------------------------------------------------------ */

/* A device a worker may not use: every transfer fails, and the empty dispatch table makes every
 * op fail, naming the reason. Releases are dropped (the buffers belong to the parent). */
#define FORBIDDEN "not usable in a DataLoader worker process: OpenCL drivers are not fork-safe; get() must " \
                  "return CPU tensors or numbers"
static nc_status forbidden_alloc(nc_device *d, size_t n, void **h) {
  (void)n, (void)h;
  return nc_error(NC_ERR_DEVICE, "device %s is " FORBIDDEN, d->info.spec);
}
static void forbidden_release(nc_device *d, void *h) { (void)d, (void)h; }
static void *forbidden_host_ptr(nc_device *d, void *h) {
  (void)d, (void)h;
  return NULL;
}
static nc_status forbidden_write(nc_device *d, void *h, size_t off, const void *src, size_t n) {
  (void)h, (void)off, (void)src, (void)n;
  return nc_error(NC_ERR_DEVICE, "device %s is " FORBIDDEN, d->info.spec);
}
static nc_status forbidden_read(nc_device *d, void *h, size_t off, void *dst, size_t n) {
  (void)h, (void)off, (void)dst, (void)n;
  return nc_error(NC_ERR_DEVICE, "device %s is " FORBIDDEN, d->info.spec);
}
static nc_status forbidden_sync(nc_device *d) {
  return nc_error(NC_ERR_DEVICE, "device %s is " FORBIDDEN, d->info.spec);
}
static nc_status forbidden_warmup(nc_device *d) {
  return nc_error(NC_ERR_DEVICE, "device %s is " FORBIDDEN, d->info.spec);
}
static const nc_device_iface forbidden_iface = {
    "forbidden",    forbidden_alloc, forbidden_release, forbidden_host_ptr, forbidden_write, forbidden_read,
    forbidden_sync, NULL,            forbidden_warmup, NULL, NULL, NULL, NULL};
static nc_dispatch forbidden_dispatch = {
    .name = "opencl (in a DataLoader worker: OpenCL drivers are not fork-safe, so get() must return CPU tensors or "
            "numbers)"};

static void forbid_devices(void) {
  nc_device **devs;
  int n = nc_device_list(&devs);
  for (int i = 0; i < n; i++) {
    if (devs[i]->info.kind == NC_DEVICE_CPU) continue;
    devs[i]->iface = &forbidden_iface;
    devs[i]->dispatch = &forbidden_dispatch;
  }
}

/* The one place a worker's CPU thread count is set: the parent's pool threads do not exist in the
 * forked child, and its CPU ops run on one thread (the pool's own count; the BLAS it calls is
 * serial already). */
static void single_threaded(void) { nc_set_num_threads(1); }

static void become_worker(nc_ring *r, int self) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != r->parent) _exit(1); /* the parent died before prctl took effect */
  signal(SIGINT, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  for (int i = 0; i < r->workers; i++) {
    worker *w = &r->w[i];
    close_fd(&w->ready_rd);
    close_fd(&w->free_wr);
    if (i != self) {
      close_fd(&w->ready_wr);
      close_fd(&w->free_rd);
      w->pid = 0;
    }
  }
  r->self = self;
  single_threaded();
  forbid_devices();
}

nc_status nc_ring_fork(nc_ring *r, int w, int *pid) {
  if (w < 0 || w >= r->workers || r->w[w].pid || r->self >= 0)
    return nc_error(NC_ERR_ARG, "worker %d cannot be forked (out of range, already running, or in a worker)", w);
  fflush(stdout);
  fflush(stderr);
  pid_t p = fork();
  if (p < 0) return nc_error(NC_ERR_IO, "fork: %s", strerror(errno));
  if (p == 0) {
    become_worker(r, w);
    *pid = 0;
    return NC_OK;
  }
  r->w[w].pid = p;
  /* The worker's ends, closed here so that a worker's death is the end of its socket for us
   * (and later workers never inherit them). */
  close_fd(&r->w[w].ready_wr);
  close_fd(&r->w[w].free_rd);
  *pid = p;
  return NC_OK;
}

static bool full_write(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k, n -= (size_t)k;
  }
  return true;
}

/* Reads exactly n bytes: 1, 0 at the end of the stream, -1 on an error. */
static int full_read(int fd, void *p, size_t n) {
  char *c = p;
  size_t got = 0;
  while (got < n) {
    ssize_t k = read(fd, c + got, n - got);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return -1;
    if (k == 0) return got ? -1 : 0;
    got += (size_t)k;
  }
  return 1;
}

nc_status nc_ring_acquire(nc_ring *r, int64_t b, void **payload, size_t *capacity) {
  if (r->self < 0 || b < 0 || b % r->workers != r->self)
    return nc_error(NC_ERR_ARG, "batch %lld is not this worker's", (long long)b);
  if (b / r->workers >= r->prefetch) { /* the first prefetch slots start free */
    char c;
    if (full_read(r->w[r->self].free_rd, &c, 1) != 1) return nc_error(NC_ERR_IO, "the main process has gone");
  }
  slot_header *h = slot_of(r, b);
  *payload = (unsigned char *)h + SLOT_HEADER;
  *capacity = r->slot_bytes;
  return NC_OK;
}

nc_status nc_ring_publish(nc_ring *r, int64_t b, size_t len, bool is_error) {
  if (r->self < 0 || b % r->workers != r->self || len > r->slot_bytes)
    return nc_error(NC_ERR_ARG, "bad publish of batch %lld (%zu bytes)", (long long)b, len);
  slot_header *h = slot_of(r, b);
  h->len = len;
  h->is_error = is_error;
  atomic_store_explicit(&h->seq, (uint64_t)b + 1, memory_order_release);
  if (!full_write(r->w[r->self].ready_wr, &b, sizeof b)) return nc_error(NC_ERR_IO, "the main process has gone");
  return NC_OK;
}

void nc_worker_exit(int code) {
  fflush(stdout);
  fflush(stderr);
  _exit(code);
}

/* ---- the main process ---------------------------------------------------------------------- */

static void describe_end(int status, char *buf, size_t n) {
  if (WIFSIGNALED(status))
    snprintf(buf, n, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
  else if (WIFEXITED(status))
    snprintf(buf, n, "exited with status %d", WEXITSTATUS(status));
  else
    snprintf(buf, n, "ended (wait status %d)", status);
}

nc_status nc_ring_wait(nc_ring *r, int64_t b, const void **payload, size_t *len, bool *is_error) {
  if (r->self >= 0 || b < 0) return nc_error(NC_ERR_ARG, "nc_ring_wait is for the main process");
  worker *w = &r->w[b % r->workers];
  int wi = (int)(b % r->workers);
  int64_t got;
  int rc = w->ready_rd < 0 ? 0 : full_read(w->ready_rd, &got, sizeof got);
  if (rc != 1) {
    char how[128] = "had already ended";
    if (w->pid > 0) {
      int status = 0;
      pid_t p;
      do p = waitpid(w->pid, &status, 0);
      while (p < 0 && errno == EINTR);
      if (p == w->pid) describe_end(status, how, sizeof how);
      w->pid = 0;
    }
    return nc_error(NC_ERR_IO, "worker %d %s before delivering batch %lld", wi + 1, how, (long long)b + 1);
  }
  slot_header *h = slot_of(r, b);
  uint64_t seq = atomic_load_explicit(&h->seq, memory_order_acquire);
  if (got != b || seq != (uint64_t)b + 1 || h->len > r->slot_bytes)
    return nc_error(NC_ERR_IO, "worker %d delivered batch %lld (slot sequence %llu) when batch %lld was due",
                    wi + 1, (long long)got + 1, (unsigned long long)seq, (long long)b + 1);
  *payload = (unsigned char *)h + SLOT_HEADER;
  *len = h->len;
  *is_error = h->is_error != 0;
  return NC_OK;
}

nc_status nc_ring_release(nc_ring *r, int64_t b) {
  worker *w = &r->w[b % r->workers];
  atomic_store_explicit(&slot_of(r, b)->seq, 0, memory_order_release);
  char c = 1;
  /* A worker that has finished its batches has closed its end: nothing to wake. */
  if (w->free_wr >= 0 && !full_write(w->free_wr, &c, 1) && errno != EPIPE)
    return nc_error(NC_ERR_IO, "waking worker %d: %s", (int)(b % r->workers) + 1, strerror(errno));
  return NC_OK;
}

int nc_ring_pid(const nc_ring *r, int w) { return w >= 0 && w < r->workers ? r->w[w].pid : 0; }

void nc_ring_destroy(nc_ring *r) {
  if (!r) return;
  if (r->self < 0 && r->w) {
    for (int i = 0; i < r->workers; i++)
      if (r->w[i].pid > 0) kill(r->w[i].pid, SIGKILL);
    for (int i = 0; i < r->workers; i++) {
      if (r->w[i].pid > 0) {
        pid_t p;
        do p = waitpid(r->w[i].pid, NULL, 0);
        while (p < 0 && errno == EINTR);
      }
      r->w[i].pid = 0;
    }
  }
  for (int i = 0; r->w && i < r->workers; i++) {
    close_fd(&r->w[i].ready_rd);
    close_fd(&r->w[i].ready_wr);
    close_fd(&r->w[i].free_rd);
    close_fd(&r->w[i].free_wr);
  }
  if (r->base) munmap(r->base, r->map_bytes);
  free(r->w);
  free(r);
}

/* ---- packed batches ------------------------------------------------------------------------ */

#define PACK_MAGIC 0x4e434254u /* "NCBT" */

typedef struct {
  uint32_t dtype, ndim;
  int64_t shape[NC_MAX_DIMS];
  uint64_t offset, nbytes;
} pack_field;

typedef struct {
  uint32_t magic, n;
} pack_header;

size_t nc_batch_pack_size(int n, nc_tensor *const *t) {
  size_t s = round_up(sizeof(pack_header) + (size_t)n * sizeof(pack_field), ALIGN);
  for (int i = 0; i < n; i++) s += round_up(nc_tensor_nbytes(t[i]), ALIGN);
  return s;
}

nc_status nc_batch_pack(int n, nc_tensor *const *t, void *buf, size_t capacity, size_t *len) {
  size_t need = nc_batch_pack_size(n, t);
  if (need > capacity)
    return nc_error(NC_ERR_ARG,
                    "the batch needs %zu bytes, a slot holds %zu (slots are sized from the first sample: every "
                    "sample must have the same shapes)",
                    need, capacity);
  unsigned char *p = buf;
  pack_header *h = buf;
  pack_field *f = (pack_field *)(p + sizeof *h);
  h->magic = (uint32_t)PACK_MAGIC;
  h->n = (uint32_t)n;
  size_t off = round_up(sizeof(pack_header) + (size_t)n * sizeof(pack_field), ALIGN);
  for (int i = 0; i < n; i++) {
    if (!nc_tensor_is_contiguous(t[i]))
      return nc_error(NC_ERR_ARG, "field %d of the batch is not contiguous", i + 1);
    memset(&f[i], 0, sizeof f[i]);
    f[i].dtype = (uint32_t)t[i]->dtype;
    f[i].ndim = (uint32_t)t[i]->ndim;
    memcpy(f[i].shape, t[i]->shape, sizeof(int64_t) * (size_t)t[i]->ndim);
    f[i].offset = off;
    f[i].nbytes = nc_tensor_nbytes(t[i]);
    if (f[i].nbytes) NC_TRY(nc_tensor_read_host(t[i], p + off, f[i].nbytes));
    off += round_up(f[i].nbytes, ALIGN);
  }
  *len = off;
  return NC_OK;
}

nc_status nc_batch_unpack(const void *buf, size_t len, nc_device *dev, int max, nc_tensor **out, int *n) {
  const unsigned char *p = buf;
  const pack_header *h = buf;
  if (len < sizeof *h || h->magic != (uint32_t)PACK_MAGIC || h->n > (uint32_t)max ||
      len < sizeof *h + h->n * sizeof(pack_field))
    return nc_error(NC_ERR_FORMAT, "corrupt batch in the ring (%zu bytes)", len);
  const pack_field *f = (const pack_field *)(p + sizeof *h);
  int made = 0;
  nc_status s = NC_OK;
  for (uint32_t i = 0; s == NC_OK && i < h->n; i++) {
    if (f[i].ndim > NC_MAX_DIMS || f[i].offset > len || f[i].nbytes > len - f[i].offset) {
      s = nc_error(NC_ERR_FORMAT, "corrupt batch in the ring (field %u)", i + 1);
      break;
    }
    s = nc_tensor_empty(dev, (nc_dtype)f[i].dtype, (int)f[i].ndim, f[i].shape, 0, &out[made]);
    if (s != NC_OK) break;
    made++;
    if (nc_tensor_nbytes(out[made - 1]) != f[i].nbytes)
      s = nc_error(NC_ERR_FORMAT, "corrupt batch in the ring (field %u size)", i + 1);
    else if (f[i].nbytes)
      s = nc_tensor_write_host(out[made - 1], p + f[i].offset, f[i].nbytes);
  }
  if (s != NC_OK) {
    for (int i = 0; i < made; i++) nc_tensor_release(out[i]);
    return s;
  }
  *n = made;
  return NC_OK;
}

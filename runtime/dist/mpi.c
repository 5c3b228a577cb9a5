/* Collectives between processes through MPI (Open MPI). Built with NC_HAVE_MPI when CMake finds
 * MPI; without it every call but nc_mpi_available fails with NC_ERR_UNSUPPORTED, so libnetcl
 * builds and runs on machines without MPI.
 *
 * Each collective first exchanges a descriptor of the call (which collective, dtype, shape,
 * root) among all ranks, so ranks that disagree fail together with a message naming every
 * rank's tensor instead of hanging or exchanging garbage. Every MPI call is non-blocking and
 * polled against a deadline (nc_mpi_init's timeout): when another rank dies or stops calling,
 * this rank fails with an error instead of waiting forever, and MPI is aborted at exit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "netcl/dist.h"

#ifdef NC_HAVE_MPI
#include <mpi.h>
#include <time.h>
#include "dist/support.h"
#include "netcl/copy.h"

static bool g_init, g_done, g_broken;
static double g_timeout = 300;
static int g_rank, g_size;
/* The split all-reduces run on a duplicate of MPI_COMM_WORLD: they are launched when their
 * reads complete, which differs between ranks relative to the other collectives, and each
 * communicator must see its collectives in one order on every rank. */
static MPI_Comm g_async = MPI_COMM_NULL;

bool nc_mpi_available(void) { return true; }
bool nc_mpi_initialized(void) { return g_init && !g_done; }

static nc_status mpi_fail(int rc, const char *what) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", rc);
  g_broken = true;
  return nc_error(NC_ERR_DEVICE, "%s: MPI failed on rank %d: %s", what, g_rank, msg);
}

/* Polls req until it completes or the deadline passes. */
static nc_status wait_for(MPI_Request *req, const char *what) {
  double t0 = MPI_Wtime();
  for (long spins = 0;; spins++) {
    int done = 0, rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, what);
    if (done) return NC_OK;
    if (MPI_Wtime() - t0 > g_timeout) {
      g_broken = true;
      return nc_error(NC_ERR_DEVICE,
                      "%s: rank %d waited %.0f s for the other ranks of %d (a rank has died, stopped, or "
                      "called another collective; the timeout is dist.init's timeout=)",
                      what, g_rank, g_timeout, g_size);
    }
    if (spins > 2000) nanosleep(&(struct timespec){0, 200000}, NULL);
  }
}

static void at_exit(void) {
  if (!g_init || g_done) return;
  g_done = true;
  /* A rank that gave up waiting cannot finalize (the others may never answer): abort the job. */
  if (g_broken) MPI_Abort(MPI_COMM_WORLD, 1);
  else MPI_Finalize();
}

nc_status nc_mpi_init(double timeout_s, int *rank, int *size, int *local_rank, int *local_size) {
  if (g_done) return nc_error(NC_ERR_STATE, "MPI was finalized in this process; it cannot start again");
  if (!(timeout_s > 0)) return nc_error(NC_ERR_ARG, "timeout must be > 0 seconds, got %g", timeout_s);
  if (!g_init) {
    int already = 0;
    MPI_Initialized(&already);
    if (!already && MPI_Init(NULL, NULL) != MPI_SUCCESS)
      return nc_error(NC_ERR_DEVICE, "MPI_Init failed (is this process started by mpirun?)");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &g_async);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "init");
    g_init = true;
    atexit(at_exit);
  }
  g_timeout = timeout_s;
  MPI_Comm local;
  int rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &local);
  if (rc != MPI_SUCCESS) return mpi_fail(rc, "init");
  MPI_Comm_rank(local, local_rank);
  MPI_Comm_size(local, local_size);
  MPI_Comm_free(&local);
  *rank = g_rank;
  *size = g_size;
  return NC_OK;
}

nc_status nc_mpi_finalize(void) {
  if (!g_init || g_done) return NC_OK;
  g_done = true;
  if (g_broken) MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Finalize();
  return NC_OK;
}

static nc_status need_init(const char *what) {
  if (!g_init) return nc_error(NC_ERR_STATE, "%s: MPI is not initialized (call dist.init{backend=\"mpi\"} first)", what);
  if (g_done) return nc_error(NC_ERR_STATE, "%s: MPI was finalized", what);
  return NC_OK;
}

enum { DESC_N = 12 }; /* kind, dtype, ndim, root, shape[8] */

static void desc_text(const int64_t *d, char *buf, size_t n) {
  static const char *kinds[] = {"all_reduce", "broadcast", "gather", "barrier"};
  if (d[0] == 3) {
    snprintf(buf, n, "barrier");
    return;
  }
  size_t k = (size_t)snprintf(buf, n, "%s of %s [", kinds[d[0] & 3], nc_dtype_name((nc_dtype)d[1]));
  for (int i = 0; i < d[2] && k < n; i++) k += (size_t)snprintf(buf + k, n - k, i ? ",%lld" : "%lld", (long long)d[4 + i]);
  if (k < n) k += (size_t)snprintf(buf + k, n - k, "]");
  if (d[3] >= 0 && k < n) snprintf(buf + k, n - k, " with root %lld", (long long)d[3]);
}

/* Every rank's call descriptor; an error on every rank when they differ. */
static nc_status agree(int kind, const nc_tensor *t, int root, const char *what) {
  int64_t mine[DESC_N] = {kind, t ? t->dtype : 0, t ? t->ndim : 0, root};
  for (int i = 0; t && i < t->ndim; i++) mine[4 + i] = t->shape[i];
  int64_t *all = malloc(sizeof(int64_t) * DESC_N * (size_t)g_size);
  if (!all) return nc_error(NC_ERR_OOM, "%s: out of host memory", what);
  MPI_Request req;
  int rc = MPI_Iallgather(mine, DESC_N, MPI_INT64_T, all, DESC_N, MPI_INT64_T, MPI_COMM_WORLD, &req);
  nc_status s = rc == MPI_SUCCESS ? wait_for(&req, what) : mpi_fail(rc, what);
  int bad = -1;
  for (int r = 0; s == NC_OK && r < g_size && bad < 0; r++)
    if (memcmp(all + (size_t)r * DESC_N, all, sizeof(int64_t) * DESC_N)) bad = r;
  if (bad >= 0) {
    char a[200], b[200];
    desc_text(all, a, sizeof a);
    desc_text(all + (size_t)bad * DESC_N, b, sizeof b);
    s = nc_error(NC_ERR_SHAPE, "%s: ranks disagree: rank 0 calls %s, rank %d calls %s", what, a, bad, b);
  }
  free(all);
  return s;
}

static MPI_Datatype mpi_type(nc_dtype dt) {
  switch (dt) {
  case NC_FLOAT32: return MPI_FLOAT;
  case NC_FLOAT64: return MPI_DOUBLE;
  case NC_INT32: return MPI_INT32_T;
  default: return MPI_INT64_T;
  }
}

static nc_status check_count(const nc_tensor *t, const char *what) {
  if (nc_tensor_numel(t) > 0x7fffffff)
    return nc_error(NC_ERR_UNSUPPORTED, "%s: tensors of more than 2^31-1 elements are not supported", what);
  return NC_OK;
}

nc_status nc_mpi_all_reduce(nc_tensor *t, nc_reduce_op op) {
  const char *what = "all_reduce";
  NC_TRY(need_init(what));
  NC_TRY(nc_dist_check_dtype(t->dtype, op, what));
  NC_TRY(check_count(t, what));
  NC_TRY(agree(0, t, -1, what));
  int64_t n = nc_tensor_numel(t);
  size_t nbytes = nc_tensor_nbytes(t);
  if (n == 0) return NC_OK;
  void *buf = malloc(nbytes);
  if (!buf) return nc_error(NC_ERR_OOM, "%s: out of host memory staging %zu bytes", what, nbytes);
  nc_status s = nc_read_values(t, buf, nbytes);
  if (s == NC_OK) {
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, mpi_type(t->dtype), op == NC_REDUCE_MAX ? MPI_MAX : MPI_SUM,
                            MPI_COMM_WORLD, &req);
    s = rc == MPI_SUCCESS ? wait_for(&req, what) : mpi_fail(rc, what);
  }
  if (s == NC_OK && op == NC_REDUCE_MEAN) nc_dist_scale(buf, n, t->dtype, g_size);
  if (s == NC_OK) s = nc_dist_write_back(t, buf, nbytes);
  free(buf);
  return s;
}

/* ---- the split all-reduce ------------------------------------------------------------------------ */
struct nc_mpi_reduce {
  nc_tensor *t, *dense; /* the caller's tensor (written back at finish) and what is read */
  void *buf;
  int64_t n;
  size_t nbytes;
  nc_reduce_op op;
  nc_read read;
  nc_status status; /* a failed read: the reduction still runs (the other ranks wait for it) */
  char message[512];
  bool launched;
  MPI_Request req;
  struct nc_mpi_reduce *next; /* started, not finished, in start order */
};

static nc_mpi_reduce *g_started;

/* Launches h's MPI_Iallreduce on g_async once its read is done (wait: waits for the read). */
static nc_status launch(nc_mpi_reduce *h) {
  nc_status s = nc_read_wait(&h->read);
  if (s != NC_OK && h->status == NC_OK) {
    h->status = s;
    snprintf(h->message, sizeof h->message, "%s", nc_last_error());
    memset(h->buf, 0, h->nbytes);
  }
  int rc = MPI_Iallreduce(MPI_IN_PLACE, h->buf, (int)h->n, mpi_type(h->dense->dtype),
                          h->op == NC_REDUCE_MAX ? MPI_MAX : MPI_SUM, g_async, &h->req);
  if (rc != MPI_SUCCESS) return mpi_fail(rc, "all_reduce");
  h->launched = true;
  return NC_OK;
}

/* Launches, in start order, the started reductions up to `until` (all when NULL), waiting for
 * their reads when wait, else only those whose reads are done (stopping at the first that is
 * not: the order must hold). */
static nc_status launch_started(nc_mpi_reduce *until, bool wait) {
  for (nc_mpi_reduce *h = g_started; h; h = h->next) {
    if (!h->launched) {
      if (!wait && !nc_read_done(&h->read)) return NC_OK;
      NC_TRY(launch(h));
    }
    if (h == until) break;
  }
  return NC_OK;
}

static void free_reduce(nc_mpi_reduce *h) {
  nc_read_wait(&h->read);
  nc_tensor_release(h->t);
  nc_tensor_release(h->dense);
  free(h->buf);
  free(h);
}

nc_status nc_mpi_all_reduce_start(nc_tensor *t, nc_reduce_op op, nc_mpi_reduce **out) {
  const char *what = "all_reduce";
  *out = NULL;
  NC_TRY(need_init(what));
  NC_TRY(nc_dist_check_dtype(t->dtype, op, what));
  NC_TRY(check_count(t, what));
  NC_TRY(agree(0, t, -1, what));
  nc_mpi_reduce *h = calloc(1, sizeof *h);
  if (!h) return nc_error(NC_ERR_OOM, "%s: out of host memory", what);
  h->n = nc_tensor_numel(t);
  h->nbytes = nc_tensor_nbytes(t);
  h->op = op;
  h->t = nc_tensor_retain(t);
  nc_status s = (h->buf = malloc(h->nbytes ? h->nbytes : 1)) ? NC_OK
                : nc_error(NC_ERR_OOM, "%s: out of host memory staging %zu bytes", what, h->nbytes);
  if (s == NC_OK) s = nc_contiguous(t, &h->dense);
  if (s == NC_OK && h->nbytes) s = nc_tensor_read_host_start(h->dense, h->buf, h->nbytes, &h->read);
  if (s != NC_OK) {
    /* the other ranks passed agree too and will launch this reduction: a failure here is
     * reported at finish, after the reduction ran with zeros */
    h->status = s;
    snprintf(h->message, sizeof h->message, "%s", nc_last_error());
    if (h->buf) memset(h->buf, 0, h->nbytes);
    if (!h->dense) h->dense = nc_tensor_retain(t);
  }
  if (!h->buf) {
    nc_tensor_release(h->t);
    nc_tensor_release(h->dense);
    free(h);
    g_broken = true; /* the other ranks will wait for this reduction in vain */
    return s;
  }
  nc_mpi_reduce **tail = &g_started;
  while (*tail) tail = &(*tail)->next;
  *tail = h;
  *out = h;
  /* earlier reductions whose reads have completed meanwhile go out now */
  return launch_started(NULL, false);
}

nc_status nc_mpi_all_reduce_finish(nc_mpi_reduce *h) {
  const char *what = "all_reduce";
  nc_status s = need_init(what);
  if (s != NC_OK) { /* MPI was finalized first: nothing can complete it */
    for (nc_mpi_reduce **p = &g_started; *p; p = &(*p)->next)
      if (*p == h) {
        *p = h->next;
        break;
      }
    if (!h->launched) free_reduce(h);
    return s;
  }
  s = launch_started(h, true);
  bool done = false;
  if (s == NC_OK) {
    s = wait_for(&h->req, what);
    done = s == NC_OK;
  }
  for (nc_mpi_reduce **p = &g_started; *p; p = &(*p)->next)
    if (*p == h) {
      *p = h->next;
      break;
    }
  if (done && h->status != NC_OK) s = nc_error(h->status, "%s", h->message);
  if (done && s == NC_OK && h->op == NC_REDUCE_MEAN) nc_dist_scale(h->buf, h->n, h->dense->dtype, g_size);
  if (done && s == NC_OK && h->nbytes) s = nc_dist_write_back(h->t, h->buf, h->nbytes);
  /* a collective still in flight may write into h->buf (MPI cannot cancel it): h stays; the job
   * is broken and MPI is aborted at exit */
  if (!(h->launched && !done)) free_reduce(h);
  return s;
}

nc_status nc_mpi_broadcast(nc_tensor *t, int root) {
  const char *what = "broadcast";
  NC_TRY(need_init(what));
  if (root < 0 || root >= g_size)
    return nc_error(NC_ERR_INDEX, "%s: root %d is not a rank (0..%d)", what, root, g_size - 1);
  NC_TRY(nc_dist_check_dtype(t->dtype, NC_REDUCE_SUM, what));
  NC_TRY(check_count(t, what));
  NC_TRY(agree(1, t, root, what));
  size_t nbytes = nc_tensor_nbytes(t);
  if (nbytes == 0) return NC_OK;
  void *buf = malloc(nbytes);
  if (!buf) return nc_error(NC_ERR_OOM, "%s: out of host memory staging %zu bytes", what, nbytes);
  nc_status s = g_rank == root ? nc_read_values(t, buf, nbytes) : NC_OK;
  if (s == NC_OK) {
    MPI_Request req;
    int rc = MPI_Ibcast(buf, (int)nc_tensor_numel(t), mpi_type(t->dtype), root, MPI_COMM_WORLD, &req);
    s = rc == MPI_SUCCESS ? wait_for(&req, what) : mpi_fail(rc, what);
  }
  if (s == NC_OK && g_rank != root) s = nc_dist_write_back(t, buf, nbytes);
  free(buf);
  return s;
}

nc_status nc_mpi_barrier(void) {
  const char *what = "barrier";
  NC_TRY(need_init(what));
  NC_TRY(agree(3, NULL, -1, what));
  return NC_OK; /* the descriptor exchange is itself a barrier */
}

nc_status nc_mpi_gather(nc_tensor *t, int root, nc_tensor **out) {
  const char *what = "gather";
  *out = NULL;
  NC_TRY(need_init(what));
  if (root >= g_size) return nc_error(NC_ERR_INDEX, "%s: root %d is not a rank (0..%d)", what, root, g_size - 1);
  if (root < 0) root = -1;
  NC_TRY(nc_dist_check_dtype(t->dtype, NC_REDUCE_SUM, what));
  NC_TRY(check_count(t, what));
  if (t->ndim >= NC_MAX_DIMS) return nc_error(NC_ERR_SHAPE, "%s: a tensor of %d dims cannot get a rank dim", what, t->ndim);
  NC_TRY(agree(2, t, root, what));
  size_t nbytes = nc_tensor_nbytes(t);
  bool mine = root < 0 || root == g_rank;
  void *buf = malloc(nbytes ? nbytes : 1), *all = mine ? malloc(nbytes * (size_t)g_size + 1) : NULL;
  nc_status s = NC_OK;
  if (!buf || (mine && !all)) s = nc_error(NC_ERR_OOM, "%s: out of host memory", what);
  if (s == NC_OK && nbytes) s = nc_read_values(t, buf, nbytes);
  if (s == NC_OK) {
    MPI_Request req;
    int n = (int)nc_tensor_numel(t), rc;
    MPI_Datatype ty = mpi_type(t->dtype);
    if (root < 0) rc = MPI_Iallgather(buf, n, ty, all, n, ty, MPI_COMM_WORLD, &req);
    else rc = MPI_Igather(buf, n, ty, all, n, ty, root, MPI_COMM_WORLD, &req);
    s = rc == MPI_SUCCESS ? wait_for(&req, what) : mpi_fail(rc, what);
  }
  if (s == NC_OK && mine) {
    int64_t shape[NC_MAX_DIMS];
    shape[0] = g_size;
    memcpy(shape + 1, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    s = nc_tensor_empty(nc_tensor_device(t), t->dtype, t->ndim + 1, shape, 0, out);
    if (s == NC_OK && nbytes) s = nc_tensor_write_host(*out, all, nbytes * (size_t)g_size);
    if (s != NC_OK) {
      nc_tensor_release(*out);
      *out = NULL;
    }
  }
  free(buf);
  free(all);
  return s;
}

#else /* no MPI in this build */

static nc_status no_mpi(void) {
  return nc_error(NC_ERR_UNSUPPORTED,
                  "this libnetcl was built without MPI (install libopenmpi-dev and openmpi-bin, then rebuild)");
}
bool nc_mpi_available(void) { return false; }
bool nc_mpi_initialized(void) { return false; }
nc_status nc_mpi_init(double timeout_s, int *rank, int *size, int *local_rank, int *local_size) {
  (void)timeout_s, (void)rank, (void)size, (void)local_rank, (void)local_size;
  return no_mpi();
}
nc_status nc_mpi_all_reduce(nc_tensor *t, nc_reduce_op op) { (void)t, (void)op; return no_mpi(); }
nc_status nc_mpi_broadcast(nc_tensor *t, int root) { (void)t, (void)root; return no_mpi(); }
struct nc_mpi_reduce {
  int unused;
};
nc_status nc_mpi_all_reduce_start(nc_tensor *t, nc_reduce_op op, nc_mpi_reduce **out) {
  (void)t, (void)op;
  *out = NULL;
  return no_mpi();
}
nc_status nc_mpi_all_reduce_finish(nc_mpi_reduce *h) {
  (void)h;
  return no_mpi();
}
nc_status nc_mpi_barrier(void) { return no_mpi(); }
nc_status nc_mpi_gather(nc_tensor *t, int root, nc_tensor **out) {
  (void)t, (void)root;
  *out = NULL;
  return no_mpi();
}
nc_status nc_mpi_finalize(void) { return NC_OK; }

#endif

/* Collectives between the devices of one process, staged through host memory: each tensor is
 * read to the host, combined there in device order, and written back. The reads of large
 * contiguous tensors run on one thread per device, so the waits for the devices overlap; the
 * writes to OpenCL devices are queued through the pinned staging pool without waiting, so the
 * copies to different devices overlap each other and the work queued after them. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "netcl/copy.h"
#include "netcl/dist.h"
#include "dist/support.h"

nc_status nc_reduce_op_parse(const char *name, nc_reduce_op *out) {
  if (name && !strcmp(name, "sum")) *out = NC_REDUCE_SUM;
  else if (name && !strcmp(name, "mean")) *out = NC_REDUCE_MEAN;
  else if (name && !strcmp(name, "max")) *out = NC_REDUCE_MAX;
  else return nc_error(NC_ERR_ARG, "unknown reduction '%s' (accepted: \"sum\", \"mean\", \"max\")", name ? name : "nil");
  return NC_OK;
}

static void shape_text(const nc_tensor *t, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < t->ndim && k < n; i++) k += (size_t)snprintf(buf + k, n - k, i ? ",%lld" : "%lld", (long long)t->shape[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

nc_status nc_dist_check_dtype(nc_dtype dt, nc_reduce_op op, const char *what) {
  if (dt != NC_FLOAT32 && dt != NC_FLOAT64 && dt != NC_INT32 && dt != NC_INT64)
    return nc_error(NC_ERR_DTYPE, "%s: dtype %s is not supported (float32, float64, int32, int64)", what,
                    nc_dtype_name(dt));
  if (op == NC_REDUCE_MEAN && !nc_dtype_is_float(dt))
    return nc_error(NC_ERR_DTYPE, "%s: mean of %s tensors (use a float dtype, or sum)", what, nc_dtype_name(dt));
  return NC_OK;
}

#define COMBINE(T)                                                                   \
  do {                                                                               \
    T *a = (T *)acc;                                                                 \
    const T *b = (const T *)src;                                                     \
    if (op == NC_REDUCE_MAX)                                                         \
      for (int64_t i = 0; i < n; i++) a[i] = b[i] > a[i] || b[i] != b[i] ? b[i] : a[i]; \
    else                                                                             \
      for (int64_t i = 0; i < n; i++) a[i] += b[i];                                  \
  } while (0)

void nc_dist_combine(void *acc, const void *src, int64_t n, nc_dtype dt, nc_reduce_op op) {
  switch (dt) {
  case NC_FLOAT32: COMBINE(float); break;
  case NC_FLOAT64: COMBINE(double); break;
  case NC_INT32: COMBINE(int32_t); break;
  case NC_INT64: COMBINE(int64_t); break;
  default: break;
  }
}

void nc_dist_scale(void *acc, int64_t n, nc_dtype dt, int count) {
  if (dt == NC_FLOAT32) {
    float *a = acc;
    for (int64_t i = 0; i < n; i++) a[i] /= (float)count;
  } else if (dt == NC_FLOAT64) {
    double *a = acc;
    for (int64_t i = 0; i < n; i++) a[i] /= (double)count;
  }
}

nc_status nc_dist_write_back(nc_tensor *t, const void *host, size_t nbytes) {
  if (nc_tensor_is_contiguous(t)) return nc_tensor_write_host(t, host, nbytes);
  nc_tensor *tmp;
  NC_TRY(nc_tensor_empty(nc_tensor_device(t), t->dtype, t->ndim, t->shape, 0, &tmp));
  nc_status s = nc_tensor_write_host(tmp, host, nbytes);
  if (s == NC_OK) s = nc_copy(t, tmp);
  nc_tensor_release(tmp);
  return s;
}

/* Same shape and dtype, distinct devices. */
static nc_status check_group(nc_tensor **ts, int n, const char *what) {
  if (n < 1 || !ts) return nc_error(NC_ERR_ARG, "%s: no tensors", what);
  for (int i = 0; i < n; i++) {
    if (!ts[i]) return nc_error(NC_ERR_ARG, "%s: tensor %d is missing", what, i + 1);
    bool same = ts[i]->dtype == ts[0]->dtype && ts[i]->ndim == ts[0]->ndim;
    for (int d = 0; same && d < ts[0]->ndim; d++) same = ts[i]->shape[d] == ts[0]->shape[d];
    if (!same) {
      char a[160], b[160];
      shape_text(ts[0], a, sizeof a);
      shape_text(ts[i], b, sizeof b);
      return nc_error(NC_ERR_SHAPE, "%s: tensors differ between devices: %s %s on device 1, %s %s on device %d",
                      what, a, nc_dtype_name(ts[0]->dtype), b, nc_dtype_name(ts[i]->dtype), i + 1);
    }
    for (int j = 0; j < i; j++)
      if (nc_tensor_device(ts[j]) == nc_tensor_device(ts[i]))
        return nc_error(NC_ERR_ARG, "%s: tensors %d and %d are on the same device (one tensor per device)", what,
                        j + 1, i + 1);
  }
  return NC_OK;
}

typedef struct {
  nc_tensor *t;
  void *dst;
  size_t nbytes;
  nc_status status;
  char message[512];
} read_job;

static void *read_one(void *arg) {
  read_job *j = arg;
  j->status = nc_read_values(j->t, j->dst, j->nbytes);
  if (j->status != NC_OK) snprintf(j->message, sizeof j->message, "%s", nc_last_error());
  return NULL;
}

/* Reads every ts[i] into bufs[i]: on one thread per device when the tensors are contiguous (a
 * plain transfer each) and large enough to be worth a thread (starting one costs ~0.1 ms), else
 * one after the other. */
static nc_status read_all(nc_tensor **ts, int n, char **bufs, size_t nbytes) {
  bool threads = nbytes >= ((size_t)1 << 20);
  for (int i = 0; i < n; i++) threads = threads && nc_tensor_is_contiguous(ts[i]);
  if (!threads || n == 1) {
    for (int i = 0; i < n; i++) NC_TRY(nc_read_values(ts[i], bufs[i], nbytes));
    return NC_OK;
  }
  read_job *jobs = calloc((size_t)n, sizeof *jobs);
  pthread_t *tids = calloc((size_t)n, sizeof *tids);
  bool *started = calloc((size_t)n, sizeof *started);
  if (!jobs || !tids || !started) {
    free(jobs), free(tids), free(started);
    return nc_error(NC_ERR_OOM, "all_reduce: out of host memory");
  }
  for (int i = 0; i < n; i++) jobs[i] = (read_job){.t = ts[i], .dst = bufs[i], .nbytes = nbytes};
  for (int i = 1; i < n; i++) started[i] = pthread_create(&tids[i], NULL, read_one, &jobs[i]) == 0;
  read_one(&jobs[0]);
  for (int i = 1; i < n; i++) {
    if (started[i]) pthread_join(tids[i], NULL);
    else read_one(&jobs[i]); /* no thread to be had: read it here */
  }
  nc_status s = NC_OK;
  for (int i = 0; i < n && s == NC_OK; i++)
    if (jobs[i].status != NC_OK) s = nc_error(jobs[i].status, "%s", jobs[i].message);
  free(jobs), free(tids), free(started);
  return s;
}

nc_status nc_group_all_reduce(nc_tensor **ts, int n, nc_reduce_op op) {
  const char *what = "all_reduce";
  NC_TRY(check_group(ts, n, what));
  NC_TRY(nc_dist_check_dtype(ts[0]->dtype, op, what));
  int64_t numel = nc_tensor_numel(ts[0]);
  size_t nbytes = nc_tensor_nbytes(ts[0]);
  if (numel == 0) return NC_OK;
  char **bufs = calloc((size_t)n, sizeof *bufs);
  nc_status s = bufs ? NC_OK : nc_error(NC_ERR_OOM, "%s: out of host memory", what);
  for (int i = 0; s == NC_OK && i < n; i++)
    if (!(bufs[i] = malloc(nbytes))) s = nc_error(NC_ERR_OOM, "%s: out of host memory staging %zu bytes", what, nbytes);
  if (s == NC_OK) s = read_all(ts, n, bufs, nbytes);
  /* combined in device order: the same bits on every device */
  for (int i = 1; s == NC_OK && i < n; i++) nc_dist_combine(bufs[0], bufs[i], numel, ts[0]->dtype, op);
  if (s == NC_OK && op == NC_REDUCE_MEAN) nc_dist_scale(bufs[0], numel, ts[0]->dtype, n);
  for (int i = 0; s == NC_OK && i < n; i++) s = nc_dist_write_back(ts[i], bufs[0], nbytes);
  for (int i = 0; bufs && i < n; i++) free(bufs[i]);
  free(bufs);
  return s;
}

nc_status nc_group_broadcast(nc_tensor **ts, int n, int root) {
  const char *what = "broadcast";
  NC_TRY(check_group(ts, n, what));
  if (root < 0 || root >= n) return nc_error(NC_ERR_INDEX, "%s: root %d is not in the group of %d", what, root + 1, n);
  size_t nbytes = nc_tensor_nbytes(ts[0]);
  if (nbytes == 0) return NC_OK;
  char *buf = malloc(nbytes);
  if (!buf) return nc_error(NC_ERR_OOM, "%s: out of host memory staging %zu bytes", what, nbytes);
  nc_status s = nc_read_values(ts[root], buf, nbytes);
  for (int i = 0; s == NC_OK && i < n; i++)
    if (i != root) s = nc_dist_write_back(ts[i], buf, nbytes);
  free(buf);
  return s;
}

/* Collectives between the devices of one process. Devices that are peers (nc_device_peers:
 * OpenCL devices of one platform, sharing a context) reduce on a device: every tensor is copied
 * device to device to the first one's device, combined there in device order by the ordinary
 * ops, and copied back, all queued without waiting. Other groups stage through host memory:
 * each tensor is read to the host, combined there in device order, and written back. The reads
 * are queued on every device without waiting (nc_storage_read_start) and waited for together,
 * so the devices' transfers overlap; an all-reduce can also be split
 * (nc_group_reduce_begin/add/finish), its copies or reads queued one device at a time as each
 * tensor becomes ready, while the caller goes on queueing work. The writes to OpenCL devices
 * are queued through the pinned staging pool without waiting, so the copies to different
 * devices overlap each other and the work queued after them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "netcl/copy.h"
#include "netcl/device.h"
#include "netcl/dist.h"
#include "netcl/elementwise.h"
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

/* ---- the split all-reduce: begin, add (one tensor per position), finish -------------------------- */
struct nc_group_reduce {
  int n, added;
  nc_reduce_op op;
  nc_device *root;   /* the first added tensor's device */
  bool host;         /* combined in host memory: some device is no peer of root */
  nc_tensor **ts;    /* as added (retained), for the write-back */
  nc_tensor **dense; /* on the device: position i's values copied to root; on the host: what is
                        read (ts[i] itself, or its contiguous copy) */
  char **bufs;       /* host staging, one per position (host mode) */
  nc_read *reads;    /* in flight until finish (host mode) */
};

nc_status nc_group_reduce_begin(int n, nc_reduce_op op, nc_group_reduce **out) {
  *out = NULL;
  if (n < 1) return nc_error(NC_ERR_ARG, "all_reduce: a group of %d devices", n);
  nc_group_reduce *r = calloc(1, sizeof *r);
  if (r) {
    r->ts = calloc((size_t)n, sizeof *r->ts);
    r->dense = calloc((size_t)n, sizeof *r->dense);
    r->bufs = calloc((size_t)n, sizeof *r->bufs);
    r->reads = calloc((size_t)n, sizeof *r->reads);
  }
  if (!r || !r->ts || !r->dense || !r->bufs || !r->reads) {
    nc_group_reduce_free(r);
    return nc_error(NC_ERR_OOM, "all_reduce: out of host memory");
  }
  r->n = n;
  r->op = op;
  *out = r;
  return NC_OK;
}

/* Host mode for position i: its read to host memory, started (dense[i] set). */
static nc_status start_read(nc_group_reduce *r, int i) {
  size_t nbytes = nc_tensor_nbytes(r->dense[i]);
  if (!(r->bufs[i] = malloc(nbytes ? nbytes : 1)))
    return nc_error(NC_ERR_OOM, "all_reduce: out of host memory staging %zu bytes", nbytes);
  return nbytes ? nc_tensor_read_host_start(r->dense[i], r->bufs[i], nbytes, &r->reads[i]) : NC_OK;
}

nc_status nc_group_reduce_add(nc_group_reduce *r, int i, nc_tensor *t) {
  const char *what = "all_reduce";
  if (i < 0 || i >= r->n) return nc_error(NC_ERR_INDEX, "%s: position %d is not in the group of %d", what, i + 1, r->n);
  if (r->ts[i]) return nc_error(NC_ERR_STATE, "%s: position %d was added twice", what, i + 1);
  NC_TRY(nc_dist_check_dtype(t->dtype, r->op, what));
  for (int j = 0; j < r->n; j++) {
    const nc_tensor *o = r->ts[j];
    if (!o) continue;
    bool same = o->dtype == t->dtype && o->ndim == t->ndim;
    for (int d = 0; same && d < t->ndim; d++) same = o->shape[d] == t->shape[d];
    if (!same) {
      char a[160], b[160];
      shape_text(o, a, sizeof a);
      shape_text(t, b, sizeof b);
      return nc_error(NC_ERR_SHAPE, "%s: tensors differ between devices: %s %s on device %d, %s %s on device %d",
                      what, a, nc_dtype_name(o->dtype), j + 1, b, nc_dtype_name(t->dtype), i + 1);
    }
    if (nc_tensor_device(o) == nc_tensor_device(t))
      return nc_error(NC_ERR_ARG, "%s: tensors %d and %d are on the same device (one tensor per device)", what,
                      j < i ? j + 1 : i + 1, j < i ? i + 1 : j + 1);
  }
  nc_device *dev = nc_tensor_device(t);
  if (!r->root) r->root = dev;
  if (!r->host && dev != r->root && !nc_device_peers(r->root, dev)) {
    /* a device the others cannot copy to: all go through the host, those added so far too */
    r->host = true;
    for (int j = 0; j < r->n; j++)
      if (r->ts[j]) NC_TRY(start_read(r, j));
  }
  nc_tensor *dense = NULL;
  nc_status s = r->host || dev == r->root ? nc_contiguous(t, &dense) /* queued like any op */
                                          : nc_to(t, r->root, t->dtype, &dense); /* device to device */
  if (s != NC_OK) return s;
  r->dense[i] = dense;
  if (r->host && (s = start_read(r, i)) != NC_OK) {
    nc_tensor_release(dense);
    r->dense[i] = NULL;
    free(r->bufs[i]);
    r->bufs[i] = NULL;
    return s;
  }
  r->ts[i] = nc_tensor_retain(t);
  r->added++;
  return NC_OK;
}

int nc_group_reduce_added(const nc_group_reduce *r) { return r->added; }

/* Device mode: the combination on root, in position order, then copied into every tensor. */
static nc_status finish_on_device(nc_group_reduce *r) {
  nc_op op = r->op == NC_REDUCE_MAX ? NC_OP_MAXIMUM : NC_OP_ADD;
  nc_tensor *acc = nc_tensor_retain(r->dense[0]);
  nc_status s = NC_OK;
  for (int i = 1; s == NC_OK && i < r->n; i++) {
    nc_tensor *next = NULL;
    s = nc_binary(op, nc_operand_tensor(acc), nc_operand_tensor(r->dense[i]), &next);
    nc_tensor_release(acc);
    acc = next;
  }
  if (s == NC_OK && r->op == NC_REDUCE_MEAN && r->n > 1)
    s = nc_binary_into(NC_OP_DIV, acc, nc_operand_tensor(acc), nc_operand_scalar(nc_scalar_float(r->n)));
  for (int i = 0; s == NC_OK && i < r->n; i++) s = nc_copy(r->ts[i], acc);
  nc_tensor_release(acc);
  return s;
}

nc_status nc_group_reduce_finish(nc_group_reduce *r) {
  const char *what = "all_reduce";
  nc_status s = NC_OK;
  for (int i = 0; s == NC_OK && i < r->n; i++)
    if (!r->ts[i]) s = nc_error(NC_ERR_STATE, "%s: device %d of %d gave no tensor", what, i + 1, r->n);
  if (s == NC_OK && !r->host) {
    s = finish_on_device(r);
    nc_group_reduce_free(r);
    return s;
  }
  /* every read is waited for, even after an error: their buffers are freed below */
  for (int i = 0; i < r->n; i++) {
    nc_status w = nc_read_wait(&r->reads[i]);
    if (s == NC_OK) s = w;
  }
  if (s == NC_OK) {
    const nc_tensor *t0 = r->ts[0];
    int64_t numel = nc_tensor_numel(t0);
    size_t nbytes = nc_tensor_nbytes(t0);
    /* combined in device order: the same bits on every device, whatever order they came in */
    for (int i = 1; i < r->n; i++) nc_dist_combine(r->bufs[0], r->bufs[i], numel, t0->dtype, r->op);
    if (r->op == NC_REDUCE_MEAN) nc_dist_scale(r->bufs[0], numel, t0->dtype, r->n);
    for (int i = 0; s == NC_OK && nbytes && i < r->n; i++) s = nc_dist_write_back(r->ts[i], r->bufs[0], nbytes);
  }
  nc_group_reduce_free(r);
  return s;
}

void nc_group_reduce_free(nc_group_reduce *r) {
  if (!r) return;
  for (int i = 0; r->reads && i < r->n; i++) nc_read_wait(&r->reads[i]); /* never free a buffer being written */
  for (int i = 0; r->ts && i < r->n; i++) {
    nc_tensor_release(r->ts[i]);
    nc_tensor_release(r->dense[i]);
    free(r->bufs[i]);
  }
  free(r->ts), free(r->dense), free(r->bufs), free(r->reads);
  free(r);
}

/* Every device's read is queued before any is waited for, so the devices' transfers (and the
 * work queued before them) overlap. */
nc_status nc_group_all_reduce(nc_tensor **ts, int n, nc_reduce_op op) {
  const char *what = "all_reduce";
  NC_TRY(check_group(ts, n, what));
  NC_TRY(nc_dist_check_dtype(ts[0]->dtype, op, what));
  if (nc_tensor_numel(ts[0]) == 0) return NC_OK;
  nc_group_reduce *r;
  NC_TRY(nc_group_reduce_begin(n, op, &r));
  for (int i = 0; i < n; i++) {
    nc_status s = nc_group_reduce_add(r, i, ts[i]);
    if (s != NC_OK) {
      nc_group_reduce_free(r);
      return s;
    }
  }
  return nc_group_reduce_finish(r);
}

nc_status nc_group_broadcast(nc_tensor **ts, int n, int root) {
  const char *what = "broadcast";
  NC_TRY(check_group(ts, n, what));
  if (root < 0 || root >= n) return nc_error(NC_ERR_INDEX, "%s: root %d is not in the group of %d", what, root + 1, n);
  size_t nbytes = nc_tensor_nbytes(ts[0]);
  if (nbytes == 0) return NC_OK;
  bool peers = true;
  for (int i = 0; peers && i < n; i++)
    peers = i == root || nc_device_peers(nc_tensor_device(ts[root]), nc_tensor_device(ts[i]));
  if (peers) { /* device to device, queued without waiting */
    nc_status s = NC_OK;
    for (int i = 0; s == NC_OK && i < n; i++)
      if (i != root) s = nc_copy(ts[i], ts[root]);
    return s;
  }
  char *buf = malloc(nbytes);
  if (!buf) return nc_error(NC_ERR_OOM, "%s: out of host memory staging %zu bytes", what, nbytes);
  nc_status s = nc_read_values(ts[root], buf, nbytes);
  for (int i = 0; s == NC_OK && i < n; i++)
    if (i != root) s = nc_dist_write_back(ts[i], buf, nbytes);
  free(buf);
  return s;
}

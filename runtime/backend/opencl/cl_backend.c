/* The OpenCL backend's buffers and transfers (its device interface) and the foundation ops
 * (fill, copy, arange, random) on kernels/core.cl. */
#include <string.h>
#include <limits.h>
#include "core/check.h"
#include "cl_backend.h"
#include "cl_linalg.h"
#include "netcl/half.h"

nc_status nc_cl_alloc(nc_device *dev, size_t n, void **h) {
  nc_cl_device *cd;
  NC_TRY(nc_cl_ready(dev, &cd));
  cl_int err;
  cl_mem m = nc_cl.clCreateBuffer(cd->ctx, CL_MEM_READ_WRITE, n, NULL, &err);
  if (err != CL_SUCCESS) return nc_cl_fail(err, "allocating a device buffer", dev);
  *h = m;
  return NC_OK;
}

void nc_cl_release(nc_device *dev, void *h) { nc_cl.clReleaseMemObject((cl_mem)h); }
void *nc_cl_host_ptr(nc_device *dev, void *h) { return NULL; }

nc_status nc_cl_write(nc_device *dev, void *h, size_t off, const void *src, size_t n) {
  nc_cl_device *cd;
  NC_TRY(nc_cl_ready(dev, &cd));
  return nc_cl_staging_write(dev, cd, (cl_mem)h, off, src, n);
}

/* Reads are queued without blocking under dev->lock (which serializes enqueues), then waited
 * for on their event without it, so a thread waiting for a read never holds up other threads
 * queueing work on the device. */
static nc_status read_direct_start(nc_device *dev, void *h, size_t off, void *dst, size_t n, void **ticket) {
  nc_cl_device *cd;
  NC_TRY(nc_cl_ready(dev, &cd));
  cl_event ev = NULL;
  pthread_mutex_lock(&dev->lock);
  cl_int err = nc_cl.clEnqueueReadBuffer(cd->queue, (cl_mem)h, CL_FALSE, off, n, dst, 0, NULL, &ev);
  if (err == CL_SUCCESS) nc_cl.clFlush(cd->queue); /* submitted now, not at the next wait */
  pthread_mutex_unlock(&dev->lock);
  if (err != CL_SUCCESS) return nc_cl_fail(err, "reading a device buffer", dev);
  *ticket = ev;
  return NC_OK;
}

static nc_status read_direct_wait(nc_device *dev, void *ticket) {
  nc_cl_device *cd = dev->impl;
  cl_event ev = ticket;
  cl_int err = nc_cl.clWaitForEvents(1, &ev), status = CL_COMPLETE;
  if (err == CL_SUCCESS)
    err = nc_cl.clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
  if (err == CL_SUCCESS && status < 0) err = status;
  nc_cl.clReleaseEvent(ev);
  if (err != CL_SUCCESS) return nc_cl_fail(err, "reading a device buffer", dev);
  /* The in-order queue ran everything queued before the read: a bounded-queue marker that has
   * completed is no longer needed (one another thread queued since stays). */
  pthread_mutex_lock(&dev->lock);
  if (cd->mark) {
    cl_int ms = CL_QUEUED;
    if (nc_cl.clGetEventInfo(cd->mark, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof ms, &ms, NULL) == CL_SUCCESS &&
        ms == CL_COMPLETE)
      nc_cl_forget_mark(cd);
  }
  pthread_mutex_unlock(&dev->lock);
  return NC_OK;
}

nc_status nc_cl_read(nc_device *dev, void *h, size_t off, void *dst, size_t n) {
  void *ticket = NULL;
  NC_TRY(read_direct_start(dev, h, off, dst, n, &ticket));
  return read_direct_wait(dev, ticket);
}

nc_status nc_cl_sync(nc_device *dev) {
  nc_cl_device *cd = dev->impl;
  if (!cd->ready) return NC_OK;
  cl_int err = nc_cl.clFinish(cd->queue);
  if (err != CL_SUCCESS) return nc_cl_fail(err, "waiting for the queue", dev);
  pthread_mutex_lock(&dev->lock);
  nc_cl_forget_mark(cd); /* complete now, unless another thread enqueued meanwhile: harmless */
  nc_status s = nc_cl_reads_complete(dev, cd);
  pthread_mutex_unlock(&dev->lock);
  return s;
}

void nc_cl_stats(nc_device *dev, nc_memory_stats *st) {
  nc_cl_device *cd = dev->impl;
  pthread_mutex_lock(&cd->programs_lock);
  st->programs_built = cd->programs_built;
  st->programs_loaded = cd->programs_loaded;
  pthread_mutex_unlock(&cd->programs_lock);
  pthread_mutex_lock(&dev->lock);
  st->pinned_bytes = cd->ready ? nc_cl_staging_bytes(cd) : 0;
  pthread_mutex_unlock(&dev->lock);
}

static nc_status dtype_supported(nc_device *dev, nc_dtype dt) {
  if (dt == NC_FLOAT64 && !dev->info.fp64)
    return nc_error(NC_ERR_UNSUPPORTED, "%s has no float64 support (cl_khr_fp64)", dev->info.name);
  return NC_OK;
}

/* A scalar of dtype dt holding v, as a kernel argument. */
typedef union {
  cl_float f;
  cl_double d;
  cl_int i;
  cl_long l;
  cl_uchar u;
  cl_ushort h;
} scalar;

static nc_cl_arg scalar_arg(nc_dtype dt, double v, scalar *s) {
  switch (dt) {
    case NC_FLOAT32: s->f = (cl_float)v; return (nc_cl_arg){sizeof s->f, &s->f};
    case NC_FLOAT64: s->d = v; return (nc_cl_arg){sizeof s->d, &s->d};
    case NC_INT32: s->i = (cl_int)v; return (nc_cl_arg){sizeof s->i, &s->i};
    case NC_INT64: s->l = (cl_long)v; return (nc_cl_arg){sizeof s->l, &s->l};
    case NC_BOOL: s->u = v != 0; return (nc_cl_arg){sizeof s->u, &s->u};
    case NC_BFLOAT16:
    case NC_FLOAT16: s->h = nc_half_from_double(dt, v); return (nc_cl_arg){sizeof s->h, &s->h};
    default: s->u = (cl_uchar)v; return (nc_cl_arg){sizeof s->u, &s->u};
  }
}

nc_status nc_cl_fill(nc_tensor *t, double v) {
  nc_device *dev = nc_tensor_device(t);
  NC_TRY(dtype_supported(dev, t->dtype));
  const nc_cl_handle *k;
  NC_TRY(nc_cl_handle_get(dev, NC_CL_K_FILL, t->dtype, &k));
  cl_mem m = nc_cl_mem(t);
  nc_cl_layout l;
  nc_cl_layout_of(t, &l);
  scalar s;
  cl_long n = nc_tensor_numel(t);
  nc_cl_arg args[] = {NC_CL_ARG(m), NC_CL_ARG(l), scalar_arg(t->dtype, v, &s), NC_CL_ARG(n)};
  return nc_cl_launch(dev, k->kernel, 4, args, nc_cl_global_size(dev, n), 0);
}

/* Mirrors nc_layout32 (kernels/core.cl). */
typedef struct {
  cl_int ndim;
  cl_int shape[NC_MAX_DIMS];
  cl_int strides[NC_MAX_DIMS];
} layout32;

/* A same-dtype copy from a strided source into a contiguous destination through
 * strided_copy_<size> when every source offset fits 32 bits; NC_ERR_UNSUPPORTED (nothing queued,
 * no error recorded) when it does not, for the general kernels to take. */
static nc_status strided_copy(nc_device *dev, nc_tensor *dst, const nc_tensor *src, int64_t n) {
  if (n >= INT_MAX) return NC_ERR_UNSUPPORTED;
  const nc_tensor *ts[2] = {dst, src};
  nc_cl_layout l[2];
  nc_cl_layouts(2, ts, l);
  layout32 s32 = {.ndim = l[1].ndim};
  int64_t last = 0;
  for (int d = 0; d < l[1].ndim; d++) {
    if (l[1].strides[d] < 0 || l[1].strides[d] >= INT_MAX) return NC_ERR_UNSUPPORTED;
    last += (l[1].shape[d] - 1) * l[1].strides[d];
    s32.shape[d] = (cl_int)l[1].shape[d];
    s32.strides[d] = (cl_int)l[1].strides[d];
  }
  if (last >= INT_MAX) return NC_ERR_UNSUPPORTED;
  const int nd = l[1].ndim;
  cl_int vec = nd > 0 && s32.strides[nd - 1] == 1 && s32.shape[nd - 1] % 4 == 0 && src->offset % 4 == 0 &&
               dst->offset % 4 == 0;
  for (int d = 0; vec && d < nd - 1; d++) vec = s32.strides[d] % 4 == 0;
  const nc_cl_handle *k;
  NC_TRY(nc_cl_handle_get(dev, NC_CL_K_STRIDED_COPY, src->dtype, &k));
  cl_mem dm = nc_cl_mem(dst), sm = nc_cl_mem(src);
  cl_long doff = dst->offset, soff = src->offset;
  cl_int units = (cl_int)(vec ? n / 4 : n);
  nc_cl_arg args[] = {NC_CL_ARG(dm),  NC_CL_ARG(doff),  NC_CL_ARG(sm), NC_CL_ARG(soff),
                      NC_CL_ARG(s32), NC_CL_ARG(units), NC_CL_ARG(vec)};
  return nc_cl_launch(dev, k->kernel, 7, args, nc_cl_global_size(dev, units), 0);
}

nc_status nc_cl_copy(nc_tensor *dst, const nc_tensor *src) {
  nc_device *dev = nc_tensor_device(dst);
  NC_TRY(dtype_supported(dev, dst->dtype));
  NC_TRY(dtype_supported(dev, src->dtype));
  cl_long n = nc_tensor_numel(dst);
  if (dst->dtype == src->dtype && nc_tensor_is_contiguous(dst) && nc_tensor_is_contiguous(src)) {
    nc_cl_device *cd;
    NC_TRY(nc_cl_ready(dev, &cd));
    size_t es = nc_dtype_size(dst->dtype);
    pthread_mutex_lock(&dev->lock);
    cl_int err = nc_cl.clEnqueueCopyBuffer(cd->queue, nc_cl_mem(src), nc_cl_mem(dst), (size_t)src->offset * es,
                                           (size_t)dst->offset * es, (size_t)n * es, 0, NULL, NULL);
    nc_status q = err == CL_SUCCESS ? nc_cl_enqueued(dev, cd) : NC_OK;
    pthread_mutex_unlock(&dev->lock);
    if (err != CL_SUCCESS) return nc_cl_fail(err, "copying a device buffer", dev);
    return q;
  }
  if (dst->dtype == src->dtype && nc_tensor_is_contiguous(dst)) {
    nc_status s = strided_copy(dev, dst, src, n);
    if (s != NC_ERR_UNSUPPORTED) return s;
  }
  const nc_cl_handle *k;
  /* contiguous float32 from a storage dtype and back: half.cl's vector conversions */
  const bool widen = dst->dtype == NC_FLOAT32 && nc_dtype_is_storage(src->dtype),
             narrow = src->dtype == NC_FLOAT32 && nc_dtype_is_storage(dst->dtype);
  if ((widen || narrow) && nc_tensor_is_contiguous(dst) && nc_tensor_is_contiguous(src)) {
    const int slot = widen ? NC_CL_K_HALF_WIDEN : NC_CL_K_HALF_NARROW;
    NC_TRY(nc_cl_handle_get(dev, slot, widen ? src->dtype : dst->dtype, &k));
    cl_mem dm = nc_cl_mem(dst), sm = nc_cl_mem(src);
    cl_long doff = dst->offset, soff = src->offset;
    nc_cl_arg args[] = {NC_CL_ARG(dm), NC_CL_ARG(doff), NC_CL_ARG(sm), NC_CL_ARG(soff), NC_CL_ARG(n)};
    return nc_cl_launch(dev, k->kernel, 5, args, nc_cl_grid(dev, (n + 3) / 4), k->local);
  }
  /* other copies with a storage dtype on either side are half.cl's */
  const int from = nc_dtype_is_storage(dst->dtype) || nc_dtype_is_storage(src->dtype) ? NC_CL_K_HALF_FROM_FLOAT32
                                                                                       : NC_CL_K_COPY_FROM_FLOAT32;
  NC_TRY(nc_cl_handle_get(dev, from + (int)src->dtype, dst->dtype, &k));
  cl_mem dm = nc_cl_mem(dst), sm = nc_cl_mem(src);
  nc_cl_layout dl, sl;
  nc_cl_layout_of(dst, &dl);
  nc_cl_layout_of(src, &sl);
  nc_cl_arg args[] = {NC_CL_ARG(dm), NC_CL_ARG(dl), NC_CL_ARG(sm), NC_CL_ARG(sl), NC_CL_ARG(n)};
  return nc_cl_launch(dev, k->kernel, 5, args, nc_cl_global_size(dev, n), 0);
}

/* A real for an nc_acc kernel parameter (double where the device has fp64). */
static nc_cl_arg acc_arg(nc_device *dev, double v, scalar *s) {
  return scalar_arg(dev->info.fp64 ? NC_FLOAT64 : NC_FLOAT32, v, s);
}

nc_status nc_cl_arange(nc_tensor *t, double start, double step) {
  nc_device *dev = nc_tensor_device(t);
  NC_TRY(dtype_supported(dev, t->dtype));
  const nc_cl_handle *k;
  NC_TRY(nc_cl_handle_get(dev, NC_CL_K_ARANGE, t->dtype, &k));
  cl_mem m = nc_cl_mem(t);
  cl_long off = t->offset, n = nc_tensor_numel(t);
  scalar a, b;
  nc_cl_arg args[] = {NC_CL_ARG(m), NC_CL_ARG(off), acc_arg(dev, start, &a), acc_arg(dev, step, &b), NC_CL_ARG(n)};
  return nc_cl_launch(dev, k->kernel, 5, args, nc_cl_global_size(dev, n), 0);
}

nc_status nc_cl_random(nc_tensor *t, int kind, uint64_t seed, uint64_t offset, double a, double b) {
  nc_device *dev = nc_tensor_device(t);
  NC_TRY(dtype_supported(dev, t->dtype));
  const nc_cl_handle *k;
  NC_TRY(nc_cl_handle_get(dev, kind == NC_RANDOM_UNIFORM ? NC_CL_K_UNIFORM : NC_CL_K_NORMAL, t->dtype, &k));
  cl_mem m = nc_cl_mem(t);
  cl_long off = t->offset, n = nc_tensor_numel(t);
  cl_ulong sd = seed, of = offset;
  scalar sa, sb;
  nc_cl_arg args[] = {NC_CL_ARG(m),  NC_CL_ARG(off), NC_CL_ARG(sd), NC_CL_ARG(of), scalar_arg(t->dtype, a, &sa),
                      scalar_arg(t->dtype, b, &sb), NC_CL_ARG(n)};
  return nc_cl_launch(dev, k->kernel, 7, args, nc_cl_global_size(dev, n), 0);
}


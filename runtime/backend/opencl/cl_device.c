/* OpenCL devices at work: the lazily created context and in-order queue, tensor layouts as
 * kernels take them, work sizes and launches. Discovery is cl_discover.c. */
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "cl_backend.h"


nc_status nc_cl_fail(cl_int err, const char *what, const nc_device *dev) {
  return nc_error(err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ? NC_ERR_OOM : NC_ERR_DEVICE,
                  "%s failed on %s: %s (%d)", what, dev ? dev->info.name : "OpenCL", nc_cl_strerror(err), err);
}

bool nc_cl_gpu_pattern(const nc_device *dev) {
  const char *e = getenv("NETCL_CL_PATTERN");
  if (e && strcmp(e, "gpu") == 0) return true;
  if (e && strcmp(e, "cpu") == 0) return false;
  return dev->info.is_gpu;
}

/* The platform's shared context (made for all its devices on the first call, retained for
 * each caller), or, when the driver refuses it, a context of the device's own. */
static cl_context context_of(nc_cl_device *cd, cl_int *err) {
  nc_cl_platform *pl = cd->plat;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)cd->platform, 0};
  cl_context ctx = NULL;
  pthread_mutex_lock(&pl->lock);
  if (!pl->tried) {
    pl->tried = true;
    cl_int e;
    pl->ctx = pl->ndev > 1 ? nc_cl.clCreateContext(props, pl->ndev, pl->ids, NULL, NULL, &e) : NULL;
    if (pl->ctx && e != CL_SUCCESS) pl->ctx = NULL;
    if (pl->ctx) pl->users = 1, ctx = pl->ctx; /* the creation's reference is this caller's */
  } else if (pl->ctx && nc_cl.clRetainContext(pl->ctx) == CL_SUCCESS) {
    pl->users++;
    ctx = pl->ctx;
  }
  pthread_mutex_unlock(&pl->lock);
  if (ctx) {
    cd->shared = true;
    *err = CL_SUCCESS;
    return ctx;
  }
  cd->shared = false;
  return nc_cl.clCreateContext(props, 1, &cd->id, NULL, NULL, err);
}

void nc_cl_context_release(nc_cl_device *cd) {
  if (!cd->ctx) return;
  if (cd->shared) {
    nc_cl_platform *pl = cd->plat;
    pthread_mutex_lock(&pl->lock);
    if (--pl->users == 0) pl->ctx = NULL; /* the last reference goes below */
    pthread_mutex_unlock(&pl->lock);
  }
  nc_cl.clReleaseContext(cd->ctx);
  cd->ctx = NULL;
}

nc_status nc_cl_ready(nc_device *dev, nc_cl_device **out) {
  nc_cl_device *cd = dev->impl;
  *out = cd;
  if (__atomic_load_n(&cd->ready, __ATOMIC_ACQUIRE)) return NC_OK;
  pthread_mutex_lock(&cd->init_lock);
  if (!cd->ready && cd->init_status == NC_OK) {
    cl_int err;
    cd->ctx = context_of(cd, &err);
    if (err == CL_SUCCESS) {
      cl_command_queue_properties props = nc_cl_profiling() ? CL_QUEUE_PROFILING_ENABLE : 0;
      cd->queue = nc_cl.clCreateCommandQueue(cd->ctx, cd->id, props, &err);
      if (err != CL_SUCCESS) nc_cl_context_release(cd);
    }
    if (err == CL_SUCCESS) {
      const char *env = getenv("NETCL_QUEUE_BATCH");
      long batch = env && *env ? strtol(env, NULL, 10) : 0;
      cd->queue_batch = batch > 0 && batch < (1 << 20) ? (unsigned)batch : NC_CL_QUEUE_BATCH;
      nc_cl_profile_start(cd);
      __atomic_store_n(&cd->ready, true, __ATOMIC_RELEASE);
    } else {
      cd->init_status = nc_cl_fail(err, "creating an OpenCL context and queue", dev);
      snprintf(cd->init_error, sizeof cd->init_error, "%s", nc_last_error());
    }
  }
  nc_status s = cd->ready ? NC_OK : cd->init_status;
  if (s != NC_OK) nc_error(s, "%s", cd->init_error);
  pthread_mutex_unlock(&cd->init_lock);
  return s;
}

nc_status nc_cl_enqueued(nc_device *dev, nc_cl_device *cd) {
  ++cd->since_mark;
  /* The first commands of a batch are handed to the device early (a flush does not wait): after
   * a sync the device would otherwise idle until the host had queued a whole batch. */
  if (cd->since_mark == NC_CL_EARLY_FLUSH || cd->since_mark == 4 * NC_CL_EARLY_FLUSH) nc_cl.clFlush(cd->queue);
  if (cd->since_mark < cd->queue_batch) return NC_OK;
  cd->since_mark = 0;
  cl_event mark = NULL;
  cl_int err = nc_cl.clEnqueueMarkerWithWaitList(cd->queue, 0, NULL, &mark);
  if (err != CL_SUCCESS) return nc_cl_fail(err, "enqueueing a queue marker", dev);
  nc_cl.clFlush(cd->queue);
  if (cd->mark) { /* the batch before this one */
    err = nc_cl.clWaitForEvents(1, &cd->mark);
    nc_cl.clReleaseEvent(cd->mark);
  }
  cd->mark = mark;
  if (err != CL_SUCCESS) return nc_cl_fail(err, "waiting for queued work", dev);
  return NC_OK;
}

void nc_cl_forget_mark(nc_cl_device *cd) {
  if (cd->mark) nc_cl.clReleaseEvent(cd->mark);
  cd->mark = NULL;
  cd->since_mark = 0;
}

void nc_cl_layout_of(const nc_tensor *t, nc_cl_layout *l) {
  memset(l, 0, sizeof *l);
  l->offset = t->offset;
  l->ndim = t->ndim;
  l->contiguous = nc_tensor_is_contiguous(t);
  for (int i = 0; i < t->ndim; i++) {
    l->shape[i] = t->shape[i];
    l->strides[i] = t->strides[i];
  }
}

void nc_cl_layouts(int n, const nc_tensor *const *ts, nc_cl_layout *ls) {
  const nc_tensor *t0 = ts[0];
  int nd = 0;
  int64_t shape[NC_MAX_DIMS], strides[4][NC_MAX_DIMS];
  NC_ASSERT(n <= 4);
  for (int d = 0; d < t0->ndim; d++) {
    if (t0->shape[d] == 1) continue;
    bool merge = nd > 0;
    for (int k = 0; k < n && merge; k++)
      if (ts[k] && strides[k][nd - 1] != ts[k]->strides[d] * t0->shape[d]) merge = false;
    if (merge) {
      shape[nd - 1] *= t0->shape[d];
      for (int k = 0; k < n; k++) strides[k][nd - 1] = ts[k] ? ts[k]->strides[d] : 0;
      continue;
    }
    shape[nd] = t0->shape[d];
    for (int k = 0; k < n; k++) strides[k][nd] = ts[k] ? ts[k]->strides[d] : 0;
    nd++;
  }
  for (int k = 0; k < n; k++) {
    nc_cl_layout *l = &ls[k];
    memset(l, 0, sizeof *l);
    if (!ts[k]) {
      l->contiguous = 1;
      continue;
    }
    l->offset = ts[k]->offset;
    l->ndim = nd;
    l->contiguous = nd == 0 || (nd == 1 && strides[k][0] == 1);
    for (int d = 0; d < nd; d++) {
      l->shape[d] = shape[d];
      l->strides[d] = strides[k][d];
    }
  }
}

size_t nc_cl_grid(nc_device *dev, int64_t n) {
  const size_t ls = nc_cl_local_size(dev), cap = (size_t)1 << 30;
  size_t want = ((size_t)(n > 0 ? n : 1) + ls - 1) / ls * ls;
  return want < cap ? want : cap;
}

size_t nc_cl_local_size(nc_device *dev) {
  size_t max = dev->info.max_work_group_size ? dev->info.max_work_group_size : 1, l = 1;
  while (l * 2 <= max && l < 256) l *= 2;
  return l;
}

size_t nc_cl_kernel_local_size(nc_device *dev, cl_kernel k) {
  size_t ls = nc_cl_local_size(dev), max = 0;
  nc_cl_device *cd = dev->impl;
  if (nc_cl.clGetKernelWorkGroupInfo(k, cd->id, CL_KERNEL_WORK_GROUP_SIZE, sizeof max, &max, NULL) == CL_SUCCESS)
    while (ls > 1 && ls > max) ls /= 2;
  return ls;
}

nc_status nc_cl_check_dtype(nc_device *dev, nc_dtype dt) {
  if (dt == NC_FLOAT64 && !dev->info.fp64)
    return nc_error(NC_ERR_UNSUPPORTED, "%s has no float64 support (cl_khr_fp64)", dev->info.name);
  return NC_OK;
}

nc_cl_arg nc_cl_scalar_arg(nc_dtype dt, const nc_scalar *s, nc_cl_scalar *v) {
  switch (dt) {
    case NC_FLOAT32:
    case NC_BFLOAT16: /* the storage dtypes' kernels compute in float32 and take float32 numbers */
    case NC_FLOAT16:
      v->f = (cl_float)(s->is_int ? (double)s->i : s->f);
      return (nc_cl_arg){sizeof v->f, &v->f};
    case NC_FLOAT64: v->d = s->is_int ? (double)s->i : s->f; return (nc_cl_arg){sizeof v->d, &v->d};
    case NC_INT32: v->i = (cl_int)(s->is_int ? s->i : (int64_t)s->f); return (nc_cl_arg){sizeof v->i, &v->i};
    case NC_INT64: v->l = (cl_long)(s->is_int ? s->i : (int64_t)s->f); return (nc_cl_arg){sizeof v->l, &v->l};
    case NC_BOOL: v->u = s->is_int ? s->i != 0 : s->f != 0; return (nc_cl_arg){sizeof v->u, &v->u};
    default: v->u = (cl_uchar)(s->is_int ? s->i : (int64_t)s->f); return (nc_cl_arg){sizeof v->u, &v->u};
  }
}

size_t nc_cl_global_size(nc_device *dev, int64_t n) {
  const size_t group = 256;
  size_t cap = (size_t)nc_cl_compute_units(dev) * 2048;
  if (cap < 65536) cap = 65536;
  size_t want = ((size_t)n + group - 1) / group * group;
  return want < cap ? want : cap / group * group;
}

nc_status nc_cl_launch(nc_device *dev, cl_kernel k, int nargs, const nc_cl_arg *args, size_t global, size_t local) {
  nc_cl_device *cd;
  NC_TRY(nc_cl_ready(dev, &cd));
  pthread_mutex_lock(&dev->lock);
  cl_int err = CL_SUCCESS;
  for (int i = 0; i < nargs && err == CL_SUCCESS; i++) err = nc_cl.clSetKernelArg(k, (cl_uint)i, args[i].size, args[i].value);
  cl_event *ev = nc_cl_profile_event(cd);
  if (err == CL_SUCCESS) err = nc_cl.clEnqueueNDRangeKernel(cd->queue, k, 1, NULL, &global, local ? &local : NULL, 0, NULL, ev);
  if (err == CL_SUCCESS && ev) nc_cl_profile_record(cd, k, 1, &global);
  nc_status q = err == CL_SUCCESS ? nc_cl_enqueued(dev, cd) : NC_OK;
  pthread_mutex_unlock(&dev->lock);
  if (err != CL_SUCCESS) return nc_cl_fail(err, "launching a kernel", dev);
  return q;
}

/* OpenCL device discovery: every device of every platform becomes an nc_device with the
 * backend's device interface and dispatch table, which are assembled here (and only here, so
 * no other file of the backend depends on this one). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cl_backend.h"
#include "cl_linalg.h"

static const nc_device_iface cl_iface = {
    .name = "opencl",
    .alloc = nc_cl_alloc,
    .release = nc_cl_release,
    .host_ptr = nc_cl_host_ptr,
    .write = nc_cl_write,
    .read = nc_cl_read,
    .sync = nc_cl_sync,
    .read_start = nc_cl_read_start,
    .read_ready = nc_cl_read_ready,
    .read_end = nc_cl_read_end,
    .stats = nc_cl_stats,
    .warmup = nc_cl_build_all,
    .shutdown = nc_cl_shutdown,
    .peers = nc_cl_peers,
    .peer_copy = nc_cl_peer_copy,
};

static nc_dispatch cl_dispatch = {.name = "opencl"};

static void fill_dispatch(void) {
  static const struct {
    nc_entry e;
    nc_backend_fn fn;
  } entries[] = {
      {NC_ENTRY_FILL, NC_BACKEND_FN(nc_cl_fill)},
      {NC_ENTRY_COPY, NC_BACKEND_FN(nc_cl_copy)},
      {NC_ENTRY_ARANGE, NC_BACKEND_FN(nc_cl_arange)},
      {NC_ENTRY_RANDOM, NC_BACKEND_FN(nc_cl_random)},
      {NC_ENTRY_UNARY, NC_BACKEND_FN(nc_cl_unary)},
      {NC_ENTRY_BINARY, NC_BACKEND_FN(nc_cl_binary)},
      {NC_ENTRY_WHERE, NC_BACKEND_FN(nc_cl_where)},
      {NC_ENTRY_REDUCE, NC_BACKEND_FN(nc_cl_reduce)},
      {NC_ENTRY_SCAN, NC_BACKEND_FN(nc_cl_scan)},
      {NC_ENTRY_SOFTMAX, NC_BACKEND_FN(nc_cl_softmax)},
      {NC_ENTRY_INDEX, NC_BACKEND_FN(nc_cl_index)},
      {NC_ENTRY_SORT, NC_BACKEND_FN(nc_cl_sort)},
      {NC_ENTRY_SAMPLE, NC_BACKEND_FN(nc_cl_sample)},
      {NC_ENTRY_GEMM, NC_BACKEND_FN(nc_cl_gemm_entry)},
      {NC_ENTRY_CONV2D, NC_BACKEND_FN(nc_cl_conv2d)},
      {NC_ENTRY_CONV2D_BWD_INPUT, NC_BACKEND_FN(nc_cl_conv2d_backward_input)},
      {NC_ENTRY_CONV2D_BWD_WEIGHT, NC_BACKEND_FN(nc_cl_conv2d_backward_weight)},
      {NC_ENTRY_POOL2D, NC_BACKEND_FN(nc_cl_pool2d)},
      {NC_ENTRY_POOL2D_BWD, NC_BACKEND_FN(nc_cl_pool2d_backward)},
      {NC_ENTRY_BATCH_NORM, NC_BACKEND_FN(nc_cl_batch_norm)},
      {NC_ENTRY_BATCH_NORM_BWD, NC_BACKEND_FN(nc_cl_batch_norm_backward)},
      {NC_ENTRY_ROW_NORM, NC_BACKEND_FN(nc_cl_row_norm)},
      {NC_ENTRY_ROW_NORM_BWD, NC_BACKEND_FN(nc_cl_row_norm_backward)},
      {NC_ENTRY_EMBEDDING, NC_BACKEND_FN(nc_cl_embedding)},
      {NC_ENTRY_EMBEDDING_BWD, NC_BACKEND_FN(nc_cl_embedding_backward)},
      {NC_ENTRY_CROSS_ENTROPY, NC_BACKEND_FN(nc_cl_cross_entropy)},
      {NC_ENTRY_CROSS_ENTROPY_BWD, NC_BACKEND_FN(nc_cl_cross_entropy_backward)},
      {NC_ENTRY_SGD_STEP, NC_BACKEND_FN(nc_cl_sgd_step)},
      {NC_ENTRY_RMSPROP_STEP, NC_BACKEND_FN(nc_cl_rmsprop_step)},
      {NC_ENTRY_ADAM_STEP, NC_BACKEND_FN(nc_cl_adam_step)},
      {NC_ENTRY_SUM_SQUARES, NC_BACKEND_FN(nc_cl_sum_squares)},
  };
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
    nc_dispatch_entry(&cl_dispatch, entries[i].e, entries[i].fn);
  nc_dispatch_entry(&cl_dispatch, NC_ENTRY_KERNEL, NC_BACKEND_FN(nc_cl_kernel_call));
  cl_dispatch.conv2d_storage = nc_cl_conv2d_storage;
}


static void info_str(cl_device_id d, cl_device_info what, char *buf, size_t n) {
  buf[0] = 0;
  if (nc_cl.clGetDeviceInfo(d, what, n, buf, NULL) != CL_SUCCESS) buf[0] = 0;
  buf[n - 1] = 0;
}

/* The major compute capability of an NVIDIA device (cl_nv_device_attribute_query), whose OpenCL
 * compiler takes inline PTX; 0 for other devices. */
#define NC_CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV 0x4000
static cl_uint nv_compute_major(cl_device_id d) {
  size_t n = 0;
  if (nc_cl.clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &n) != CL_SUCCESS || n == 0) return 0;
  char *ext = malloc(n + 1);
  if (!ext) return 0;
  bool nv = nc_cl.clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, n, ext, NULL) == CL_SUCCESS &&
            (ext[n] = 0, strstr(ext, "cl_nv_device_attribute_query") != NULL);
  free(ext);
  cl_uint major = 0;
  if (!nv) return 0;
  cl_int err = nc_cl.clGetDeviceInfo(d, NC_CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV, sizeof major, &major, NULL);
  return err == CL_SUCCESS ? major : 0;
}

static void describe(nc_device *dev, nc_cl_device *cd, int p, int d) {
  nc_device_info *info = &dev->info;
  cl_device_type type = 0;
  cl_ulong mem = 0, max_alloc = 0;
  cl_uint cus = 0;
  size_t wg = 0;
  cl_device_fp_config fp64 = 0;
  info_str(cd->id, CL_DEVICE_NAME, info->name, sizeof info->name);
  info_str(cd->id, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
  info_str(cd->id, CL_DRIVER_VERSION, info->driver_version, sizeof info->driver_version);
  nc_cl.clGetDeviceInfo(cd->id, CL_DEVICE_TYPE, sizeof type, &type, NULL);
  nc_cl.clGetDeviceInfo(cd->id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
  nc_cl.clGetDeviceInfo(cd->id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, NULL);
  nc_cl.clGetDeviceInfo(cd->id, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cus, &cus, NULL);
  nc_cl.clGetDeviceInfo(cd->id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
  nc_cl.clGetDeviceInfo(cd->id, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp64, &fp64, NULL);
  if (nc_cl.clGetDeviceInfo(cd->id, CL_DEVICE_LOCAL_MEM_SIZE, sizeof cd->local_mem, &cd->local_mem, NULL) != CL_SUCCESS)
    cd->local_mem = 0;
  snprintf(info->spec, sizeof info->spec, "opencl:%d:%d", p, d);
  info->kind = NC_DEVICE_OPENCL;
  info->is_gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
  info->memory = mem;
  info->max_alloc = max_alloc;
  info->compute_units = (int)cus;
  info->max_work_group_size = wg;
  info->fp64 = fp64 != 0;
  /* Inline PTX on NVIDIA GPUs: tf32 and bfloat16 mma.sync from compute capability 8.0, shfl.sync
   * on all of them. Whether a PTX program builds is learnt at its first use
   * (nc_cl_handle_optional), which clears the flag if it does not. */
  const cl_uint nv = info->is_gpu ? nv_compute_major(cd->id) : 0;
  info->tf32 = nv >= 8 || nc_cl_mma_emulated();
  info->bf16_mma = info->tf32;
  cd->mma_async = info->tf32;
  cd->mma_conv = info->tf32;
  cd->mma_attention = info->tf32;
  cd->mma_conv_bx = info->bf16_mma;
  cd->gemm_bf16 = info->bf16_mma;
  cd->gemm_bf16_wide = info->bf16_mma;
  cd->warp_shuffle = nv > 0 || nc_cl_shfl_emulated();
}

/* The ICD loader reads OCL_ICD_FILENAMES ("a.so:b.so") when it first lists platforms, and some
 * versions of ocl-icd split it in place, in the environment itself: the process, and every
 * process it starts, is left with the first driver only (seen on a machine listing PoCL and
 * NVIDIA's driver, where a netcl-lua started by netcl-lua no longer saw the GPU). The value is
 * kept before the loader's first call and put back when the loader has changed it. */
static cl_int list_platforms(cl_uint n, cl_platform_id *plats, cl_uint *count) {
  const char *before = getenv("OCL_ICD_FILENAMES");
  char *saved = before ? strdup(before) : NULL;
  cl_int err = nc_cl.clGetPlatformIDs(n, plats, count);
  const char *after = getenv("OCL_ICD_FILENAMES");
  if (saved && (!after || strcmp(after, saved))) setenv("OCL_ICD_FILENAMES", saved, 1);
  free(saved);
  return err;
}

void nc_opencl_discover(nc_status (*add)(nc_device *dev)) {
  if (!nc_cl_load()) return;
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, fill_dispatch);
  cl_uint np = 0;
  if (list_platforms(0, NULL, &np) != CL_SUCCESS || np == 0) return;
  cl_platform_id *plats = calloc(np, sizeof *plats);
  if (!plats || list_platforms(np, plats, NULL) != CL_SUCCESS) {
    free(plats);
    return;
  }
  for (cl_uint p = 0; p < np; p++) {
    cl_uint nd = 0;
    if (nc_cl.clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || nd == 0) continue;
    cl_device_id *ids = calloc(nd, sizeof *ids);
    if (!ids || nc_cl.clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, ids, NULL) != CL_SUCCESS) {
      free(ids);
      continue;
    }
    /* Shared by the platform's devices, and never freed: they are never freed either. */
    nc_cl_platform *pl = calloc(1, sizeof *pl);
    if (!pl) {
      free(ids);
      continue;
    }
    pl->id = plats[p];
    pl->ndev = nd;
    pl->ids = ids;
    pthread_mutex_init(&pl->lock, NULL);
    int added = 0;
    for (cl_uint d = 0; d < nd; d++) {
      nc_device *dev = calloc(1, sizeof *dev);
      nc_cl_device *cd = calloc(1, sizeof *cd);
      if (!dev || !cd) {
        free(dev);
        free(cd);
        break;
      }
      cd->platform = plats[p];
      cd->plat = pl;
      cd->id = ids[d];
      nc_cl.clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof cd->platform_name, cd->platform_name, NULL);
      cd->platform_name[sizeof cd->platform_name - 1] = 0;
      pthread_mutex_init(&cd->init_lock, NULL);
      pthread_mutex_init(&cd->programs_lock, NULL);
      dev->iface = &cl_iface;
      dev->dispatch = &cl_dispatch;
      dev->impl = cd;
      describe(dev, cd, (int)p, (int)d);
      if (add(dev) != NC_OK) {
        free(cd);
        free(dev);
      } else {
        added++;
      }
    }
    if (!added) {
      pthread_mutex_destroy(&pl->lock);
      free(ids);
      free(pl);
    }
  }
  free(plats);
}


/* The CPU device: its description (the host's processor, memory and threads), its device
 * interface and its dispatch table, assembled here and only here. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "netcl/threads.h"
#include "cpu_backend.h"
#include "cpu_linalg.h"

static const nc_device_iface cpu_iface = {
    .name = "cpu",
    .alloc = nc_cpu_alloc,
    .release = nc_cpu_release,
    .host_ptr = nc_cpu_host_ptr,
    .write = nc_cpu_write,
    .read = nc_cpu_read,
    .sync = nc_cpu_sync,
};

static nc_dispatch cpu_dispatch = {.name = "cpu"};

static void fill_dispatch(void) {
  static const struct {
    nc_entry e;
    nc_backend_fn fn;
  } entries[] = {
      {NC_ENTRY_FILL, NC_BACKEND_FN(nc_cpu_fill)},
      {NC_ENTRY_COPY, NC_BACKEND_FN(nc_cpu_copy)},
      {NC_ENTRY_ARANGE, NC_BACKEND_FN(nc_cpu_arange)},
      {NC_ENTRY_RANDOM, NC_BACKEND_FN(nc_cpu_random)},
      {NC_ENTRY_UNARY, NC_BACKEND_FN(nc_cpu_unary)},
      {NC_ENTRY_BINARY, NC_BACKEND_FN(nc_cpu_binary)},
      {NC_ENTRY_WHERE, NC_BACKEND_FN(nc_cpu_where)},
      {NC_ENTRY_REDUCE, NC_BACKEND_FN(nc_cpu_reduce)},
      {NC_ENTRY_SCAN, NC_BACKEND_FN(nc_cpu_scan)},
      {NC_ENTRY_SOFTMAX, NC_BACKEND_FN(nc_cpu_softmax)},
      {NC_ENTRY_INDEX, NC_BACKEND_FN(nc_cpu_index)},
      {NC_ENTRY_SORT, NC_BACKEND_FN(nc_cpu_sort)},
      {NC_ENTRY_SAMPLE, NC_BACKEND_FN(nc_cpu_sample)},
      {NC_ENTRY_GEMM, NC_BACKEND_FN(nc_cpu_gemm_entry)},
      {NC_ENTRY_CONV2D, NC_BACKEND_FN(nc_cpu_conv2d)},
      {NC_ENTRY_CONV2D_BWD_INPUT, NC_BACKEND_FN(nc_cpu_conv2d_backward_input)},
      {NC_ENTRY_CONV2D_BWD_WEIGHT, NC_BACKEND_FN(nc_cpu_conv2d_backward_weight)},
      {NC_ENTRY_POOL2D, NC_BACKEND_FN(nc_cpu_pool2d)},
      {NC_ENTRY_POOL2D_BWD, NC_BACKEND_FN(nc_cpu_pool2d_backward)},
      {NC_ENTRY_BATCH_NORM, NC_BACKEND_FN(nc_cpu_batch_norm)},
      {NC_ENTRY_BATCH_NORM_BWD, NC_BACKEND_FN(nc_cpu_batch_norm_backward)},
      {NC_ENTRY_ROW_NORM, NC_BACKEND_FN(nc_cpu_row_norm)},
      {NC_ENTRY_ROW_NORM_BWD, NC_BACKEND_FN(nc_cpu_row_norm_backward)},
      {NC_ENTRY_EMBEDDING, NC_BACKEND_FN(nc_cpu_embedding)},
      {NC_ENTRY_EMBEDDING_BWD, NC_BACKEND_FN(nc_cpu_embedding_backward)},
      {NC_ENTRY_CROSS_ENTROPY, NC_BACKEND_FN(nc_cpu_cross_entropy)},
      {NC_ENTRY_CROSS_ENTROPY_BWD, NC_BACKEND_FN(nc_cpu_cross_entropy_backward)},
      {NC_ENTRY_SGD_STEP, NC_BACKEND_FN(nc_cpu_sgd_step)},
      {NC_ENTRY_RMSPROP_STEP, NC_BACKEND_FN(nc_cpu_rmsprop_step)},
      {NC_ENTRY_ADAM_STEP, NC_BACKEND_FN(nc_cpu_adam_step)},
      {NC_ENTRY_SUM_SQUARES, NC_BACKEND_FN(nc_cpu_sum_squares)},
  };
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
    nc_dispatch_entry(&cpu_dispatch, entries[i].e, entries[i].fn);
#define KERNEL_ENTRY(...)
#define KERNEL_KERNEL(n, sig) nc_dispatch_kernel(&cpu_dispatch, #n, NC_BACKEND_FN(nc_cpu_##n));
#define KERNEL_ROW(id, name, family, arity, dtypes, result, entry, grad, kernel, cpu) NC_PP_CAT(KERNEL_, entry)
  NC_OPS(KERNEL_ROW)
}

static void cpu_model_name(char *buf, size_t n) {
  snprintf(buf, n, "CPU");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) == 0) {
      char *colon = strchr(line, ':');
      if (colon) {
        colon++;
        while (*colon == ' ') colon++;
        colon[strcspn(colon, "\n")] = 0;
        snprintf(buf, n, "%s", colon);
      }
      break;
    }
  }
  fclose(f);
}

nc_status nc_cpu_device_create(nc_device **out) {
  nc_device *d = calloc(1, sizeof *d);
  if (!d) return nc_error(NC_ERR_OOM, "out of host memory");
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, fill_dispatch);
  d->iface = &cpu_iface;
  d->dispatch = &cpu_dispatch;
  nc_device_info *info = &d->info;
  cpu_model_name(info->name, sizeof info->name);
  snprintf(info->vendor, sizeof info->vendor, "netcl CPU backend");
  snprintf(info->driver_version, sizeof info->driver_version, "%s", NC_VERSION_STRING);
  snprintf(info->spec, sizeof info->spec, "cpu");
  info->kind = NC_DEVICE_CPU;
  long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
  info->memory = (pages > 0 && psize > 0) ? (uint64_t)pages * (uint64_t)psize : 0;
  info->max_alloc = 0;
  info->compute_units = nc_get_num_threads();
  info->max_work_group_size = 1;
  info->fp64 = true;
  *out = d;
  return NC_OK;
}

/* Effective bandwidth of elementwise add (reads a and b, writes c) and of a full sum (reads x)
 * over 16M float32 on every device, one JSON object per line. The CPU figures are compared
 * with memcpy of the same buffer, the OpenCL ones with the device's own buffer copy
 * (clEnqueueCopyBuffer, reached through nc_copy of contiguous tensors); a ratio of 1 means the
 * op streams memory as fast as a copy does. Each figure is the best of REPS timed runs after a
 * warm-up (which also builds the kernels). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "netcl/netcl.h"

#define N (16 * 1024 * 1024)
#define REPS 20

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
  fprintf(stderr, "bench_ops: %s: %s\n", what, nc_last_error());
  exit(1);
}

#define TRY(what, expr)             \
  do {                              \
    if ((expr) != NC_OK) die(what); \
  } while (0)

typedef enum { OP_COPY, OP_MEMCPY, OP_ADD, OP_SUM } bench_op;

typedef struct {
  nc_device *dev;
  nc_tensor *a, *b, *c, *s;
  void *ha, *hb; /* memcpy buffers (CPU) */
} bench_ctx;

static void run(bench_ctx *x, bench_op op) {
  switch (op) {
    case OP_MEMCPY:
      memcpy(x->hb, x->ha, (size_t)N * sizeof(float));
      break;
    case OP_COPY:
      TRY("copy", nc_copy(x->c, x->a));
      break;
    case OP_ADD:
      TRY("add", nc_binary_into(NC_OP_ADD, x->c, nc_operand_tensor(x->a), nc_operand_tensor(x->b)));
      break;
    case OP_SUM:
      TRY("sum", nc_reduce_into(NC_OP_SUM, x->s, x->a, 0, NULL, false, NULL));
      break;
  }
}

/* One timed run, ended by a device sync. */
static double timed(bench_ctx *x, bench_op op) {
  double t0 = now();
  run(x, op);
  TRY("sync", nc_device_sync(x->dev));
  return now() - t0;
}

static void emit(const nc_device_info *info, const char *name, double bytes, double t, const char *ref,
                 double ref_gbps) {
  double gbps = bytes / t / 1e9;
  printf(
      "{\"bench\": \"%s\", \"device\": \"%s\", \"device_name\": \"%s\", \"n\": %d, \"dtype\": \"float32\", "
      "\"ms\": %.3f, \"gbps\": %.2f, \"reference\": \"%s\", \"reference_gbps\": %.2f, \"ratio\": %.3f}\n",
      name, info->spec, info->name, N, t * 1e3, gbps, ref, ref_gbps, gbps / ref_gbps);
  fflush(stdout);
}

static void bench_device(nc_device *dev) {
  const nc_device_info *info = nc_device_info_of(dev);
  int64_t n = N;
  bench_ctx x = {.dev = dev};
  nc_rng g;
  nc_rng_seed(&g, 1);
  TRY("alloc", nc_tensor_empty(dev, NC_FLOAT32, 1, &n, 0, &x.a));
  TRY("alloc", nc_tensor_empty(dev, NC_FLOAT32, 1, &n, 0, &x.b));
  TRY("alloc", nc_tensor_empty(dev, NC_FLOAT32, 1, &n, 0, &x.c));
  TRY("alloc", nc_tensor_empty(dev, NC_FLOAT32, 0, NULL, 0, &x.s));
  TRY("fill", nc_uniform(x.a, &g, -1, 1));
  TRY("fill", nc_uniform(x.b, &g, -1, 1));
  const double bytes = (double)N * sizeof(float);
  const char *ref = info->kind == NC_DEVICE_CPU ? "memcpy" : "device copy";
  const bench_op ops[3] = {info->kind == NC_DEVICE_CPU ? OP_MEMCPY : OP_COPY, OP_ADD, OP_SUM};
  if (info->kind == NC_DEVICE_CPU) {
    x.ha = nc_storage_host_ptr(x.a->storage);
    x.hb = nc_storage_host_ptr(x.c->storage);
  }
  /* Rounds interleave the reference and the ops, so that other load on the machine weighs on
   * all three alike; each keeps its best time. The first round warms up (and builds kernels). */
  double best[3] = {1e30, 1e30, 1e30};
  for (int r = 0; r <= REPS; r++)
    for (int i = 0; i < 3; i++) {
      double t = timed(&x, ops[i]);
      if (r > 0 && t < best[i]) best[i] = t;
    }
  const double ref_gbps = 2 * bytes / best[0] / 1e9; /* a copy reads and writes every byte */
  emit(info, "copy_reference", 2 * bytes, best[0], ref, ref_gbps);
  emit(info, "elementwise_add", 3 * bytes, best[1], ref, ref_gbps);
  emit(info, "sum", bytes, best[2], ref, ref_gbps);
  nc_tensor_release(x.a);
  nc_tensor_release(x.b);
  nc_tensor_release(x.c);
  nc_tensor_release(x.s);
}

int main(int argc, char **argv) {
  TRY("init", nc_init());
  for (int i = 0; i < nc_device_count(); i++) {
    nc_device *dev = nc_device_get(i);
    if (argc > 1 && strcmp(argv[1], nc_device_info_of(dev)->spec) != 0) continue;
    bench_device(dev);
  }
  return 0;
}

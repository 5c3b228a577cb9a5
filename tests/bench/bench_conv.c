/* conv2d forward, input-gradient and weight-gradient throughput at ResNet18's distinct conv
 * layer shapes (ImageNet stem, 224x224 input), one JSON object per line per shape and pass.
 *   bench_conv [--batch 32] [--device cpu|opencl|all] [--reps R]
 * Time: the median of R runs after a warm-up run (which also builds kernels). GFLOP/s counts
 * 2 * N * O * OH * OW * (C/groups) * KH * KW per pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "netcl/netcl.h"

typedef struct {
  const char *name;
  int64_t c, h, o, k, stride, pad;
} layer;

/* Each distinct (in, out, size, kernel, stride) of torchvision's resnet18. */
static const layer layers[] = {
    {"conv1", 3, 224, 64, 7, 2, 3},
    {"layer1.conv", 64, 56, 64, 3, 1, 1},
    {"layer2.0.conv1", 64, 56, 128, 3, 2, 1},
    {"layer2.conv", 128, 28, 128, 3, 1, 1},
    {"layer2.0.downsample", 64, 56, 128, 1, 2, 0},
    {"layer3.0.conv1", 128, 28, 256, 3, 2, 1},
    {"layer3.conv", 256, 14, 256, 3, 1, 1},
    {"layer3.0.downsample", 128, 28, 256, 1, 2, 0},
    {"layer4.0.conv1", 256, 14, 512, 3, 2, 1},
    {"layer4.conv", 512, 7, 512, 3, 1, 1},
    {"layer4.0.downsample", 256, 14, 512, 1, 2, 0},
};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void fail(void) {
  fprintf(stderr, "bench_conv: %s\n", nc_last_error());
  exit(1);
}

enum { FWD, BWD_INPUT, BWD_WEIGHT };

static double run(int pass, nc_device *dev, nc_tensor *x, nc_tensor *w, nc_tensor *dy,
                  const nc_conv2d_desc *p) {
  nc_tensor *r = NULL;
  double t0 = now();
  nc_status s = pass == FWD         ? nc_conv2d(x, w, NULL, p, &r)
                : pass == BWD_INPUT ? nc_conv2d_backward_input(dy, w, x->shape, p, &r)
                                    : nc_conv2d_backward_weight(dy, x, w->shape, p, &r);
  if (s != NC_OK || nc_device_sync(dev) != NC_OK) fail();
  double t = now() - t0;
  nc_tensor_release(r);
  return t;
}

static void bench(nc_device *dev, int64_t batch, int reps) {
  const nc_device_info *info = nc_device_info_of(dev);
  static const char *pass_names[] = {"forward", "backward_input", "backward_weight"};
  nc_rng g;
  nc_rng_seed(&g, 3);
  for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
    const layer *l = &layers[i];
    nc_conv2d_desc p = {
        .stride = {l->stride, l->stride}, .padding = {l->pad, l->pad}, .dilation = {1, 1}, .groups = 1};
    int64_t xs[4] = {batch, l->c, l->h, l->h}, ws[4] = {l->o, l->c, l->k, l->k};
    nc_tensor *x, *w, *dy;
    if (nc_tensor_empty(dev, NC_FLOAT32, 4, xs, 0, &x) || nc_tensor_empty(dev, NC_FLOAT32, 4, ws, 0, &w) ||
        nc_uniform(x, &g, -1, 1) || nc_uniform(w, &g, -1, 1) || nc_conv2d_plan(&p, x, w))
      fail();
    int64_t ys[4] = {batch, l->o, p.oh, p.ow};
    if (nc_tensor_empty(dev, NC_FLOAT32, 4, ys, 0, &dy) || nc_uniform(dy, &g, -1, 1)) fail();
    double flops = 2.0 * (double)batch * (double)l->o * (double)(p.oh * p.ow) * (double)(l->c * l->k * l->k);
    for (int pass = 0; pass < 3; pass++) {
      double t[64];
      run(pass, dev, x, w, dy, &p);
      for (int r = 0; r < reps; r++) t[r] = run(pass, dev, x, w, dy, &p);
      qsort(t, (size_t)reps, sizeof(double), cmp);
      double med = t[reps / 2];
      printf(
          "{\"bench\":\"conv2d\",\"device\":\"%s\",\"layer\":\"%s\",\"pass\":\"%s\",\"batch\":%lld,"
          "\"shape\":\"%lldx%lldx%lld -> %lld, k%lld s%lld\",\"ms\":%.2f,\"gflops\":%.2f}\n",
          info->spec, l->name, pass_names[pass], (long long)batch, (long long)l->c, (long long)l->h,
          (long long)l->h, (long long)l->o, (long long)l->k, (long long)l->stride, med * 1e3,
          flops / med * 1e-9);
      fflush(stdout);
    }
    nc_tensor_release(x), nc_tensor_release(w), nc_tensor_release(dy);
  }
}

int main(int argc, char **argv) {
  int64_t batch = 32;
  int reps = 3;
  const char *which = "all";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--batch") && i + 1 < argc)
      batch = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--device") && i + 1 < argc)
      which = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--batch N] [--device cpu|opencl|all] [--reps R]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  if (reps > 64) reps = 64;
  if (nc_init() != NC_OK) fail();
  for (int d = 0; d < nc_device_count(); d++) {
    nc_device *dev = nc_device_get(d);
    bool cpu = nc_device_info_of(dev)->kind == NC_DEVICE_CPU;
    if (!strcmp(which, "all") || (cpu && !strcmp(which, "cpu")) || (!cpu && !strcmp(which, "opencl")))
      bench(dev, batch, reps);
  }
  return 0;
}

/* The GEMM autotuner: times a few tile variants of kernels/gemm.cl on the device and keeps
 * the fastest, in memory and on disk ($NETCL_CACHE_DIR/gemm-<key>.tune, key = device, driver,
 * platform, library version and the kernel source, so a new driver or kernel retunes).
 * Tuning runs only with NETCL_TUNE=1 (it takes a minute on slow compilers such as PoCL's);
 * otherwise a cached result or a per-device-type default is used. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include "core/check.h"
#include "cl_linalg.h"

const nc_gemm_config nc_gemm_candidates[] = {
    /* mwg nwg kwg tm tnv vw */
    {64, 64, 16, 4, 1, 8},   {64, 64, 32, 8, 1, 8},  {32, 64, 32, 4, 1, 16}, {64, 128, 32, 8, 1, 16},
    {128, 128, 16, 8, 2, 8}, {128, 64, 32, 8, 1, 8}, {32, 32, 32, 4, 1, 8},  {64, 64, 64, 8, 2, 4},
};
const int nc_gemm_candidate_count = (int)(sizeof nc_gemm_candidates / sizeof nc_gemm_candidates[0]);

/* Defaults when nothing is tuned: measured on PoCL (CPU) and a common GPU shape. */
static const nc_gemm_config default_cpu = {64, 128, 32, 8, 1, 16};
static const nc_gemm_config default_gpu = {64, 64, 16, 4, 1, 8};
static const nc_gemm_config default_f64 = {64, 64, 16, 4, 1, 4};

#define MAX_TUNED 64
static struct {
  nc_device *dev;
  nc_gemm_config cfg;
} tuned[MAX_TUNED];
static int n_tuned;
static pthread_mutex_t tuned_lock = PTHREAD_MUTEX_INITIALIZER;

static bool lookup(nc_device *dev, nc_gemm_config *out) {
  bool found = false;
  pthread_mutex_lock(&tuned_lock);
  for (int i = 0; i < n_tuned && !found; i++)
    if (tuned[i].dev == dev) *out = tuned[i].cfg, found = true;
  pthread_mutex_unlock(&tuned_lock);
  return found;
}

static void remember(nc_device *dev, const nc_gemm_config *cfg) {
  pthread_mutex_lock(&tuned_lock);
  int i = 0;
  while (i < n_tuned && tuned[i].dev != dev) i++;
  if (i < MAX_TUNED) {
    tuned[i].dev = dev;
    tuned[i].cfg = *cfg;
    if (i == n_tuned) n_tuned++;
  }
  pthread_mutex_unlock(&tuned_lock);
}

static bool cache_file(nc_device *dev, char *path, size_t n) {
  char dir[900];
  if (nc_cl_cache_dir(dir, sizeof dir) != NC_OK) return false;
  nc_cl_device *cd = dev->impl;
  size_t len = 0;
  const char *src = nc_cl_source("gemm.cl", &len);
  XXH64_state_t *h = XXH64_createState();
  if (!h || !src) {
    XXH64_freeState(h);
    return false;
  }
  XXH64_reset(h, 0);
  XXH64_update(h, src, len);
  XXH64_update(h, dev->info.name, strlen(dev->info.name) + 1);
  XXH64_update(h, dev->info.driver_version, strlen(dev->info.driver_version) + 1);
  XXH64_update(h, cd->platform_name, strlen(cd->platform_name) + 1);
  XXH64_update(h, NC_VERSION_STRING, sizeof NC_VERSION_STRING);
  unsigned long long key = XXH64_digest(h);
  XXH64_freeState(h);
  snprintf(path, n, "%s/gemm-%016llx.tune", dir, key);
  return true;
}

static bool valid(nc_device *dev, const nc_gemm_config *c) {
  return c->vw > 0 && c->tnv > 0 && c->tm > 0 && c->kwg > 0 && c->mwg % c->tm == 0 &&
         c->nwg % (c->vw * c->tnv) == 0 && c->mwg % 4 == 0 && c->nwg % 4 == 0 && c->kwg % 4 == 0 &&
         (c->vw == 2 || c->vw == 4 || c->vw == 8 || c->vw == 16) && nc_gemm_config_fits(dev, c, NC_FLOAT32);
}

static bool read_cached(nc_device *dev, nc_gemm_config *out) {
  char path[1024];
  if (!cache_file(dev, path, sizeof path)) return false;
  FILE *f = fopen(path, "r");
  if (!f) return false;
  nc_gemm_config c;
  bool ok =
      fscanf(f, "%d %d %d %d %d %d", &c.mwg, &c.nwg, &c.kwg, &c.tm, &c.tnv, &c.vw) == 6 && valid(dev, &c);
  fclose(f);
  if (ok) *out = c;
  return ok;
}

/* Temporary file, fsync, rename: readers see the old result or the new one, never half. */
static void write_cached(nc_device *dev, const nc_gemm_config *c, double gflops) {
  char path[1024], tmp[1100];
  if (!cache_file(dev, path, sizeof path)) return;
  snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
  int fd = mkstemp(tmp);
  if (fd < 0) return;
  char line[256];
  int len = snprintf(line, sizeof line, "%d %d %d %d %d %d\n# %.1f GFLOP/s on %s\n", c->mwg, c->nwg, c->kwg,
                     c->tm, c->tnv, c->vw, gflops, dev->info.name);
  bool ok = write(fd, line, (size_t)len) == len && fsync(fd) == 0;
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) unlink(tmp);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

nc_status nc_cl_gemm_tune(nc_device *dev, int max_candidates, int64_t n, nc_gemm_config *best,
                          double *gflops) {
  if (dev->info.kind != NC_DEVICE_OPENCL) return nc_error(NC_ERR_ARG, "GEMM tuning is for OpenCL devices");
  int64_t shape[2] = {n, n};
  nc_tensor *a = NULL, *b = NULL, *c = NULL;
  nc_status s = nc_tensor_empty(dev, NC_FLOAT32, 2, shape, 0, &a);
  if (s == NC_OK) s = nc_tensor_empty(dev, NC_FLOAT32, 2, shape, 0, &b);
  if (s == NC_OK) s = nc_tensor_empty(dev, NC_FLOAT32, 2, shape, 0, &c);
  /* Random operands (the kernels' speed does not depend on the values, but zeros or
   * denormals could flatter a device). */
  if (s == NC_OK) s = nc_cl_random(a, NC_RANDOM_UNIFORM, 1, 0, -1, 1);
  if (s == NC_OK) s = nc_cl_random(b, NC_RANDOM_UNIFORM, 1, (uint64_t)(n * n), -1, 1);
  double best_rate = 0;
  nc_gemm_config winner = dev->info.is_gpu ? default_gpu : default_cpu;
  int tried = 0;
  nc_gemm_desc d = {.a = a,
                    .b = b,
                    .c = c,
                    .batch = 1,
                    .m = n,
                    .n = n,
                    .k = n,
                    .a_sm = n,
                    .a_sk = 1,
                    .b_sk = n,
                    .b_sn = 1,
                    .c_sm = n,
                    .c_sn = 1,
                    .alpha = 1,
                    .beta = 0};
  for (int i = 0; s == NC_OK && i < nc_gemm_candidate_count; i++) {
    if (max_candidates > 0 && tried >= max_candidates) break;
    const nc_gemm_config *cfg = &nc_gemm_candidates[i];
    if (!valid(dev, cfg)) continue;
    tried++;
    /* A variant that fails to build or run on this device is skipped, not fatal. */
    if (nc_cl_gemm_with(&d, cfg) != NC_OK || nc_device_sync(dev) != NC_OK) continue;
    int reps = 0;
    double t0 = now(), t;
    do {
      if (nc_cl_gemm_with(&d, cfg) != NC_OK) break;
      reps++;
      if ((s = nc_device_sync(dev)) != NC_OK) break;
      t = now() - t0;
    } while (t < 0.3 && reps < 50);
    if (s != NC_OK || reps == 0) continue;
    double rate = 2.0 * (double)n * (double)n * (double)n * reps / t * 1e-9;
    if (rate > best_rate) best_rate = rate, winner = *cfg;
  }
  nc_tensor_release(a);
  nc_tensor_release(b);
  nc_tensor_release(c);
  NC_TRY(s);
  if (best_rate == 0) return nc_error(NC_ERR_DEVICE, "GEMM tuning on %s: no variant ran", dev->info.name);
  remember(dev, &winner);
  write_cached(dev, &winner, best_rate);
  if (best) *best = winner;
  if (gflops) *gflops = best_rate;
  return NC_OK;
}

nc_status nc_cl_gemm_config(nc_device *dev, nc_dtype dt, nc_gemm_config *out) {
  if (dt == NC_FLOAT64) return *out = default_f64, NC_OK;
  if (lookup(dev, out)) return NC_OK;
  nc_gemm_config c;
  if (read_cached(dev, &c)) {
    remember(dev, &c);
    *out = c;
    return NC_OK;
  }
  const char *env = getenv("NETCL_TUNE");
  if (env && strcmp(env, "1") == 0) {
    nc_status s = nc_cl_gemm_tune(dev, 0, 1024, out, NULL);
    if (s == NC_OK) return NC_OK;
  }
  c = dev->info.is_gpu ? default_gpu : default_cpu;
  if (!valid(dev, &c)) c = default_f64;
  remember(dev, &c);
  *out = c;
  return NC_OK;
}

/* The dispatch entry: float32 products with contiguous rows or columns go to the large-tile
 * kernel (kernels/gemm_fast.cl), the rest to the tuned (or default) variant of gemm.cl. */
nc_status nc_cl_gemm(const nc_gemm_desc *g) {
  if (nc_cl_gemm_fast_fits(g)) return nc_cl_gemm_fast(g, NC_GEMM_FAST_AUTO);
  nc_gemm_config cfg;
  NC_TRY(nc_cl_gemm_config(nc_tensor_device(g->c), g->c->dtype, &cfg));
  return nc_cl_gemm_with(g, &cfg);
}

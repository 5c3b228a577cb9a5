/* Shared helpers of the linalg C tests: random host arrays, tensors from them, and the
 * normalized error of a result against an independent reference. */
#ifndef NETCL_TEST_LINALG_REF_H
#define NETCL_TEST_LINALG_REF_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include "netcl/netcl.h"

static uint64_t ref_rng_state = 0x9E3779B97F4A7C15ull;
static inline double ref_uniform(void) { /* xorshift64*, in [-1, 1) */
  ref_rng_state ^= ref_rng_state >> 12;
  ref_rng_state ^= ref_rng_state << 25;
  ref_rng_state ^= ref_rng_state >> 27;
  return (double)((ref_rng_state * 2685821657736338717ull) >> 11) * 0x1p-52 - 1.0;
}

static inline double *ref_random(int64_t n) {
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) v[i] = ref_uniform();
  return v;
}

/* A contiguous tensor of dtype dt on dev holding vals (converted). */
static inline nc_tensor *ref_tensor(nc_device *dev, nc_dtype dt, int ndim, const int64_t *shape,
                                    const double *vals) {
  nc_tensor *t;
  if (nc_tensor_empty(dev, dt, ndim, shape, 0, &t) != NC_OK) return NULL;
  int64_t n = nc_tensor_numel(t);
  size_t es = nc_dtype_size(dt);
  char *buf = malloc(es * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) {
    if (dt == NC_FLOAT32)
      ((float *)buf)[i] = (float)vals[i];
    else if (dt == NC_FLOAT64)
      ((double *)buf)[i] = vals[i];
    else if (dt == NC_INT64)
      ((int64_t *)buf)[i] = (int64_t)vals[i];
    else if (dt == NC_INT32)
      ((int32_t *)buf)[i] = (int32_t)vals[i];
  }
  nc_status s = nc_tensor_write_host(t, buf, es * (size_t)n);
  free(buf);
  if (s != NC_OK) {
    nc_tensor_release(t);
    return NULL;
  }
  return t;
}

/* t's values (any layout, float dtype) as doubles; caller frees. */
static inline double *ref_values(nc_tensor *t) {
  int64_t n = nc_tensor_numel(t);
  size_t es = nc_dtype_size(t->dtype);
  char *buf = malloc(es * (size_t)(n ? n : 1));
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  if (nc_read_values(t, buf, es * (size_t)n) != NC_OK) {
    free(buf);
    free(v);
    return NULL;
  }
  for (int64_t i = 0; i < n; i++) {
    if (t->dtype == NC_FLOAT32)
      v[i] = ((float *)buf)[i];
    else if (t->dtype == NC_FLOAT64)
      v[i] = ((double *)buf)[i];
    else if (t->dtype == NC_INT64)
      v[i] = (double)((int64_t *)buf)[i];
    else
      v[i] = ((int32_t *)buf)[i];
  }
  free(buf);
  return v;
}

/* max |got - want| / (max |want| + tiny): a scale-free error, robust for sums of many terms. */
static inline double ref_error(const double *got, const double *want, int64_t n) {
  double err = 0, scale = 1e-30;
  for (int64_t i = 0; i < n; i++) {
    double w = fabs(want[i]);
    if (w > scale) scale = w;
  }
  for (int64_t i = 0; i < n; i++) {
    double d = fabs(got[i] - want[i]);
    if (isnan(got[i]) != isnan(want[i])) return INFINITY;
    if (d > err) err = d;
  }
  return err / scale;
}

/* Error of tensor t against want[n]; INFINITY when t cannot be read or has another size. */
static inline double ref_tensor_error(nc_tensor *t, const double *want, int64_t n) {
  if (!t || nc_tensor_numel(t) != n) return INFINITY;
  double *got = ref_values(t);
  if (!got) return INFINITY;
  double e = ref_error(got, want, n);
  free(got);
  return e;
}

/* Devices the tests run on: the CPU backend and the first OpenCL device, if any. */
static inline int ref_devices(nc_device **devs) {
  int n = 0;
  devs[n++] = nc_device_get(0);
  nc_device *cl;
  if (nc_device_find("opencl", &cl) == NC_OK) devs[n++] = cl;
  return n;
}

#endif

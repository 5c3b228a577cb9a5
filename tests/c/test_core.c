/* Core runtime: status, dtypes, Philox, shapes and views, pools, storage, copies, formatting
 * (CPU backend; the OpenCL path is covered by the Lua suites run with NETCL_DEVICE=opencl). */
#include <stdlib.h>
#include "check.h"
#include "netcl/netcl.h"

static nc_device *cpu;

static void test_philox(void) {
  /* Known-answer vectors of Philox4x32-10 (Random123's kat_vectors). */
  uint32_t out[4];
  const uint32_t c0[4] = {0, 0, 0, 0}, k0[2] = {0, 0};
  nc_philox4x32(c0, k0, out);
  CHECK(out[0] == 0x6627e8d5u && out[1] == 0xe169c58du && out[2] == 0xbc57ac4cu && out[3] == 0x9b00dbd8u);
  const uint32_t c1[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, k1[2] = {0xffffffffu, 0xffffffffu};
  nc_philox4x32(c1, k1, out);
  CHECK(out[0] == 0x408f276du && out[1] == 0x41c83b0eu && out[2] == 0xa20bc7c6u && out[3] == 0x6d5451fdu);
  const uint32_t c2[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, k2[2] = {0xa4093822u, 0x299f31d0u};
  nc_philox4x32(c2, k2, out);
  CHECK(out[0] == 0xd16cfe09u && out[1] == 0x94fdccebu && out[2] == 0x5001e420u && out[3] == 0x24126ea1u);
}

static void test_dtype_status(void) {
  nc_dtype d;
  CHECK_OK(nc_dtype_parse("float64", &d));
  CHECK(d == NC_FLOAT64);
  CHECK_OK(nc_dtype_parse("long", &d));
  CHECK(d == NC_INT64);
  CHECK_ERR(nc_dtype_parse("float16x", &d), NC_ERR_DTYPE, "unknown dtype 'float16x'");
  CHECK(nc_dtype_size(NC_BOOL) == 1 && nc_dtype_size(NC_INT64) == 8);
  CHECK(strcmp(nc_status_name(NC_ERR_OOM), "NC_ERR_OOM") == 0);
}

static nc_tensor *arange_tensor(int ndim, const int64_t *shape) {
  nc_tensor *t;
  CHECK_OK(nc_tensor_empty(cpu, NC_FLOAT32, ndim, shape, 0, &t));
  CHECK_OK(nc_arange_fill(t, 0, 1));
  return t;
}

static float at(nc_tensor *t, int64_t flat) {
  int64_t n = nc_tensor_numel(t);
  float *v = malloc(sizeof(float) * (size_t)n);
  CHECK_OK(nc_read_values(t, v, sizeof(float) * (size_t)n));
  float r = v[flat];
  free(v);
  return r;
}

static void test_views(void) {
  int64_t shape[3] = {2, 3, 4};
  nc_tensor *t = arange_tensor(3, shape), *v, *w;
  CHECK(nc_tensor_is_contiguous(t));
  CHECK_OK(nc_tensor_transpose(t, 0, 2, &v)); /* [4,3,2] */
  CHECK(!nc_tensor_is_contiguous(v) && v->shape[0] == 4 && v->strides[0] == 1);
  CHECK(at(v, 1) == 12.0f); /* v[0][0][1] = t[1][0][0] */
  int64_t flat = 24;
  CHECK_ERR(nc_tensor_view(v, 1, &flat, &w), NC_ERR_SHAPE, "would need a copy");
  CHECK_OK(nc_reshape(v, 1, &flat, &w));
  CHECK(nc_tensor_is_contiguous(w) && at(w, 1) == 12.0f && w->storage != t->storage);
  nc_tensor_release(w);
  nc_tensor_release(v);

  CHECK_OK(nc_tensor_narrow(t, 2, 1, 2, &v)); /* [2,3,2] */
  CHECK(at(v, 0) == 1.0f && at(v, 1) == 2.0f && at(v, 2) == 5.0f);
  int64_t merged[2] = {6, 2}; /* dims 0,1 merge (stride 4 = 1*4... both uniform) */
  CHECK_OK(nc_tensor_view(v, 2, merged, &w));
  CHECK(w->strides[0] == 4 && w->strides[1] == 1);
  nc_tensor_release(w);
  CHECK_ERR(nc_tensor_narrow(t, 2, 3, 2, &w), NC_ERR_INDEX, "outside dim 3");
  nc_tensor_release(v);

  CHECK_OK(nc_tensor_select(t, 1, 2, &v)); /* t[:,2,:] -> [2,4] */
  CHECK(v->ndim == 2 && at(v, 0) == 8.0f && at(v, 4) == 20.0f);
  CHECK_ERR(nc_tensor_select(t, 1, 3, &w), NC_ERR_INDEX, "out of range");
  nc_tensor_release(v);

  int64_t one[1] = {1}, exp_shape[2] = {3, 4};
  nc_tensor *s = arange_tensor(1, one);
  CHECK_OK(nc_tensor_expand(s, 2, exp_shape, &v));
  CHECK(v->strides[0] == 0 && v->strides[1] == 0 && nc_tensor_numel(v) == 12);
  int64_t bad[2] = {3, 5};
  nc_tensor *r4;
  int64_t four = 4;
  CHECK_OK(nc_tensor_empty(cpu, NC_FLOAT32, 1, &four, 0, &r4));
  CHECK_ERR(nc_tensor_expand(r4, 2, bad, &w), NC_ERR_SHAPE, "cannot become 5");
  nc_tensor_release(r4);
  nc_tensor_release(v);
  nc_tensor_release(s);

  CHECK_OK(nc_tensor_unsqueeze(t, 1, &v));
  CHECK(v->ndim == 4 && v->shape[1] == 1);
  CHECK_OK(nc_tensor_squeeze(v, -1, &w));
  CHECK(w->ndim == 3 && w->shape[1] == 3);
  nc_tensor_release(w);
  nc_tensor_release(v);

  int dims[3] = {2, 0, 1};
  CHECK_OK(nc_tensor_permute(t, dims, &v));
  CHECK(v->shape[0] == 4 && v->shape[1] == 2 && v->shape[2] == 3 && at(v, 1) == 4.0f && at(v, 6) == 1.0f);
  int dup[3] = {0, 0, 1};
  CHECK_ERR(nc_tensor_permute(t, dup, &w), NC_ERR_ARG, "appears twice");
  nc_tensor_release(v);

  int64_t neg[2] = {-1, 6}, neg2[2] = {-1, -1}, wrong[1] = {25};
  CHECK_OK(nc_tensor_view(t, 2, neg, &v));
  CHECK(v->shape[0] == 4);
  nc_tensor_release(v);
  CHECK_ERR(nc_tensor_view(t, 2, neg2, &v), NC_ERR_SHAPE, "only one size may be -1");
  CHECK_ERR(nc_tensor_view(t, 1, wrong, &v), NC_ERR_SHAPE, "25 elements");
  nc_tensor_release(t);

  int64_t negative[2] = {2, -3}, too_many[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  CHECK_ERR(nc_tensor_empty(cpu, NC_FLOAT32, 2, negative, 0, &t), NC_ERR_SHAPE, "negative");
  CHECK_ERR(nc_tensor_empty(cpu, NC_FLOAT32, 9, too_many, 0, &t), NC_ERR_SHAPE, "0 to 8 dims");
  int64_t zero[2] = {0, 5};
  CHECK_OK(nc_tensor_empty(cpu, NC_FLOAT32, 2, zero, 0, &t));
  CHECK(nc_tensor_numel(t) == 0);
  CHECK_OK(nc_fill(t, 1.0));
  nc_tensor_release(t);
}

static void test_pool(void) {
  nc_memory_stats a, b, c;
  CHECK_OK(nc_memory_stats_get(cpu, &a));
  int64_t n = 1000; /* 4000 bytes -> class 4096 */
  nc_tensor *t;
  CHECK_OK(nc_tensor_empty(cpu, NC_FLOAT32, 1, &n, 0, &t));
  CHECK_OK(nc_memory_stats_get(cpu, &b));
  CHECK(b.in_use == a.in_use + 4096);
  nc_tensor_release(t);
  CHECK_OK(nc_tensor_empty(cpu, NC_FLOAT32, 1, &n, 0, &t)); /* same class: a cache hit */
  CHECK_OK(nc_memory_stats_get(cpu, &c));
  CHECK(c.hits == b.hits + 1 && c.in_use == b.in_use);
  nc_tensor_release(t);
  CHECK_OK(nc_tensor_empty(cpu, NC_FLOAT32, 1, &n, NC_ALLOC_PERSISTENT, &t));
  CHECK_OK(nc_memory_stats_get(cpu, &c));
  CHECK(c.persistent_in_use == 4000);
  nc_tensor_release(t);
  nc_memory_empty_cache(cpu);
  CHECK_OK(nc_memory_stats_get(cpu, &c));
  CHECK(c.cached == 0);
  /* An impossible request fails with a message giving requested and in-use bytes. */
  int64_t huge = (int64_t)1 << 60;
  CHECK_ERR(nc_tensor_empty(cpu, NC_UINT8, 1, &huge, 0, &t), NC_ERR_OOM, "requested 1152921504606846976 bytes");
}

static int released;
static void on_release(void *ud) { released += *(int *)ud; }

static void test_wrap_and_copy(void) {
  float host[6] = {1, 2, 3, 4, 5, 6};
  int inc = 1;
  nc_storage *s;
  CHECK_OK(nc_storage_wrap_host(host, sizeof host, on_release, &inc, &s));
  int64_t shape[2] = {2, 3}, strides[2] = {3, 1};
  nc_tensor *t, *tt, *d;
  CHECK_OK(nc_tensor_from_storage(s, NC_FLOAT32, 2, shape, strides, 0, &t));
  int64_t big[2] = {3, 3};
  CHECK_ERR(nc_tensor_from_storage(s, NC_FLOAT32, 2, big, strides, 0, &tt), NC_ERR_INDEX, "outside its storage");
  nc_storage_release(s);
  host[0] = 10; /* zero-copy: the tensor sees host writes */
  CHECK(at(t, 0) == 10.0f);
  CHECK_OK(nc_tensor_transpose(t, 0, 1, &tt));
  CHECK_OK(nc_to(tt, cpu, NC_INT64, &d)); /* strided read, dtype conversion */
  int64_t v[6];
  CHECK_OK(nc_read_values(d, v, sizeof v));
  CHECK(v[0] == 10 && v[1] == 4 && v[2] == 2 && v[5] == 6);
  nc_tensor *b;
  CHECK_OK(nc_to(d, cpu, NC_BOOL, &b));
  nc_tensor_release(d);
  nc_tensor_release(tt);
  nc_tensor_release(t);
  CHECK(released == 1);
  uint8_t bv[6];
  CHECK_OK(nc_read_values(b, bv, sizeof bv));
  CHECK(bv[0] == 1 && bv[5] == 1);
  char *str;
  CHECK_OK(nc_tensor_format(b, &str));
  CHECK(strstr(str, "True") && strstr(str, "dtype=bool, device=cpu"));
  free(str);
  nc_tensor_release(b);
}

static void test_format(void) {
  int64_t n = 2000;
  nc_tensor *t;
  CHECK_OK(nc_tensor_empty(cpu, NC_FLOAT32, 1, &n, 0, &t));
  CHECK_OK(nc_arange_fill(t, 0, 0.5));
  char *s;
  CHECK_OK(nc_tensor_format(t, &s));
  /* max/min > 1e3 switches to scientific notation, as PyTorch does */
  CHECK(strcmp(s, "tensor([0.0000e+00, 5.0000e-01, 1.0000e+00, ..., 9.9850e+02, 9.9900e+02, 9.9950e+02], "
                  "dtype=float32, device=cpu)") == 0);
  free(s);
  int64_t shape[2] = {2, 2};
  nc_tensor *m;
  CHECK_OK(nc_tensor_view(t, 1, &n, &m));
  nc_tensor_release(m);
  CHECK_OK(nc_tensor_empty(cpu, NC_FLOAT32, 2, shape, 0, &m));
  CHECK_OK(nc_arange_fill(m, -1.5, 1));
  CHECK_OK(nc_tensor_format(m, &s));
  CHECK(strcmp(s, "tensor([[-1.5000, -0.5000],\n        [ 0.5000,  1.5000]], dtype=float32, device=cpu)") == 0);
  free(s);
  nc_tensor_release(m);
  nc_tensor_release(t);
}

static void test_random(void) {
  int64_t n = 100000;
  nc_tensor *t;
  nc_rng g;
  nc_rng_seed(&g, 42);
  CHECK_OK(nc_tensor_empty(cpu, NC_FLOAT64, 1, &n, 0, &t));
  CHECK_OK(nc_normal(t, &g, 0, 1));
  CHECK(g.offset == (uint64_t)n);
  double *v = malloc(sizeof(double) * (size_t)n), mean = 0, var = 0;
  CHECK_OK(nc_read_values(t, v, sizeof(double) * (size_t)n));
  for (int64_t i = 0; i < n; i++) mean += v[i];
  mean /= (double)n;
  for (int64_t i = 0; i < n; i++) var += (v[i] - mean) * (v[i] - mean);
  var /= (double)(n - 1);
  CHECK(fabs(mean) < 0.02 && fabs(var - 1) < 0.02);
  free(v);
  CHECK_ERR(nc_normal(t, &g, 0, -1), NC_ERR_ARG, "std must be >= 0");
  nc_tensor_release(t);
  nc_tensor *i;
  CHECK_OK(nc_tensor_empty(cpu, NC_INT32, 1, &n, 0, &i));
  CHECK_ERR(nc_uniform(i, &g, 0, 1), NC_ERR_DTYPE, "floating dtype");
  nc_tensor_release(i);
}

int main(void) {
  CHECK_OK(nc_init());
  CHECK_OK(nc_device_find("cpu", &cpu));
  nc_device *d;
  CHECK_ERR(nc_device_find("tpu", &d), NC_ERR_ARG, "bad device spec 'tpu'");
  CHECK_ERR(nc_device_find("opencl:9:9", &d), NC_ERR_DEVICE, "no OpenCL device opencl:9:9");
  test_philox();
  test_dtype_status();
  test_views();
  test_pool();
  test_wrap_and_copy();
  test_format();
  test_random();
  CHECK_DONE();
}

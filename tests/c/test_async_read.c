/* Reads to the host that do not wait (nc_storage_read_async, nc_storage_is_ready,
 * nc_storage_wait, nc_to_async) on the CPU backend and, when one exists, the first OpenCL
 * device: the bytes equal what was written, whatever is written or freed after the read is
 * issued; every access to a pending storage waits; sync completes reads; a read still pending
 * at process exit lands before the device shuts down. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "check.h"
#include "fill.h"
#include "netcl/netcl.h"

static nc_device *cpu;

/* Whether dst's bytes [dst_off, dst_off + n) are pattern(seed)'s bytes [off, off + n). */
static bool holds(nc_storage *dst, size_t dst_off, size_t off, size_t n, unsigned seed) {
  uint8_t *want = malloc(off + n);
  pattern(want, off + n, seed);
  bool same = memcmp((uint8_t *)nc_storage_host_ptr(dst) + dst_off, want + off, n) == 0;
  free(want);
  return same;
}

static void test_values(nc_device *dev) {
  const size_t sizes[] = {1, 3, 4096, 5000, (1u << 20) + 7};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t n = sizes[k];
    nc_storage *src = filled(dev, n + 64, (unsigned)k), *dst = NULL;
    CHECK_OK(nc_storage_new(cpu, n + 16, 0, &dst));
    CHECK_OK(nc_storage_read_async(src, 64, dst, 16, n));
    CHECK_OK(nc_storage_wait(dst));
    CHECK(nc_storage_is_ready(dst));
    CHECK(holds(dst, 16, 64, n, (unsigned)k));
    nc_storage_release(src);
    nc_storage_release(dst);
  }
}

/* The read sees src as the queued work leaves it: a write, or src's release, right after the
 * read was issued changes nothing. An access through nc_storage_host_ptr waits by itself. */
static void test_overwrite_and_release(nc_device *dev) {
  size_t n = 300000;
  nc_storage *src = filled(dev, n, 1), *dst = NULL, *dst2 = NULL;
  CHECK_OK(nc_storage_new(cpu, n, 0, &dst));
  CHECK_OK(nc_storage_new(cpu, n, 0, &dst2));
  CHECK_OK(nc_storage_read_async(src, 0, dst, 0, n));
  uint8_t *other = malloc(n);
  pattern(other, n, 2);
  CHECK_OK(nc_storage_write(src, 0, other, n));
  CHECK_OK(nc_storage_read_async(src, 0, dst2, 0, n));
  nc_storage_release(src); /* freed with both reads in flight */
  CHECK(holds(dst, 0, 0, n, 1));
  CHECK(holds(dst2, 0, 0, n, 2));
  /* a second read into a pending storage waits for the first; both land */
  nc_storage *a = filled(dev, 100, 3), *b = filled(dev, 100, 4);
  CHECK_OK(nc_storage_read_async(a, 0, dst, 0, 100));
  CHECK_OK(nc_storage_read_async(b, 0, dst, 100, 100));
  CHECK(holds(dst, 0, 0, 100, 3) && holds(dst, 100, 0, 100, 4));
  /* a host write into a pending storage waits, so the read cannot land on top of it */
  CHECK_OK(nc_storage_read_async(a, 0, dst, 0, 100));
  CHECK_OK(nc_storage_write(dst, 0, other, 100));
  CHECK(holds(dst, 0, 0, 100, 2));
  /* released while pending: waits, frees (ASan: no leak, no late write) */
  CHECK_OK(nc_storage_read_async(b, 0, dst2, 0, 100));
  nc_storage_release(dst2);
  nc_storage_release(a);
  nc_storage_release(b);
  nc_storage_release(dst);
  free(other);
}

static void test_ready_sync_and_counts(nc_device *dev, bool queued) {
  nc_memory_stats before, after;
  CHECK_OK(nc_memory_stats_get(dev, &before));
  enum { N = 300 };
  nc_storage *src = filled(dev, 64, 5), *dst[N];
  for (int i = 0; i < N; i++) {
    CHECK_OK(nc_storage_new(cpu, 8, 0, &dst[i]));
    CHECK_OK(nc_storage_read_async(src, (size_t)(i % 8) * 8, dst[i], 0, 8));
  }
  CHECK_OK(nc_memory_stats_get(dev, &after));
  /* on a device with a queue, each read started without waiting; on the CPU backend each one
   * was an ordinary read */
  CHECK(after.async_reads - before.async_reads == (queued ? N : 0));
  CHECK(after.host_reads - before.host_reads == (queued ? 0 : N));
  /* the first one lands by itself */
  for (int spins = 0; !nc_storage_is_ready(dst[0]) && spins < 30000; spins++) usleep(1000);
  CHECK(nc_storage_is_ready(dst[0]));
  CHECK_OK(nc_device_sync(dev)); /* completes every pending read of the device */
  bool all = true;
  for (int i = 0; i < N; i++) all = all && nc_storage_is_ready(dst[i]) && holds(dst[i], 0, (size_t)(i % 8) * 8, 8, 5);
  CHECK(all);
  for (int i = 0; i < N; i++) nc_storage_release(dst[i]);
  nc_storage_release(src);
}

static void test_errors(nc_device *dev, bool queued) {
  nc_storage *src = filled(dev, 16, 6), *dst = NULL;
  CHECK_OK(nc_storage_new(cpu, 16, 0, &dst));
  CHECK_ERR(nc_storage_read_async(src, 8, dst, 0, 16), NC_ERR_INDEX, "async read of 16 bytes at offset 8");
  CHECK_ERR(nc_storage_read_async(src, 0, dst, 4, 16), NC_ERR_INDEX, "async read destination");
  if (queued) CHECK_ERR(nc_storage_read_async(src, 0, src, 0, 16), NC_ERR_ARG, "is not host memory");
  CHECK_OK(nc_storage_read_async(src, 0, dst, 0, 0));
  CHECK(nc_storage_is_ready(dst));
  nc_storage_release(src);
  nc_storage_release(dst);
}

/* nc_to_async: a strided view converted to float64, read without waiting. */
static void test_to_async(nc_device *dev) {
  int64_t shape[2] = {3, 5};
  nc_tensor *t = NULL, *tt = NULL, *h = NULL;
  CHECK_OK(nc_tensor_empty(dev, NC_FLOAT32, 2, shape, 0, &t));
  CHECK_OK(nc_arange_fill(t, 0, 1));
  CHECK_OK(nc_tensor_transpose(t, 0, 1, &tt));
  nc_dtype dt = nc_device_info_of(dev)->fp64 ? NC_FLOAT64 : NC_INT32;
  CHECK_OK(nc_to_async(tt, cpu, dt, &h));
  CHECK_OK(nc_fill(t, -1)); /* after the read was issued */
  if (h) {
    CHECK(nc_tensor_device(h) == cpu && h->dtype == dt && h->shape[0] == 5 && h->shape[1] == 3);
    CHECK_OK(nc_storage_wait(h->storage));
    bool ok = true;
    for (int i = 0; i < 5; i++)
      for (int j = 0; j < 3; j++) {
        double v = dt == NC_FLOAT64 ? ((double *)nc_storage_host_ptr(h->storage))[i * 3 + j]
                                    : ((int32_t *)nc_storage_host_ptr(h->storage))[i * 3 + j];
        ok = ok && v == (double)(j * 5 + i);
      }
    CHECK(ok);
  }
  nc_tensor_release(h);
  nc_tensor_release(tt);
  nc_tensor_release(t);
}

/* A read left pending at exit: registered before nc_init, this handler runs after the devices'
 * shutdown, which must have landed the read (and released its pinned buffer) first. */
static nc_storage *late_dst;
static void check_late_read(void) {
  if (!late_dst) return;
  bool ok = nc_storage_is_ready(late_dst) && holds(late_dst, 0, 0, 4096, 9);
  nc_storage_release(late_dst);
  if (!ok) {
    fprintf(stderr, "a read pending at exit did not land before shutdown\n");
    _exit(1);
  }
}

int main(void) {
  atexit(check_late_read);
  CHECK_OK(nc_device_find("cpu", &cpu));
  nc_device *devs[2] = {cpu, NULL};
  int ndev = 1;
  if (nc_device_find("opencl", &devs[1]) == NC_OK) ndev = 2;
  else printf("no OpenCL device: the CPU backend only\n");
  for (int i = 0; i < ndev; i++) {
    bool queued = devs[i] != cpu;
    test_values(devs[i]);
    test_overwrite_and_release(devs[i]);
    test_ready_sync_and_counts(devs[i], queued);
    test_errors(devs[i], queued);
    test_to_async(devs[i]);
  }
  nc_device *last = devs[ndev - 1];
  nc_storage *src = filled(last, 4096, 9);
  CHECK_OK(nc_storage_new(cpu, 4096, 0, &late_dst));
  CHECK_OK(nc_storage_read_async(src, 0, late_dst, 0, 4096));
  nc_storage_release(src);
  CHECK_DONE();
}

/* Device-to-device copies (nc_storage_copy_peer) between the first two OpenCL devices when they
 * are peers (CI's POCL_DEVICES="pthread pthread": two devices of one platform): the bytes equal
 * what was written, at odd sizes and offsets; the copy sees the source as the work queued before
 * it left it, whatever is written to the source or recycled from its pool after; work queued on
 * the destination after the copy sees its bytes; copies both ways from two threads at once
 * complete; ranges outside a storage and devices that are
 * not peers are errors. Skipped (77) without two peer devices. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include "check.h"
#include "fill.h"
#include "netcl/netcl.h"

/* Whether s's bytes [at, at + n) are pattern(seed)'s bytes [off, off + n). */
static bool holds(nc_storage *s, size_t at, size_t off, size_t n, unsigned seed) {
  uint8_t *want = malloc(off + n), *got = malloc(n ? n : 1);
  pattern(want, off + n, seed);
  CHECK_OK(nc_storage_read(s, at, got, n));
  bool same = memcmp(got, want + off, n) == 0;
  free(want);
  free(got);
  return same;
}

/* Copies both ways at once from two threads: each device's queue then holds copies waiting for
 * the other's markers and barriers waiting for the other's copies; none may wait forever. */
typedef struct {
  nc_storage *dst, *src;
  nc_status status;
} copier;

static void *copy_loop(void *arg) {
  copier *c = arg;
  for (int i = 0; i < 200 && c->status == NC_OK; i++)
    c->status = nc_storage_copy_peer(c->dst, 0, c->src, 0, nc_storage_nbytes(c->src));
  return NULL;
}

static void test_both_ways(nc_device *a, nc_device *b) {
  const size_t n = 1 << 16;
  copier c[2] = {{NULL, filled(a, n, 50), NC_OK}, {NULL, filled(b, n, 51), NC_OK}};
  CHECK_OK(nc_storage_new(b, n, 0, &c[0].dst));
  CHECK_OK(nc_storage_new(a, n, 0, &c[1].dst));
  pthread_t t[2];
  for (int i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, copy_loop, &c[i]) == 0);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 2; i++) {
    CHECK(c[i].status == NC_OK);
    CHECK(holds(c[i].dst, 0, 0, n, 50u + (unsigned)i));
    nc_storage_release(c[i].dst);
    nc_storage_release(c[i].src);
  }
}

int main(void) {
  nc_device *a = NULL, *b = NULL, *cpu = NULL;
  CHECK_OK(nc_device_find("cpu", &cpu));
  if (nc_device_find("opencl:0:0", &a) != NC_OK || nc_device_find("opencl:0:1", &b) != NC_OK ||
      !nc_device_peers(a, b)) {
    printf("SKIP: needs two OpenCL devices of one platform (POCL_DEVICES=\"pthread pthread\")\n");
    return 77;
  }
  CHECK(nc_device_peers(b, a));
  CHECK(!nc_device_peers(a, a));
  CHECK(!nc_device_peers(a, cpu));

  /* odd sizes and offsets, both directions */
  const size_t sizes[] = {1, 3, 4097, 1 << 20};
  for (int k = 0; k < 4; k++) {
    size_t n = sizes[k];
    nc_storage *src = filled(a, n + 5, (unsigned)k), *dst = NULL;
    CHECK_OK(nc_storage_new(b, n + 11, 0, &dst));
    CHECK_OK(nc_storage_copy_peer(dst, 7, src, 3, n - (n > 2 ? 2 : 0)));
    CHECK(holds(dst, 7, 3, n - (n > 2 ? 2 : 0), (unsigned)k));
    CHECK_OK(nc_storage_copy_peer(src, 0, dst, 7, n - (n > 2 ? 2 : 0))); /* back, to offset 0 */
    CHECK(holds(src, 0, 3, n - (n > 2 ? 2 : 0), (unsigned)k));
    nc_storage_release(src);
    nc_storage_release(dst);
  }

  /* the source overwritten, and released and its buffer reused, right after the copy: the copy
   * holds the values written before it */
  const size_t n = 1 << 22;
  nc_storage *src = filled(a, n, 40), *dst = NULL, *dst2 = NULL;
  CHECK_OK(nc_storage_new(b, n, 0, &dst));
  CHECK_OK(nc_storage_new(b, n, 0, &dst2));
  CHECK_OK(nc_storage_copy_peer(dst, 0, src, 0, n));
  uint8_t *p = malloc(n);
  pattern(p, n, 41);
  CHECK_OK(nc_storage_write(src, 0, p, n));
  CHECK_OK(nc_storage_copy_peer(dst2, 0, src, 0, n));
  nc_storage_release(src);
  nc_storage *reuse = NULL;
  CHECK_OK(nc_storage_new(a, n, 0, &reuse)); /* most likely src's buffer, from the pool */
  pattern(p, n, 42);
  CHECK_OK(nc_storage_write(reuse, 0, p, n));
  CHECK(holds(dst, 0, 0, n, 40));
  CHECK(holds(dst2, 0, 0, n, 41));
  CHECK(holds(reuse, 0, 0, n, 42));
  free(p);

  test_both_ways(a, b);

  /* errors */
  nc_storage *small = filled(a, 16, 1), *host = NULL;
  CHECK_OK(nc_storage_new(cpu, 16, 0, &host));
  CHECK_ERR(nc_storage_copy_peer(dst, 0, small, 8, 16), NC_ERR_INDEX, "device-to-device copy of 16 bytes at offset 8");
  CHECK_ERR(nc_storage_copy_peer(small, 4, dst, 0, 16), NC_ERR_INDEX, "destination");
  CHECK_ERR(nc_storage_copy_peer(host, 0, small, 0, 16), NC_ERR_STATE, "they are not peers");
  CHECK_ERR(nc_storage_copy_peer(small, 0, small, 0, 16), NC_ERR_STATE, "they are not peers");
  CHECK_OK(nc_storage_copy_peer(dst, 0, small, 0, 0));
  nc_storage_release(small);
  nc_storage_release(host);
  nc_storage_release(reuse);
  nc_storage_release(dst);
  nc_storage_release(dst2);
  CHECK_DONE();
}

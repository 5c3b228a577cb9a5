/* Data-loader primitives: seeded permutations (against the documented algorithm, and for
 * uniformity) and row gathers. */
#include <stdint.h>
#include <stdlib.h>
#include "check.h"
#include "netcl/netcl.h"

static nc_device *cpu;

/* shuffle.h's description, written out independently. */
static void reference_permutation(int64_t *out, int64_t n, uint64_t seed, uint64_t stream) {
  for (int64_t i = 0; i < n; i++) out[i] = i;
  uint64_t c = 0;
  const uint32_t key[2] = {(uint32_t)(seed & 0xffffffffu), (uint32_t)(seed >> 32)};
  for (int64_t i = n - 1; i >= 1; i--) {
    unsigned __int128 two64 = (unsigned __int128)1 << 64;
    uint64_t bound = (uint64_t)i + 1, threshold = (uint64_t)(two64 % bound), r;
    for (;;) {
      uint32_t ctr[4] = {(uint32_t)(c & 0xffffffffu), (uint32_t)(c >> 32), (uint32_t)(stream & 0xffffffffu),
                         (uint32_t)(stream >> 32)},
               w[4];
      c++;
      nc_philox4x32(ctr, key, w);
      r = ((uint64_t)w[1] << 32) + w[0];
      if (r >= threshold) break;
    }
    int64_t j = (int64_t)(r % bound), tmp = out[j];
    out[j] = out[i];
    out[i] = tmp;
  }
}

static void test_permutation(void) {
  enum { N = 1000 };
  static int64_t a[N], b[N], seen[N];
  nc_shuffle_permutation(a, N, 42, 1);
  reference_permutation(b, N, 42, 1);
  CHECK(!memcmp(a, b, sizeof a));
  memset(seen, 0, sizeof seen);
  int fixed = 0;
  for (int i = 0; i < N; i++) {
    CHECK(a[i] >= 0 && a[i] < N);
    if (a[i] >= 0 && a[i] < N) seen[a[i]]++;
    fixed += a[i] == i;
  }
  for (int i = 0; i < N; i++) CHECK(seen[i] == 1);
  CHECK(fixed < 10); /* about 1 expected for a random permutation */
  nc_shuffle_permutation(b, N, 42, 1);
  CHECK(!memcmp(a, b, sizeof a)); /* deterministic */
  nc_shuffle_permutation(b, N, 42, 2);
  CHECK(memcmp(a, b, sizeof a) != 0); /* another epoch */
  nc_shuffle_permutation(b, N, 43, 1);
  CHECK(memcmp(a, b, sizeof a) != 0); /* another seed */
  reference_permutation(a, N, 0xdeadbeefcafef00dull, 1ull << 40);
  nc_shuffle_permutation(b, N, 0xdeadbeefcafef00dull, 1ull << 40);
  CHECK(!memcmp(a, b, sizeof a));
  nc_shuffle_permutation(a, 0, 1, 1);
  nc_shuffle_permutation(a, 1, 1, 1);
  CHECK(a[0] == 0);
  /* Uniformity: over 24000 streams, element 0 lands in each of 4 places about 6000 times
   * (standard deviation about 67). */
  int where[4] = {0, 0, 0, 0};
  for (uint64_t s = 0; s < 24000; s++) {
    int64_t p[4];
    nc_shuffle_permutation(p, 4, 7, s);
    for (int k = 0; k < 4; k++)
      if (p[k] == 0) where[k]++;
  }
  for (int k = 0; k < 4; k++) CHECK(where[k] > 5700 && where[k] < 6300);
}

static nc_tensor *arange(nc_dtype dt, int ndim, const int64_t *shape) {
  nc_tensor *t;
  CHECK_OK(nc_tensor_empty(cpu, dt, ndim, shape, 0, &t));
  CHECK_OK(nc_arange_fill(t, 0, 1));
  return t;
}

static void test_gather(void) {
  int64_t shape[3] = {5, 2, 3}, bshape[3] = {3, 2, 3};
  nc_tensor *src = arange(NC_FLOAT32, 3, shape), *dst, *dst2;
  const int64_t rows[3] = {4, 0, 4};
  CHECK_OK(nc_tensor_empty(cpu, NC_FLOAT32, 3, bshape, 0, &dst));
  CHECK_OK(nc_gather_rows(dst, src, rows, 3));
  float v[18];
  CHECK_OK(nc_read_values(dst, v, sizeof v));
  for (int k = 0; k < 3; k++)
    for (int e = 0; e < 6; e++) CHECK(v[k * 6 + e] == (float)(rows[k] * 6 + e));
  /* A strided source (transposed rows) and a strided destination take the general paths. */
  nc_tensor *big = arange(NC_FLOAT32, 3, (int64_t[]){5, 3, 2}), *tsrc, *tdst;
  CHECK_OK(nc_tensor_transpose(big, 1, 2, &tsrc)); /* [5, 2, 3], not contiguous */
  CHECK_OK(nc_tensor_empty(cpu, NC_FLOAT32, 3, (int64_t[]){3, 3, 2}, 0, &dst2));
  CHECK_OK(nc_tensor_transpose(dst2, 1, 2, &tdst));
  CHECK_OK(nc_gather_rows(dst, tsrc, rows, 3));
  CHECK_OK(nc_gather_rows(tdst, src, rows, 3));
  float w[18], u[18];
  CHECK_OK(nc_read_values(dst, w, sizeof w));
  CHECK_OK(nc_read_values(tdst, u, sizeof u));
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 3; j++) {
        CHECK(w[k * 6 + i * 3 + j] == (float)(rows[k] * 6 + j * 2 + i));
        CHECK(u[k * 6 + i * 3 + j] == (float)(rows[k] * 6 + i * 3 + j));
      }
  /* errors */
  const int64_t bad[3] = {0, 5, 1};
  CHECK_ERR(nc_gather_rows(dst, src, bad, 3), NC_ERR_INDEX, "row 5 is out of range for 5 rows");
  CHECK_ERR(nc_gather_rows(dst, src, rows, 2), NC_ERR_SHAPE, "must be [2, <source row shape>]");
  nc_tensor *i64;
  CHECK_OK(nc_tensor_empty(cpu, NC_INT64, 3, bshape, 0, &i64));
  CHECK_ERR(nc_gather_rows(i64, src, rows, 3), NC_ERR_DTYPE, "dtypes differ (float32 into int64)");
  nc_tensor *scalar;
  CHECK_OK(nc_tensor_empty(cpu, NC_FLOAT32, 0, NULL, 0, &scalar));
  CHECK_ERR(nc_gather_rows(dst, scalar, rows, 3), NC_ERR_SHAPE, "no rows");
  /* 1-d sources (labels) */
  nc_tensor *labels = arange(NC_INT64, 1, (int64_t[]){5}), *lb;
  CHECK_OK(nc_tensor_empty(cpu, NC_INT64, 1, (int64_t[]){3}, 0, &lb));
  CHECK_OK(nc_gather_rows(lb, labels, rows, 3));
  int64_t l[3];
  CHECK_OK(nc_read_values(lb, l, sizeof l));
  CHECK(l[0] == 4 && l[1] == 0 && l[2] == 4);
  nc_tensor *all[] = {src, dst, dst2, big, tsrc, tdst, i64, scalar, labels, lb};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) nc_tensor_release(all[i]);
}

int main(void) {
  CHECK_OK(nc_init());
  CHECK_OK(nc_device_find("cpu", &cpu));
  test_permutation();
  test_gather();
  CHECK_DONE();
}

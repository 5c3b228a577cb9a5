/* The division constants of the convolution kernels (nc_cl_divisor, kernels/gemm_fast.cl's
 * NC_DIV): floor(n m / 2^sh) against n / d, every n below 70000 for every d up to 1100, then
 * for divisors up to 2^31 - 1 (powers of two, their neighbours, primes, products of extents)
 * the numerators around multiples of d and near 2^31. Needs no device. */
#include <stdlib.h>
#include "check.h"
#ifdef NC_HAVE_OPENCL
#include "backend/opencl/cl_linalg.h"
#endif

#ifndef NC_HAVE_OPENCL
int main(void) {
  printf("built without OpenCL: skipped\n");
  return 77;
}
#else
static int32_t div_by(int32_t n, uint32_t m, int32_t sh) { return (int32_t)(((uint64_t)(uint32_t)n * m) >> sh); }

static long checked;

static void check(int32_t n, int32_t d, uint32_t m, int32_t sh) {
  if (div_by(n, m, sh) != n / d) {
    fprintf(stderr, "%d / %d: got %d\n", n, d, div_by(n, m, sh));
    CHECK(0);
  }
  checked++;
}

int main(void) {
  for (int32_t d = 1; d <= 1100; d++) {
    uint32_t m;
    int32_t sh;
    nc_cl_divisor(d, &m, &sh);
    for (int32_t n = 0; n < 70000; n++) check(n, d, m, sh);
  }
  int32_t ds[64];
  int nd = 0;
  for (int b = 1; b < 31; b += 3) ds[nd++] = (int32_t)1 << b, ds[nd++] = ((int32_t)1 << b) - 1, ds[nd++] = ((int32_t)1 << b) + 1;
  const int32_t more[] = {2147483647, 1073741823, 65521, 1000003, 3 * 3, 7 * 7, 224 * 224, 112 * 112, 2147483646, 46341};
  for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) ds[nd++] = more[i];
  unsigned seed = 1;
  for (int i = 0; i < nd; i++) {
    uint32_t m;
    int32_t sh;
    nc_cl_divisor(ds[i], &m, &sh);
    for (int64_t q = 0; q * ds[i] < 2147483647 && q < 200000; q += 1 + q / 64)
      for (int64_t r = -2; r <= 2; r++) {
        const int64_t n = q * ds[i] + r;
        if (n >= 0 && n <= 2147483647) check((int32_t)n, ds[i], m, sh);
      }
    for (int32_t n = 2147483647; n > 2147483647 - 5000; n--) check(n, ds[i], m, sh);
    for (int k = 0; k < 20000; k++) {
      seed = seed * 1103515245u + 12345u;
      check((int32_t)((seed ^ (seed << 13)) & 0x7fffffff), ds[i], m, sh);
    }
  }
  printf("ok: %ld divisions\n", checked);
  return 0;
}
#endif

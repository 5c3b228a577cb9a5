#include "netcl/random.h"
#include "netcl/shuffle.h"

static uint64_t candidate(uint64_t seed, uint64_t stream, uint64_t c) {
  const uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)};
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  uint32_t w[4];
  nc_philox4x32(ctr, key, w);
  return (uint64_t)w[1] << 32 | w[0];
}

void nc_shuffle_permutation(int64_t *out, int64_t n, uint64_t seed, uint64_t stream) {
  for (int64_t i = 0; i < n; i++) out[i] = i;
  uint64_t c = 0;
  for (int64_t i = n - 1; i > 0; i--) {
    uint64_t bound = (uint64_t)i + 1;
    /* Plain "mod bound" favours small values when bound does not divide 2^64; rejecting the
     * 2^64 mod bound lowest candidates leaves a whole number of copies of [0, bound). */
    uint64_t threshold = (0 - bound) % bound, r;
    do r = candidate(seed, stream, c++);
    while (r < threshold);
    int64_t j = (int64_t)(r % bound), t = out[i];
    out[i] = out[j];
    out[j] = t;
  }
}

void nc_sample_uniforms(double *out, int64_t n, int k, uint64_t seed, uint64_t call) {
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  for (int64_t j = 0; j < n; j++)
    for (int d = 0; d < k; d++) {
      const uint32_t ctr[4] = {(uint32_t)d, (uint32_t)j, (uint32_t)call, (uint32_t)(call >> 32)};
      uint32_t w[4];
      nc_philox4x32(ctr, key, w);
      out[j * k + d] = (double)(((uint64_t)w[1] << 32 | w[0]) >> 11) * 0x1p-53;
    }
}

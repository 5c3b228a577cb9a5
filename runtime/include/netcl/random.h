/* Counter-based random numbers (Philox 4x32-10): the same stream on every backend. */
#ifndef NETCL_RANDOM_H
#define NETCL_RANDOM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A generator is a key (seed) and a counter offset; every draw of n elements consumes n
 * counters, so the element at flat position i of a draw uses counter (offset + i). */
typedef struct {
  uint64_t seed;
  uint64_t offset;
} nc_rng;

void nc_rng_seed(nc_rng *g, uint64_t seed);

/* One Philox 4x32-10 block: ctr (4 words), key (2 words) -> out (4 words). */
void nc_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* The words element i of a draw uses: counter = {lo(offset+i), hi(offset+i), 0, 0}, key = seed. */
void nc_philox_element(uint64_t seed, uint64_t counter, uint32_t out[4]);

#ifdef __cplusplus
}
#endif

#endif

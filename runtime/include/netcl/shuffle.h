/* Seeded permutations for shuffling datasets, the same on every machine and backend. */
#ifndef NETCL_SHUFFLE_H
#define NETCL_SHUFFLE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Fills out[0..n) with a permutation of 0..n-1 that depends only on (seed, stream): a
 * Fisher-Yates shuffle (Durstenfeld's, i from n-1 down to 1, swapping out[i] with out[j]) where
 * j is uniform on [0, i] by rejection sampling. Candidate c (0, 1, 2, ... across the whole
 * shuffle) is the 64-bit number (w1 << 32 | w0) from Philox4x32-10 with key = seed and counter
 * = {lo(c), hi(c), lo(stream), hi(stream)}; it is rejected when below 2^64 mod (i + 1), else
 * j = candidate mod (i + 1). A data loader uses the epoch as the stream. */
void nc_shuffle_permutation(int64_t *out, int64_t n, uint64_t seed, uint64_t stream);

/* Per-sample draws for random transforms: out[j * k + d] (j < n samples, d < k draws each) is
 * uniform on [0, 1) with 53 bits, (w1 << 32 | w0) >> 11 scaled by 2^-53, from Philox4x32-10 with
 * key = seed and counter = {d, j, lo(call), hi(call)}: sample j of the call-th batch has a
 * stream of its own, so the draws do not depend on the backend or on how batches are made. */
void nc_sample_uniforms(double *out, int64_t n, int k, uint64_t seed, uint64_t call);

#ifdef __cplusplus
}
#endif

#endif

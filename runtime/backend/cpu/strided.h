/* Iteration over several same-shaped strided operands on the CPU. Dims that are laid out
 * alike in every operand are merged, so most layouts run as a few long rows whose inner loop
 * the compiler vectorizes. */
#ifndef NETCL_CPU_STRIDED_H
#define NETCL_CPU_STRIDED_H

#include "netcl/tensor.h"

#define NC_CPU_MAX_OPERANDS 4

typedef struct {
  int nops;
  int ndim;                                     /* >= 1 after init; last dim is the row */
  int64_t shape[NC_MAX_DIMS];
  int64_t strides[NC_CPU_MAX_OPERANDS][NC_MAX_DIMS];
  int64_t offset[NC_CPU_MAX_OPERANDS];
  int64_t rows, inner;
} nc_cpu_iter;

/* ts[0] gives the shape; the others must have the same shape (0 strides allowed). */
void nc_cpu_iter_init(nc_cpu_iter *it, int nops, const nc_tensor *const *ts);

/* Element offsets of each operand at the start of row r. */
static inline void nc_cpu_iter_row(const nc_cpu_iter *it, int64_t r, int64_t *offs) {
  for (int k = 0; k < it->nops; k++) offs[k] = it->offset[k];
  for (int d = it->ndim - 2; d >= 0; d--) {
    int64_t i = r % it->shape[d];
    r /= it->shape[d];
    for (int k = 0; k < it->nops; k++) offs[k] += i * it->strides[k][d];
  }
}

/* Work below this many elements runs on one thread. */
#define NC_CPU_PARALLEL_MIN 32768

/* Rows are cut into blocks of at most NC_CPU_BLOCK elements, so that a contiguous tensor (one
 * long row after merging) still spreads over threads. */
#define NC_CPU_BLOCK 8192

static inline int64_t nc_cpu_iter_blocks(const nc_cpu_iter *it) {
  return it->rows * ((it->inner + NC_CPU_BLOCK - 1) / NC_CPU_BLOCK);
}

/* Element offsets of each operand at the start of block b, and the block's length. */
static inline void nc_cpu_iter_block(const nc_cpu_iter *it, int64_t b, int64_t *offs, int64_t *len) {
  const int64_t per = (it->inner + NC_CPU_BLOCK - 1) / NC_CPU_BLOCK, start = (b % per) * NC_CPU_BLOCK;
  nc_cpu_iter_row(it, b / per, offs);
  for (int k = 0; k < it->nops; k++) offs[k] += start * it->strides[k][it->ndim - 1];
  *len = it->inner - start < NC_CPU_BLOCK ? it->inner - start : NC_CPU_BLOCK;
}

#endif

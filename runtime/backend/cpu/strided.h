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

/* Hot loops compiled for AVX2 and AVX-512 too, the variant chosen at load time for the CPU at
 * hand (GCC target_clones; the baseline build targets plain x86-64, whose SSE2 halves or
 * quarters the work per instruction). Elsewhere, and under the sanitizers, nothing. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define NC_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define NC_CPU_CLONES
#endif

/* Work below this many elements runs on one thread. */
#define NC_CPU_PARALLEL_MIN 32768

/* for (int64_t i = 0; i < n; i++) body, under `omp parallel for clauses` when cond holds and as
 * a plain loop otherwise. Entering a parallel construct costs microseconds even when an if
 * clause turns it down, which would be most of a tiny op's time. */
#define NC_CPU_PRAGMA_(x) _Pragma(#x)
#define NC_CPU_PARALLEL_FOR(cond, clauses, i, n, ...)                          \
  do {                                                                         \
    if (cond) {                                                                \
      NC_CPU_PRAGMA_(omp parallel for clauses)                                 \
      for (int64_t i = 0; i < (n); i++) __VA_ARGS__                            \
    } else {                                                                   \
      for (int64_t i = 0; i < (n); i++) __VA_ARGS__                            \
    }                                                                          \
  } while (0)

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

/* Element offset of flat (row-major) index i in the first ndim dims of a layout. */
static inline int64_t nc_cpu_offset(int ndim, const int64_t *shape, const int64_t *strides, int64_t offset, int64_t i) {
  for (int d = ndim - 1; d >= 0 && i; d--) {
    const int64_t q = i / shape[d];
    offset += (i - q * shape[d]) * strides[d];
    i = q;
  }
  return offset;
}

/* The trailing dims of a layout walked as runs along its last (merged) dim: a "row" of a
 * reduction, scan or softmax. Size-1 dims are dropped and neighbours merged where the strides
 * allow, so a contiguous row is one run. */
typedef struct {
  int ndim;
  int64_t shape[NC_MAX_DIMS], strides[NC_MAX_DIMS];
} nc_cpu_rowlayout;

static inline void nc_cpu_rowlayout_init(nc_cpu_rowlayout *rl, int n, const int64_t *shape, const int64_t *strides) {
  int nd = 0;
  for (int d = 0; d < n; d++) {
    if (shape[d] == 1) continue;
    if (nd > 0 && rl->strides[nd - 1] == strides[d] * shape[d]) {
      rl->shape[nd - 1] *= shape[d];
      rl->strides[nd - 1] = strides[d];
      continue;
    }
    rl->shape[nd] = shape[d];
    rl->strides[nd++] = strides[d];
  }
  if (nd == 0) {
    int64_t numel = 1;
    for (int d = 0; d < n; d++) numel *= shape[d];
    rl->shape[0] = numel; /* 0 or 1 */
    rl->strides[0] = 1;
    nd = 1;
  }
  rl->ndim = nd;
}

/* Calls BODY(off, stride, m, r0) for each run covering row elements [start, start + len):
 * m elements from element offset off (relative to the row's base) with stride, the first being
 * the row's element r0. */
#define NC_CPU_FOR_RUNS(rl, start, len, BODY)                                                   \
  do {                                                                                          \
    const nc_cpu_rowlayout *rl_ = (rl);                                                         \
    const int nd_ = rl_->ndim;                                                                  \
    int64_t idx_[NC_MAX_DIMS], off_ = 0, rem_ = (start), left_ = (len), r0_ = (start);          \
    for (int d_ = nd_ - 1; d_ >= 0; d_--) {                                                     \
      idx_[d_] = rem_ % rl_->shape[d_];                                                         \
      rem_ /= rl_->shape[d_];                                                                   \
      off_ += idx_[d_] * rl_->strides[d_];                                                      \
    }                                                                                           \
    while (left_ > 0) {                                                                         \
      const int64_t avail_ = rl_->shape[nd_ - 1] - idx_[nd_ - 1];                               \
      const int64_t m_ = left_ < avail_ ? left_ : avail_;                                       \
      BODY(off_, rl_->strides[nd_ - 1], m_, r0_);                                               \
      left_ -= m_;                                                                              \
      r0_ += m_;                                                                                \
      idx_[nd_ - 1] += m_;                                                                      \
      off_ += m_ * rl_->strides[nd_ - 1];                                                       \
      for (int d_ = nd_ - 1; d_ > 0 && idx_[d_] == rl_->shape[d_]; d_--) {                      \
        off_ -= idx_[d_] * rl_->strides[d_];                                                    \
        idx_[d_] = 0;                                                                           \
        idx_[d_ - 1]++;                                                                         \
        off_ += rl_->strides[d_ - 1];                                                           \
      }                                                                                         \
    }                                                                                           \
  } while (0)

#endif

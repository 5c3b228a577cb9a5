/* Reductions, cumsum and softmax over "rows": x is viewed (by the host) with the reduced dim(s)
 * last, so row r's element j is flat index r * inner + j of x's layout.
 *
 * reduce_rows_<C>: one work-item per row, for short rows. reduce_groups_<C>: one work-group per
 * (row, chunk), a tree in local memory; with several chunks per row the partial states go to
 * reduce_partials_<C>, which merges them per row. The chunking depends only on the shape and
 * the device, and every merge happens in a fixed order, so results are deterministic.
 * Semantics match runtime/backend/cpu/reduce.c (nan propagates; argmax/argmin take nan as the
 * extreme and the first of equal values). Work-groups are at most NC_RLOCAL wide. */

#define NC_RLOCAL 256

#define PLAIN_ADD(a, b) ((a) + (b))
#define WRAP_ADD(a, b) ((long)((ulong)(a) + (ulong)(b)))

/* The self-test's reduction fault (NETCL_FAULT=reduce): sums skip each row's last element. */
#ifdef NC_FAULT
#define NC_ROW_END(op, inner) ((op) == NC_OP_SUM && (inner) > 1 ? (inner) - 1 : (inner))
#else
#define NC_ROW_END(op, inner) (inner)
#endif

#define NC_X(i) x[lx.contiguous ? lx.offset + (i) : nc_offset(&lx, (i))]

/* This item's elements of [start, end): FOR_ITEM(j, start, end) { ... }. Blocked: item lid takes
 * the lid-th run of per_ consecutive elements; else elements lid, lid + ls, ... Every item runs
 * the same per_ rounds and skips the body past its share: a trip count that differs between the
 * items of a group makes PoCL 5.0 abort on these kernels (see NC_GROUP_FOR). */
#define FOR_ITEM(j, start, end) FOR_SHARE(j, start, end, lid, ls)
/* The same for item `me` of `cnt` items sharing [start, end). */
#define FOR_SHARE(j, start, end, me, cnt)                                                         \
  for (long step_ = blocked ? 1 : (cnt), per_ = ((end) - (start) + (cnt) - 1) / (cnt), round_ = 0, \
            j = blocked ? (start) + (me) * per_ : (start) + (me),                                 \
            stop_ = blocked ? min((long)(end), (start) + ((me) + 1) * per_) : (end);              \
       round_ < per_; round_++, j += step_)                                                       \
    if (j < stop_)

/* ---- float states: a (sum, product, extreme, mean, max), b (M2, scaled sum), n (count, position) -- */
#define FLOAT_STATE(N, T, A)                                                                      \
  typedef struct {                                                                                \
    A a, b;                                                                                       \
    long n;                                                                                       \
  } rs_##N;                                                                                       \
                                                                                                  \
  inline rs_##N rs_init_##N(int op, A p) {                                                        \
    rs_##N s = {0, 0, 0};                                                                         \
    switch (op) {                                                                                 \
      case NC_OP_PROD:                                                                            \
      case NC_OP_ALL: s.a = 1; break;                                                             \
      case NC_OP_MAX:                                                                             \
      case NC_OP_LOGSUMEXP: s.a = -INFINITY; break;                                               \
      case NC_OP_MIN: s.a = INFINITY; break;                                                      \
      case NC_OP_ARGMAX: s.a = -INFINITY, s.n = LONG_MAX; break;                                  \
      case NC_OP_ARGMIN: s.a = INFINITY, s.n = LONG_MAX; break;                                   \
      case NC_OP_NORM: s.a = p == -INFINITY ? INFINITY : 0; break;                                \
    }                                                                                             \
    return s;                                                                                     \
  }                                                                                               \
                                                                                                  \
  inline bool arg_better_##N(bool is_max, A x, long i, A a, long n) {                             \
    if (isnan(a)) return isnan(x) && i < n;                                                       \
    if (isnan(x)) return true;                                                                    \
    if (x == a) return i < n;                                                                     \
    return is_max ? x > a : x < a;                                                                \
  }                                                                                               \
                                                                                                  \
  inline rs_##N lse_add_##N(rs_##N s, A m2, A s2) {                                               \
    if (isnan(s.a) || isnan(m2)) {                                                                \
      s.a = NAN;                                                                                  \
      return s;                                                                                   \
    }                                                                                             \
    A m = s.a > m2 ? s.a : m2;                                                                    \
    if (m == -INFINITY) return s;                                                                 \
    if (isinf(m)) {                                                                               \
      s.a = m, s.b = 1;                                                                           \
      return s;                                                                                   \
    }                                                                                             \
    s.b = (s.a == -INFINITY ? 0 : s.b * exp(s.a - m)) + (m2 == -INFINITY ? 0 : s2 * exp(m2 - m)); \
    s.a = m;                                                                                      \
    return s;                                                                                     \
  }                                                                                               \
                                                                                                  \
  inline rs_##N rs_add_##N(int op, rs_##N s, A x, long i, A p) {                                  \
    switch (op) {                                                                                 \
      case NC_OP_SUM:                                                                             \
      case NC_OP_MEAN: s.a += x; break;                                                           \
      case NC_OP_PROD: s.a *= x; break;                                                           \
      case NC_OP_MAX: s.a = (x > s.a || isnan(x)) ? x : s.a; break;                               \
      case NC_OP_MIN: s.a = (x < s.a || isnan(x)) ? x : s.a; break;                               \
      case NC_OP_ARGMAX:                                                                          \
      case NC_OP_ARGMIN:                                                                          \
        if (arg_better_##N(op == NC_OP_ARGMAX, x, i, s.a, s.n)) s.a = x, s.n = i;                 \
        break;                                                                                    \
      case NC_OP_VAR:                                                                             \
      case NC_OP_STD: {                                                                           \
        A d = x - s.a;                                                                            \
        s.n++;                                                                                    \
        s.a += d / (A)s.n;                                                                        \
        s.b += d * (x - s.a);                                                                     \
        break;                                                                                    \
      }                                                                                           \
      case NC_OP_NORM: {                                                                          \
        A v = fabs(x);                                                                            \
        if (p == 2) s.a += v * v;                                                                 \
        else if (p == 1) s.a += v;                                                                \
        else if (p == INFINITY) s.a = (v > s.a || isnan(v)) ? v : s.a;                            \
        else if (p == -INFINITY) s.a = (v < s.a || isnan(v)) ? v : s.a;                           \
        else if (p == 0) s.a += v != 0;                                                           \
        else s.a += pow(v, p);                                                                    \
        break;                                                                                    \
      }                                                                                           \
      case NC_OP_LOGSUMEXP: s = lse_add_##N(s, x, 1); break;                                      \
      case NC_OP_ANY: s.a = s.a != 0 || x != 0; break;                                            \
      case NC_OP_ALL: s.a = s.a != 0 && x != 0; break;                                            \
    }                                                                                             \
    return s;                                                                                     \
  }                                                                                               \
                                                                                                  \
  inline rs_##N rs_merge_##N(int op, rs_##N s, rs_##N t, A p) {                                   \
    switch (op) {                                                                                 \
      case NC_OP_ARGMAX:                                                                          \
      case NC_OP_ARGMIN:                                                                          \
        return arg_better_##N(op == NC_OP_ARGMAX, t.a, t.n, s.a, s.n) ? t : s;                    \
      case NC_OP_VAR:                                                                             \
      case NC_OP_STD: {                                                                           \
        if (t.n == 0) return s;                                                                   \
        if (s.n == 0) return t;                                                                   \
        long n = s.n + t.n;                                                                       \
        A d = t.a - s.a;                                                                          \
        s.a += d * (A)t.n / (A)n;                                                                 \
        s.b += t.b + d * d * (A)s.n * (A)t.n / (A)n;                                              \
        s.n = n;                                                                                  \
        return s;                                                                                 \
      }                                                                                           \
      case NC_OP_NORM:                                                                            \
        if (p == INFINITY) s.a = (t.a > s.a || isnan(t.a)) ? t.a : s.a;                          \
        else if (p == -INFINITY) s.a = (t.a < s.a || isnan(t.a)) ? t.a : s.a;                     \
        else s.a += t.a;                                                                          \
        return s;                                                                                 \
      case NC_OP_LOGSUMEXP: return lse_add_##N(s, t.a, t.b);                                      \
    }                                                                                             \
    return rs_add_##N(op, s, t.a, t.n, p);                                                        \
  }                                                                                               \
                                                                                                  \
  inline T rs_final_##N(int op, rs_##N s, long count, A p, A corr) {                             \
    switch (op) {                                                                                 \
      case NC_OP_MEAN: return s.a / (A)count;                                                     \
      case NC_OP_VAR: return s.b / ((A)count - corr);                                             \
      case NC_OP_STD: return sqrt(s.b / ((A)count - corr));                                       \
      case NC_OP_NORM:                                                                            \
        if (p == 2) return sqrt(s.a);                                                             \
        if (p == 1 || p == 0 || isinf(p)) return s.a;                                             \
        return pow(s.a, (A)1 / p);                                                                \
      case NC_OP_LOGSUMEXP: return (isnan(s.a) || isinf(s.a)) ? s.a : s.a + log(s.b);             \
    }                                                                                             \
    return s.a;                                                                                   \
  }

/* ---- int64 states (sum prod max min argmax argmin any all; arithmetic wraps) ---------------------- */
typedef struct {
  long a, b, n;
} rs_int64;

inline rs_int64 rs_init_int64(int op, long p) {
  rs_int64 s = {0, 0, 0};
  switch (op) {
    case NC_OP_PROD:
    case NC_OP_ALL: s.a = 1; break;
    case NC_OP_MAX: s.a = LONG_MIN; break;
    case NC_OP_MIN: s.a = LONG_MAX; break;
    case NC_OP_ARGMAX: s.a = LONG_MIN, s.n = LONG_MAX; break;
    case NC_OP_ARGMIN: s.a = LONG_MAX, s.n = LONG_MAX; break;
  }
  return s;
}

inline bool arg_better_int64(bool is_max, long x, long i, long a, long n) {
  if (x == a) return i < n;
  return is_max ? x > a : x < a;
}

inline rs_int64 rs_add_int64(int op, rs_int64 s, long x, long i, long p) {
  switch (op) {
    case NC_OP_SUM: s.a = (long)((ulong)s.a + (ulong)x); break;
    case NC_OP_PROD: s.a = (long)((ulong)s.a * (ulong)x); break;
    case NC_OP_MAX: s.a = x > s.a ? x : s.a; break;
    case NC_OP_MIN: s.a = x < s.a ? x : s.a; break;
    case NC_OP_ARGMAX:
    case NC_OP_ARGMIN:
      if (arg_better_int64(op == NC_OP_ARGMAX, x, i, s.a, s.n)) s.a = x, s.n = i;
      break;
    case NC_OP_ANY: s.a = s.a != 0 || x != 0; break;
    case NC_OP_ALL: s.a = s.a != 0 && x != 0; break;
  }
  return s;
}

inline rs_int64 rs_merge_int64(int op, rs_int64 s, rs_int64 t, long p) { return rs_add_int64(op, s, t.a, t.n, p); }
inline long rs_final_int64(int op, rs_int64 s, long count, long p, long corr) { return s.a; }

/* ---- kernels ------------------------------------------------------------------------------------- */
#define REDUCE_STORE(N, s)                                                                        \
  do {                                                                                            \
    out[nc_offset(&lo, row)] = rs_final_##N(op, s, inner, p, corr);                               \
    if (has_idx) idx[nc_offset(&li, row)] = (s).n;                                                \
  } while (0)

#define REDUCE_ARGS(T, A)                                                                         \
  int op, __global T *out, nc_layout lo, __global long *idx, nc_layout li, int has_idx, A p, A corr

#define REDUCE_K(N, T, A)                                                                         \
  __kernel void reduce_rows_##N(REDUCE_ARGS(T, A), __global const T *x, nc_layout lx, long outer, long inner) { \
    NC_GRID_LOOP(row, outer) {                                                                    \
      rs_##N s = rs_init_##N(op, p);                                                              \
      const long end = NC_ROW_END(op, inner);                                                     \
      for (long j = 0; j < end; j++) s = rs_add_##N(op, s, NC_X(row * inner + j), j, p);         \
      REDUCE_STORE(N, s);                                                                         \
    }                                                                                             \
  }                                                                                               \
                                                                                                  \
  __kernel void reduce_groups_##N(REDUCE_ARGS(T, A), __global const T *x, nc_layout lx, long outer, long inner, \
                                  long chunks, long chunk_len, __global rs_##N *partial, int blocked) { \
    __local rs_##N sh[NC_RLOCAL];                                                                 \
    const int lid = get_local_id(0), ls = get_local_size(0);                                      \
    for (long u = get_group_id(0); u < outer * chunks; u += get_num_groups(0)) {                  \
      const long row = u / chunks, start = (u - row * chunks) * chunk_len;                        \
      const long end = min((long)NC_ROW_END(op, inner), start + chunk_len);                       \
      rs_##N s = rs_init_##N(op, p);                                                              \
      FOR_ITEM(j, start, end) s = rs_add_##N(op, s, NC_X(row * inner + j), j, p);                 \
      sh[lid] = s;                                                                                \
      barrier(CLK_LOCAL_MEM_FENCE);                                                               \
      for (int w = ls / 2; w > 0; w >>= 1) {                                                      \
        if (lid < w) sh[lid] = rs_merge_##N(op, sh[lid], sh[lid + w], p);                         \
        barrier(CLK_LOCAL_MEM_FENCE);                                                             \
      }                                                                                           \
      if (lid == 0) {                                                                             \
        if (chunks == 1) REDUCE_STORE(N, sh[0]);                                                  \
        else partial[u] = sh[0];                                                                  \
      }                                                                                           \
      barrier(CLK_LOCAL_MEM_FENCE);                                                               \
    }                                                                                             \
  }                                                                                               \
                                                                                                  \
  __kernel void reduce_partials_##N(REDUCE_ARGS(T, A), __global const rs_##N *partial, long outer, long inner, \
                                    long chunks) {                                                \
    __local rs_##N sh[NC_RLOCAL];                                                                 \
    const int lid = get_local_id(0), ls = get_local_size(0);                                      \
    for (long row = get_group_id(0); row < outer; row += get_num_groups(0)) {                     \
      rs_##N s = rs_init_##N(op, p);                                                              \
      NC_GROUP_FOR(long, c, 0, lid, chunks, ls) s = rs_merge_##N(op, s, partial[row * chunks + c], p); \
      sh[lid] = s;                                                                                \
      barrier(CLK_LOCAL_MEM_FENCE);                                                               \
      for (int w = ls / 2; w > 0; w >>= 1) {                                                      \
        if (lid < w) sh[lid] = rs_merge_##N(op, sh[lid], sh[lid + w], p);                         \
        barrier(CLK_LOCAL_MEM_FENCE);                                                             \
      }                                                                                           \
      if (lid == 0) REDUCE_STORE(N, sh[0]);                                                       \
      barrier(CLK_LOCAL_MEM_FENCE);                                                               \
    }                                                                                             \
  }

/* sum and mean: reduce_groups_<C> with the accumulation written out, so that CPU drivers
 * vectorize it (the op switch of rs_add inside the loop would stop them). The contiguous case
 * gets its own copy of the loop over rows: a branch between two barriers choosing between two
 * element loops makes PoCL 5.0's work-group compiler abort, a branch around the whole loop
 * (uniform: a kernel argument) does not; so does the access pattern: blocked runs for CPU drivers,
 * four strided loads in flight for GPUs. SUM_ROWS(LOAD, ITEMS): LOAD(j) reads element j of row
 * `row`, ITEMS accumulates the item's share. */
#define SUM_CONTIGUOUS(j) x[lx.offset + row * inner + (j)]
#define SUM_STRIDED(j) NC_X(row * inner + (j))
/* The items' share of [start, end) with four loads in flight: item lid adds elements lid,
 * lid + ls, ... into four accumulators, four rounds at a time (the same trip count for every item
 * of the group, each load guarded), then merges them in a fixed order. */
#define SUM_STRIDED4(A, ADD, LOAD, acc, start, end)                                               \
  {                                                                                               \
    const long per_ = ((end) - (start) + ls - 1) / ls;                                            \
    A a1_ = 0, a2_ = 0, a3_ = 0;                                                                  \
    long j = (start) + lid, r_ = 0;                                                               \
    for (; r_ + 4 <= per_; r_ += 4, j += 4 * (long)ls) {                                          \
      if (j < (end)) acc = ADD(acc, LOAD(j));                                                     \
      if (j + ls < (end)) a1_ = ADD(a1_, LOAD(j + ls));                                           \
      if (j + 2 * (long)ls < (end)) a2_ = ADD(a2_, LOAD(j + 2 * (long)ls));                       \
      if (j + 3 * (long)ls < (end)) a3_ = ADD(a3_, LOAD(j + 3 * (long)ls));                       \
    }                                                                                             \
    for (; r_ < per_; r_++, j += ls)                                                              \
      if (j < (end)) acc = ADD(acc, LOAD(j));                                                     \
    acc = ADD(ADD(acc, a1_), ADD(a2_, a3_));                                                      \
  }

#define SUM_BLOCKED(A, ADD, LOAD, acc, start, end) FOR_ITEM(j, start, end) acc = ADD(acc, LOAD(j));

/* Contiguous float rows on GPUs: 16-byte loads. The row's [start, end) in buffer elements is cut
 * at multiples of 4: the head and tail (fewer than 4 elements each) go one per item, the aligned
 * body as vectors (VEC = A4, from 16-byte aligned addresses: buffers are at least that aligned),
 * item lid taking vectors lid, lid + ls, ... two at a time into two vector accumulators, so eight
 * partial sums per item instead of four. 32-bit vector indices (a chunk holds fewer than 2^34
 * elements). */
#define NC_CAT2(a, b) a##b
#define NC_CAT(a, b) NC_CAT2(a, b)
#define SUM_VEC4(A, ADD, LOAD, acc, start, end)                                                   \
  {                                                                                               \
    const long lo_ = lx.offset + row * inner + (start), hi_ = lx.offset + row * inner + (end);    \
    const long alo_ = min(hi_, (lo_ + 3) & ~3L), ahi_ = max(alo_, hi_ & ~3L);                    \
    if (lid < alo_ - lo_) acc = ADD(acc, x[lo_ + lid]);                                           \
    if (lid < hi_ - ahi_) acc = ADD(acc, x[ahi_ + lid]);                                          \
    __global const NC_CAT(A, 4) *xv_ = (__global const NC_CAT(A, 4) *)(x + alo_);                 \
    const uint nv_ = (uint)((ahi_ - alo_) / 4), ul_ = (uint)ls, rounds_ = (nv_ + 2 * ul_ - 1) / (2 * ul_); \
    NC_CAT(A, 4) v0_ = 0, v1_ = 0;                                                                \
    uint k_ = (uint)lid;                                                                          \
    for (uint r_ = 0; r_ < rounds_; r_++, k_ += 2 * ul_) {                                        \
      if (k_ < nv_) v0_ += xv_[k_];                                                               \
      if (k_ + ul_ < nv_) v1_ += xv_[k_ + ul_];                                                   \
    }                                                                                             \
    v0_ += v1_;                                                                                   \
    acc = ADD(acc, (v0_.s0 + v0_.s1) + (v0_.s2 + v0_.s3));                                        \
  }

#define SUM_ROWS(N, A, ADD, LOAD, ITEMS)                                                                 \
  for (long u = get_group_id(0); u < outer * chunks; u += get_num_groups(0)) {                    \
    const long row = u / chunks, start = (u - row * chunks) * chunk_len;                          \
    const long end = min((long)NC_ROW_END(op, inner), start + chunk_len);                         \
    A acc = 0;                                                                                    \
    ITEMS(A, ADD, LOAD, acc, start, end)                                                          \
    rs_##N s = rs_init_##N(op, p);                                                                \
    s.a = acc;                                                                                    \
    sh[lid] = s;                                                                                  \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                 \
    for (int w = ls / 2; w > 0; w >>= 1) {                                                        \
      if (lid < w) sh[lid] = rs_merge_##N(op, sh[lid], sh[lid + w], p);                           \
      barrier(CLK_LOCAL_MEM_FENCE);                                                               \
    }                                                                                             \
    if (lid == 0) {                                                                               \
      if (chunks == 1) REDUCE_STORE(N, sh[0]);                                                    \
      else partial[u] = sh[0];                                                                    \
    }                                                                                             \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                 \
  }

/* CONTIG: the items' share for contiguous rows on GPUs (SUM_VEC4 for floats). */
#define SUM_K(N, T, A, ADD, CONTIG)                                                               \
  __kernel void reduce_sum_##N(REDUCE_ARGS(T, A), __global const T *x, nc_layout lx, long outer, long inner, \
                               long chunks, long chunk_len, __global rs_##N *partial, int blocked) { \
    __local rs_##N sh[NC_RLOCAL];                                                                 \
    const int lid = get_local_id(0), ls = get_local_size(0);                                      \
    if (lx.contiguous && blocked) {                                                               \
      SUM_ROWS(N, A, ADD, SUM_CONTIGUOUS, SUM_BLOCKED)                                            \
    } else if (lx.contiguous) {                                                                   \
      SUM_ROWS(N, A, ADD, SUM_CONTIGUOUS, CONTIG)                                                 \
    } else if (blocked) {                                                                         \
      SUM_ROWS(N, A, ADD, SUM_STRIDED, SUM_BLOCKED)                                               \
    } else {                                                                                      \
      SUM_ROWS(N, A, ADD, SUM_STRIDED, SUM_STRIDED4)                                              \
    }                                                                                             \
  }

/* ---- cumsum: a scan per row, tile by tile in local memory (Hillis-Steele), carrying the total -- */
#define CUMSUM_K(N, T, ADD)                                                                       \
  __kernel void cumsum_rows_##N(__global T *out, nc_layout lo, __global const T *x, nc_layout lx, long outer, \
                                long inner) {                                                     \
    NC_GRID_LOOP(row, outer) {                                                                    \
      T acc = 0;                                                                                  \
      for (long j = 0; j < inner; j++) {                                                          \
        acc = ADD(acc, NC_X(row * inner + j));                                                    \
        out[nc_offset(&lo, row * inner + j)] = acc;                                               \
      }                                                                                           \
    }                                                                                             \
  }                                                                                               \
                                                                                                  \
  __kernel void cumsum_groups_##N(__global T *out, nc_layout lo, __global const T *x, nc_layout lx, long outer, \
                                  long inner) {                                                   \
    __local T buf[NC_RLOCAL];                                                                     \
    const int lid = get_local_id(0), ls = get_local_size(0);                                      \
    for (long row = get_group_id(0); row < outer; row += get_num_groups(0)) {                     \
      T carry = 0;                                                                                \
      for (long base = 0; base < inner; base += ls) {                                             \
        const long j = base + lid;                                                                \
        buf[lid] = j < inner ? NC_X(row * inner + j) : (T)0;                                      \
        barrier(CLK_LOCAL_MEM_FENCE);                                                             \
        for (int w = 1; w < ls; w <<= 1) {                                                        \
          T t = lid >= w ? buf[lid - w] : (T)0;                                                   \
          barrier(CLK_LOCAL_MEM_FENCE);                                                           \
          buf[lid] = ADD(buf[lid], t);                                                            \
          barrier(CLK_LOCAL_MEM_FENCE);                                                           \
        }                                                                                         \
        if (j < inner) out[nc_offset(&lo, row * inner + j)] = ADD(carry, buf[lid]);               \
        carry = ADD(carry, buf[ls - 1]);                                                          \
        barrier(CLK_LOCAL_MEM_FENCE);                                                             \
      }                                                                                           \
    }                                                                                             \
  }


/* ---- softmax: one pass for the max and the sum of exp(x - max) (online: the running sum is
 * rescaled when the max grows, Milakov & Gimelshein 2018), then one pass that writes ----------------
 * A running pair (m, s) means s = sum of exp(v - m) over the values seen (SM_TERM and SM_MAX:
 * kernels/common.cl). */
#define SM_OUT(i) out[lo.contiguous ? lo.offset + (i) : nc_offset(&lo, (i))]
#define SOFTMAX_WRITE(i, v, m, sum) SM_OUT(i) = op == NC_OP_LOG_SOFTMAX ? ((v) - (m)) - log(sum) : exp((v) - (m)) / (sum)

/* Contiguous rows of at most sub * SM_REG elements (GPUs, interleaved shares): each item keeps
 * its share in registers (constant indices only, and plain pointers: no layout decoding in the
 * unrolled loops), so the row is read once from memory: its max, then the sum of exp(v - max),
 * each reduced over the row's sub items, then the writes. Padding is -inf, which adds 0. NaN
 * and +inf give NaN rows, as in the online form below. (4-vector loads of the shares were
 * measured 3.4x slower on the H200, so the loads are scalar: coalesced across the items.) */
#define SM_REG 32
/* x reduced with MERGE over the row's sub items, through sh. A row of at most 32 items takes
 * one barrier: each item then merges the row's partials itself (reads of one address by a
 * whole warp are one broadcast). Longer rows halve in a tree. The next write to sh comes after
 * a later barrier of the caller (the other array's reduction, or the next row's first). */
#define SM_REDUCE(sh, x, MERGE)                                                                   \
  sh[lid] = x;                                                                                    \
  barrier(CLK_LOCAL_MEM_FENCE);                                                                   \
  if (sub <= 32) {                                                                                \
    x = sh[first];                                                                                \
    for (int q_ = 1; q_ < sub; q_++) x = MERGE(x, sh[first + q_]);                                \
  } else {                                                                                        \
    for (int w = sub / 2; w > 0; w >>= 1) {                                                       \
      if (lane < w) sh[lid] = MERGE(sh[lid], sh[lid + w]);                                        \
      barrier(CLK_LOCAL_MEM_FENCE);                                                               \
    }                                                                                             \
    x = sh[first];                                                                                \
  }
#define SM_PLUS(a, b) ((a) + (b))
#define SOFTMAX_IN_REGISTERS(T)                                                                   \
  for (long base = get_group_id(0) * (long)per_group; base < outer;                               \
       base += get_num_groups(0) * (long)per_group) {                                             \
    const long row = base + lid / sub;                                                            \
    const int len = row < outer ? (int)inner : 0;                                                 \
    __global const T *xr = x + lx.offset + row * inner;                                           \
    __global T *orow = out + lo.offset + row * inner;                                             \
    T v[SM_REG];                                                                                  \
    T m = -INFINITY, sum = 0;                                                                     \
    _Pragma("unroll") for (int r = 0; r < SM_REG; r++) {                                          \
      const int j = lane + r * sub;                                                               \
      v[r] = j < len ? xr[j] : (T)(-INFINITY);                                                    \
      m = SM_MAX(m, v[r]);                                                                        \
    }                                                                                             \
    SM_REDUCE(sh_m, m, SM_MAX)                                                                    \
    _Pragma("unroll") for (int r = 0; r < SM_REG; r++) sum += SM_TERM(v[r], m);                   \
    SM_REDUCE(sh_s, sum, SM_PLUS)                                                                 \
    const T ls_ = log(sum);                                                                       \
    _Pragma("unroll") for (int r = 0; r < SM_REG; r++) {                                          \
      const int j = lane + r * sub;                                                               \
      if (j < len) orow[j] = op == NC_OP_LOG_SOFTMAX ? (v[r] - m) - ls_ : exp(v[r] - m) / sum;    \
    }                                                                                             \
  }

#define SOFTMAX_K(N, T)                                                                           \
  inline void sm_add_##N(T *m, T *s, T v) {                                                       \
    const T m2 = SM_MAX(*m, v);                                                                   \
    *s = *s * SM_TERM(*m, m2) + SM_TERM(v, m2);                                                   \
    *m = m2;                                                                                      \
  }                                                                                               \
                                                                                                  \
  __kernel void softmax_rows_##N(int op, __global T *out, nc_layout lo, __global const T *x, nc_layout lx, long outer, \
                                 long inner) {                                                    \
    NC_GRID_LOOP(row, outer) {                                                                    \
      T m = -INFINITY, sum = 0;                                                                   \
      for (long j = 0; j < inner; j++) sm_add_##N(&m, &sum, NC_X(row * inner + j));               \
      for (long j = 0; j < inner; j++) SOFTMAX_WRITE(row * inner + j, NC_X(row * inner + j), m, sum); \
    }                                                                                             \
  }                                                                                               \
                                                                                                  \
  /* Rows of a group: `sub` items per row (a power of two dividing the group), ls / sub rows at a \
   * time, so short rows do not leave most of a group idle in its tree. */                        \
  __kernel void softmax_groups_##N(int op, __global T *out, nc_layout lo, __global const T *x, nc_layout lx, \
                                   long outer, long inner, int blocked, int sub) {                \
    __local T sh_m[NC_RLOCAL], sh_s[NC_RLOCAL];                                                   \
    const int lid = get_local_id(0), ls = get_local_size(0);                                      \
    const int lane = lid % sub, first = lid - lane, per_group = ls / sub;                         \
    if (!blocked && lx.contiguous && lo.contiguous && inner <= (long)sub * SM_REG) {              \
      SOFTMAX_IN_REGISTERS(T)                                                                     \
      return;                                                                                     \
    }                                                                                             \
    for (long base = get_group_id(0) * (long)per_group; base < outer;                             \
         base += get_num_groups(0) * (long)per_group) {                                           \
      const long row = base + lid / sub;                                                          \
      const bool live = row < outer;                                                              \
      T m = -INFINITY, sum = 0;                                                                   \
      FOR_SHARE(j, 0, inner, lane, sub) if (live) sm_add_##N(&m, &sum, NC_X(row * inner + j));    \
      sh_m[lid] = m;                                                                              \
      sh_s[lid] = sum;                                                                            \
      barrier(CLK_LOCAL_MEM_FENCE);                                                               \
      for (int w = sub / 2; w > 0; w >>= 1) {                                                     \
        if (lane < w) {                                                                           \
          const T m1 = sh_m[lid], m2 = sh_m[lid + w], mm = SM_MAX(m1, m2);                        \
          sh_s[lid] = sh_s[lid] * SM_TERM(m1, mm) + sh_s[lid + w] * SM_TERM(m2, mm);              \
          sh_m[lid] = mm;                                                                         \
        }                                                                                         \
        barrier(CLK_LOCAL_MEM_FENCE);                                                             \
      }                                                                                           \
      m = sh_m[first];                                                                            \
      sum = sh_s[first];                                                                          \
      barrier(CLK_LOCAL_MEM_FENCE);                                                               \
      FOR_SHARE(j, 0, inner, lane, sub) if (live) SOFTMAX_WRITE(row * inner + j, NC_X(row * inner + j), m, sum); \
    }                                                                                             \
  }

FLOAT_STATE(float32, float, float)
REDUCE_K(float32, float, float)
SUM_K(float32, float, float, PLAIN_ADD, SUM_VEC4)
CUMSUM_K(float32, float, PLAIN_ADD)
SOFTMAX_K(float32, float)
REDUCE_K(int64, long, long)
SUM_K(int64, long, long, WRAP_ADD, SUM_STRIDED4)
CUMSUM_K(int64, long, WRAP_ADD)
#ifdef NC_FP64
FLOAT_STATE(float64, double, double)
REDUCE_K(float64, double, double)
SUM_K(float64, double, double, PLAIN_ADD, SUM_VEC4)
CUMSUM_K(float64, double, PLAIN_ADD)
SOFTMAX_K(float64, double)
#endif

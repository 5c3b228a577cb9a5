/* The "medium" GEMM of float32 tensors that the bfloat16 kernel does not take: C = alpha A B +
 * beta C (+ bias), float32 operands and results, the operands rounded to bfloat16 as they are read
 * from local memory and multiplied on bf16 mma.sync (m16n8k16, kernels/mma.cl) with float32
 * sums, for NVIDIA devices of compute capability 8.0 or later. runtime/backend/opencl/
 * cl_gemm.c picks it for "medium" products whose operand rows start 16-byte aligned and that
 * cl_gemm_lowp.c does not round into bfloat16 temporaries for kernels/gemm_bf16.cl (a long K
 * over few tiles, whose splits of K run here). "high" (tf32) products run kernels/gemm_tf32.cl.
 * kernels/conv_mma.cl builds on this file's pipeline, fragment reads and products, with
 * -DTC_CONV=1 (no GEMM kernels) and -DNC_MMA_BF16=1 or -DNC_MMA_TF32=1 (tf32 products, for its
 * "high" convolutions: TC_PRODUCTS).
 *
 * A work-group computes a 128 x 128 tile of C with TC_WARPS_N x 2 warps, each a 64 x (128 /
 * TC_WARPS_N) block. K advances 16 at a time through TC_STAGES local buffers: the tile
 * TC_STAGES - 1 steps ahead is copied from global to local memory by cp.async (16 bytes a
 * work-item, no registers, zero fill past the edges) while the work-group multiplies the
 * current one; one barrier per K tile. Local memory keeps each operand as it lies in global memory:
 * - an operand whose K is contiguous ("K-major") as rows of 16 floats (64 bytes);
 * - one whose M (or N) is contiguous as 16 rows of 128 floats, with the 16-byte chunks of row k
 *   permuted (chunk c at c ^ ((k >> 1) & 6)), so that the reads below fall in distinct banks.
 * Every fragment read is one 16-byte vector: the sum over k is the same in any order, so a
 * work-item whose fragment slot is t (of 0..3) takes the 4 consecutive k = 4t..4t+3 of one row
 * (K-major), or 4 consecutive rows or columns of one k row, assigned to 4 fragments (M- or
 * N-major; the results' rows or columns are permuted alike, and the epilogue writes them back
 * in place): slots 2t, 2t + 1, 2t + 8, 2t + 9 of the k step are k = 4t .. 4t + 3.
 *
 * The host launches it only where every operand row starts 16-byte aligned (offsets and leading
 * dimensions multiples of 4 floats), and element indices fit in 32 bits. Diagnostic builds
 * (tests/bench/kernel_probe.c; docs/performance.md gives their timings): -DTC_STAGES=2,
 * -DTC_WARPS_N=4 (256 work-items), -DTC_SYNC_COPY=1 (plain loads and stores), -DTC_NOROUND=1
 * (truncated inputs), and, with wrong results, -DTC_NOWAIT=1 and -DTC_NOLOAD=1. */

#define TC_BM 128
#define TC_BN 128
#define TC_BK 16
#ifndef TC_STAGES
#define TC_STAGES 3
#endif
#ifndef TC_WARPS_N
#define TC_WARPS_N 2
#endif
#define TC_ITEMS (64 * TC_WARPS_N)
#define TC_WN (TC_BN / TC_WARPS_N) /* a warp's columns: 64 or 32 */
#define TC_FJ (TC_WN / 8)          /* its B fragments */
#define TC_STAGE_FLOATS ((TC_BM + TC_BN) * TC_BK)
/* the chunk position of chunk c in row k of an M- or N-major tile */
#define TC_SWZ(c, k) ((c) ^ (((k) >> 1) & 6))

#if defined(NC_MMA_BF16) || defined(NC_MMA_TF32)

/* 16 bytes from src (bytes of them, 0..16, the rest zero) to dst, both 16-byte aligned. */
#if !defined(NC_MMA_EMULATE) && !defined(TC_SYNC_COPY)
inline void tc_copy16(__local float *dst, __global const float *src, const int bytes) {
  __asm__ volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"((uint)(ulong)dst), "l"((ulong)src),
                   "r"(bytes)
                   : "memory");
}
/* 4 bytes from src (bytes 4, or 0: a zero), dst and src 4-byte aligned: the convolutions'
 * gathers (kernels/conv_mma.cl) */
inline void tc_copy4(__local float *dst, __global const float *src, const int bytes) {
  __asm__ volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"((uint)(ulong)dst), "l"((ulong)src),
                   "r"(bytes)
                   : "memory");
}
#define TC_COMMIT() __asm__ volatile("cp.async.commit_group;" ::: "memory")
/* wait until at most TC_STAGES - 2 groups are in flight: the current tile has landed (three
 * stages fill the 48 KB a work-group gets; two is the diagnostic build) */
#if TC_STAGES == 2
#define TC_WAIT_ALL_BUT_ONE() __asm__ volatile("cp.async.wait_group 0;" ::: "memory")
#elif TC_STAGES == 3
#define TC_WAIT_ALL_BUT_ONE() __asm__ volatile("cp.async.wait_group 1;" ::: "memory")
#else
#error "gemm_mma.cl: TC_STAGES is 2 or 3"
#endif
/* until no copy is in flight */
#define TC_WAIT_ALL() __asm__ volatile("cp.async.wait_group 0;" ::: "memory")
#else
/* Plain copies: the emulation (PoCL in CI), and -DTC_SYNC_COPY=1 (a diagnostic build). */
inline void tc_copy16(__local float *dst, __global const float *src, const int bytes) {
  float4 v = (float4)0;
  if (bytes >= 16) v = vload4(0, src);
  else {
    if (bytes >= 4) v.x = src[0];
    if (bytes >= 8) v.y = src[1];
    if (bytes >= 12) v.z = src[2];
  }
  vstore4(v, 0, dst);
}
inline void tc_copy4(__local float *dst, __global const float *src, const int bytes) { *dst = bytes ? *src : 0.0f; }
#define TC_COMMIT()
#define TC_WAIT_ALL_BUT_ONE()
#define TC_WAIT_ALL()
#endif
#ifdef NC_MMA_BF16
#ifndef NC_MMA_EMULATE
/* lo and hi rounded to bfloat16 (to nearest, ties to even) as one register: lo in bits 0-15 */
inline uint tc_pack_(const float lo, const float hi) {
  uint r;
  __asm__("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
#define tc_pack(lo, hi) tc_pack_(lo, hi)
#else
/* The emulation: the rounding of kernels/mma.cl. */
#define tc_pack(lo, hi) MMA_PK(as_uint(mma_bf16(lo)), as_uint(mma_bf16(hi)))
#endif
#else
#ifndef NC_MMA_EMULATE
/* x rounded to tf32 (cvt.rna: to nearest, ties away from zero), as gemm_tf32.cl */
inline uint tc_tf32_(const float x) {
  uint r;
  __asm__("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
#define tc_tf32(x) tc_tf32_(x)
#else
#define tc_tf32(x) as_uint(mma_tf32(x))
#endif
#endif

/* Copies K tile kt (k0 = kt * 16) of both operands into stage st. Ab is A at row m0 (K-major)
 * or column m0 (M-major), Bb is B at column n0 (N-major) or row n0 (K-major). */
#ifdef TC_NOLOAD /* diagnostic builds that leave one stage out (wrong results, for timing) */
#define TC_LOAD(st, kt, A_K, B_K)
#else
#define TC_LOAD(st, kt, A_K, B_K)                                                                  \
  {                                                                                              \
    const int k0_ = (kt) * TC_BK;                                                                 \
    __local float *sa_ = smem + (st) * TC_STAGE_FLOATS, *sb_ = sa_ + TC_BM * TC_BK;              \
    _Pragma("unroll") for (int i_ = 0; i_ < 512 / TC_ITEMS; i_++) {                               \
      const int c_ = lid + i_ * TC_ITEMS;                                                        \
      TC_COPY(A_K, sa_, Ab, lda, M - m0, TC_BM)                                                  \
      TC_COPY(B_K, sb_, Bb, ldb, N - n0, TC_BN)                                                  \
    }                                                                                            \
  }
/* Chunk c_ (of 512) of one operand's K tile at k0_ into s_: a K-major operand (row r of 4
 * chunks, base at the tile's first row) or an M- or N-major one (16 rows of W / 4 chunks,
 * permuted, base at the tile's first column); left: the rows or columns left from the tile's
 * first one, ld the operand's leading dimension. */
#define TC_COPY(KMAJ, s_, base, ld, left, W)                                                       \
  {                                                                                              \
    const int r_ = (KMAJ) ? c_ >> 2 : c_ / ((W) / 4), q_ = (KMAJ) ? c_ & 3 : c_ % ((W) / 4);      \
    const int k_ = k0_ + ((KMAJ) ? q_ * 4 : r_);                                                 \
    const int by_ = (KMAJ) ? (r_ < (left) ? clamp((K - k_) * 4, 0, 16) : 0)                      \
                           : (k_ < K ? clamp(((left) - q_ * 4) * 4, 0, 16) : 0);                 \
    __global const float *src_ = (KMAJ) ? (base) + r_ * (ld) + k_ : (base) + k_ * (ld) + q_ * 4;  \
    tc_copy16((KMAJ) ? s_ + c_ * 4 : s_ + r_ * (W) + TC_SWZ(q_, r_) * 4, by_ ? src_ : (base), by_); \
  }
#endif
#ifdef TC_NOWAIT
#undef TC_WAIT_ALL_BUT_ONE
#define TC_WAIT_ALL_BUT_ONE()
#endif
#ifdef TC_NOROUND
#undef tc_pack
#define tc_pack(lo, hi) MMA_PK(as_uint(lo), as_uint(hi))
#undef tc_tf32
#define tc_tf32(x) as_uint(x)
#endif

/* The work-item's values of stage st: fa[8] for A, fb[2 * TC_FJ / 2] for B, then
 * TC_A(i, h, kk): A at fragment i (of 4), row half h (rows g, g + 8), k slot kk (k = 4t + kk);
 * TC_B(j, kk): B at fragment j (of TC_FJ), column g, k slot kk. */
#define TC_READ(st, A_K, B_K) TC_READ_AT(smem + (st) * TC_STAGE_FLOATS, smem + (st) * TC_STAGE_FLOATS + TC_BM * TC_BK, A_K, B_K)
/* The same from the A tile at sa and the B tile at sb (an M-major A tile TC_BM wide, an N-major B
 * tile TC_BN wide). */
#define TC_READ_AT(sa, sb, A_K, B_K)                                                               \
  {                                                                                              \
    __local const float *sa_ = (sa), *sb_ = (sb);                                                \
    _Pragma("unroll") for (int u_ = 0; u_ < 8; u_++) {                                           \
      if (A_K) /* u_ = 2i + h: row wm*64 + 16i + 8h + g, chunk t */                              \
        fa[u_] = *(__local const float4 *)(sa_ + (wm * 64 + (u_ >> 1) * 16 + (u_ & 1) * 8 + g) * 16 + t * 4); \
      else { /* u_ = 2kk + h: row 4t + kk, chunk wm*16 + 8h + g */                               \
        const int r_ = t * 4 + (u_ >> 1);                                                        \
        fa[u_] = *(__local const float4 *)(sa_ + r_ * TC_BM + TC_SWZ(wm * 16 + (u_ & 1) * 8 + g, r_) * 4); \
      }                                                                                          \
    }                                                                                            \
    _Pragma("unroll") for (int u_ = 0; u_ < TC_FJ; u_++) {                                       \
      if (B_K) /* u_ = j: row wn*WN + 8j + g, chunk t */                                          \
        fb[u_] = *(__local const float4 *)(sb_ + (wn * TC_WN + u_ * 8 + g) * 16 + t * 4);          \
      else { /* u_ = kk * (FJ/4) + hh: row 4t + kk, chunk wn*WN/4 + 8hh + g */                   \
        const int r_ = t * 4 + u_ / (TC_FJ / 4);                                                 \
        fb[u_] = *(__local const float4 *)(sb_ + r_ * TC_BN + TC_SWZ(wn * (TC_WN / 4) + (u_ % (TC_FJ / 4)) * 8 + g, r_) * 4); \
      }                                                                                          \
    }                                                                                            \
  }
#define TC_A(A_K, i, h, kk) ((A_K) ? NC_V4(fa[2 * (i) + (h)], kk) : NC_V4(fa[2 * (kk) + (h)], i))
#define TC_B(B_K, j, kk) ((B_K) ? NC_V4(fb[j], kk) : NC_V4(fb[(kk) * (TC_FJ / 4) + (j) / 4], (j) % 4))

/* The products of one stage's values. Unrolled (the accumulators and fragments stay in
 * registers), except under the emulation, whose barriers in each product make an unrolled
 * kernel take PoCL many minutes to compile. bfloat16 (m16n8k16): one k step, whose slots 2t,
 * 2t + 1, 2t + 8, 2t + 9 are k = 4t .. 4t + 3; tf32 (m16n8k8, the convolutions of "high",
 * conv_mma.cl): two k steps s, whose slots t and t + 4 are k = 4t + 2s and 4t + 2s + 1. */
#define TC_UNROLL MMA_UNROLL
#ifdef NC_MMA_TF32
#define TC_PRODUCTS(A_K, B_K)                                                                      \
  TC_UNROLL for (int s = 0; s < 2; s++) {                                                        \
    uint b_[TC_FJ][2];                                                                           \
    _Pragma("unroll") for (int j = 0; j < TC_FJ; j++) {                                          \
      b_[j][0] = tc_tf32(TC_B(B_K, j, 2 * s));                                                   \
      b_[j][1] = tc_tf32(TC_B(B_K, j, 2 * s + 1));                                               \
    }                                                                                            \
    TC_UNROLL for (int i = 0; i < 4; i++) {                                                      \
      const uint a_[4] = {tc_tf32(TC_A(A_K, i, 0, 2 * s)), tc_tf32(TC_A(A_K, i, 1, 2 * s)),        \
                          tc_tf32(TC_A(A_K, i, 0, 2 * s + 1)), tc_tf32(TC_A(A_K, i, 1, 2 * s + 1))}; \
      TC_UNROLL for (int j = 0; j < TC_FJ; j++) MMA_SYNC(acc[i][j], a_, b_[j]);                  \
    }                                                                                            \
  }
#else
#define TC_PRODUCTS(A_K, B_K)                                                                      \
  TC_UNROLL for (int i = 0; i < 4; i++) {                                                \
    const uint a_[4] = {tc_pack(TC_A(A_K, i, 0, 0), TC_A(A_K, i, 0, 1)), tc_pack(TC_A(A_K, i, 1, 0), TC_A(A_K, i, 1, 1)), \
                        tc_pack(TC_A(A_K, i, 0, 2), TC_A(A_K, i, 0, 3)), tc_pack(TC_A(A_K, i, 1, 2), TC_A(A_K, i, 1, 3))}; \
    TC_UNROLL for (int j = 0; j < TC_FJ; j++) {                                          \
      const uint b_[2] = {tc_pack(TC_B(B_K, j, 0), TC_B(B_K, j, 1)), tc_pack(TC_B(B_K, j, 2), TC_B(B_K, j, 3))}; \
      MMA_SYNC(acc[i][j], a_, b_);                                                               \
    }                                                                                            \
  }
#endif

/* where the results lie in the tile (mma.cl) */
#define TC_ROW(A_K, i, h) MMA_ROW16(A_K, i, h)
#define TC_COL(B_K, j, e) MMA_COL16(B_K, j, e, TC_WN)

/* A work-item's accumulators (zeroed) and fragment registers. */
#define TC_REGS                                                                                    \
  float acc[4][TC_FJ][4];                                                                        \
  _Pragma("unroll") for (int i = 0; i < 4; i++)                                                  \
    _Pragma("unroll") for (int j = 0; j < TC_FJ; j++)                                            \
      _Pragma("unroll") for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;                         \
  float4 fa[8], fb[TC_FJ];

/* The pipeline over K tiles 0 .. ntiles - 1 (conv_mma.cl runs it too): LOAD(st, kt, A_K, B_K)
 * copies K tile kt into stage st, READ(st, A_K, B_K) reads a stage's fragments, which
 * TC_PRODUCTS multiplies. */
#define TC_PIPELINE(LOAD, READ, A_K, B_K)                                                          \
  _Pragma("unroll") for (int s = 0; s < TC_STAGES - 1; s++) {                                    \
    if (s < ntiles) LOAD(s, s, A_K, B_K)                                                         \
    TC_COMMIT();                                                                                 \
  }                                                                                              \
  int st = 0;                                                                                    \
  for (int kt = 0; kt < ntiles; kt++) {                                                          \
    TC_WAIT_ALL_BUT_ONE();                                                                       \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                \
    /* the stage read at kt - 1 is free: every work-item passed the barrier after reading it */  \
    if (kt + TC_STAGES - 1 < ntiles) {                                                           \
      const int ls_ = st == 0 ? TC_STAGES - 1 : st - 1;                                          \
      LOAD(ls_, kt + TC_STAGES - 1, A_K, B_K)                                                    \
    }                                                                                            \
    TC_COMMIT();                                                                                 \
    READ(st, A_K, B_K)                                                                           \
    TC_PRODUCTS(A_K, B_K)                                                                        \
    st = st == TC_STAGES - 1 ? 0 : st + 1;                                                       \
  }

#define TC_BODY(A_K, B_K)                                                                          \
  MMA_TILE_START(float, TC_BM, TC_BN, TC_WARPS_N, A_K, B_K)                                      \
  __local float4 smem4_[TC_STAGES * TC_STAGE_FLOATS / 4];                                        \
  __local float *smem = (__local float *)smem4_;                                                 \
  MMA_SCRATCH(TC_ITEMS)                                                                          \
  TC_REGS                                                                                        \
  const int ntiles = (K + TC_BK - 1) / TC_BK;                                                    \
  TC_PIPELINE(TC_LOAD, TC_READ, A_K, B_K)                                                        \
  MMA_EPILOGUE(float, TC_FJ, TC_ROW, A_K, TC_COL, B_K, MMA_ID, MMA_ID)

/* Grid: (ceil(N/128) * TC_ITEMS, ceil(M/128), batch); local (TC_ITEMS, 1, 1). gemm_mma_<a><b>: a
 * is r when A's rows are contiguous (a_sk == 1), else c; b is r when B's rows are (b_sn == 1). */
#if defined(NC_MMA_BF16) && !defined(TC_CONV) /* the convolutions' programs (conv_mma.cl) build none */
#define TC_ATTR __kernel __attribute__((reqd_work_group_size(TC_ITEMS, 1, 1))) void
TC_ATTR gemm_mma_rr(GEMM_ARGS) { TC_BODY(1, 0) }
TC_ATTR gemm_mma_rc(GEMM_ARGS) { TC_BODY(1, 1) }
TC_ATTR gemm_mma_cr(GEMM_ARGS) { TC_BODY(0, 0) }
TC_ATTR gemm_mma_cc(GEMM_ARGS) { TC_BODY(0, 1) }
#endif

#endif

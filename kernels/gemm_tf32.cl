/* The tensor-core GEMM of matmul precision "high": C = alpha A B + beta C (+ bias), float32
 * operands and results, the operands rounded to tf32 (cvt.rna: to nearest, ties away from zero)
 * and multiplied on tf32 mma.sync (m16n8k8, kernels/mma.cl) with float32 sums. For NVIDIA devices
 * of compute capability 8.0 or later (runtime/backend/opencl/cl_gemm.c picks it for float32
 * products whose operand rows start 16-byte aligned).
 *
 * A work-group of four warps computes a 128 x 128 tile of C, each warp a 64 x 64 block. K
 * advances 16 at a time through three local buffers (16 KB each), filled by cp.async (16 bytes,
 * four floats, a work-item, zero fill past the edges) two K tiles ahead. Each K tile is two k
 * steps of 8 (k = 8s .. 8s + 7), and the loop reads the fragments of each k step one step ahead
 * of their products, across K tiles too (TF_MAIN), so the tensor cores have work queued while a
 * warp waits at the barrier of a K tile. Local memory keeps each operand as it lies in global
 * memory, in 16-byte chunks:
 * - an operand whose K is contiguous ("K-major") as 128 rows of 16 floats (4 chunks), chunk c of
 *   row r at c ^ ((r >> 1) & 3); its fragments come from ldmatrix.x4 (a 32-bit value is two
 *   16-bit halves that ldmatrix moves together: lane 4g + t gets word t of row g of each 8 x 4
 *   matrix, which is the tf32 fragment layout), the eight rows of each of its phases in
 *   distinct banks;
 * - one whose M (or N) is contiguous as 16 rows (k) of 128 floats (32 chunks), chunk c of row k
 *   at c ^ 2 (k & 3); a work-item reads 16 bytes of row 8s + t (and 8s + 4 + t): 4 neighbouring
 *   rows (columns) that go to 4 fragments, whose results' rows (columns) are permuted alike and
 *   written back in place by the epilogue; a quarter warp's eight reads fall in distinct banks.
 *
 * The host launches it only where every operand row starts 16-byte aligned (offsets, leading
 * dimensions and batch strides multiples of 4 floats), and element indices fit in 32 bits. Under
 * the test hook NETCL_MMA_EMULATE=1 (PoCL in CI) the copies are plain, each lane reads what
 * ldmatrix would give it (the same address arithmetic), and mma.sync goes through local memory
 * (kernels/mma.cl).
 *
 * Tiles inside both operands copy from addresses computed once per work-item (TF_FAST), with no
 * edge checks.
 *
 * Diagnostic builds (tests/bench/kernel_probe.c): -DTF_WARPS_N=4 (eight warps of 64 x 32, for a
 * .maxnreg 128 cap), -DTF_STAGES=2..5 and -DTF_BK=32 (past 48 KB of static local memory, which
 * NVIDIA's driver builds and runs), -DTF_FAST=0, -DTF_NOLOAD=1 (no copies: wrong results). */

#define TF_BM 128
#define TF_BN 128
#ifndef TF_BK
#define TF_BK 16 /* 16 or 32 */
#endif
#ifndef TF_FAST
#define TF_FAST 1 /* full tiles' copies from precomputed addresses (TF_LOAD) */
#endif
#ifndef TF_STAGES
#define TF_STAGES 3
#endif
#ifndef TF_WARPS_N
#define TF_WARPS_N 2 /* warps along N (two along M): 2, each 64 wide, or 4, each 32 wide */
#endif
#define TF_ITEMS (64 * TF_WARPS_N)
#define TF_WN (TF_BN / TF_WARPS_N) /* a warp's columns */
#define TF_FJ (TF_WN / 8)          /* its column blocks of 8 */
#define TF_HH (TF_WN / 32)         /* 16-byte reads per k row of an N-major B, per work-item */
#define TF_STAGE ((TF_BM + TF_BN) * TF_BK)   /* floats per stage */

#ifdef NC_MMA_TF32

#ifndef NC_MMA_EMULATE
/* 16 bytes from src (bytes of them, the rest zero) to dst, both 16-byte aligned */
inline void tf_copy16(__local float *dst, __global const float *src, const int bytes) {
  __asm__ volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"((uint)(ulong)dst), "l"((ulong)src),
                   "r"(bytes)
                   : "memory");
}
/* 16 bytes from src to dst, both 16-byte aligned and all of them inside the operand */
inline void tf_copy16_full(__local float *dst, __global const float *src) {
  __asm__ volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((uint)(ulong)dst), "l"((ulong)src) : "memory");
}
#define TF_COMMIT() __asm__ volatile("cp.async.commit_group;" ::: "memory")
/* until at most TF_STAGES - 2 groups are in flight: the next tile has landed */
#define TF_WAIT_(n) __asm__ volatile("cp.async.wait_group " #n ";" ::: "memory")
#define TF_WAITN(n) TF_WAIT_(n)
#define TF_WAIT() TF_WAITN(TF_INFLIGHT)
#if TF_STAGES == 2
#define TF_INFLIGHT 0
#elif TF_STAGES == 3
#define TF_INFLIGHT 1
#elif TF_STAGES == 4
#define TF_INFLIGHT 2
#elif TF_STAGES == 5
#define TF_INFLIGHT 3
#else
#error "gemm_tf32.cl: TF_STAGES is 2 to 5"
#endif
/* ldmatrix.x4 into r[0..3]: lane L names the row at smem + OFF(L) of matrix L / 8 */
#define TF_LDM(r, OFF)                                                                             \
  __asm__ volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"               \
                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])                              \
                   : "r"((uint)(ulong)(smem + OFF(lane))));
inline uint tf_round(const uint x) {
  uint r;
  __asm__("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(as_float(x)));
  return r;
}
#else
inline void tf_copy16(__local float *dst, __global const float *src, const int bytes) {
  for (int h = 0; h < 4; h++) dst[h] = 4 * h < bytes ? src[h] : 0.0f;
}
inline void tf_copy16_full(__local float *dst, __global const float *src) {
  for (int h = 0; h < 4; h++) dst[h] = src[h];
}
#define TF_COMMIT()
#define TF_WAIT()
/* what ldmatrix.x4 gives lane 4g + t: word t of row g of each matrix, the row where the lane
 * naming it (8 m + g) puts it */
#define TF_LDM(r, OFF)                                                                             \
  _Pragma("unroll 1") for (int m_ = 0; m_ < 4; m_++) r[m_] = as_uint(smem[OFF(m_ * 8 + g) + t]);
#define tf_round(x) as_uint(mma_tf32(as_float(x)))
#endif

/* chunk positions (in floats): a K-major operand's row r, chunk c (of TF_BK / 4); an M- or
 * N-major one's row k, chunk c (of W / 4) */
#if TF_BK == 32
#define TF_KSWZ(r) ((r) & 7)
#define TF_KSH 3 /* log2 of a K-major row's chunks */
#elif TF_BK == 16
#define TF_KSWZ(r) (((r) >> 1) & 3)
#define TF_KSH 2
#else
#error "gemm_tf32.cl: TF_BK is 16 or 32"
#endif
#define TF_KPOS(r, c) ((r) * TF_BK + (((c) ^ TF_KSWZ(r)) << 2))
#define TF_NPOS(k, c, W) ((k) * (W) + (((c) ^ (((k) & 3) << 1)) << 2))

/* Copies K tile kt (k0 = kt * TF_BK) of both operands into stage st: 512 chunks of each (K tiles
 * of 16), four per work-item. Ab is A at row m0 (K-major) or column m0 (M-major), Bb likewise for
 * B at n0. A tile inside both operands (tf_full_: the work-group's rows and columns all inside
 * C, and a K tile below K / TF_BK) copies from the addresses that TF_FAST_SETUP computed once
 * (TF_FCOPY); others check every chunk (TF_COPY). */
#ifdef TF_NOLOAD /* a diagnostic build with no copies (wrong results, for timing) */
#define TF_LOAD(st, kt, A_K, B_K)
#else
#define TF_LOAD(st, kt, A_K, B_K)                                                                  \
  {                                                                                              \
    const int k0_ = (kt) * TF_BK;                                                                 \
    __local float *sa_ = smem + (st) * TF_STAGE, *sb_ = sa_ + TF_BM * TF_BK;                      \
    if (TF_FAST && tf_full_ && (kt) < tf_kfull_) {                                               \
      TF_FCOPY(A_K, sa_, Ab, lda, ta_, TF_BM)                                                    \
      TF_FCOPY(B_K, sb_, Bb, ldb, tb_, TF_BN)                                                    \
    } else {                                                                                     \
      _Pragma("unroll") for (int i_ = 0; i_ < TF_BM * TF_BK / 4 / TF_ITEMS; i_++) {               \
        const int c_ = lid + i_ * TF_ITEMS;                                                      \
        TF_COPY(A_K, sa_, Ab, lda, M - m0, TF_BM)                                                \
        TF_COPY(B_K, sb_, Bb, ldb, N - n0, TF_BN)                                                \
      }                                                                                          \
    }                                                                                            \
  }
#endif
/* Chunk c_ of one operand's K tile at k0_: K-major (row r_ of TF_BK / 4 chunks) or M/N-major (row
 * r_ = k of W / 4 chunks, W the tile's width); left: the rows or columns left from the tile's
 * first */
#define TF_COPY(KMAJ, s_, base, ld, left, W)                                                       \
  {                                                                                              \
    const int r_ = (KMAJ) ? c_ >> TF_KSH : c_ / ((W) / 4);                                       \
    const int q_ = (KMAJ) ? c_ & (TF_BK / 4 - 1) : c_ % ((W) / 4);                               \
    const int k_ = k0_ + ((KMAJ) ? q_ * 4 : r_);                                                 \
    const int by_ = (KMAJ) ? (r_ < (left) ? clamp((K - k_) * 4, 0, 16) : 0)                      \
                           : (k_ < K ? clamp(((left) - q_ * 4) * 4, 0, 16) : 0);                 \
    __global const float *src_ = (KMAJ) ? (base) + r_ * (ld) + k_ : (base) + k_ * (ld) + q_ * 4;  \
    tf_copy16(s_ + ((KMAJ) ? TF_KPOS(r_, q_) : TF_NPOS(r_, q_, W)), by_ ? src_ : (base), by_);     \
  }
/* The work-item's chunks of one operand (prefix p: ta_ for A, tb_ for B) in a full tile: chunk
 * lid + i TF_ITEMS lies TF_FROWS(KMAJ, W) i rows (K-major: of M or N; else of k) past chunk
 * lid's, in global memory and in local memory alike, since the chunk swizzles depend on a row's
 * index modulo 8 (K-major) or 4 only. p##src: chunk lid's offset from Ab or Bb at k 0; p##dst:
 * its place in a stage; p##step: the rows' offset in global memory. */
#define TF_FROWS(KMAJ, W) ((KMAJ) ? TF_ITEMS >> TF_KSH : TF_ITEMS / ((W) / 4))
#define TF_FAST_SETUP1(KMAJ, p, ld, W)                                                             \
  const int p##r_ = (KMAJ) ? lid >> TF_KSH : lid / ((W) / 4);                                    \
  const int p##q_ = (KMAJ) ? lid & (TF_BK / 4 - 1) : lid % ((W) / 4);                            \
  const int p##src = p##r_ * (ld) + p##q_ * 4, p##step = TF_FROWS(KMAJ, W) * (ld);                 \
  const int p##dst = (KMAJ) ? TF_KPOS(p##r_, p##q_) : TF_NPOS(p##r_, p##q_, W);
#define TF_FAST_SETUP(A_K, B_K)                                                                    \
  const int tf_full_ = m0 + TF_BM <= M && n0 + TF_BN <= N, tf_kfull_ = K / TF_BK;                \
  TF_FAST_SETUP1(A_K, ta_, lda, TF_BM)                                                           \
  TF_FAST_SETUP1(B_K, tb_, ldb, TF_BN)
#define TF_FCOPY(KMAJ, s_, base, ld, p, W)                                                         \
  {                                                                                              \
    __global const float *src_ = (base) + (p##src + ((KMAJ) ? k0_ : k0_ * (ld)));                \
    _Pragma("unroll") for (int i_ = 0; i_ < (W) * TF_BK / 4 / TF_ITEMS; i_++)                    \
      tf_copy16_full(s_ + p##dst + i_ * TF_FROWS(KMAJ, W) * ((KMAJ) ? TF_BK : (W)), src_ + i_ * p##step); \
  }
#if (TF_ITEMS >> TF_KSH) % 8 || (TF_ITEMS / (TF_BM / 4)) % 4 || (TF_ITEMS / (TF_BN / 4)) % 4
#error "gemm_tf32.cl: the full tiles' copies need each work-item's chunks 8 (K-major) or 4 rows apart"
#endif

/* The fragments of k step s of stage st, raw (TF_MMA rounds them): fa[i] (a0..a3 of rows
 * wm*64 + 16i ..), fb[jj] (b0, b1 of column block 2jj, then of 2jj + 1). K-major: ldmatrix, lane L
 * naming row L % 8 of matrix L / 8, A's matrices (rows 0-7, k 0-3), (8-15, 0-3), (0-7, 4-7),
 * (8-15, 4-7) of the step, B's (columns 0-7, k 0-3), (0-7, 4-7), (8-15, 0-3), (8-15, 4-7). M- or
 * N-major: 16 bytes of row 8s + 4kk + t (kk = 0, 1: slots t and t + 4) at chunk 8h + g of the
 * warp's 16, values e = 0..3 to fragment i = e (A, rows 32h + 4g + e) or j = 4h + e (B). */
#define TF_A_KMAJ(L) (so_ + TF_KPOS(wm * 64 + i_ * 16 + ((L) & 7) + (((L) >> 3) & 1) * 8, s_ * 2 + ((L) >> 4)))
#define TF_B_KMAJ(L) (so_ + TF_BM * TF_BK + TF_KPOS(wn * TF_WN + j_ * 16 + ((L) >> 4) * 8 + ((L) & 7), s_ * 2 + (((L) >> 3) & 1)))
#define TF_FRAGS(st, s, A_K, B_K, fa, fb)                                                          \
  {                                                                                              \
    const int so_ = (st) * TF_STAGE, s_ = (s);                                                   \
    if (A_K) {                                                                                   \
      _Pragma("unroll") for (int i_ = 0; i_ < 4; i_++) { TF_LDM(fa[i_], TF_A_KMAJ) }              \
    } else {                                                                                     \
      _Pragma("unroll") for (int u_ = 0; u_ < 4; u_++) { /* u_ = 2kk + h */                       \
        const float4 v_ = *(__local const float4 *)(smem + so_ +                                 \
                              TF_NPOS(s_ * 8 + (u_ >> 1) * 4 + t, wm * 16 + (u_ & 1) * 8 + g, TF_BM)); \
        fa[0][u_] = as_uint(v_.x), fa[1][u_] = as_uint(v_.y), fa[2][u_] = as_uint(v_.z), fa[3][u_] = as_uint(v_.w); \
      }                                                                                          \
    }                                                                                            \
    if (B_K) {                                                                                   \
      _Pragma("unroll") for (int j_ = 0; j_ < TF_FJ / 2; j_++) { TF_LDM(fb[j_], TF_B_KMAJ) }      \
    } else {                                                                                     \
      _Pragma("unroll") for (int u_ = 0; u_ < 2 * TF_HH; u_++) { /* u_ = kk * TF_HH + h */      \
        const int kk_ = u_ / TF_HH, j0_ = (u_ % TF_HH) * 4; /* fragments j0_ .. j0_ + 3 */       \
        const float4 v_ = *(__local const float4 *)(smem + so_ + TF_BM * TF_BK +                 \
                              TF_NPOS(s_ * 8 + kk_ * 4 + t, wn * (TF_WN / 4) + (u_ % TF_HH) * 8 + g, TF_BN)); \
        fb[(j0_ + 0) >> 1][((j0_ + 0) & 1) * 2 + kk_] = as_uint(v_.x);                           \
        fb[(j0_ + 1) >> 1][((j0_ + 1) & 1) * 2 + kk_] = as_uint(v_.y);                           \
        fb[(j0_ + 2) >> 1][((j0_ + 2) & 1) * 2 + kk_] = as_uint(v_.z);                           \
        fb[(j0_ + 3) >> 1][((j0_ + 3) & 1) * 2 + kk_] = as_uint(v_.w);                           \
      }                                                                                          \
    }                                                                                            \
  }

/* The products of one k step: its fragments rounded to tf32, then 4 x TF_FJ mma.sync (rolled
 * under the emulation, whose barriers in each product take PoCL minutes to build unrolled). */
#define TF_MMA(fa, fb)                                                                             \
  _Pragma("unroll") for (int i = 0; i < 4; i++)                                                  \
    _Pragma("unroll") for (int e = 0; e < 4; e++) fa[i][e] = tf_round(fa[i][e]);                   \
  _Pragma("unroll") for (int j = 0; j < TF_FJ / 2; j++)                                          \
    _Pragma("unroll") for (int e = 0; e < 4; e++) fb[j][e] = tf_round(fb[j][e]);                   \
  MMA_UNROLL for (int i = 0; i < 4; i++)                                                          \
    MMA_UNROLL for (int j = 0; j < TF_FJ; j++) {                                                  \
      const uint b_[2] = {fb[j >> 1][(j & 1) * 2], fb[j >> 1][(j & 1) * 2 + 1]};                  \
      MMA_SYNC(acc[i][j], fa[i], b_);                                                            \
    }

#define TF_PREV(st) ((st) == 0 ? TF_STAGES - 1 : (st) - 1)
#define TF_NEXT(st) ((st) == TF_STAGES - 1 ? 0 : (st) + 1)
/* Per K tile: the second k step's fragments, the first step's products, the copies of the tile
 * TF_STAGES - 1 ahead into the stage read in the previous K tile (every work-item read it before
 * that tile's barrier), then the wait and barrier for the next tile, its first fragments, and
 * the second step's products, which need nothing the barrier waited for. */
#if TF_BK == 32 /* k steps 1 and 2 of 0..3 between the copies and the barrier */
#define TF_MIDDLE(st, A_K, B_K)                                                                    \
  TF_FRAGS(st, 2, A_K, B_K, fa0, fb0)                                                            \
  TF_MMA(fa1, fb1)                                                                               \
  TF_FRAGS(st, 3, A_K, B_K, fa1, fb1)                                                            \
  TF_MMA(fa0, fb0)
#else
#define TF_MIDDLE(st, A_K, B_K)
#endif
#ifndef NC_MMA_EMULATE
#define TF_MAIN(A_K, B_K)                                                                          \
  TF_WAIT();                                                                                     \
  barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
  if (ntiles > 0) TF_FRAGS(0, 0, A_K, B_K, fa0, fb0)                                             \
  int st = 0;                                                                                    \
  for (int kt = 0; kt < ntiles; kt++) {                                                          \
    TF_FRAGS(st, 1, A_K, B_K, fa1, fb1)                                                          \
    TF_MMA(fa0, fb0)                                                                             \
    if (kt + TF_STAGES - 1 < ntiles) TF_LOAD(TF_PREV(st), kt + TF_STAGES - 1, A_K, B_K)          \
    TF_COMMIT();                                                                                 \
    TF_MIDDLE(st, A_K, B_K)                                                                      \
    TF_WAIT();                                                                                   \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                \
    const int nx = TF_NEXT(st);                                                                  \
    if (kt + 1 < ntiles) TF_FRAGS(nx, 0, A_K, B_K, fa0, fb0)                                     \
    TF_MMA(fa1, fb1)                                                                             \
    st = nx;                                                                                     \
  }
#else
/* The emulation's loop: the same copies, fragments and products, each k step's fragments read
 * just before its products (one site each: PoCL takes minutes over each inlined copy of the
 * emulated mma.sync and its barriers). The GPU's order is tested on GPUs only. */
#define TF_MAIN(A_K, B_K)                                                                          \
  int st = 0;                                                                                    \
  for (int kt = 0; kt < ntiles; kt++) {                                                          \
    TF_WAIT();                                                                                   \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                \
    if (kt + TF_STAGES - 1 < ntiles) TF_LOAD(TF_PREV(st), kt + TF_STAGES - 1, A_K, B_K)          \
    TF_COMMIT();                                                                                 \
    _Pragma("unroll 1") for (int s = 0; s < TF_BK / 8; s++) {                                    \
      TF_FRAGS(st, s, A_K, B_K, fa0, fb0)                                                        \
      TF_MMA(fa0, fb0)                                                                           \
    }                                                                                            \
    st = TF_NEXT(st);                                                                            \
  }
#endif

/* where the results lie in the tile (mma.cl) */
#define TF_ROW(A_K, i, h) MMA_ROW16(A_K, i, h)
#define TF_COL(B_K, j, e) MMA_COL16(B_K, j, e, TF_WN)

#define TF_BODY(A_K, B_K)                                                                          \
  MMA_TILE_START(float, TF_BM, TF_BN, TF_WARPS_N, A_K, B_K)                                      \
  __local float4 smem4_[TF_STAGES * TF_STAGE / 4];                                               \
  __local float *smem = (__local float *)smem4_;                                                 \
  MMA_SCRATCH(TF_ITEMS)                                                                          \
  float acc[4][TF_FJ][4];                                                                        \
  _Pragma("unroll") for (int i = 0; i < 4; i++)                                                  \
    _Pragma("unroll") for (int j = 0; j < TF_FJ; j++)                                            \
      _Pragma("unroll") for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;                         \
  uint fa0[4][4], fb0[TF_FJ / 2][4], fa1[4][4], fb1[TF_FJ / 2][4];                               \
  const int ntiles = (K + TF_BK - 1) / TF_BK;                                                    \
  TF_FAST_SETUP(A_K, B_K)                                                                        \
  _Pragma("unroll") for (int s = 0; s < TF_STAGES - 1; s++) {                                    \
    if (s < ntiles) TF_LOAD(s, s, A_K, B_K)                                                      \
    TF_COMMIT();                                                                                 \
  }                                                                                              \
  TF_MAIN(A_K, B_K)                                                                              \
  MMA_EPILOGUE(float, TF_FJ, TF_ROW, A_K, TF_COL, B_K, MMA_ID, MMA_ID)

/* Grid: (ceil(N/128) * TF_ITEMS, ceil(M/128), batch); local (TF_ITEMS, 1, 1). gemm_tf32_<a><b>: a is r
 * when A's rows are contiguous (a_sk == 1), else c; b is r when B's rows are (b_sn == 1). */
#define TF_ATTR __kernel __attribute__((reqd_work_group_size(TF_ITEMS, 1, 1))) void
TF_ATTR gemm_tf32_rr(GEMM_ARGS) { TF_BODY(1, 0) }
TF_ATTR gemm_tf32_rc(GEMM_ARGS) { TF_BODY(1, 1) }
TF_ATTR gemm_tf32_cr(GEMM_ARGS) { TF_BODY(0, 0) }
TF_ATTR gemm_tf32_cc(GEMM_ARGS) { TF_BODY(0, 1) }

#endif

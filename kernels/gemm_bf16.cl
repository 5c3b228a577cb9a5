/* The tensor-core GEMM on bfloat16 tensors: C = alpha A B + beta C (+ bias), A, B, C and bias
 * bfloat16 in memory (16-bit patterns), products on bf16 mma.sync (m16n8k16, kernels/mma.cl) with
 * float32 sums, the result rounded once to bfloat16 (to nearest, ties to even). For NVIDIA
 * devices of compute capability 8.0 or later (runtime/backend/opencl/cl_gemm.c picks it for
 * bfloat16 products whose rows are 16-byte aligned; other bfloat16 products go through float32,
 * cl_gemm_lowp.c).
 *
 * A work-group of eight warps (two along M, four along N) computes a 128 x 128 tile of C, each
 * warp a 64 x 32 block; the host caps its registers at 128 a work-item (.maxnreg, cl_ptx.c), so
 * that two work-groups share a multiprocessor. K advances 32 at a time through three local
 * buffers (16 KB each): the tile two steps ahead is copied from global to local memory by
 * cp.async (16 bytes, eight values, a work-item, zero fill past the edges) while the work-group
 * multiplies the current one; one barrier per K tile, and the fragments of each 16-deep k step
 * are read one step ahead of their products, across K tiles too (HB_MAIN). Tiles inside both
 * operands copy from addresses computed once per work-item (HB_FAST), with no edge checks. The
 * host's wide build (-DHB_BN=256 -DHB_WARPS_N=4 -DHB_STAGES=4: a 128 x 256 tile, eight warps of
 * 64 x 64, four 24 KB buffers, one work-group a multiprocessor, no register cap) copies a
 * quarter fewer bytes per product and takes products whose grid fills the device twice. Local
 * memory keeps each operand as it lies in global memory, in 16-byte chunks:
 * - an operand whose K is contiguous ("K-major") as 128 rows of 32 values (4 chunks), chunk c of
 *   row r at c ^ ((r >> 1) & 3);
 * - one whose M (or N) is contiguous as 32 rows (k) of 128 values (16 chunks), chunk c of row k
 *   at c ^ (k & 7),
 * so that the eight 16-byte rows that each ldmatrix phase reads fall in distinct banks.
 * Fragments come from ldmatrix.x4: plain for K-major operands, .trans for the others (which
 * moves the pairs of consecutive k that a bf16 register holds together).
 *
 * The host launches it only where every operand row starts 16-byte aligned (offsets, leading
 * dimensions and batch strides multiples of 8 values), and element indices fit in 32 bits.
 * Under the test hook NETCL_MMA_EMULATE=1 (PoCL in CI) the copies are plain, and each lane
 * computes its results of each mma.sync from what ldmatrix would give the lanes holding the
 * values (HB_REG: the same address arithmetic as on the GPU, with no exchange between lanes). */

/* The tile and its pipeline. Diagnostic builds set others (tests/bench/kernel_probe.c;
 * docs/performance.md has their timings): -DHB_WARPS_N=2 (four warps of 64 x 64), -DHB_BN=256,
 * -DHB_BK=16 or 64, -DHB_STAGES=2..6, -DHB_PIPE=0, -DHB_FRAG_LATE=1, -DHB_FAST=0,
 * -DHB_NOLOAD=1 (wrong results). Local memory holds HB_STAGES x (HB_BM + HB_BN) x HB_BK
 * values: 48 KB by default, 96 KB in the wide build; NVIDIA's driver builds and runs static
 * local arrays past 48 KB (147 KB ran on the H100). */
#define HB_BM 128
#ifndef HB_BN
#define HB_BN 128
#endif
#ifndef HB_BK
#define HB_BK 32 /* 16, 32 or 64 */
#endif
#ifndef HB_STAGES
#define HB_STAGES 3
#endif
#ifndef HB_WARPS_N
#define HB_WARPS_N 4 /* warps along N (two along M), each HB_BN / HB_WARPS_N wide: 32 or 64 */
#endif
#ifndef HB_PIPE
#define HB_PIPE (HB_BK >= 32) /* fragments a k step ahead (HB_MAIN) */
#endif
#ifndef HB_FAST
#define HB_FAST 1 /* full tiles' copies from precomputed addresses (HB_LOAD) */
#endif
#define HB_ITEMS (64 * HB_WARPS_N)         /* two warps along M */
#define HB_WN (HB_BN / HB_WARPS_N)         /* a warp's columns */
#define HB_FJ (HB_WN / 8)                  /* its column blocks of 8 */
#define HB_STAGE ((HB_BM + HB_BN) * HB_BK) /* values (ushort) per stage */

/* C and the bias: bfloat16, or float32 with -DHB_OUT_F32=1 (the build behind "medium" products
 * of float32 tensors, whose operands the host rounds to bfloat16 first: cl_gemm_lowp.c) */
#ifdef HB_OUT_F32
#define HB_CT float
#define HB_CIN(v) (v)
#define HB_COUT(x) (x)
#else
#define HB_CT ushort
#define HB_CIN(v) HB_F(v)
#define HB_COUT(x) HB_H(x)
#endif

/* The arguments: GEMM_ARGS of kernels/mma.cl with bfloat16 operands, HB_CT results and bias, and
 * float scalars. */
#define GEMM_ARGS_BF16                                                                                            \
  const long M_, const long N_, const long K_, __global const ushort *A, const long a_off, const long a_sb,      \
      const long a_sm, const long a_sk, __global const ushort *B, const long b_off, const long b_sb,             \
      const long b_sk, const long b_sn, __global HB_CT *C, const long c_off, const long c_sb, const long c_sm,  \
      const long c_sn, __global const HB_CT *bias, const long bias_off, const long bias_sm, const long bias_sn, \
      const int has_bias, const float alpha, const float beta

#ifdef NC_MMA_BF16

/* a bfloat16 value (16-bit pattern) as float, and a float rounded to bfloat16 (mma_bf16) */
#define HB_F(u) as_float((uint)(u) << 16)
#define HB_H(x) ((ushort)(as_uint(mma_bf16(x)) >> 16))

#ifndef NC_MMA_EMULATE
/* 16 bytes from src (bytes of them, the rest zero) to dst, both 16-byte aligned */
inline void hb_copy16(__local ushort *dst, __global const ushort *src, const int bytes) {
  __asm__ volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"((uint)(ulong)dst), "l"((ulong)src),
                   "r"(bytes)
                   : "memory");
}
/* 16 bytes from src to dst, both 16-byte aligned and all of them inside the operand */
inline void hb_copy16_full(__local ushort *dst, __global const ushort *src) {
  __asm__ volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((uint)(ulong)dst), "l"((ulong)src) : "memory");
}
#define HB_COMMIT() __asm__ volatile("cp.async.commit_group;" ::: "memory")
/* until at most HB_STAGES - 2 groups are in flight: the current tile has landed */
#define HB_WAIT_(n) __asm__ volatile("cp.async.wait_group " #n ";" ::: "memory")
#define HB_WAITN(n) HB_WAIT_(n)
#define HB_WAIT() HB_WAITN(HB_INFLIGHT)
#if HB_STAGES == 2
#define HB_INFLIGHT 0
#elif HB_STAGES == 3
#define HB_INFLIGHT 1
#elif HB_STAGES == 4
#define HB_INFLIGHT 2
#elif HB_STAGES == 5
#define HB_INFLIGHT 3
#elif HB_STAGES == 6
#define HB_INFLIGHT 4
#else
#error "gemm_bf16.cl: HB_STAGES is 2 to 6"
#endif
/* ldmatrix.x4 into r[0..3]: lane L names the row at smem + OFF(L) of matrix L / 8 (OFF a macro
 * of the lane); .trans when T */
#define HB_LD(r, T, OFF)                                                                           \
  if (T)                                                                                         \
    __asm__ volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"       \
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])                            \
                     : "r"((uint)(ulong)(smem + OFF(lane))));                                     \
  else                                                                                           \
    __asm__ volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"             \
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])                            \
                     : "r"((uint)(ulong)(smem + OFF(lane))));
#else
inline void hb_copy16(__local ushort *dst, __global const ushort *src, const int bytes) {
  for (int h = 0; h < 8; h++) dst[h] = 2 * h < bytes ? src[h] : (ushort)0;
}
inline void hb_copy16_full(__local ushort *dst, __global const ushort *src) {
  for (int h = 0; h < 8; h++) dst[h] = src[h];
}
#define HB_COMMIT()
#define HB_WAIT()
/* What ldmatrix.x4 gives lane L in register reg (HB_LD), each row where the lane naming it puts
 * it (OFF of that lane, the same address arithmetic as on the GPU): plain, from matrix reg row
 * L / 4 its values 2 (L % 4) and 2 (L % 4) + 1; .trans (T), value L / 4 of rows 2 (L % 4) and
 * 2 (L % 4) + 1; the lower value in the low half. */
#define HB_REG(L, reg, T, OFF)                                                                     \
  ((T) ? (uint)smem[OFF((reg) * 8 + 2 * ((L) & 3)) + ((L) >> 2)] |                                 \
             ((uint)smem[OFF((reg) * 8 + 2 * ((L) & 3) + 1) + ((L) >> 2)] << 16)                   \
       : (uint)smem[OFF((reg) * 8 + ((L) >> 2)) + 2 * ((L) & 3)] |                                 \
             ((uint)smem[OFF((reg) * 8 + ((L) >> 2)) + 2 * ((L) & 3) + 1] << 16))
#endif

/* chunk positions: a K-major operand's row r, chunk c (of 4); an M- or N-major one's row k,
 * chunk c (of 16); in values */
#if HB_BK == 64
#define HB_KSWZ(r) ((r) & 7)
#define HB_KSH 3 /* log2 of a K-major row's chunks */
#elif HB_BK == 32
#define HB_KSWZ(r) (((r) >> 1) & 3)
#define HB_KSH 2
#elif HB_BK == 16
#define HB_KSWZ(r) (((r) >> 2) & 1)
#define HB_KSH 1
#else
#error "gemm_bf16.cl: HB_BK is 16, 32 or 64"
#endif
#define HB_KPOS(r, c) ((r) * HB_BK + (((c) ^ HB_KSWZ(r)) << 3))
#define HB_NPOS(k, c, W) ((k) * (W) + (((c) ^ ((k) & 7)) << 3))

/* Copies K tile kt (k0 = kt * HB_BK) of both operands into stage st, in 16-byte chunks (512 of
 * each operand in the default tile, two per work-item). Ab is A at row m0 (K-major) or column m0
 * (M-major), Bb likewise for B at n0. A tile inside both operands (hb_full_: the work-group's
 * rows and columns all inside C, and a K tile below K / HB_BK) copies from the addresses that
 * HB_FAST_SETUP computed once (HB_FCOPY); others check every chunk (HB_COPY). */
#define HB_LOAD(st, kt, A_K, B_K)                                                                  \
  {                                                                                              \
    const int k0_ = (kt) * HB_BK;                                                                 \
    __local ushort *sa_ = smem + (st) * HB_STAGE, *sb_ = sa_ + HB_BM * HB_BK;                     \
    if (HB_FAST && hb_full_ && (kt) < hb_kfull_) {                                               \
      HB_FCOPY(A_K, sa_, Ab, lda, ha_, HB_BM)                                                    \
      HB_FCOPY(B_K, sb_, Bb, ldb, hbb_, HB_BN)                                                   \
    } else {                                                                                     \
      HB_LOAD_ALL(A_K, B_K)                                                                      \
    }                                                                                            \
  }
#define HB_LOAD_ALL(A_K, B_K)                                                                      \
  _Pragma("unroll") for (int i_ = 0; i_ < HB_BM * HB_BK / 8 / HB_ITEMS; i_++) {                   \
    const int c_ = lid + i_ * HB_ITEMS;                                                          \
    HB_COPY(A_K, sa_, Ab, lda, M - m0, HB_BM)                                                    \
  }                                                                                              \
  _Pragma("unroll") for (int i_ = 0; i_ < HB_BN * HB_BK / 8 / HB_ITEMS; i_++) {                   \
    const int c_ = lid + i_ * HB_ITEMS;                                                          \
    HB_COPY(B_K, sb_, Bb, ldb, N - n0, HB_BN)                                                    \
  }
/* The work-item's chunks of one operand (prefix p: ha_ for A, hbb_ for B) in a full tile:
 * chunk lid + i HB_ITEMS lies HB_FROWS(KMAJ, W) i rows (K-major: of M or N; else of k) past
 * chunk lid's, in global memory and in local memory alike, since the chunk swizzles depend on
 * a row's index modulo 8 only (HB_FROWS is a multiple of 8). p##src: chunk lid's offset from Ab or
 * Bb at k 0; p##dst: its place in a stage; p##step: the rows' offset in global memory. */
#define HB_FROWS(KMAJ, W) ((KMAJ) ? HB_ITEMS >> HB_KSH : HB_ITEMS / ((W) / 8))
#define HB_FAST_SETUP1(KMAJ, p, ld, W)                                                             \
  const int p##r_ = (KMAJ) ? lid >> HB_KSH : lid / ((W) / 8);                                    \
  const int p##q_ = (KMAJ) ? lid & (HB_BK / 8 - 1) : lid % ((W) / 8);                            \
  const int p##src = p##r_ * (ld) + p##q_ * 8, p##step = HB_FROWS(KMAJ, W) * (ld);                 \
  const int p##dst = (KMAJ) ? HB_KPOS(p##r_, p##q_) : HB_NPOS(p##r_, p##q_, W);
#define HB_FAST_SETUP(A_K, B_K)                                                                    \
  const int hb_full_ = m0 + HB_BM <= M && n0 + HB_BN <= N, hb_kfull_ = K / HB_BK;                \
  HB_FAST_SETUP1(A_K, ha_, lda, HB_BM)                                                           \
  HB_FAST_SETUP1(B_K, hbb_, ldb, HB_BN)
#define HB_FCOPY(KMAJ, s_, base, ld, p, W)                                                         \
  {                                                                                              \
    __global const ushort *src_ = (base) + (p##src + ((KMAJ) ? k0_ : k0_ * (ld)));               \
    _Pragma("unroll") for (int i_ = 0; i_ < (W) * HB_BK / 8 / HB_ITEMS; i_++)                    \
      hb_copy16_full(s_ + p##dst + i_ * HB_FROWS(KMAJ, W) * ((KMAJ) ? HB_BK : (W)), src_ + i_ * p##step); \
  }
#if HB_FAST && ((HB_ITEMS >> HB_KSH) % 8 || (HB_ITEMS / (HB_BM / 8)) % 8 || (HB_ITEMS / (HB_BN / 8)) % 8)
#error "gemm_bf16.cl: HB_FAST needs each work-item's chunks 8 rows apart (a multiple of)"
#endif
#ifdef HB_NOLOAD /* a diagnostic build with no copies (wrong results, for timing) */
#undef HB_LOAD
#define HB_LOAD(st, kt, A_K, B_K)
#endif
/* Chunk c_ of one operand's K tile at k0_: K-major (row r_ of HB_BK / 8 chunks) or M/N-major (row
 * r_ = k of W / 8 chunks, W the tile's width); left: the rows or columns left from the tile's
 * first one */
#define HB_COPY(KMAJ, s_, base, ld, left, W)                                                       \
  {                                                                                              \
    const int r_ = (KMAJ) ? c_ >> HB_KSH : c_ / ((W) / 8), q_ = (KMAJ) ? c_ & (HB_BK / 8 - 1) : c_ % ((W) / 8); \
    const int k_ = k0_ + ((KMAJ) ? q_ * 8 : r_);                                                 \
    const int by_ = (KMAJ) ? (r_ < (left) ? clamp((K - k_) * 2, 0, 16) : 0)                      \
                           : (k_ < K ? clamp(((left) - q_ * 8) * 2, 0, 16) : 0);                 \
    __global const ushort *src_ = (KMAJ) ? (base) + r_ * (ld) + k_ : (base) + k_ * (ld) + q_ * 8; \
    hb_copy16(s_ + ((KMAJ) ? HB_KPOS(r_, q_) : HB_NPOS(r_, q_, W)), by_ ? src_ : (base), by_);      \
  }

/* The fragments of k step s (16 deep) of stage st: fa[i] (4 registers: rows wm*64 + 16i ..),
 * fb[jj] (4 registers: b0, b1 of column block 2jj, then of 2jj + 1). Lane L names row L % 8 of
 * matrix L / 8. A: matrices (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15); B:
 * (k 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15). The offsets (in values) of the row
 * lane L names, for fragment i_ or j_ of k step s_ at stage offset so_: */
#define HB_A_KMAJ(L) (so_ + HB_KPOS(wm * 64 + i_ * 16 + ((L) & 7) + (((L) >> 3) & 1) * 8, s_ * 2 + ((L) >> 4)))
#define HB_A_MMAJ(L) (so_ + HB_NPOS(s_ * 16 + ((L) & 7) + ((L) >> 4) * 8, wm * 8 + i_ * 2 + (((L) >> 3) & 1), HB_BM))
#define HB_B_KMAJ(L) (so_ + HB_BM * HB_BK + HB_KPOS(wn * HB_WN + j_ * 16 + ((L) & 7) + ((L) >> 4) * 8, s_ * 2 + (((L) >> 3) & 1)))
#define HB_B_NMAJ(L) (so_ + HB_BM * HB_BK + HB_NPOS(s_ * 16 + ((L) & 7) + (((L) >> 3) & 1) * 8, wn * (HB_WN / 8) + j_ * 2 + ((L) >> 4), HB_BN))
#define HB_FRAGS(st, s, A_K, B_K, fa, fb)                                                          \
  {                                                                                              \
    const int so_ = (st) * HB_STAGE, s_ = (s);                                                   \
    _Pragma("unroll") for (int i_ = 0; i_ < 4; i_++) {                                           \
      if (A_K) { HB_LD(fa[i_], 0, HB_A_KMAJ) } else { HB_LD(fa[i_], 1, HB_A_MMAJ) }              \
    }                                                                                            \
    _Pragma("unroll") for (int j_ = 0; j_ < HB_FJ / 2; j_++) {                                   \
      if (B_K) { HB_LD(fb[j_], 0, HB_B_KMAJ) } else { HB_LD(fb[j_], 1, HB_B_NMAJ) }              \
    }                                                                                            \
  }
/* In the unpipelined loop (-DHB_PIPE=0) the second k step's fragments come before the first
 * step's products (default), or after them (-DHB_FRAG_LATE=1: fewer registers live). */
#ifdef HB_FRAG_LATE
#define HB_FRAGS_EARLY(st, s, A_K, B_K, fa, fb)
#define HB_FRAGS_LATE(st, s, A_K, B_K, fa, fb) HB_FRAGS(st, s, A_K, B_K, fa, fb)
#else
#define HB_FRAGS_EARLY(st, s, A_K, B_K, fa, fb) HB_FRAGS(st, s, A_K, B_K, fa, fb)
#define HB_FRAGS_LATE(st, s, A_K, B_K, fa, fb)
#endif

/* HB_MMA(st, s, fa, fb): the products of k step s of stage st, whose fragments HB_FRAGS put in
 * fa and fb. */
#ifndef NC_MMA_EMULATE
#define HB_MMA(st, s, fa, fb)                                                                      \
  _Pragma("unroll") for (int i = 0; i < 4; i++)                                                  \
    _Pragma("unroll") for (int j = 0; j < HB_FJ; j++) {                                          \
      const uint b_[2] = {fb[j >> 1][(j & 1) * 2], fb[j >> 1][(j & 1) * 2 + 1]};                  \
      MMA_SYNC(acc[i][j], fa[i], b_);                                                            \
    }
#else
/* The emulation's products: each lane sums its four results of each mma over k, with A at (r, k)
 * and B at (k, n) taken from the register of the lane that holds it (mma.cl's fragment layout)
 * as HB_REG gives it, so no lane waits on another; it reads local memory here, where the GPU's
 * ldmatrix (HB_FRAGS, nothing under the emulation) read it before. */
#undef HB_FRAGS
#define HB_FRAGS(st, s, A_K, B_K, fa, fb) {}
#define HB_HALF(u, hi) as_float((hi) ? ((u) & 0xffff0000u) : ((u) << 16))
#define HB_EA(r, k)                                                                                \
  HB_HALF(a_k_ ? HB_REG(((r) % 8) * 4 + ((k) % 8) / 2, ((k) >= 8 ? 2 : 0) + ((r) >= 8 ? 1 : 0), 0, HB_A_KMAJ) \
               : HB_REG(((r) % 8) * 4 + ((k) % 8) / 2, ((k) >= 8 ? 2 : 0) + ((r) >= 8 ? 1 : 0), 1, HB_A_MMAJ), \
          (k) & 1)
#define HB_EB(n, k)                                                                                \
  HB_HALF(b_k_ ? HB_REG((n) * 4 + ((k) % 8) / 2, jo_ * 2 + ((k) >= 8 ? 1 : 0), 0, HB_B_KMAJ)      \
               : HB_REG((n) * 4 + ((k) % 8) / 2, jo_ * 2 + ((k) >= 8 ? 1 : 0), 1, HB_B_NMAJ),      \
          (k) & 1)
#define HB_MMA(st, s, fa, fb)                                                                      \
  {                                                                                              \
    const int so_ = (st) * HB_STAGE, s_ = (s);                                                   \
    _Pragma("unroll 1") for (int i_ = 0; i_ < 4; i_++)                                           \
      _Pragma("unroll 1") for (int j_ = 0; j_ < HB_FJ / 2; j_++)                                 \
        _Pragma("unroll 1") for (int jo_ = 0; jo_ < 2; jo_++)                                    \
          _Pragma("unroll 1") for (int e = 0; e < 4; e++) {                                      \
            const int r = (e >= 2 ? 8 : 0) + g, n = 2 * t + (e & 1);                             \
            float v_ = acc[i_][j_ * 2 + jo_][e];                                                 \
            _Pragma("unroll 1") for (int k = 0; k < 16; k++) v_ = fma(HB_EA(r, k), HB_EB(n, k), v_); \
            acc[i_][j_ * 2 + jo_][e] = v_;                                                       \
          }                                                                                      \
  }
#endif

#define HB_PREV(st) ((st) == 0 ? HB_STAGES - 1 : (st) - 1)
#define HB_NEXT(st) ((st) == HB_STAGES - 1 ? 0 : (st) + 1)
#ifdef NC_MMA_EMULATE
/* the emulation reads local memory in HB_MMA: every lane is done with a stage before the copies
 * that refill it */
#define HB_EMU_BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
#else
#define HB_EMU_BARRIER()
#endif
#if HB_PIPE
/* The pipelined loop: fragments are read one k step ahead of the products that use them, across
 * K tiles too. Per K tile: the second k step's fragments, the first step's products, the copies
 * of the tile HB_STAGES - 1 ahead into the stage read in the previous K tile (every work-item
 * read it before that tile's barrier), the further k steps (K tiles of 64: fragments of step
 * s + 1, then the products of step s), then the wait and barrier for the next tile, its first
 * fragments, and the last step's products, which need nothing the barrier waited for. */
#if HB_BK == 32
#define HB_MIDDLE(st, A_K, B_K)
#define HB_LAST(st) HB_MMA(st, 1, fa1, fb1)
#elif HB_BK == 64
#define HB_MIDDLE(st, A_K, B_K)                                                                    \
  HB_FRAGS(st, 2, A_K, B_K, fa0, fb0)                                                            \
  HB_MMA(st, 1, fa1, fb1)                                                                        \
  HB_FRAGS(st, 3, A_K, B_K, fa1, fb1)                                                            \
  HB_MMA(st, 2, fa0, fb0)
#define HB_LAST(st) HB_MMA(st, 3, fa1, fb1)
#else
#error "gemm_bf16.cl: the pipelined loop (HB_PIPE) takes K tiles of 32 or 64"
#endif
#define HB_MAIN(A_K, B_K)                                                                          \
  HB_WAIT();                                                                                     \
  barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
  if (ntiles > 0) HB_FRAGS(0, 0, A_K, B_K, fa0, fb0)                                             \
  int st = 0;                                                                                    \
  for (int kt = 0; kt < ntiles; kt++) {                                                          \
    HB_FRAGS(st, 1, A_K, B_K, fa1, fb1)                                                          \
    HB_MMA(st, 0, fa0, fb0)                                                                      \
    HB_EMU_BARRIER();                                                                            \
    if (kt + HB_STAGES - 1 < ntiles) HB_LOAD(HB_PREV(st), kt + HB_STAGES - 1, A_K, B_K)          \
    HB_COMMIT();                                                                                 \
    HB_MIDDLE(st, A_K, B_K)                                                                      \
    HB_WAIT();                                                                                   \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                \
    const int nx = HB_NEXT(st);                                                                  \
    if (kt + 1 < ntiles) HB_FRAGS(nx, 0, A_K, B_K, fa0, fb0)                                     \
    HB_LAST(st)                                                                                  \
    st = nx;                                                                                     \
  }
#else
/* The plain loop (-DHB_PIPE=0, a diagnostic build): per K tile the wait and barrier, the copies
 * of the tile HB_STAGES - 1 ahead into the stage read in the previous K tile, then this tile's
 * fragments and products. */
#if HB_BK == 64
#error "gemm_bf16.cl: K tiles of 64 take the pipelined loop (HB_PIPE)"
#elif HB_BK == 32
#define HB_STEP2(st, A_K, B_K)                                                                     \
  HB_FRAGS_EARLY(st, 1, A_K, B_K, fa1, fb1)                                                      \
  HB_MMA(st, 0, fa0, fb0)                                                                        \
  HB_FRAGS_LATE(st, 1, A_K, B_K, fa1, fb1)                                                       \
  HB_MMA(st, 1, fa1, fb1)
#else
#define HB_STEP2(st, A_K, B_K) HB_MMA(st, 0, fa0, fb0)
#endif
#define HB_MAIN(A_K, B_K)                                                                          \
  int st = 0;                                                                                    \
  for (int kt = 0; kt < ntiles; kt++) {                                                          \
    HB_WAIT();                                                                                   \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                \
    if (kt + HB_STAGES - 1 < ntiles) HB_LOAD(HB_PREV(st), kt + HB_STAGES - 1, A_K, B_K)          \
    HB_COMMIT();                                                                                 \
    HB_FRAGS(st, 0, A_K, B_K, fa0, fb0)                                                          \
    HB_STEP2(st, A_K, B_K)                                                                       \
    st = HB_NEXT(st);                                                                            \
  }
#endif

/* a result's row and column in the tile (the fragments hold them in place in every layout) */
#define HB_ROW(A_K, i, h) (wm * 64 + (i) * 16 + (h) * 8 + g)
#define HB_COL(B_K, j, e) (wn * HB_WN + (j) * 8 + t * 2 + (e))

#define HB_BODY(A_K, B_K)                                                                          \
  MMA_TILE_START(ushort, HB_BM, HB_BN, HB_WARPS_N, A_K, B_K)                                      \
  __local uint4 smem4_[HB_STAGES * HB_STAGE / 8];                                                \
  __local ushort *smem = (__local ushort *)smem4_;                                               \
  float acc[4][HB_FJ][4];                                                                            \
  MMA_UNROLL for (int i = 0; i < 4; i++)                                                  \
    MMA_UNROLL for (int j = 0; j < HB_FJ; j++)                                            \
      MMA_UNROLL for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;                         \
  const int ntiles = (K + HB_BK - 1) / HB_BK, a_k_ = (A_K), b_k_ = (B_K);                        \
  HB_FAST_SETUP(A_K, B_K)                                                                        \
  (void)a_k_, (void)b_k_; /* the emulation's */                                                  \
  uint fa0[4][4], fb0[HB_FJ / 2][4], fa1[4][4], fb1[HB_FJ / 2][4];                               \
  MMA_UNROLL for (int s = 0; s < HB_STAGES - 1; s++) {                                            \
    if (s < ntiles) HB_LOAD(s, s, A_K, B_K)                                                      \
    HB_COMMIT();                                                                                 \
  }                                                                                              \
  HB_MAIN(A_K, B_K)                                                                              \
  MMA_EPILOGUE(HB_CT, HB_FJ, HB_ROW, A_K, HB_COL, B_K, HB_CIN, HB_COUT)

/* Grid: (ceil(N/128) * HB_ITEMS, ceil(M/128), batch); local (HB_ITEMS, 1, 1). gemm_bf16_<a><b>: a is r
 * when A's rows are contiguous (a_sk == 1), else c; b is r when B's rows are (b_sn == 1). */
#define HB_ATTR __kernel __attribute__((reqd_work_group_size(HB_ITEMS, 1, 1))) void
HB_ATTR gemm_bf16_rr(GEMM_ARGS_BF16) { HB_BODY(1, 0) }
HB_ATTR gemm_bf16_rc(GEMM_ARGS_BF16) { HB_BODY(1, 1) }
HB_ATTR gemm_bf16_cr(GEMM_ARGS_BF16) { HB_BODY(0, 0) }
HB_ATTR gemm_bf16_cc(GEMM_ARGS_BF16) { HB_BODY(0, 1) }

#endif

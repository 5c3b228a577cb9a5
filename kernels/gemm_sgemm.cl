/* The float32 SGEMM on asynchronous copies: C = alpha A B + beta C (+ bias), float32 operands,
 * products and sums (fma on the FFMA pipe, no tensor cores), batched. For NVIDIA devices of
 * compute capability 8.0 or later, where the global-to-local copies are cp.async (inline PTX);
 * built with -DSG_PLAIN=1 the same kernels copy with plain loads and stores, for any OpenCL
 * device (PoCL in the tests).
 *
 * A work-group of 256 work-items (tx = lid % 16 along N, ty = lid / 16 along M: a warp is 16 tx
 * by two ty) computes a 128 x 128 tile of C; each work-item holds 8 x 8 results in registers.
 * K advances SG_BK (16) at a time through SG_STAGES (3) local buffers filled by cp.async (16
 * bytes, four floats, a copy; zero fill past the edges) SG_STAGES - 1 K tiles ahead, with one
 * barrier per K tile: at the top of K tile kt each work-item waits for its own copies of tile kt
 * (cp.async.wait_group), the barrier publishes everyone's, and the copies of tile
 * kt + SG_STAGES - 1 go into the stage that tile kt - 1 was read from (every work-item left it
 * before this barrier) ahead of tile kt's products.
 *
 * cp.async cannot transpose, so local memory keeps each operand as it lies in global memory,
 * 16-byte chunks of 4 floats, no padding (3 x 16 KB for the defaults); a 128-byte line of 8
 * chunks spans the 32 banks, so 16-byte reads are conflict-free when a warp's distinct chunks
 * fall in distinct chunk places of their lines (a wavefront serves 128 bytes):
 * - an M-major A (a_sm == 1) or N-major B (b_sn == 1): SG_BK rows (k) of 128 floats. The
 *   work-item's rows (columns) are 4 x 4 blocks 64 apart, 4u + i + 64c (u = ty or tx), as in
 *   gemm_fast.cl: per k it reads two float4 of the row. A warp's 16 tx read 16 consecutive
 *   chunks (two wavefronts, the minimum for 256 bytes), its two ty two neighbouring chunks (one
 *   wavefront; the other lanes are broadcasts).
 * - a K-major A (a_sk == 1) or B (b_sk == 1): 128 rows (m or n) of SG_BK floats, chunk q of row
 *   r at chunk place q ^ s(r), s(r) = (r / (32 / SG_BK)) % (SG_BK / 4) (SG_KPOS; for SG_BK 16
 *   that is gemm_tf32.cl's q ^ ((r >> 1) & 3)): 8 consecutive rows fill the 8 places of their
 *   lines. The work-item's rows (columns) are u + 16p, p = 0..7 (a float4 runs along k, so they
 *   need not be neighbours): per 4 k it reads one float4 of each. A warp's 16 tx read 16
 *   consecutive rows (two wavefronts), its two ty two consecutive rows (one). s(u + 16p) = s(u),
 *   so each read address is the work-item's base for those 4 k (two integer operations) plus a
 *   constant. (-DSG_KV=2 reads float2 instead, for 16 fewer live registers: the two ty still
 *   take one wavefront, the 16 tx two for 128 bytes.)
 * Either way, per 4 k: 8 float4 reads of A and 8 of B for 256 fma, the ratio of gemm_fast.cl.
 * The copies are conflict-free too: a warp's 32 copies of one operand are 32 consecutive chunks
 * of its global tile, whole lines of local memory (permuted within each line).
 *
 * Interior tiles (inside M and N) run their own copy of the K loop, which copies through two
 * per-work-item source pointers (A's and B's chunk lid of the tile; chunk lid + 256 i is a
 * constant stride away) bumped by one K tile each time, with no index math or clamps (the last
 * K tile, where K is not a multiple of SG_BK, clamps along K only); the other tiles' loop copies
 * chunk by chunk with clamped byte counts (cp.async's zero fill), as gemm_tf32.cl does. Two
 * loops, so that the interior one keeps no edge state in registers. The epilogue stores float4
 * rows for interior tiles with an N-major B, C rows contiguous and 16-byte aligned, and no bias;
 * else element by element (MMA_EPILOGUE, kernels/mma.cl, with this kernel's result places).
 * Register arrays are indexed by constants only (every loop over them is unrolled).
 *
 * Preconditions (a host must check them before launching the cp.async build): every operand row
 * of A and B starts 16-byte aligned (offsets, leading dimensions and batch strides multiples of
 * 4 floats: cp.async reads 16 aligned bytes even where it zero-fills part of them) and element
 * indices fit in 32 bits. The -DSG_PLAIN=1 build has only the second.
 *
 * Options (-D, tests/bench/kernel_probe.c): SG_STAGES 2..4 (default 3); SG_BK 8, 16 (default)
 * or 32 (local memory: SG_STAGES x SG_BK KB, 48 KB by default; NVIDIA's driver builds and runs
 * static local arrays past 48 KB, docs/performance.md); SG_KV 4 (default) or 2 (the width of
 * the reads of a K-major operand); SG_L2PF 64, 128 or 256 (cp.async's .L2::<n>B prefetch hint;
 * none by default); SG_PLAIN 1 (plain copies: any device, and rows need not be aligned). */

#define SG_BM 128
#define SG_BN 128
#ifndef SG_BK
#define SG_BK 16
#endif
#ifndef SG_STAGES
#define SG_STAGES 3
#endif
#if SG_BK != 8 && SG_BK != 16 && SG_BK != 32
#error "gemm_sgemm.cl: SG_BK is 8, 16 or 32"
#endif
#if SG_STAGES < 2 || SG_STAGES > 4
#error "gemm_sgemm.cl: SG_STAGES is 2 to 4"
#endif
#ifndef SG_KV
#define SG_KV 4
#endif
#if SG_KV != 2 && SG_KV != 4
#error "gemm_sgemm.cl: SG_KV is 2 or 4"
#endif
/* floats of one operand's K tile in local memory, and of one stage of both */
#define SG_OPSZ (128 * SG_BK)
#define SG_STAGE (2 * SG_OPSZ)
/* 16-byte chunks of one operand's K tile per work-item */
#define SG_CHUNKS (128 * SG_BK / 4 / 256)
/* the chunk place swizzle of row r of a K-major operand, and chunk q of that row (floats) */
#define SG_SW(r) (((r) / (32 / SG_BK)) & (SG_BK / 4 - 1))
#define SG_KPOS(r, q) ((r) * SG_BK + (((q) ^ SG_SW(r)) << 2))
/* chunk lid + 256 i lies 1024 i floats after chunk lid in local memory (the swizzle of row
 * r + 1024 i / SG_BK is that of r), and i SG_RSTEP rows of its own (K-major: m or n, else k)
 * times ld elements after it in global memory */
#define SG_RSTEP(KMAJ) ((KMAJ) ? 1024 / SG_BK : 8)

#ifdef SG_PLAIN
/* 16 bytes from src (bytes of them, the rest zero) to dst */
inline void sg_copy16(__local float *dst, __global const float *src, const int bytes) {
  for (int h = 0; h < 4; h++) dst[h] = 4 * h < bytes ? src[h] : 0.0f;
}
#define SG_COPY16(dst, src) (*(__local float4 *)(dst) = vload4(0, (src)))
#define SG_COMMIT()
#define SG_WAIT()
#else
#if !defined(SG_L2PF)
#define SG_CP "cp.async.cg.shared.global"
#elif SG_L2PF == 64
#define SG_CP "cp.async.cg.shared.global.L2::64B"
#elif SG_L2PF == 128
#define SG_CP "cp.async.cg.shared.global.L2::128B"
#elif SG_L2PF == 256
#define SG_CP "cp.async.cg.shared.global.L2::256B"
#else
#error "gemm_sgemm.cl: SG_L2PF is 64, 128 or 256"
#endif
/* 16 bytes from src (bytes of them, the rest zero) to dst, both 16-byte aligned */
inline void sg_copy16(__local float *dst, __global const float *src, const int bytes) {
  __asm__ volatile(SG_CP " [%0], [%1], 16, %2;" ::"r"((uint)(ulong)dst), "l"((ulong)src), "r"(bytes) : "memory");
}
/* all 16 bytes */
#define SG_COPY16(dst, src)                                                                        \
  __asm__ volatile(SG_CP " [%0], [%1], 16;" ::"r"((uint)(ulong)(dst)), "l"((ulong)(src)) : "memory")
#define SG_COMMIT() __asm__ volatile("cp.async.commit_group;" ::: "memory")
/* until at most SG_STAGES - 2 groups are in flight: this K tile has landed */
#define SG_WAIT_(n) __asm__ volatile("cp.async.wait_group " #n ";" ::: "memory")
#define SG_WAITN(n) SG_WAIT_(n)
#define SG_WAIT() SG_WAITN(SG_INFLIGHT)
#if SG_STAGES == 2
#define SG_INFLIGHT 0
#elif SG_STAGES == 3
#define SG_INFLIGHT 1
#else
#define SG_INFLIGHT 2
#endif
#endif

/* The copies of K tile kt (k0_ = kt SG_BK) into stage st. SG_LOAD_INT, for interior tiles:
 * through the source pointers pa, pb, moved on by one K tile each time (tiles are copied in
 * order, each once), clamped (along K only) in the last K tile where K is not a multiple of
 * SG_BK. SG_LOAD_EDGE, for the others: chunk by chunk, clamped along both extents. */
#define SG_LOAD_INT(st, kt, A_K, B_K)                                                             \
  {                                                                                               \
    const int k0_ = (kt) * SG_BK;                                                                 \
    __local float *sa_ = smem + (st) * SG_STAGE + da, *sb_ = smem + (st) * SG_STAGE + SG_OPSZ + db; \
    if (k0_ + SG_BK <= K) {                                                                       \
      _Pragma("unroll") for (int i_ = 0; i_ < SG_CHUNKS; i_++) {                                  \
        SG_COPY16(sa_ + i_ * 1024, pa + i_ * astep);                                              \
        SG_COPY16(sb_ + i_ * 1024, pb + i_ * bstep);                                              \
      }                                                                                           \
    } else {                                                                                      \
      _Pragma("unroll") for (int i_ = 0; i_ < SG_CHUNKS; i_++) {                                  \
        SG_COPY_KT(A_K, sa_ + i_ * 1024, pa + i_ * astep, ra_ + i_ * SG_RSTEP(A_K), qa_)          \
        SG_COPY_KT(B_K, sb_ + i_ * 1024, pb + i_ * bstep, rb_ + i_ * SG_RSTEP(B_K), qb_)          \
      }                                                                                           \
    }                                                                                             \
    pa += abump, pb += bbump;                                                                     \
  }
/* One chunk of an interior tile's last K tile: row r (K-major: m or n; else k), chunk q */
#define SG_COPY_KT(KMAJ, dst, src, r, q)                                                          \
  {                                                                                               \
    const int by_ = (KMAJ) ? clamp((K - k0_ - (q) * 4) * 4, 0, 16) : (k0_ + (r) < K ? 16 : 0);    \
    sg_copy16(dst, by_ ? (src) : Ab, by_);                                                        \
  }
#define SG_LOAD_EDGE(st, kt, A_K, B_K)                                                            \
  {                                                                                               \
    const int k0_ = (kt) * SG_BK;                                                                 \
    __local float *sa_ = smem + (st) * SG_STAGE, *sb_ = sa_ + SG_OPSZ;                            \
    _Pragma("unroll") for (int i_ = 0; i_ < SG_CHUNKS; i_++) {                                    \
      const int c_ = lid + i_ * 256;                                                              \
      SG_COPY(A_K, sa_, Ab, lda, M - m0)                                                          \
      SG_COPY(B_K, sb_, Bb, ldb, N - n0)                                                          \
    }                                                                                             \
  }
/* Chunk c_ of one operand's K tile at k0_ (edge tiles): K-major (row r_ of SG_BK / 4 chunks) or
 * M/N-major (row r_ = k of 32 chunks); left: the rows or columns left from the tile's first */
#define SG_COPY(KMAJ, s_, base, ld, left)                                                         \
  {                                                                                               \
    const int r_ = (KMAJ) ? c_ / (SG_BK / 4) : c_ / 32, q_ = (KMAJ) ? c_ % (SG_BK / 4) : c_ % 32; \
    const int k_ = k0_ + ((KMAJ) ? q_ * 4 : r_);                                                  \
    const int by_ = (KMAJ) ? (r_ < (left) ? clamp((K - k_) * 4, 0, 16) : 0)                       \
                           : (k_ < K ? clamp(((left) - q_ * 4) * 4, 0, 16) : 0);                  \
    __global const float *src_ = (KMAJ) ? (base) + r_ * (ld) + k_ : (base) + k_ * (ld) + q_ * 4;  \
    sg_copy16(s_ + ((KMAJ) ? SG_KPOS(r_, q_) : r_ * 128 + q_ * 4), by_ ? src_ : (base), by_);     \
  }

/* The work-item's result p (0..7) along M (u = ty) or N (u = tx): tile row or column u + 16p of
 * a K-major operand, else 4u + (p & 3) + 64 (p >> 2). acc holds result (p, q) where
 * MMA_EPILOGUE looks for fragment (p >> 1, q >> 1), row half p & 1, element q & 1. */
#define SG_PLACE(KMAJ, u, p) ((KMAJ) ? (u) + 16 * (p) : (u) * 4 + ((p) & 3) + ((p) >> 2) * 64)
#define SG_ACC(p, q) acc[(p) >> 1][(q) >> 1][(((p) & 1) << 1) | ((q) & 1)]
#define SG_ROW(A_K, i, h) SG_PLACE(A_K, ty, 2 * (i) + (h))
#define SG_COL(B_K, j, e) SG_PLACE(B_K, tx, 2 * (j) + (e))
/* Read offsets in an operand's stage: K-major, the float4 of result p's row at chunk kq (k =
 * 4 kq ..) is at SG_KRD(u, kq) + 16 p SG_BK; M/N-major, that of results 4h .. 4h + 3 in k row k
 * at 4u + SG_NRD(k, h). */
#define SG_KRD(u, kq) ((u) * SG_BK + (((kq) ^ SG_SW(u)) << 2))
#define SG_NRD(k, h) ((k) * 128 + (h) * 64)

/* SG_KV floats along k from a K-major stage into d[0 .. SG_KV - 1] */
#if SG_KV == 4
#define SG_RDK(d, ptr)                                                                            \
  {                                                                                               \
    const float4 v_ = *(__local const float4 *)(ptr);                                             \
    d[0] = v_.x, d[1] = v_.y, d[2] = v_.z, d[3] = v_.w;                                           \
  }
#else
#define SG_RDK(d, ptr)                                                                            \
  {                                                                                               \
    const float2 v_ = *(__local const float2 *)(ptr);                                             \
    d[0] = v_.x, d[1] = v_.y;                                                                     \
  }
#endif

/* The products of the K tile in stage st: per SG_KV k, the work-item's A values of its 8 rows
 * and B values of its 8 columns (K-major: 8 reads of SG_KV floats; else per k two float4),
 * 64 SG_KV fma. */
#define SG_TILE(st, A_K, B_K)                                                                     \
  {                                                                                               \
    __local const float *sa_ = smem + (st) * SG_STAGE, *sb_ = sa_ + SG_OPSZ;                      \
    _Pragma("unroll") for (int kv_ = 0; kv_ < SG_BK / SG_KV; kv_++) {                             \
      float ak_[8][SG_KV], bk_[8][SG_KV]; /* K-major operands' values, k = kv_ SG_KV + kk_ */     \
      const int kq_ = kv_ * SG_KV / 4, kh_ = kv_ * SG_KV % 4; /* chunk, float within it */        \
      if (A_K) {                                                                                  \
        __local const float *r_ = sa_ + SG_KRD(ty, kq_) + kh_;                                    \
        _Pragma("unroll") for (int p_ = 0; p_ < 8; p_++) SG_RDK(ak_[p_], r_ + 16 * SG_BK * p_)    \
      }                                                                                           \
      if (B_K) {                                                                                  \
        __local const float *r_ = sb_ + SG_KRD(tx, kq_) + kh_;                                    \
        _Pragma("unroll") for (int p_ = 0; p_ < 8; p_++) SG_RDK(bk_[p_], r_ + 16 * SG_BK * p_)    \
      }                                                                                           \
      _Pragma("unroll") for (int kk_ = 0; kk_ < SG_KV; kk_++) {                                   \
        float av_[8], bv_[8];                                                                     \
        if (A_K) {                                                                                \
          _Pragma("unroll") for (int p_ = 0; p_ < 8; p_++) av_[p_] = ak_[p_][kk_];                \
        } else {                                                                                  \
          _Pragma("unroll") for (int h_ = 0; h_ < 2; h_++) {                                      \
            const float4 v_ = *(__local const float4 *)(sa_ + ty * 4 + SG_NRD(kv_ * SG_KV + kk_, h_)); \
            av_[4 * h_] = v_.x, av_[4 * h_ + 1] = v_.y, av_[4 * h_ + 2] = v_.z, av_[4 * h_ + 3] = v_.w; \
          }                                                                                       \
        }                                                                                         \
        if (B_K) {                                                                                \
          _Pragma("unroll") for (int p_ = 0; p_ < 8; p_++) bv_[p_] = bk_[p_][kk_];                \
        } else {                                                                                  \
          _Pragma("unroll") for (int h_ = 0; h_ < 2; h_++) {                                      \
            const float4 v_ = *(__local const float4 *)(sb_ + tx * 4 + SG_NRD(kv_ * SG_KV + kk_, h_)); \
            bv_[4 * h_] = v_.x, bv_[4 * h_ + 1] = v_.y, bv_[4 * h_ + 2] = v_.z, bv_[4 * h_ + 3] = v_.w; \
          }                                                                                       \
        }                                                                                         \
        _Pragma("unroll") for (int p_ = 0; p_ < 8; p_++)                                          \
          _Pragma("unroll") for (int q_ = 0; q_ < 8; q_++) SG_ACC(p_, q_) = fma(av_[p_], bv_[q_], SG_ACC(p_, q_)); \
      }                                                                                           \
    }                                                                                             \
  }

/* float4 stores of an interior tile whose columns come in fours (an N-major B), C rows contiguous
 * and 16-byte aligned, no bias; else MMA_EPILOGUE's guarded element stores (a K-major B's
 * columns tx + 16p: a warp's stores still cover 64 contiguous bytes of a row). */
#define SG_EPILOGUE(A_K, B_K)                                                                     \
  if (!(B_K) && interior && c_sn == 1 && !has_bias && ((c_off + bi * c_sb) & 3) == 0 && (c_sm & 3) == 0) { \
    __global float *Cv_ = C + c_off + bi * c_sb + (long)m0 * c_sm + n0 + tx * 4;                  \
    _Pragma("unroll") for (int p_ = 0; p_ < 8; p_++)                                              \
      _Pragma("unroll") for (int h_ = 0; h_ < 2; h_++) {                                          \
        __global float4 *o_ = (__global float4 *)(Cv_ + (long)SG_PLACE(A_K, ty, p_) * c_sm + h_ * 64); \
        float4 v_ = (float4)(SG_ACC(p_, 4 * h_), SG_ACC(p_, 4 * h_ + 1), SG_ACC(p_, 4 * h_ + 2),  \
                             SG_ACC(p_, 4 * h_ + 3)) * alpha;                                     \
        if (beta != 0.0f) v_ += beta * *o_;                                                       \
        *o_ = v_;                                                                                 \
      }                                                                                           \
  } else {                                                                                        \
    MMA_EPILOGUE(float, 4, SG_ROW, A_K, SG_COL, B_K, MMA_ID, MMA_ID)                              \
  }

#define SG_PREV(st) ((st) == 0 ? SG_STAGES - 1 : (st) - 1)
#define SG_NEXT(st) ((st) == SG_STAGES - 1 ? 0 : (st) + 1)

/* The pipeline with copies LOAD (one loop for interior tiles, one for the others: the interior
 * loop keeps no edge state live). */
#define SG_MAIN(LOAD, A_K, B_K)                                                                   \
  _Pragma("unroll") for (int s = 0; s < SG_STAGES - 1; s++) {                                     \
    if (s < ntiles) LOAD(s, s, A_K, B_K)                                                          \
    SG_COMMIT();                                                                                  \
  }                                                                                               \
  int st = 0;                                                                                     \
  for (int kt = 0; kt < ntiles; kt++) {                                                           \
    SG_WAIT();                                                                                    \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                 \
    if (kt + SG_STAGES - 1 < ntiles) LOAD(SG_PREV(st), kt + SG_STAGES - 1, A_K, B_K)              \
    SG_COMMIT();                                                                                  \
    SG_TILE(st, A_K, B_K)                                                                         \
    st = SG_NEXT(st);                                                                             \
  }

#define SG_BODY(A_K, B_K)                                                                         \
  MMA_TILE_START(float, SG_BM, SG_BN, 1, A_K, B_K)                                                \
  const int tx = lid % 16, ty = lid / 16;                                                         \
  __local float4 smem4_[SG_STAGES * SG_STAGE / 4];                                                \
  __local float *smem = (__local float *)smem4_;                                                  \
  float acc[4][4][4];                                                                             \
  _Pragma("unroll") for (int i = 0; i < 4; i++)                                                   \
    _Pragma("unroll") for (int j = 0; j < 4; j++)                                                 \
      _Pragma("unroll") for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;                          \
  const bool interior = m0 + SG_BM <= M && n0 + SG_BN <= N;                                       \
  /* interior tiles' copies: chunk lid of each operand (row ra_: K-major m or n, else k; chunk  \
   * qa_), local offset da, source pa; chunk lid + 256 i is i * 1024 and i * astep after it */   \
  const int ra_ = (A_K) ? lid / (SG_BK / 4) : lid / 32, qa_ = (A_K) ? lid % (SG_BK / 4) : lid % 32; \
  const int rb_ = (B_K) ? lid / (SG_BK / 4) : lid / 32, qb_ = (B_K) ? lid % (SG_BK / 4) : lid % 32; \
  const int da = (A_K) ? SG_KPOS(ra_, qa_) : ra_ * 128 + qa_ * 4;                                 \
  const int db = (B_K) ? SG_KPOS(rb_, qb_) : rb_ * 128 + qb_ * 4;                                 \
  __global const float *pa = Ab + ra_ * lda + qa_ * 4, *pb = Bb + rb_ * ldb + qb_ * 4;            \
  const int astep = SG_RSTEP(A_K) * lda, bstep = SG_RSTEP(B_K) * ldb;                             \
  const int abump = (A_K) ? SG_BK : SG_BK * lda, bbump = (B_K) ? SG_BK : SG_BK * ldb;             \
  const int ntiles = (K + SG_BK - 1) / SG_BK;                                                     \
  if (interior) {                                                                                 \
    SG_MAIN(SG_LOAD_INT, A_K, B_K)                                                                \
  } else {                                                                                        \
    SG_MAIN(SG_LOAD_EDGE, A_K, B_K)                                                               \
  }                                                                                               \
  SG_EPILOGUE(A_K, B_K)

/* Grid: (ceil(N/128) * 256, ceil(M/128), batch); local (256, 1, 1). gemm_sgemm_<a><b>: a is r
 * when A's rows are contiguous (a_sk == 1), else c (a_sm == 1); b is r when B's rows are
 * (b_sn == 1), else c (b_sk == 1). */
#define SG_ATTR __kernel __attribute__((reqd_work_group_size(256, 1, 1))) void
SG_ATTR gemm_sgemm_rr(GEMM_ARGS) { SG_BODY(1, 0) }
SG_ATTR gemm_sgemm_rc(GEMM_ARGS) { SG_BODY(1, 1) }
SG_ATTR gemm_sgemm_cr(GEMM_ARGS) { SG_BODY(0, 0) }
SG_ATTR gemm_sgemm_cc(GEMM_ARGS) { SG_BODY(0, 1) }

/* The large-tile GEMM for GPUs: C = alpha A B + beta C (+ bias), float32, batched, with
 * operands whose rows or columns are contiguous (the host sends other layouts, float64 and
 * problems whose extents pass 2^31 elements to gemm.cl's general kernel).
 *
 * A work-group of 256 work-items (16 x 16) computes a BM x BN tile of C; each work-item holds
 * (BM/16) x (BN/16) results in registers, as 4 x 4 blocks spaced 64 rows and 64 columns apart
 * so that its reads of the staged tiles are 16-byte vectors without bank conflicts. K advances
 * BK at a time through two local-memory buffers: while the work-group multiplies the tile in
 * one buffer, each work-item has already issued its global reads of the next tile into
 * registers, and writes them into the other buffer afterwards; one barrier per K tile. Full
 * tiles read with 16-byte vector loads and 32-bit index math; edge tiles read element by
 * element with zero fill. Register arrays are indexed only by constants (every loop over them
 * is unrolled), so they stay in registers.
 *
 * Three tile shapes are built (gemm_fast_l_* 128x128, one kernel per operand layout,
 * gemm_fast_m 128x64, gemm_fast_s 64x64, each with BK 16); the host picks one per product so
 * that the grid fills the device. */

#define REAL4 NC_CAT4_(REAL, 4)
#define NC_CAT4__(a, b) a##b
#define NC_CAT4_(a, b) NC_CAT4__(a, b)

/* The work-item's place in the 16 x 16 grid of 4 x 4 result blocks: tx along N, ty along M.
 * (Mapping each warp to 8 x 4 blocks instead of 16 x 2, so that a warp's reads of the B tile
 * touch fewer rows, was timed on an H100 and changed nothing: docs/performance.md.) */
#define GF_TXY const int lid = get_local_id(0), tx = lid % 16, ty = lid / 16;


/* Reads the A tile (rows m0.., columns k0..) into registers ra[]. A is K-contiguous
 * (a_sk == 1: row m starts at Ab + m*lda) or M-contiguous (a_sm == 1: column k starts at
 * Ab + k*lda), Ab already at row m0 and column 0. */
#define GF_FETCH_A(BM, BK, NVA)                                                                   \
  _Pragma("unroll") for (int t_ = 0; t_ < (NVA); t_++) {                                        \
    const int v_ = lid + t_ * 256;                                                               \
    if (a_kmajor) {                                                                              \
      const int row_ = v_ / ((BK) / 4), kq_ = (v_ % ((BK) / 4)) * 4;                              \
      __global const REAL *p_ = Ab + row_ * lda + k0 + kq_;                                      \
      if (fullm && k0 + (BK) <= K) ra[t_] = a_vec ? *(__global const REAL4 *)p_ : vload4(0, p_);  \
      else {                                                                                     \
        const bool r_ok = m0 + row_ < M;                                                         \
        ra[t_] = (REAL4)((r_ok && k0 + kq_ < K) ? p_[0] : 0, (r_ok && k0 + kq_ + 1 < K) ? p_[1] : 0, \
                         (r_ok && k0 + kq_ + 2 < K) ? p_[2] : 0, (r_ok && k0 + kq_ + 3 < K) ? p_[3] : 0); \
      }                                                                                          \
    } else {                                                                                     \
      const int kk_ = v_ / ((BM) / 4), mq_ = (v_ % ((BM) / 4)) * 4;                               \
      __global const REAL *p_ = Ab + (k0 + kk_) * lda + mq_;                                     \
      if (fullm && k0 + (BK) <= K) ra[t_] = a_vec ? *(__global const REAL4 *)p_ : vload4(0, p_);  \
      else {                                                                                     \
        const bool k_ok = k0 + kk_ < K;                                                          \
        ra[t_] = (REAL4)((k_ok && m0 + mq_ < M) ? p_[0] : 0, (k_ok && m0 + mq_ + 1 < M) ? p_[1] : 0, \
                         (k_ok && m0 + mq_ + 2 < M) ? p_[2] : 0, (k_ok && m0 + mq_ + 3 < M) ? p_[3] : 0); \
      }                                                                                          \
    }                                                                                            \
  }

/* Writes ra[] into buffer BUF of As ([BK][BM + 4] per buffer, K-major). */
#define GF_STORE_A(BM, BK, NVA, BUF)                                                              \
  _Pragma("unroll") for (int t_ = 0; t_ < (NVA); t_++) {                                        \
    const int v_ = lid + t_ * 256;                                                               \
    __local REAL *s_ = As + (BUF) * (BK) * ((BM) + GF_PAD);                                           \
    if (a_kmajor) {                                                                              \
      const int row_ = v_ / ((BK) / 4), kq_ = (v_ % ((BK) / 4)) * 4;                              \
      s_[kq_ * ((BM) + GF_PAD) + row_] = GF_CVT(ra[t_].x);                                       \
      s_[(kq_ + 1) * ((BM) + GF_PAD) + row_] = GF_CVT(ra[t_].y);                                 \
      s_[(kq_ + 2) * ((BM) + GF_PAD) + row_] = GF_CVT(ra[t_].z);                                 \
      s_[(kq_ + 3) * ((BM) + GF_PAD) + row_] = GF_CVT(ra[t_].w);                                 \
    } else {                                                                                     \
      const int kk_ = v_ / ((BM) / 4), mq_ = (v_ % ((BM) / 4)) * 4;                               \
      vstore4(GF_CVT4(ra[t_]), 0, s_ + kk_ * ((BM) + GF_PAD) + mq_);                                           \
    }                                                                                            \
  }

/* The B tile (rows k0.., columns n0..): N-contiguous (b_sn == 1: row k starts at Bb + k*ldb)
 * or K-contiguous (b_sk == 1: column n starts at Bb + n*ldb), Bb already at column n0. */
#define GF_FETCH_B(BN, BK, NVB)                                                                   \
  _Pragma("unroll") for (int t_ = 0; t_ < (NVB); t_++) {                                        \
    const int v_ = lid + t_ * 256;                                                               \
    if (b_nmajor) {                                                                              \
      const int kk_ = v_ / ((BN) / 4), nq_ = (v_ % ((BN) / 4)) * 4;                               \
      __global const REAL *p_ = Bb + (k0 + kk_) * ldb + nq_;                                     \
      if (fulln && k0 + (BK) <= K) rb[t_] = b_vec ? *(__global const REAL4 *)p_ : vload4(0, p_);  \
      else {                                                                                     \
        const bool k_ok = k0 + kk_ < K;                                                          \
        rb[t_] = (REAL4)((k_ok && n0 + nq_ < N) ? p_[0] : 0, (k_ok && n0 + nq_ + 1 < N) ? p_[1] : 0, \
                         (k_ok && n0 + nq_ + 2 < N) ? p_[2] : 0, (k_ok && n0 + nq_ + 3 < N) ? p_[3] : 0); \
      }                                                                                          \
    } else {                                                                                     \
      const int col_ = v_ / ((BK) / 4), kq_ = (v_ % ((BK) / 4)) * 4;                              \
      __global const REAL *p_ = Bb + col_ * ldb + k0 + kq_;                                      \
      if (fulln && k0 + (BK) <= K) rb[t_] = b_vec ? *(__global const REAL4 *)p_ : vload4(0, p_);  \
      else {                                                                                     \
        const bool c_ok = n0 + col_ < N;                                                         \
        rb[t_] = (REAL4)((c_ok && k0 + kq_ < K) ? p_[0] : 0, (c_ok && k0 + kq_ + 1 < K) ? p_[1] : 0, \
                         (c_ok && k0 + kq_ + 2 < K) ? p_[2] : 0, (c_ok && k0 + kq_ + 3 < K) ? p_[3] : 0); \
      }                                                                                          \
    }                                                                                            \
  }

#define GF_STORE_B(BN, BK, NVB, BUF)                                                              \
  _Pragma("unroll") for (int t_ = 0; t_ < (NVB); t_++) {                                        \
    const int v_ = lid + t_ * 256;                                                               \
    __local REAL *s_ = Bs + (BUF) * (BK) * ((BN) + GF_PAD);                                           \
    if (b_nmajor) {                                                                              \
      const int kk_ = v_ / ((BN) / 4), nq_ = (v_ % ((BN) / 4)) * 4;                               \
      vstore4(GF_CVT4(rb[t_]), 0, s_ + kk_ * ((BN) + GF_PAD) + nq_);                                           \
    } else {                                                                                     \
      const int col_ = v_ / ((BK) / 4), kq_ = (v_ % ((BK) / 4)) * 4;                              \
      s_[kq_ * ((BN) + GF_PAD) + col_] = GF_CVT(rb[t_].x);                                       \
      s_[(kq_ + 1) * ((BN) + GF_PAD) + col_] = GF_CVT(rb[t_].y);                                 \
      s_[(kq_ + 2) * ((BN) + GF_PAD) + col_] = GF_CVT(rb[t_].z);                                 \
      s_[(kq_ + 3) * ((BN) + GF_PAD) + col_] = GF_CVT(rb[t_].w);                                 \
    }                                                                                            \
  }

/* One K tile of products from buffer BUF: WM x WN blocks of 4 x 4 per work-item. The staged
 * reads go through 4-vector pointers: every offset is a multiple of 4 elements from the
 * 16-byte aligned buffers (rows of BM + GF_PAD and BN + GF_PAD, both multiples of 4). */
#define GF_COMPUTE_SIMT(BM, BN, BK, WM, WN, BUF)                                                       \
  {                                                                                              \
    __local const REAL *sa_ = As + (BUF) * (BK) * ((BM) + GF_PAD) + ty * 4;                           \
    __local const REAL *sb_ = Bs + (BUF) * (BK) * ((BN) + GF_PAD) + tx * 4;                           \
    _Pragma("unroll") for (int k_ = 0; k_ < (BK); k_++) {                                        \
      REAL4 a_[WM], b_[WN];                                                                      \
      _Pragma("unroll") for (int r_ = 0; r_ < (WM); r_++)                                        \
        a_[r_] = *(__local const REAL4 *)(sa_ + k_ * ((BM) + GF_PAD) + r_ * 64);                  \
      _Pragma("unroll") for (int c_ = 0; c_ < (WN); c_++)                                        \
        b_[c_] = *(__local const REAL4 *)(sb_ + k_ * ((BN) + GF_PAD) + c_ * 64);                  \
      _Pragma("unroll") for (int r_ = 0; r_ < (WM); r_++)                                        \
        _Pragma("unroll") for (int i_ = 0; i_ < 4; i_++)                                         \
          _Pragma("unroll") for (int c_ = 0; c_ < (WN); c_++)                                    \
            acc[r_ * 4 + i_][c_] = fma((REAL4)(NC_V4(a_[r_], i_)), b_[c_], acc[r_ * 4 + i_][c_]); \
    }                                                                                            \
  }

/* ---- the ways to multiply a staged K tile -----------------------------------------------------
 * SIMT (the default): each work-item multiplies 4 x 4 blocks with fma. Tensor cores (NVIDIA
 * devices of compute capability 8.0 or later, built by cl_gemm.c for the matmul precisions
 * "high", -DNC_MMA_TF32=1, and "medium", -DNC_MMA_BF16=1): the staged values are rounded when
 * they are written to local memory (kept as float32 bit patterns there), and the 8 warps of the
 * work-group (2 along M, 4 along N) each multiply a (BM/2) x (BN/4) block with mma.sync, float32
 * accumulation (kernels/mma.cl: the rounding, the instruction and the fragment layouts). The
 * accumulators are indexed by constants only (every loop over them is unrolled). Local rows are
 * padded so that a warp's fragment reads fall in distinct banks: by 8 elements for tf32 (rows t
 * and t + 4, columns g), by 4 for bf16 (rows 2t and 2t + 1 at columns g), whose registers are
 * packed from two local floats' upper halves. */
#if defined(NC_MMA_TF32) || defined(NC_MMA_BF16)
#ifdef NC_MMA_BF16
#define GF_PAD 4
#define GF_KSTEP 16
#define GF_CVT(x) mma_bf16(x)
#define GF_CVT4(v) mma_bf16_4(v)
#else
#define GF_PAD 8
#define GF_KSTEP 8
#define GF_CVT(x) mma_tf32(x)
#define GF_CVT4(v) mma_tf32_4(v)
#endif

#define GF_ACC(BM, BN, WN)                                                                        \
  float acc[(BM) / 32][(BN) / 32][4];                                                            \
  _Pragma("unroll") for (int i = 0; i < (BM) / 32; i++)                                         \
    _Pragma("unroll") for (int j = 0; j < (BN) / 32; j++)                                       \
      _Pragma("unroll") for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;                        \
  const int lane_ = lid % 32, warp_ = lid / 32, gq_ = lane_ >> 2, tq_ = lane_ & 3;                  \
  const int wm_ = warp_ / 4, wn_ = warp_ % 4;                                                   \
  MMA_SCRATCH(256)


/* The fragments of one K step (GF_KSTEP) at local row ks_, from sa_ / sb_ (see above). */
#ifdef NC_MMA_BF16
#define GF_FRAGS(BM, BN)                                                                          \
  _Pragma("unroll") for (int i_ = 0; i_ < (BM) / 32; i_++) {                                     \
    __local const uint *p_ = sa_ + (ks_ + 2 * tq_) * ((BM) + GF_PAD) + i_ * 16;                  \
    fa_[i_][0] = MMA_PK(p_[0], p_[(BM) + GF_PAD]);                                               \
    fa_[i_][1] = MMA_PK(p_[8], p_[(BM) + GF_PAD + 8]);                                           \
    fa_[i_][2] = MMA_PK(p_[8 * ((BM) + GF_PAD)], p_[9 * ((BM) + GF_PAD)]);                       \
    fa_[i_][3] = MMA_PK(p_[8 * ((BM) + GF_PAD) + 8], p_[9 * ((BM) + GF_PAD) + 8]);               \
  }                                                                                              \
  _Pragma("unroll") for (int j_ = 0; j_ < (BN) / 32; j_++) {                                     \
    __local const uint *q_ = sb_ + (ks_ + 2 * tq_) * ((BN) + GF_PAD) + j_ * 8;                   \
    fb_[j_][0] = MMA_PK(q_[0], q_[(BN) + GF_PAD]);                                               \
    fb_[j_][1] = MMA_PK(q_[8 * ((BN) + GF_PAD)], q_[9 * ((BN) + GF_PAD)]);                       \
  }
#else
#define GF_FRAGS(BM, BN)                                                                          \
  _Pragma("unroll") for (int i_ = 0; i_ < (BM) / 32; i_++) {                                     \
    fa_[i_][0] = sa_[(ks_ + tq_) * ((BM) + GF_PAD) + i_ * 16];                                    \
    fa_[i_][1] = sa_[(ks_ + tq_) * ((BM) + GF_PAD) + i_ * 16 + 8];                                \
    fa_[i_][2] = sa_[(ks_ + tq_ + 4) * ((BM) + GF_PAD) + i_ * 16];                                \
    fa_[i_][3] = sa_[(ks_ + tq_ + 4) * ((BM) + GF_PAD) + i_ * 16 + 8];                            \
  }                                                                                              \
  _Pragma("unroll") for (int j_ = 0; j_ < (BN) / 32; j_++) {                                     \
    fb_[j_][0] = sb_[(ks_ + tq_) * ((BN) + GF_PAD) + j_ * 8];                                     \
    fb_[j_][1] = sb_[(ks_ + tq_ + 4) * ((BN) + GF_PAD) + j_ * 8];                                 \
  }
#endif

#define GF_COMPUTE(BM, BN, BK, WM, WN, BUF)                                                       \
  {                                                                                              \
    __local const uint *sa_ = (__local const uint *)(As + (BUF) * (BK) * ((BM) + GF_PAD)) + wm_ * ((BM) / 2) + gq_; \
    __local const uint *sb_ = (__local const uint *)(Bs + (BUF) * (BK) * ((BN) + GF_PAD)) + wn_ * ((BN) / 4) + gq_; \
    MMA_UNROLL for    (int ks_ = 0; ks_ < (BK); ks_ += GF_KSTEP) {                               \
      uint fa_[(BM) / 32][4], fb_[(BN) / 32][2];                                                 \
      GF_FRAGS(BM, BN)                                                                           \
      MMA_UNROLL for    (int i_ = 0; i_ < (BM) / 32; i_++)                                       \
        MMA_UNROLL for    (int j_ = 0; j_ < (BN) / 32; j_++) MMA_SYNC(acc[i_][j_], fa_[i_], fb_[j_]); \
    }                                                                                            \
  }

/* Runs ST(m, n, value, j) for each result (m, n + j), j = 0, 1, a work-item holds. */
#define GF_MMA_EACH(BM, BN, ST)                                                                   \
  _Pragma("unroll") for (int i_ = 0; i_ < (BM) / 32; i_++)                                       \
    _Pragma("unroll") for (int j_ = 0; j_ < (BN) / 32; j_++)                                     \
      _Pragma("unroll") for (int h_ = 0; h_ < 2; h_++) {                                         \
        const int m = m0 + wm_ * ((BM) / 2) + i_ * 16 + gq_ + h_ * 8;                             \
        const int n = n0 + wn_ * ((BN) / 4) + j_ * 8 + tq_ * 2;                                  \
        if (m < M) { ST(m, n, acc[i_][j_][2 * h_], 0) ST(m, n + 1, acc[i_][j_][2 * h_ + 1], 1) } \
      }

/* The three epilogues, one result at a time (bounds on n; m is checked by GF_MMA_EACH). */
#define GF_MMA_ST(m, n, val, j)                                                                   \
  if ((n) < N) {                                                                                 \
    __global REAL *p_ = Cb + (long)(m) * c_sm + (long)(n) * c_sn;                                \
    REAL o_ = (val) * alpha;                                                                     \
    if (beta != (REAL)0) o_ += beta * *p_;                                                       \
    if (has_bias) o_ += biasb[(long)(m) * bias_sm + (long)(n) * bias_sn];                        \
    *p_ = o_;                                                                                    \
  }
#define CF_MMA_ST(m, n, val, j)                                                                   \
  if ((n) < N) {                                                                                 \
    const int b_ = CV_DIV_OHW(n);                                                                \
    Y[CV_YOFS(b_, (n) - b_ * ohw) + (m) * p.yp] = (val) + (has_bias ? bias[m] : (REAL)0);          \
  }
#define CW_MMA_ST(m, n, val, j) if ((n) < N) Wout[(m) * N + (n)] = (val);
#define GF_EPI(BM, BN, WM, WN) GF_MMA_EACH(BM, BN, GF_MMA_ST)
#define CF_EPI(BM, BN, WM, WN) GF_MMA_EACH(BM, BN, CF_MMA_ST)
#define CW_EPI(BM, BN, WM, WN) GF_MMA_EACH(BM, BN, CW_MMA_ST)

#else
#define GF_PAD 4
#define GF_CVT(x) (x)
#define GF_CVT4(v) (v)
#define GF_ACC(BM, BN, WN)                                                                        \
  REAL4 acc[(BM) / 16][WN];                                                                     \
  _Pragma("unroll") for (int i = 0; i < (BM) / 16; i++)                                         \
    _Pragma("unroll") for (int j = 0; j < WN; j++) acc[i][j] = (REAL4)0;
#define GF_COMPUTE(BM, BN, BK, WM, WN, BUF) GF_COMPUTE_SIMT(BM, BN, BK, WM, WN, BUF)
#define GF_EPI(BM, BN, WM, WN) GF_EPI_SIMT(BM, BN, WM, WN)
#define CF_EPI(BM, BN, WM, WN) CF_EPI_SIMT(BM, BN, WM, WN)
#define CW_EPI(BM, BN, WM, WN) CW_EPI_SIMT(BM, BN, WM, WN)
#endif

/* The main loop for one tile shape: declares the staged tiles and acc[BM/16][WN], and runs K
 * tiles from k0 = KBEG while k0 < K (K: the end of the range, KBEG a multiple of 4). FETCH_A /
 * FETCH_B(B?, BK, NV?) read a tile at k0 into ra[] / rb[], STORE_A / STORE_B(..., BUF) write them
 * to local buffer BUF. Expects lid, tx, ty, m0, n0, M, N, K and what the loaders use. */
#define GF_MAIN(BM, BN, BK, WM, WN, NVA, NVB, KBEG, FETCH_A, STORE_A, FETCH_B, STORE_B)            \
  __local REAL4 As4_[2 * (BK) * ((BM) + GF_PAD) / 4];                                                 \
  __local REAL4 Bs4_[2 * (BK) * ((BN) + GF_PAD) / 4];                                                 \
  __local REAL *As = (__local REAL *)As4_, *Bs = (__local REAL *)Bs4_;                           \
  GF_ACC(BM, BN, WN)                                                                            \
  REAL4 ra[NVA], rb[NVB];                                                                       \
  const int kbeg_ = (KBEG);                                                                     \
  const int ntiles = K > kbeg_ ? (K - kbeg_ + (BK) - 1) / (BK) : 0;                             \
  int k0 = kbeg_;                                                                               \
  FETCH_A(BM, BK, NVA)                                                                          \
  FETCH_B(BN, BK, NVB)                                                                          \
  STORE_A(BM, BK, NVA, 0)                                                                       \
  STORE_B(BN, BK, NVB, 0)                                                                       \
  barrier(CLK_LOCAL_MEM_FENCE);                                                                 \
  for (int t = 0; t < ntiles; t++) {                                                            \
    const int cur = t & 1;                                                                      \
    k0 = kbeg_ + (t + 1) * (BK);                                                                \
    if (t + 1 < ntiles) {                                                                       \
      FETCH_A(BM, BK, NVA)                                                                      \
      FETCH_B(BN, BK, NVB)                                                                      \
    }                                                                                           \
    GF_COMPUTE(BM, BN, BK, WM, WN, cur)                                                         \
    if (t + 1 < ntiles) {                                                                       \
      STORE_A(BM, BK, NVA, cur ^ 1)                                                             \
      STORE_B(BN, BK, NVB, cur ^ 1)                                                             \
    }                                                                                           \
    barrier(CLK_LOCAL_MEM_FENCE);                                                               \
  }

/* The plain GEMM kernel's body for one tile shape: A_KMAJOR and B_NMAJOR are whether A's rows
 * (a_sk == 1) and B's rows (b_sn == 1) are contiguous, as run-time tests or as constants in the
 * kernels built for one layout (the host launches those only on that layout): with constants the
 * compiler drops the other layout's loaders, and NVIDIA's took 128 registers a work-item for
 * gemm_fast_l instead of 187, so that two work-groups fit a multiprocessor (docs/performance.md). */
#define GF_BODY(BM, BN, BK, A_KMAJOR, B_NMAJOR)                                                   \
  GF_BODY_(BM, BN, BK, (BM) / 64, (BN) / 64, (BM) * (BK) / 1024, (BN) * (BK) / 1024, A_KMAJOR, B_NMAJOR)
#define GF_BODY_(BM, BN, BK, WM, WN, NVA, NVB, A_KMAJOR, B_NMAJOR)                                \
  GF_TXY                                                                                        \
  const long bi = get_group_id(2);                                                              \
  const int M = (int)M_, N = (int)N_, K = (int)K_;                                              \
  const int m0 = get_group_id(1) * (BM), n0 = get_group_id(0) * (BN);                           \
  const bool a_kmajor = (A_KMAJOR), b_nmajor = (B_NMAJOR);                                      \
  const int lda = (int)(a_kmajor ? a_sm : a_sk), ldb = (int)(b_nmajor ? b_sk : b_sn);          \
  __global const REAL *Ab = A + a_off + bi * a_sb + (a_kmajor ? (long)m0 * lda : (long)m0);     \
  __global const REAL *Bb = B + b_off + bi * b_sb + (b_nmajor ? (long)n0 : (long)n0 * ldb);     \
  const bool fullm = m0 + (BM) <= M, fulln = n0 + (BN) <= N;                                    \
  /* 16-byte aligned rows (buffers are): full tiles read through REAL4 pointers */              \
  const bool a_vec = ((a_off + bi * a_sb) & 3) == 0 && (lda & 3) == 0;                          \
  const bool b_vec = ((b_off + bi * b_sb) & 3) == 0 && (ldb & 3) == 0;                          \
  GF_MAIN(BM, BN, BK, WM, WN, NVA, NVB, 0, GF_FETCH_A, GF_STORE_A, GF_FETCH_B, GF_STORE_B)        \
  __global REAL *Cb = C + c_off + bi * c_sb;                                                    \
  __global const REAL *biasb = bias + bias_off;                                                 \
  GF_EPI(BM, BN, WM, WN)

/* The SIMT kernels' GEMM epilogue: 4-vector stores where the layout allows. */
#define GF_EPI_SIMT(BM, BN, WM, WN)                                                              \
  const bool plain = c_sn == 1 && beta == (REAL)0 && !has_bias;                                 \
  _Pragma("unroll") for (int r = 0; r < WM; r++)                                                \
    _Pragma("unroll") for (int i = 0; i < 4; i++) {                                             \
      const int m = m0 + r * 64 + ty * 4 + i;                                                   \
      _Pragma("unroll") for (int c = 0; c < WN; c++) {                                          \
        const int n = n0 + c * 64 + tx * 4;                                                     \
        const REAL4 v = acc[r * 4 + i][c] * alpha;                                              \
        if (plain && m < M && n + 3 < N) vstore4(v, 0, Cb + (long)m * c_sm + n);                \
        else if (m < M) {                                                                       \
          GF_STORE1(0) GF_STORE1(1) GF_STORE1(2) GF_STORE1(3)                                    \
        }                                                                                       \
      }                                                                                         \
    }

/* Stores component j of v at (m, n + j) with beta, bias and any C stride (edge tiles). */
#define GF_STORE1(j)                                                                              \
  if (n + (j) < N) {                                                                             \
    __global REAL *p_ = Cb + (long)m * c_sm + (long)(n + (j)) * c_sn;                            \
    REAL o_ = NC_V4(v, j);                                                                       \
    if (beta != (REAL)0) o_ += beta * *p_;                                                       \
    if (has_bias) o_ += biasb[(long)m * bias_sm + (long)(n + (j)) * bias_sn];                    \
    *p_ = o_;                                                                                    \
  }

/* Grid: (ceil(N/BN) * 256, ceil(M/BM), batch); local (256, 1, 1). The 128 x 128 tile comes in
 * one kernel per layout: gemm_fast_l_<a><b>, r for contiguous rows (a_sk == 1, b_sn == 1), c
 * for contiguous columns. */
#define GF_ATTR __kernel __attribute__((reqd_work_group_size(256, 1, 1))) void
GF_ATTR gemm_fast_l_rr(GEMM_ARGS) { GF_BODY(128, 128, 16, true, true) }
GF_ATTR gemm_fast_l_rc(GEMM_ARGS) { GF_BODY(128, 128, 16, true, false) }
GF_ATTR gemm_fast_l_cr(GEMM_ARGS) { GF_BODY(128, 128, 16, false, true) }
GF_ATTR gemm_fast_l_cc(GEMM_ARGS) { GF_BODY(128, 128, 16, false, false) }
GF_ATTR gemm_fast_m(GEMM_ARGS) { GF_BODY(128, 64, 16, a_sk == 1, b_sn == 1) }
GF_ATTR gemm_fast_s(GEMM_ARGS) { GF_BODY(64, 64, 16, a_sk == 1, b_sn == 1) }

/* ---- 2-D convolution on the same main loop (groups of 1, float32; geometry in mma.cl) ------- */

/* The forward's B operand: column n = (b, oy, ox) of the implicit im2col matrix, row
 * k = (c, i, j). Each work-item reads the same four columns in every K tile (their decoding
 * is in cb/cy/cx), and one row per 4-vector, decoded once per tile. */
#define CF_X(e)                                                                                   \
  ((k_ok && cy[e] + dy_ >= 0 && cy[e] + dy_ < p.h && cx[e] + dx_ >= 0 && cx[e] + dx_ < p.w)       \
       ? X[cb[e] + coff_ + (cy[e] + dy_) * p.w + cx[e] + dx_]                                     \
       : (REAL)0)
#define CF_FETCH_B(BN, BK, NVB)                                                                   \
  _Pragma("unroll") for (int t_ = 0; t_ < (NVB); t_++) {                                        \
    const int k_ = k0 + (lid + t_ * 256) / ((BN) / 4);                                           \
    const int c_ = CV_DIV_KHW(k_), r_ = k_ - c_ * khw, i_ = CV_DIV_KW(r_);                       \
    const int dy_ = i_ * p.dh, dx_ = (r_ - i_ * p.kw) * p.dw, coff_ = c_ * hw;                   \
    const bool k_ok = k_ < K;                                                                    \
    rb[t_] = (REAL4)(CF_X(0), CF_X(1), CF_X(2), CF_X(3));                                        \
  }

/* Y[b, m, q] for result (m, n = (b, q)), bias added. */
#define CF_STORE1(j)                                                                              \
  if (n + (j) < N) {                                                                             \
    const int b_ = CV_DIV_OHW(n + (j));                                                          \
    Y[CV_YOFS(b_, (n + (j)) - b_ * ohw) + m * p.yp] = NC_V4(v, j);                               \
  }

#define CF_BODY(BM, BN, BK) CF_BODY_(BM, BN, BK, (BM) / 64, (BN) / 64, (BM) * (BK) / 1024, (BN) * (BK) / 1024)
#define CF_BODY_(BM, BN, BK, WM, WN, NVA, NVB)                                                    \
  GF_TXY                                                                                        \
  const int khw = p.kh * p.kw, hw = p.h * p.w, ohw = p.oh * p.ow;                               \
  const int M = p.o, N = p.n * ohw, K = p.c * khw;                                              \
  const int m0 = get_group_id(1) * (BM), n0 = get_group_id(0) * (BN);                           \
  const bool a_kmajor = true, b_nmajor = true, fullm = m0 + (BM) <= M;                          \
  const int lda = K;                                                                            \
  const bool a_vec = (K & 3) == 0;                                                              \
  __global const REAL *Ab = Wt + (long)m0 * K;                                                  \
  int cb[4], cy[4], cx[4];                                                                      \
  _Pragma("unroll") for (int e = 0; e < 4; e++) {                                               \
    const int n = n0 + (lid % ((BN) / 4)) * 4 + e;                                              \
    const int b = CV_DIV_OHW(n), q = n - b * ohw, oy = CV_DIV_OW(q);                            \
    cb[e] = b * p.c * hw;                                                                       \
    cy[e] = n < N ? oy * p.sh - p.ph : -(1 << 29);                                              \
    cx[e] = (q - oy * p.ow) * p.sw - p.pw;                                                      \
  }                                                                                             \
  GF_MAIN(BM, BN, BK, WM, WN, NVA, NVB, 0, GF_FETCH_A, GF_STORE_A, CF_FETCH_B, GF_STORE_B)        \
  CF_EPI(BM, BN, WM, WN)

#define CF_EPI_SIMT(BM, BN, WM, WN)                                                              \
  const bool dense = p.yc == 1 && p.yr == p.ow; /* rows of Y follow each other */              \
  _Pragma("unroll") for (int r = 0; r < WM; r++)                                                \
    _Pragma("unroll") for (int i = 0; i < 4; i++) {                                             \
      const int m = m0 + r * 64 + ty * 4 + i;                                                   \
      const REAL bm = (has_bias && m < M) ? bias[m] : (REAL)0;                                  \
      _Pragma("unroll") for (int c = 0; c < WN; c++) {                                          \
        const int n = n0 + c * 64 + tx * 4;                                                     \
        const REAL4 v = acc[r * 4 + i][c] + bm;                                                 \
        const int b0 = CV_DIV_OHW(n), q0 = n - b0 * ohw;                                        \
        if (m < M && n + 3 < N && q0 + 3 < ohw && dense)                                        \
          vstore4(v, 0, Y + (b0 * p.o + m) * p.yp + q0 + p.y0);                                  \
        else if (m < M) {                                                                       \
          CF_STORE1(0) CF_STORE1(1) CF_STORE1(2) CF_STORE1(3)                                    \
        }                                                                                       \
      }                                                                                         \
    }

/* Grid: (ceil(N/BN) * 256, ceil(M/BM), 1) with M = o, N = n * oh * ow; local (256, 1, 1). */
#define CF_ARGS const nc_convi p, __global const REAL *X, __global const REAL *Wt, __global const REAL *bias, \
                const int has_bias, __global REAL *Y
__kernel __attribute__((reqd_work_group_size(256, 1, 1))) void conv_fast_l(CF_ARGS) { CF_BODY(128, 128, 16) }
__kernel __attribute__((reqd_work_group_size(256, 1, 1))) void conv_fast_s(CF_ARGS) { CF_BODY(64, 64, 16) }
__kernel __attribute__((reqd_work_group_size(256, 1, 1))) void conv_fast_w(CF_ARGS) { CF_BODY(64, 128, 16) }

/* ---- weight gradient: dW[m = o, n = (c, i, j)] = sum over k = (b, q) of dY[b, o, q] X_col[n, k].
 * The K range is split (grid dim 2) into chunks of kchunk; each writes WS[split] (or dW itself
 * when there is one split) and gf_sum_splits adds them in a fixed order. */

/* A = dY: row m, four consecutive k = (b, q); one vector read when they share b. */
#define CW_DY(e)                                                                                  \
  ((m_ok && k_ + (e) < K) ? DY[CV_DIV_OHW(k_ + (e)) * (p.o - 1) * ohw + m_ * ohw + (k_ + (e))] : (REAL)0)
#define CW_FETCH_A(BM, BK, NVA)                                                                   \
  _Pragma("unroll") for (int t_ = 0; t_ < (NVA); t_++) {                                        \
    const int v_ = lid + t_ * 256;                                                               \
    const int m_ = m0 + v_ / ((BK) / 4), k_ = k0 + (v_ % ((BK) / 4)) * 4;                         \
    const bool m_ok = m_ < M;                                                                    \
    const int b_ = CV_DIV_OHW(k_), q_ = k_ - b_ * ohw;                                           \
    if (m_ok && k_ + 3 < K && q_ + 3 < ohw)                                                     \
      ra[t_] = dy_vec ? *(__global const REAL4 *)(DY + b_ * p.o * ohw + m_ * ohw + q_)           \
                      : vload4(0, DY + b_ * p.o * ohw + m_ * ohw + q_);                          \
    else ra[t_] = (REAL4)(CW_DY(0), CW_DY(1), CW_DY(2), CW_DY(3));                               \
  }

/* B = X_col, K-contiguous: column n = (c, i, j) and four consecutive k = (b, oy, ox), decoded
 * once and stepped along ox. */
#define CW_X(e)                                                                                   \
  ((n_ok && k_ + (e) < K && y##e >= 0 && y##e < p.h && x##e >= 0 && x##e < p.w)                  \
       ? X[b##e * p.c * hw + coff_ + y##e * p.w + x##e]                                           \
       : (REAL)0)
#define CW_STEP(e, prev)                                                                          \
  int ox##e = ox##prev + 1, oy##e = oy##prev, b##e = b##prev;                                    \
  if (ox##e == p.ow) { ox##e = 0; oy##e++; }                                                     \
  if (oy##e == p.oh) { oy##e = 0; b##e++; }                                                      \
  const int y##e = oy##e * p.sh - p.ph + dy_, x##e = ox##e * p.sw - p.pw + dx_;
#define CW_FETCH_B(BN, BK, NVB)                                                                   \
  _Pragma("unroll") for (int t_ = 0; t_ < (NVB); t_++) {                                        \
    const int v_ = lid + t_ * 256;                                                               \
    const int n_ = n0 + v_ / ((BK) / 4), k_ = k0 + (v_ % ((BK) / 4)) * 4;                        \
    const bool n_ok = n_ < N;                                                                    \
    const int c_ = CV_DIV_KHW(n_), r_ = n_ - c_ * khw, i_ = CV_DIV_KW(r_);                       \
    const int dy_ = i_ * p.dh, dx_ = (r_ - i_ * p.kw) * p.dw, coff_ = c_ * hw;                   \
    int b0 = CV_DIV_OHW(k_), ox0 = k_ - b0 * ohw, oy0 = CV_DIV_OW(ox0);                          \
    ox0 -= oy0 * p.ow;                                                                           \
    const int y0 = oy0 * p.sh - p.ph + dy_, x0 = ox0 * p.sw - p.pw + dx_;                        \
    CW_STEP(1, 0) CW_STEP(2, 1) CW_STEP(3, 2)                                                    \
    rb[t_] = (REAL4)(CW_X(0), CW_X(1), CW_X(2), CW_X(3));                                        \
  }

#define CW_BODY(BM, BN, BK) CW_BODY_(BM, BN, BK, (BM) / 64, (BN) / 64, (BM) * (BK) / 1024, (BN) * (BK) / 1024)
#define CW_BODY_(BM, BN, BK, WM, WN, NVA, NVB)                                                    \
  GF_TXY                                                                                        \
  const int khw = p.kh * p.kw, hw = p.h * p.w, ohw = p.oh * p.ow;                               \
  const int M = p.o, N = p.c * khw, split = get_group_id(2);                                    \
  const int K = min(p.n * ohw, (split + 1) * kchunk);                                           \
  const int m0 = get_group_id(1) * (BM), n0 = get_group_id(0) * (BN);                           \
  const bool a_kmajor = true, b_nmajor = false, dy_vec = (ohw & 3) == 0;                        \
  GF_MAIN(BM, BN, BK, WM, WN, NVA, NVB, split * kchunk, CW_FETCH_A, GF_STORE_A, CW_FETCH_B, GF_STORE_B) \
  __global REAL *Wout = WS + (long)split * M * N;                                                \
  CW_EPI(BM, BN, WM, WN)

#define CW_EPI_SIMT(BM, BN, WM, WN)                                                              \
  _Pragma("unroll") for (int r = 0; r < WM; r++)                                                \
    _Pragma("unroll") for (int i = 0; i < 4; i++) {                                             \
      const int m = m0 + r * 64 + ty * 4 + i;                                                   \
      _Pragma("unroll") for (int c = 0; c < WN; c++) {                                          \
        const int n = n0 + c * 64 + tx * 4;                                                     \
        const REAL4 v = acc[r * 4 + i][c];                                                      \
        if (m < M && n + 3 < N) vstore4(v, 0, Wout + m * N + n);                                \
        else if (m < M) {                                                                       \
          if (n < N) Wout[m * N + n] = v.x;                                                     \
          if (n + 1 < N) Wout[m * N + n + 1] = v.y;                                             \
          if (n + 2 < N) Wout[m * N + n + 2] = v.z;                                             \
        }                                                                                       \
      }                                                                                         \
    }

/* Grid: (ceil(N/BN) * 256, ceil(M/BM), splits) with M = o, N = c * kh * kw; kchunk a multiple of 16. */
#define CW_ARGS const nc_convi p, const int kchunk, __global const REAL *DY, __global const REAL *X, __global REAL *WS
__kernel __attribute__((reqd_work_group_size(256, 1, 1))) void conv_wgrad_fast_l(CW_ARGS) { CW_BODY(128, 128, 16) }
__kernel __attribute__((reqd_work_group_size(256, 1, 1))) void conv_wgrad_fast_s(CW_ARGS) { CW_BODY(64, 64, 16) }
__kernel __attribute__((reqd_work_group_size(256, 1, 1))) void conv_wgrad_fast_w(CW_ARGS) { CW_BODY(64, 128, 16) }

/* OUT[off + i] = sum over s < splits of WS[s * total + i], in that order. */
__kernel void gf_sum_splits(__global const REAL *WS, const int splits, const int total, __global REAL *OUT,
                            const long off) {
  for (int i = get_global_id(0); i < total; i += get_global_size(0)) {
    REAL s = 0;
    for (int t = 0; t < splits; t++) s += WS[(long)t * total + i];
    OUT[off + i] = s;
  }
}

/* Y at p's output layout (yp, yr, yc, y0) = the sum over s < splits of WS[s total + i], i the
 * dense index of (b, m, oy, ox) in [n, o, oh, ow]: a convolution forward whose K was split
 * (runtime/backend/opencl/cl_conv.c), storing a phase of an input gradient. */
__kernel void conv_sum_splits(__global const REAL *WS, const int splits, const nc_convi p, __global REAL *Y) {
  CV_SUM_SPLITS(REAL, WS, splits, Y, )
}

/* The weights of one phase of a convolution's input gradient (runtime/backend/opencl/cl_conv.c):
 * transposed (o <-> c) and flipped in space, the taps ky = ky0 + sy m (m < th) and kx = kx0 + sx m'
 * (m' < tw) only: WP[c, o, th-1-m, tw-1-m'] = W[o, c, ky0 + sy m, kx0 + sx m']. With ky0 = kx0 = 0,
 * steps of 1 and every tap, the input gradient of a stride-1 convolution. */
__kernel void conv_phase_weight(__global const REAL *W, const int o, const int c, const int kh, const int kw,
                                const int ky0, const int kx0, const int sy, const int sx, const int th,
                                const int tw, __global REAL *WP) {
  const int thw = th * tw;
  for (int e = get_global_id(0); e < o * c * thw; e += get_global_size(0)) {
    const int ci = e / (o * thw), r = e - ci * o * thw, oi = r / thw, t = r - oi * thw, ty = t / tw;
    const int ky = ky0 + sy * (th - 1 - ty), kx = kx0 + sx * (tw - 1 - (t - ty * tw));
    WP[e] = W[((oi * c + ci) * kh + ky) * kw + kx];
  }
}

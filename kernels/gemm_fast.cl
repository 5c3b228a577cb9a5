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
 * Three tile shapes are built (gemm_fast_l 128x128, gemm_fast_m 128x64, gemm_fast_s 64x64,
 * each with BK 16); the host picks one per product so that the grid fills the device. */

#ifndef REAL
#define REAL float
#endif
#define REAL4 NC_CAT4_(REAL, 4)
#define NC_CAT4__(a, b) a##b
#define NC_CAT4_(a, b) NC_CAT4__(a, b)

/* Component i (a constant) of a 4-vector. */
#define NC_V4(v, i) ((i) == 0 ? (v).x : (i) == 1 ? (v).y : (i) == 2 ? (v).z : (v).w)

/* Reads the A tile (rows m0.., columns k0..) into registers ra[]. A is K-contiguous
 * (a_sk == 1: row m starts at Ab + m*lda) or M-contiguous (a_sm == 1: column k starts at
 * Ab + k*lda), Ab already at row m0 and column 0. */
#define GF_FETCH_A(BM, BK, NVA)                                                                   \
  _Pragma("unroll") for (int t_ = 0; t_ < (NVA); t_++) {                                        \
    const int v_ = lid + t_ * 256;                                                               \
    if (a_kmajor) {                                                                              \
      const int row_ = v_ / ((BK) / 4), kq_ = (v_ % ((BK) / 4)) * 4;                              \
      __global const REAL *p_ = Ab + row_ * lda + k0 + kq_;                                      \
      if (fullm && k0 + (BK) <= K) ra[t_] = vload4(0, p_);                                       \
      else {                                                                                     \
        const bool r_ok = m0 + row_ < M;                                                         \
        ra[t_] = (REAL4)((r_ok && k0 + kq_ < K) ? p_[0] : 0, (r_ok && k0 + kq_ + 1 < K) ? p_[1] : 0, \
                         (r_ok && k0 + kq_ + 2 < K) ? p_[2] : 0, (r_ok && k0 + kq_ + 3 < K) ? p_[3] : 0); \
      }                                                                                          \
    } else {                                                                                     \
      const int kk_ = v_ / ((BM) / 4), mq_ = (v_ % ((BM) / 4)) * 4;                               \
      __global const REAL *p_ = Ab + (k0 + kk_) * lda + mq_;                                     \
      if (fullm && k0 + (BK) <= K) ra[t_] = vload4(0, p_);                                       \
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
    __local REAL *s_ = As + (BUF) * (BK) * ((BM) + 4);                                           \
    if (a_kmajor) {                                                                              \
      const int row_ = v_ / ((BK) / 4), kq_ = (v_ % ((BK) / 4)) * 4;                              \
      s_[kq_ * ((BM) + 4) + row_] = ra[t_].x;                                                    \
      s_[(kq_ + 1) * ((BM) + 4) + row_] = ra[t_].y;                                              \
      s_[(kq_ + 2) * ((BM) + 4) + row_] = ra[t_].z;                                              \
      s_[(kq_ + 3) * ((BM) + 4) + row_] = ra[t_].w;                                              \
    } else {                                                                                     \
      const int kk_ = v_ / ((BM) / 4), mq_ = (v_ % ((BM) / 4)) * 4;                               \
      vstore4(ra[t_], 0, s_ + kk_ * ((BM) + 4) + mq_);                                           \
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
      if (fulln && k0 + (BK) <= K) rb[t_] = vload4(0, p_);                                       \
      else {                                                                                     \
        const bool k_ok = k0 + kk_ < K;                                                          \
        rb[t_] = (REAL4)((k_ok && n0 + nq_ < N) ? p_[0] : 0, (k_ok && n0 + nq_ + 1 < N) ? p_[1] : 0, \
                         (k_ok && n0 + nq_ + 2 < N) ? p_[2] : 0, (k_ok && n0 + nq_ + 3 < N) ? p_[3] : 0); \
      }                                                                                          \
    } else {                                                                                     \
      const int col_ = v_ / ((BK) / 4), kq_ = (v_ % ((BK) / 4)) * 4;                              \
      __global const REAL *p_ = Bb + col_ * ldb + k0 + kq_;                                      \
      if (fulln && k0 + (BK) <= K) rb[t_] = vload4(0, p_);                                       \
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
    __local REAL *s_ = Bs + (BUF) * (BK) * ((BN) + 4);                                           \
    if (b_nmajor) {                                                                              \
      const int kk_ = v_ / ((BN) / 4), nq_ = (v_ % ((BN) / 4)) * 4;                               \
      vstore4(rb[t_], 0, s_ + kk_ * ((BN) + 4) + nq_);                                           \
    } else {                                                                                     \
      const int col_ = v_ / ((BK) / 4), kq_ = (v_ % ((BK) / 4)) * 4;                              \
      s_[kq_ * ((BN) + 4) + col_] = rb[t_].x;                                                    \
      s_[(kq_ + 1) * ((BN) + 4) + col_] = rb[t_].y;                                              \
      s_[(kq_ + 2) * ((BN) + 4) + col_] = rb[t_].z;                                              \
      s_[(kq_ + 3) * ((BN) + 4) + col_] = rb[t_].w;                                              \
    }                                                                                            \
  }

/* One K tile of products from buffer BUF: WM x WN blocks of 4 x 4 per work-item. */
#define GF_COMPUTE(BM, BN, BK, WM, WN, BUF)                                                       \
  {                                                                                              \
    __local const REAL *sa_ = As + (BUF) * (BK) * ((BM) + 4) + ty * 4;                           \
    __local const REAL *sb_ = Bs + (BUF) * (BK) * ((BN) + 4) + tx * 4;                           \
    _Pragma("unroll") for (int k_ = 0; k_ < (BK); k_++) {                                        \
      REAL4 a_[WM], b_[WN];                                                                      \
      _Pragma("unroll") for (int r_ = 0; r_ < (WM); r_++) a_[r_] = vload4(0, sa_ + k_ * ((BM) + 4) + r_ * 64); \
      _Pragma("unroll") for (int c_ = 0; c_ < (WN); c_++) b_[c_] = vload4(0, sb_ + k_ * ((BN) + 4) + c_ * 64); \
      _Pragma("unroll") for (int r_ = 0; r_ < (WM); r_++)                                        \
        _Pragma("unroll") for (int i_ = 0; i_ < 4; i_++)                                         \
          _Pragma("unroll") for (int c_ = 0; c_ < (WN); c_++)                                    \
            acc[r_ * 4 + i_][c_] = fma((REAL4)(NC_V4(a_[r_], i_)), b_[c_], acc[r_ * 4 + i_][c_]); \
    }                                                                                            \
  }

/* The whole kernel body for one tile shape. */
#define GF_BODY(BM, BN, BK) GF_BODY_(BM, BN, BK, (BM) / 64, (BN) / 64, (BM) * (BK) / 1024, (BN) * (BK) / 1024)
/* WM x WN blocks of 4 x 4 results per work-item; NVA, NVB: 4-vectors of A and B each work-item
 * reads per K tile. The local tiles are declared as vectors so that they are 16-byte aligned. */
#define GF_BODY_(BM, BN, BK, WM, WN, NVA, NVB)                                                    \
  __local REAL4 As4_[2 * (BK) * ((BM) + 4) / 4];                                                 \
  __local REAL4 Bs4_[2 * (BK) * ((BN) + 4) / 4];                                                 \
  __local REAL *As = (__local REAL *)As4_, *Bs = (__local REAL *)Bs4_;                           \
  const int lid = get_local_id(0), tx = lid % 16, ty = lid / 16;                                \
  const long bi = get_group_id(2);                                                              \
  const int M = (int)M_, N = (int)N_, K = (int)K_;                                              \
  const int m0 = get_group_id(1) * (BM), n0 = get_group_id(0) * (BN);                           \
  const bool a_kmajor = a_sk == 1, b_nmajor = b_sn == 1;                                        \
  const int lda = (int)(a_kmajor ? a_sm : a_sk), ldb = (int)(b_nmajor ? b_sk : b_sn);          \
  __global const REAL *Ab = A + a_off + bi * a_sb + (a_kmajor ? (long)m0 * lda : (long)m0);     \
  __global const REAL *Bb = B + b_off + bi * b_sb + (b_nmajor ? (long)n0 : (long)n0 * ldb);     \
  const bool fullm = m0 + (BM) <= M, fulln = n0 + (BN) <= N;                                    \
  REAL4 acc[(BM) / 16][WN];                                                                     \
  _Pragma("unroll") for (int i = 0; i < (BM) / 16; i++)                                         \
    _Pragma("unroll") for (int j = 0; j < WN; j++) acc[i][j] = (REAL4)0;                       \
  REAL4 ra[NVA], rb[NVB];                                                                       \
  const int ntiles = (K + (BK) - 1) / (BK);                                                     \
  int k0 = 0;                                                                                   \
  GF_FETCH_A(BM, BK, NVA)                                                                       \
  GF_FETCH_B(BN, BK, NVB)                                                                       \
  GF_STORE_A(BM, BK, NVA, 0)                                                                    \
  GF_STORE_B(BN, BK, NVB, 0)                                                                    \
  barrier(CLK_LOCAL_MEM_FENCE);                                                                 \
  for (int t = 0; t < ntiles; t++) {                                                            \
    const int cur = t & 1;                                                                      \
    k0 = (t + 1) * (BK);                                                                        \
    if (t + 1 < ntiles) {                                                                       \
      GF_FETCH_A(BM, BK, NVA)                                                                   \
      GF_FETCH_B(BN, BK, NVB)                                                                   \
    }                                                                                           \
    GF_COMPUTE(BM, BN, BK, WM, WN, cur)                                                         \
    if (t + 1 < ntiles) {                                                                       \
      GF_STORE_A(BM, BK, NVA, cur ^ 1)                                                          \
      GF_STORE_B(BN, BK, NVB, cur ^ 1)                                                          \
    }                                                                                           \
    barrier(CLK_LOCAL_MEM_FENCE);                                                               \
  }                                                                                             \
  __global REAL *Cb = C + c_off + bi * c_sb;                                                    \
  __global const REAL *biasb = bias + bias_off;                                                 \
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

#define GF_ARGS                                                                                   \
  const long M_, const long N_, const long K_, __global const REAL *A, const long a_off, const long a_sb, \
      const long a_sm, const long a_sk, __global const REAL *B, const long b_off, const long b_sb,   \
      const long b_sk, const long b_sn, __global REAL *C, const long c_off, const long c_sb,         \
      const long c_sm, const long c_sn, __global const REAL *bias, const long bias_off,              \
      const long bias_sm, const long bias_sn, const int has_bias, const REAL alpha, const REAL beta

/* Grid: (ceil(N/BN) * 256, ceil(M/BM), batch); local (256, 1, 1). */
__kernel __attribute__((reqd_work_group_size(256, 1, 1))) void gemm_fast_l(GF_ARGS) { GF_BODY(128, 128, 16) }
__kernel __attribute__((reqd_work_group_size(256, 1, 1))) void gemm_fast_m(GF_ARGS) { GF_BODY(128, 64, 16) }
__kernel __attribute__((reqd_work_group_size(256, 1, 1))) void gemm_fast_s(GF_ARGS) { GF_BODY(64, 64, 16) }

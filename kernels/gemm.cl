/* Tiled GEMM engine and the strided batched GEMM kernel.
 *
 * A work-group computes an MWG x NWG tile of C; each work-item computes TM rows by TNV
 * vectors of VW columns, held in registers (2-D register blocking). The K dimension advances
 * KWG at a time through tiles of A and B staged in local memory; interior tiles of plainly
 * laid-out operands load with vector loads, edge tiles load element by element with zero
 * fill, so any M, N, K and any strides work. Tile sizes come from build options (one program
 * per tuned variant): -DMWG -DNWG -DKWG -DTM -DTNV -DVW, and -DREAL=float|double.
 *
 * conv.cl reuses the engine with its own tile loaders (implicit im2col). */

#ifndef REAL
#define REAL float
#endif
#ifndef MWG
#define MWG 64
#define NWG 64
#define KWG 16
#define TM 4
#define TNV 1
#define VW 8
#endif

#define NC_CAT_(a, b) a##b
#define NC_CAT(a, b) NC_CAT_(a, b)
#define REALV NC_CAT(REAL, VW)
#define REAL4 NC_CAT(REAL, 4)
#define VLOADV NC_CAT(vload, VW)
#define VSTOREV NC_CAT(vstore, VW)

#define WGN (NWG / (VW * TNV)) /* work-items along N (local dim 0) */
#define WGM (MWG / TM)         /* work-items along M (local dim 1) */
#define WGS (WGN * WGM)

/* Generic tile loaders: EXPR(m, k) / EXPR(k, n) read one in-range element; kfast says which
 * index walks contiguous memory (so neighbouring work-items read neighbouring addresses). */
#define NC_LOAD_A_GENERIC(EXPR, kfast)                                  \
  NC_GROUP_FOR(int, idx, 0, lid, MWG * KWG, WGS) {                       \
    int i_, kk_;                                                        \
    if (kfast) { kk_ = idx % KWG; i_ = idx / KWG; }                     \
    else { i_ = idx % MWG; kk_ = idx / MWG; }                           \
    long m_ = m0 + i_, k_ = k0 + kk_;                                   \
    As[kk_][i_] = (m_ < M && k_ < K) ? (REAL)(EXPR(m_, k_)) : (REAL)0;  \
  }

#define NC_LOAD_B_GENERIC(EXPR, kfast)                                  \
  NC_GROUP_FOR(int, idx, 0, lid, KWG * NWG, WGS) {                       \
    int j_, kk_;                                                        \
    if (kfast) { kk_ = idx % KWG; j_ = idx / KWG; }                     \
    else { j_ = idx % NWG; kk_ = idx / NWG; }                           \
    long n_ = n0 + j_, k_ = k0 + kk_;                                   \
    Bs[kk_][j_] = (n_ < N && k_ < K) ? (REAL)(EXPR(k_, n_)) : (REAL)0;  \
  }

/* The main loop: declares acc[TM][TNV] and runs k0 from KSTART to K. Expects M, N, K, lid,
 * m0, n0 and the loader statements LOAD_A / LOAD_B (which see k0, As, Bs). */
#define NC_GEMM_MAIN(KSTART, LOAD_A, LOAD_B)                                          \
  __local REAL As[KWG][MWG];                                                          \
  __local REAL Bs[KWG][NWG];                                                          \
  REALV acc[TM][TNV];                                                                 \
  for (int i = 0; i < TM; i++)                                                        \
    for (int j = 0; j < TNV; j++) acc[i][j] = (REALV)0;                               \
  const int tn = get_local_id(0), tm = get_local_id(1);                               \
  for (long k0 = (KSTART); k0 < K; k0 += KWG) {                                                \
    LOAD_A;                                                                           \
    LOAD_B;                                                                           \
    barrier(CLK_LOCAL_MEM_FENCE);                                                     \
    _Pragma("unroll 4")                                                               \
    for (int kk = 0; kk < KWG; kk++) {                                                \
      REALV b[TNV];                                                                   \
      for (int j = 0; j < TNV; j++) b[j] = VLOADV(0, &Bs[kk][(tn * TNV + j) * VW]);   \
      for (int i = 0; i < TM; i++) {                                                  \
        const REALV a = (REALV)(As[kk][tm * TM + i]);                                 \
        for (int j = 0; j < TNV; j++) acc[i][j] = fma(a, b[j], acc[i][j]);            \
      }                                                                               \
    }                                                                                 \
    barrier(CLK_LOCAL_MEM_FENCE);                                                     \
  }

/* Writes the tile: STORE(m, n, v) for every in-range element (v = the accumulated sum). The loops
 * run the same rounds in every work-item (no per-item break: see NC_GROUP_FOR). */
#define NC_GEMM_STORE(STORE)                                                          \
  for (int i = 0; i < TM; i++) {                                                      \
    const long m = m0 + tm * TM + i;                                                  \
    for (int j = 0; j < TNV; j++) {                                                   \
      REAL v_[VW];                                                                    \
      VSTOREV(acc[i][j], 0, v_);                                                      \
      const long nb = n0 + (tn * TNV + j) * VW;                                       \
      for (int v = 0; v < VW; v++)                                                    \
        if (m < M && nb + v < N) STORE(m, nb + v, v_[v]);                             \
    }                                                                                 \
  }

/* ---- strided batched GEMM: C = alpha A B + beta C (+ bias) ------------------------------ */

#define A_AT(m, k) A[(m) * a_sm + (k) * a_sk]
#define B_AT(k, n) B[(k) * b_sk + (n) * b_sn]

/* Interior tiles of operands with a unit stride use 4-wide vector loads. */
#define LOAD_A_STRIDED                                                                \
  if (m0 + MWG <= M && k0 + KWG <= K && a_sk == 1) {                                  \
    NC_GROUP_FOR(int, idx, 0, lid, MWG * KWG / 4, WGS) {                              \
      const int kv = idx % (KWG / 4), i = idx / (KWG / 4);                            \
      const REAL4 v = vload4(0, A + (m0 + i) * a_sm + k0 + kv * 4);                   \
      As[kv * 4][i] = v.s0; As[kv * 4 + 1][i] = v.s1;                                 \
      As[kv * 4 + 2][i] = v.s2; As[kv * 4 + 3][i] = v.s3;                             \
    }                                                                                 \
  } else if (m0 + MWG <= M && k0 + KWG <= K && a_sm == 1) {                           \
    NC_GROUP_FOR(int, idx, 0, lid, MWG * KWG / 4, WGS) {                              \
      const int iv = idx % (MWG / 4), kk = idx / (MWG / 4);                           \
      vstore4(vload4(0, A + (k0 + kk) * a_sk + m0 + iv * 4), 0, &As[kk][iv * 4]);     \
    }                                                                                 \
  } else {                                                                            \
    NC_LOAD_A_GENERIC(A_AT, a_sk == 1)                                                \
  }

#define LOAD_B_STRIDED                                                                \
  if (n0 + NWG <= N && k0 + KWG <= K && b_sn == 1) {                                  \
    NC_GROUP_FOR(int, idx, 0, lid, NWG * KWG / 4, WGS) {                              \
      const int jv = idx % (NWG / 4), kk = idx / (NWG / 4);                           \
      vstore4(vload4(0, B + (k0 + kk) * b_sk + n0 + jv * 4), 0, &Bs[kk][jv * 4]);     \
    }                                                                                 \
  } else if (n0 + NWG <= N && k0 + KWG <= K && b_sk == 1) {                           \
    NC_GROUP_FOR(int, idx, 0, lid, NWG * KWG / 4, WGS) {                              \
      const int kv = idx % (KWG / 4), j = idx / (KWG / 4);                            \
      const REAL4 v = vload4(0, B + (n0 + j) * b_sn + k0 + kv * 4);                   \
      Bs[kv * 4][j] = v.s0; Bs[kv * 4 + 1][j] = v.s1;                                 \
      Bs[kv * 4 + 2][j] = v.s2; Bs[kv * 4 + 3][j] = v.s3;                             \
    }                                                                                 \
  } else {                                                                            \
    NC_LOAD_B_GENERIC(B_AT, b_sk == 1)                                                \
  }

#define STORE_C(m, n, v)                                                              \
  {                                                                                   \
    __global REAL *p_ = C + (m) * c_sm + (n) * c_sn;                                  \
    REAL r_ = alpha * (v);                                                            \
    if (beta != (REAL)0) r_ += beta * *p_;                                            \
    if (has_bias) r_ += bias[(m) * bias_sm + (n) * bias_sn];                          \
    *p_ = r_;                                                                         \
  }

/* Grid: (ceil(N/NWG)*WGN, ceil(M/MWG)*WGM, batch); local (WGN, WGM, 1). */
__kernel __attribute__((reqd_work_group_size(WGN, WGM, 1)))
void gemm(const long M, const long N, const long K,
          __global const REAL *A, const long a_off, const long a_sb, const long a_sm, const long a_sk,
          __global const REAL *B, const long b_off, const long b_sb, const long b_sk, const long b_sn,
          __global REAL *C, const long c_off, const long c_sb, const long c_sm, const long c_sn,
          __global const REAL *bias, const long bias_off, const long bias_sm, const long bias_sn,
          const int has_bias, const REAL alpha, const REAL beta) {
  const long bi = get_group_id(2); /* local size 1 in dim 2 */
  A += a_off + bi * a_sb;
  B += b_off + bi * b_sb;
  C += c_off + bi * c_sb;
  bias += bias_off;
  const int lid = get_local_id(1) * WGN + get_local_id(0);
  const long m0 = (long)get_group_id(1) * MWG, n0 = (long)get_group_id(0) * NWG;
  NC_GEMM_MAIN(0, LOAD_A_STRIDED, LOAD_B_STRIDED)
  NC_GEMM_STORE(STORE_C)
}

/* Convolutions on the tensor cores with asynchronous copies: the forward (and through it the
 * input gradient, one forward per phase of the stride: runtime/backend/opencl/cl_conv.c) and the
 * weight gradient of float32 convolutions under matmul precision "high" (tf32, built with
 * -DNC_MMA_TF32=1) and "medium" (bfloat16 products, -DNC_MMA_BF16=1), on the pipeline of
 * kernels/gemm_mma.cl (built before this file with -DTC_CONV=1, which leaves its GEMM kernels
 * out): K advances 16 at a time through TC_STAGES local buffers, filled by cp.async TC_STAGES - 1
 * K tiles ahead while the work-group multiplies the current one, one barrier per K tile, and
 * gemm_mma.cl's fragment reads and products (TC_PIPELINE, TC_READ_AT, TC_PRODUCTS).
 *
 * Both products have a K-major A (the weights [o, c kh kw]; dY [o, (b, q)] per image) copied 16
 * bytes at a time, and an implicit im2col B gathered 4 bytes at a time (cp.async.ca with a zero
 * fill where the window leaves the image): column n of the forward's B is the output pixel
 * (b, oy, ox), row k the tap (c, i, j); the weight gradient's B has the tap as its column and the
 * pixel as its row. B is kept N-major in local memory (16 rows of 128, gemm_mma.cl's chunk
 * permutation), so that the 32 work-items of a warp, which gather 32 neighbouring columns of one
 * row, write 32 distinct banks. Each work-item decodes its columns once and steps through the K
 * tile's 16 rows, whose decoding every work-item shares. (Gathering the weight gradient's B with
 * eight work-items on eight neighbouring pixels of one tap instead, the taps from a table in
 * local memory, made it 20 to 35% slower on an H100: docs/performance.md.)
 *
 * A work-group is BM x 128 (BM = 64: _s kernels, two warps; 128: _l kernels, four warps), each
 * warp a 64 x 64 block. The forward's results go through local memory to the output in rows of
 * 128 neighbouring pixels; both may split K (grid dim 2) into partial sums, which gemm_fast.cl's
 * gf_sum_splits adds up.
 *
 * The host launches these where the A rows start 16-byte aligned (the forward: c kh kw a multiple
 * of 4; the weight gradient: oh ow a multiple of 4) and every index fits in 32 bits. */

#if (defined(NC_MMA_BF16) || defined(NC_MMA_TF32)) && defined(TC_CONV)

#define CM_STAGE(BM) (((BM) + TC_BN) * TC_BK) /* floats per stage */
#define CM_PITCH 129                            /* the forward's result rows in local memory */
#ifdef NC_MMA_EMULATE
#define CM_UNROLL4 _Pragma("unroll 1")
#else
#define CM_UNROLL4 _Pragma("unroll 4")
#endif

/* The fragments of stage st (gemm_mma.cl's TC_READ_AT) for a tile of BM rows. */
#define CM_READ(BM, st) TC_READ_AT(smem + (st) * CM_STAGE(BM), smem + (st) * CM_STAGE(BM) + (BM) * TC_BK, 1, 0)
#define CM_READ_S(st, A_K, B_K) CM_READ(64, st)
#define CM_READ_L(st, A_K, B_K) CM_READ(128, st)

/* The work-item's place: lane, warp (wm along M, wn along N: two warps along N), g and t. */
#define CM_START(BM)                                                                               \
  const int lid = get_local_id(0), lane = lid % 32, warp = lid / 32, g = lane >> 2, t = lane & 3; \
  const int wm = warp / 2, wn = warp % 2;                                                        \
  const int m0 = get_group_id(1) * (BM), n0 = get_group_id(0) * TC_BN;                           \
  const int khw = p.kh * p.kw, hw = p.h * p.w, ohw = p.oh * p.ow;                                \
  __local float4 smem4_[TC_STAGES * CM_STAGE(BM) / 4];                                           \
  __local float *smem = (__local float *)smem4_;                                                 \
  MMA_SCRATCH(BM)                                                                                \
  TC_REGS

/* Four 16-byte chunks of a K-major A tile (BM rows of 16) per work-item: chunk c_ is row c_ / 4,
 * k = k0_ + 4 (c_ % 4); SRC(r, k) is its address for an absolute row r < M and a k < KEND. */
#define CM_LOAD_A(BM, sa_, KEND, SRC)                                                              \
  _Pragma("unroll") for (int i_ = 0; i_ < 4; i_++) {                                             \
    const int c_ = lid + i_ * (BM), r_ = m0 + (c_ >> 2), k_ = k0_ + (c_ & 3) * 4;                \
    const int by_ = r_ < M ? clamp(((KEND) - k_) * 4, 0, 16) : 0;                                 \
    tc_copy16((sa_) + c_ * 4, by_ ? (SRC(r_, k_)) : (Abase), by_);                               \
  }

/* ---- forward: Y[b, m, q] = sum over k = (c, i, j) of W[m, k] X[b, c, y + i dh, x + j dw] ------ */

/* K tile kt into stage st: A from the weights, B gathered from X (each work-item's columns
 * col[u], decoded into the window's corner cy, cx and the offset cofs of (b, cy, cx)). */
#define CM_FWD_A(r, k) (Wt + (r) * K + (k))
#define CM_FWD_LOAD(BM, st, kt)                                                                    \
  {                                                                                              \
    const int k0_ = kbeg + (kt) * TC_BK;                                                         \
    __local float *sa_ = smem + (st) * CM_STAGE(BM), *sb_ = sa_ + (BM) * TC_BK;                  \
    CM_LOAD_A(BM, sa_, kend, CM_FWD_A)                                                           \
    const int c0_ = CV_DIV_KHW(k0_), t0_ = k0_ - c0_ * khw, i0_ = CV_DIV_KW(t0_);                \
    int c_ = c0_, i_ = i0_, j_ = t0_ - i0_ * p.kw;                                               \
    _Pragma("unroll") for (int r_ = 0; r_ < TC_BK; r_++) {                                       \
      const bool kok_ = k0_ + r_ < kend;                                                         \
      const int ry_ = i_ * p.dh, rx_ = j_ * p.dw, koff_ = c_ * hw + ry_ * p.w + rx_;             \
      _Pragma("unroll") for (int u_ = 0; u_ < TC_BN / (BM); u_++) {                              \
        const bool ok_ = kok_ && (uint)(cy[u_] + ry_) < (uint)p.h && (uint)(cx[u_] + rx_) < (uint)p.w; \
        tc_copy4(sb_ + r_ * TC_BN + TC_SWZ(col[u_] >> 2, r_) * 4 + (col[u_] & 3),                \
                 ok_ ? X + (cofs[u_] + koff_) : X, ok_ ? 4 : 0);                                 \
      }                                                                                          \
      if (++j_ == p.kw) {                                                                        \
        j_ = 0;                                                                                  \
        if (++i_ == p.kh) i_ = 0, c_++;                                                          \
      }                                                                                          \
    }                                                                                            \
  }
#define CM_FWD_LOAD_S(st, kt, A_K, B_K) CM_FWD_LOAD(64, st, kt)
#define CM_FWD_LOAD_L(st, kt, A_K, B_K) CM_FWD_LOAD(128, st, kt)

#define CM_FWD_BODY(BM, LOAD, READ)                                                                      \
  CM_START(BM)                                                                                   \
  const int M = p.o, N = p.n * ohw, K = p.c * khw, split = get_group_id(2);                     \
  const int kbeg = split * kchunk, kend = min(K, kbeg + kchunk), ntiles = (kend - kbeg + TC_BK - 1) / TC_BK; \
  __global const float *Abase = Wt;                                                              \
  int col[TC_BN / (BM)], cy[TC_BN / (BM)], cx[TC_BN / (BM)], cofs[TC_BN / (BM)];                 \
  _Pragma("unroll") for (int u = 0; u < TC_BN / (BM); u++) {                                     \
    const int n = n0 + (col[u] = lid + u * (BM)), nn = n < N ? n : 0; /* past N: never read */  \
    const int b = CV_DIV_OHW(nn), q = nn - b * ohw, oy = CV_DIV_OW(q);                           \
    cy[u] = n < N ? oy * p.sh - p.ph : -(1 << 29);                                               \
    cx[u] = (q - oy * p.ow) * p.sw - p.pw;                                                       \
    cofs[u] = b * p.c * hw + (oy * p.sh - p.ph) * p.w + cx[u];                                   \
  }                                                                                              \
  TC_PIPELINE(LOAD, READ, 1, 0)                                                                  \
  CM_FWD_EPILOGUE(BM)

/* The results, one warp row (64 rows of C) at a time, through local memory (rows of CM_PITCH
 * floats, which puts a warp's 32 writes in distinct banks) to Y in rows of TC_BN pixels (at the
 * layout of p's yp, yr, yc, y0): work-item lid stores columns lid + u BM. */
#define CM_FWD_EPILOGUE(BM)                                                                        \
  TC_WAIT_ALL();                                                                                 \
  __global float *Ys = Y + (long)split * p.n * p.o * p.yp; /* split s of K: partial sums */     \
  const bool addb = has_bias && split == 0;                                                      \
  int yofs[TC_BN / (BM)];                                                                        \
  _Pragma("unroll") for (int u = 0; u < TC_BN / (BM); u++) {                                     \
    const int n = n0 + col[u], b = CV_DIV_OHW(n);                                                \
    yofs[u] = n < N ? CV_YOFS(b, n - b * ohw) : -1;                                              \
  }                                                                                              \
  _Pragma("unroll 1") for (int part = 0; part < (BM) / 64; part++) {                             \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                \
    if (wm == part) {                                                                            \
      MMA_UNROLL for (int i = 0; i < 4; i++)                                                     \
        MMA_UNROLL for (int h = 0; h < 2; h++)                                                   \
          MMA_UNROLL for (int j = 0; j < TC_FJ; j++)                                             \
            MMA_UNROLL for (int e = 0; e < 2; e++)                                               \
              smem[(TC_ROW(1, i, h) - wm * 64) * CM_PITCH + TC_COL(0, j, e)] = acc[i][j][2 * h + e]; \
    }                                                                                            \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                \
    MMA_UNROLL for (int u = 0; u < TC_BN / (BM); u++) {                                          \
      if (yofs[u] >= 0)                                                                          \
        CM_UNROLL4 for (int r = 0; r < 64; r++) {                                       \
          const int m = m0 + part * 64 + r;                                                      \
          if (m < M) Ys[yofs[u] + m * p.yp] = smem[r * CM_PITCH + col[u]] + (addb ? bias[m] : 0.0f); \
        }                                                                                        \
    }                                                                                            \
  }

/* Grid: (ceil(N / 128) * BM, ceil(M / BM), splits) with M = o, N = n oh ow; local (BM, 1, 1).
 * Split s takes K from s kchunk (a multiple of 16) and writes its partial sums to Y + s n o yp
 * (the bias in split 0's), which the host sums (gf_sum_splits) where there are several. */
#define CM_FWD_ARGS                                                                                \
  const nc_convi p, const int kchunk, __global const float *X, __global const float *Wt, __global const float *bias, \
      const int has_bias, __global float *Y
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void conv_mma_fwd_s(CM_FWD_ARGS) {
  CM_FWD_BODY(64, CM_FWD_LOAD_S, CM_READ_S)
}
__kernel __attribute__((reqd_work_group_size(128, 1, 1))) void conv_mma_fwd_l(CM_FWD_ARGS) {
  CM_FWD_BODY(128, CM_FWD_LOAD_L, CM_READ_L)
}

/* ---- weight gradient: dW[m, n = (c, i, j)] = sum over k = (b, q) of dY[b, m, q] X_col[k, n] -- */

/* K tile kt of this split into stage st: A from dY (four k of one image per chunk, since oh ow is
 * a multiple of 4), B gathered from X: row k = (b, oy, ox), decoded once per tile and stepped,
 * at the work-item's columns, whose taps are decoded into ry, rx (the window's offsets from
 * (oy sh, ox sw)) and tofs. */
#define CM_WG_A(r, k) (DY + (CV_DIV_OHW(k) * (M - 1) * ohw + (r) * ohw + (k)))
#define CM_WG_LOAD(BM, st, kt)                                                                     \
  {                                                                                              \
    const int k0_ = kbeg + (kt) * TC_BK;                                                         \
    __local float *sa_ = smem + (st) * CM_STAGE(BM), *sb_ = sa_ + (BM) * TC_BK;                  \
    CM_LOAD_A(BM, sa_, kend, CM_WG_A)                                                            \
    int b_ = CV_DIV_OHW(k0_), ox_ = k0_ - b_ * ohw, oy_ = CV_DIV_OW(ox_);                        \
    ox_ -= oy_ * p.ow;                                                                           \
    _Pragma("unroll") for (int r_ = 0; r_ < TC_BK; r_++) {                                       \
      const bool kok_ = k0_ + r_ < kend;                                                         \
      const int y_ = oy_ * p.sh, x_ = ox_ * p.sw, pofs_ = b_ * p.c * hw + y_ * p.w + x_;         \
      _Pragma("unroll") for (int u_ = 0; u_ < TC_BN / (BM); u_++) {                              \
        const bool ok_ = kok_ && (uint)(y_ + ry[u_]) < (uint)p.h && (uint)(x_ + rx[u_]) < (uint)p.w; \
        tc_copy4(sb_ + r_ * TC_BN + TC_SWZ(col[u_] >> 2, r_) * 4 + (col[u_] & 3),                \
                 ok_ ? X + (pofs_ + tofs[u_]) : X, ok_ ? 4 : 0);                                 \
      }                                                                                          \
      if (++ox_ == p.ow) {                                                                       \
        ox_ = 0;                                                                                 \
        if (++oy_ == p.oh) oy_ = 0, b_++;                                                        \
      }                                                                                          \
    }                                                                                            \
  }
#define CM_WG_LOAD_S(st, kt, A_K, B_K) CM_WG_LOAD(64, st, kt)
#define CM_WG_LOAD_L(st, kt, A_K, B_K) CM_WG_LOAD(128, st, kt)

#define CM_WG_BODY(BM, LOAD, READ)                                                                       \
  CM_START(BM)                                                                                   \
  const int M = p.o, N = p.c * khw, split = get_group_id(2);                                     \
  const int kbeg = split * kchunk, kend = min(p.n * ohw, kbeg + kchunk);                        \
  const int ntiles = (kend - kbeg + TC_BK - 1) / TC_BK;                                          \
  __global const float *Abase = DY;                                                              \
  int col[TC_BN / (BM)], ry[TC_BN / (BM)], rx[TC_BN / (BM)], tofs[TC_BN / (BM)];                 \
  _Pragma("unroll") for (int u = 0; u < TC_BN / (BM); u++) {                                     \
    const int n = n0 + (col[u] = lid + u * (BM)), nn = n < N ? n : 0; /* past N: never read */  \
    const int c = CV_DIV_KHW(nn), r = nn - c * khw, i = CV_DIV_KW(r);                            \
    ry[u] = n < N ? i * p.dh - p.ph : -(1 << 29);                                                \
    rx[u] = (r - i * p.kw) * p.dw - p.pw;                                                        \
    tofs[u] = c * hw + (i * p.dh - p.ph) * p.w + rx[u];                                          \
  }                                                                                              \
  TC_PIPELINE(LOAD, READ, 1, 0)                                                                  \
  __global float *Wout = WS + (long)split * M * N;                                               \
  MMA_UNROLL for (int i = 0; i < 4; i++)                                                         \
    MMA_UNROLL for (int h = 0; h < 2; h++) {                                                     \
      const int m = m0 + TC_ROW(1, i, h);                                                        \
      MMA_UNROLL for (int j = 0; j < TC_FJ; j++)                                                 \
        MMA_UNROLL for (int e = 0; e < 2; e++) {                                                 \
          const int n = n0 + TC_COL(0, j, e);                                                    \
          if (m < M && n < N) Wout[m * N + n] = acc[i][j][2 * h + e];                             \
        }                                                                                        \
    }

/* Grid: (ceil(N / 128) * BM, ceil(M / BM), splits) with M = o, N = c kh kw; kchunk a multiple of
 * 16; local (BM, 1, 1). */
#define CM_WG_ARGS                                                                                 \
  const nc_convi p, const int kchunk, __global const float *DY, __global const float *X, __global float *WS
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void conv_mma_wgrad_s(CM_WG_ARGS) {
  CM_WG_BODY(64, CM_WG_LOAD_S, CM_READ_S)
}
__kernel __attribute__((reqd_work_group_size(128, 1, 1))) void conv_mma_wgrad_l(CM_WG_ARGS) {
  CM_WG_BODY(128, CM_WG_LOAD_L, CM_READ_L)
}

#endif

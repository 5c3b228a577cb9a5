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

/* Column u's output pixel n (of N = n oh ow; past N: never read, its cy out of every image):
 * cy, cx the window's corner, cofs the offset of (b, cy, cx) in X. */
#define CM_PIXEL(u, n_)                                                                            \
  {                                                                                              \
    const int n = (n_), nn = n < N ? n : 0;                                                      \
    const int b = CV_DIV_OHW(nn), q = nn - b * ohw, oy = CV_DIV_OW(q);                           \
    cy[u] = n < N ? oy * p.sh - p.ph : -(1 << 29);                                               \
    cx[u] = (q - oy * p.ow) * p.sw - p.pw;                                                       \
    cofs[u] = b * p.c * hw + (oy * p.sh - p.ph) * p.w + cx[u];                                   \
  }
/* Column u's tap n = (c, i, j) (of N = c kh kw; past N: never read, its ry out of every image):
 * ry, rx its offsets from a window's corner, tofs the offset of (c, ry, rx) in an image. */
#define CM_TAP(u, n_)                                                                              \
  {                                                                                              \
    const int n = (n_), nn = n < N ? n : 0;                                                      \
    const int c = CV_DIV_KHW(nn), r = nn - c * khw, i = CV_DIV_KW(r);                            \
    ry[u] = n < N ? i * p.dh - p.ph : -(1 << 29);                                                \
    rx[u] = (r - i * p.kw) * p.dw - p.pw;                                                        \
    tofs[u] = c * hw + (i * p.dh - p.ph) * p.w + rx[u];                                          \
  }
/* The taps (c_, i_, j_) of K rows k0, k0 + 1, ...: CM_TAP_WALK(k0) decodes the first, CM_TAP_NEXT
 * steps to the next. */
#define CM_TAP_WALK(k0)                                                                            \
  const int c0_ = CV_DIV_KHW(k0), t0_ = (k0) - c0_ * khw, i0_ = CV_DIV_KW(t0_);                  \
  int c_ = c0_, i_ = i0_, j_ = t0_ - i0_ * p.kw;
#define CM_TAP_NEXT                                                                                \
  if (++j_ == p.kw) {                                                                            \
    j_ = 0;                                                                                      \
    if (++i_ == p.kh) i_ = 0, c_++;                                                              \
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
    CM_TAP_WALK(k0_)                                                                             \
    _Pragma("unroll") for (int r_ = 0; r_ < TC_BK; r_++) {                                       \
      const bool kok_ = k0_ + r_ < kend;                                                         \
      const int ry_ = i_ * p.dh, rx_ = j_ * p.dw, koff_ = c_ * hw + ry_ * p.w + rx_;             \
      _Pragma("unroll") for (int u_ = 0; u_ < TC_BN / (BM); u_++) {                              \
        const bool ok_ = kok_ && (uint)(cy[u_] + ry_) < (uint)p.h && (uint)(cx[u_] + rx_) < (uint)p.w; \
        tc_copy4(sb_ + r_ * TC_BN + TC_SWZ(col[u_] >> 2, r_) * 4 + (col[u_] & 3),                \
                 ok_ ? X + (cofs[u_] + koff_) : X, ok_ ? 4 : 0);                                 \
      }                                                                                          \
      CM_TAP_NEXT                                                                                \
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
    CM_PIXEL(u, n0 + (col[u] = lid + u * (BM)))                                                  \
  }                                                                                              \
  TC_PIPELINE(LOAD, READ, 1, 0)                                                                  \
  __global float *Ys = Y + (long)split * p.n * p.o * p.yp; /* split s of K: partial sums */     \
  CM_FWD_EPILOGUE(BM, CM_STORE)
#define CM_STORE(i, v) Ys[i] = (v)

/* The results, one warp row (64 rows of C) at a time, through local memory (rows of CM_PITCH
 * floats, which puts a warp's 32 writes in distinct banks) to Y in rows of TC_BN pixels (at the
 * layout of p's yp, yr, yc, y0): work-item lid stores columns lid + u BM. */
#define CM_FWD_EPILOGUE(BM, STORE)                                                                 \
  TC_WAIT_ALL();                                                                                 \
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
          if (m < M) STORE(yofs[u] + m * p.yp, smem[r * CM_PITCH + col[u]] + (addb ? bias[m] : 0.0f)); \
        }                                                                                        \
    }                                                                                            \
  }

/* Grid: (ceil(N / 128) * BM, ceil(M / BM), splits) with M = o, N = n oh ow; local (BM, 1, 1).
 * Split s takes K from s kchunk (a multiple of 16) and writes its partial sums to Y + s n o yp
 * (the bias in split 0's), which the host sums (gf_sum_splits) where there are several. */
#define CM_FWD_ARGS                                                                                \
  const nc_convi p, const int kchunk, __global const float *X, __global const float *Wt, __global const float *bias, \
      const int has_bias, __global float *Y
#ifndef CM_XBF16 /* the bfloat16 build (below) has its own forward and weight gradient */
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void conv_mma_fwd_s(CM_FWD_ARGS) {
  CM_FWD_BODY(64, CM_FWD_LOAD_S, CM_READ_S)
}
__kernel __attribute__((reqd_work_group_size(128, 1, 1))) void conv_mma_fwd_l(CM_FWD_ARGS) {
  CM_FWD_BODY(128, CM_FWD_LOAD_L, CM_READ_L)
}
#endif

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
    CM_TAP(u, n0 + (col[u] = lid + u * (BM)))                                                    \
  }                                                                                              \
  TC_PIPELINE(LOAD, READ, 1, 0)                                                                  \
  CM_WG_EPILOGUE
/* split s's results to WS + s M N */
#define CM_WG_EPILOGUE                                                                             \
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
#ifndef CM_XBF16
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void conv_mma_wgrad_s(CM_WG_ARGS) {
  CM_WG_BODY(64, CM_WG_LOAD_S, CM_READ_S)
}
__kernel __attribute__((reqd_work_group_size(128, 1, 1))) void conv_mma_wgrad_l(CM_WG_ARGS) {
  CM_WG_BODY(128, CM_WG_LOAD_L, CM_READ_L)
}
#endif

/* ---- the forward of bfloat16 tensors (-DCM_XBF16=1, with -DNC_MMA_BF16=1 after kernels/half.cl's
 * conversions): X and Y bfloat16, the weights and bias float32 (the op layer widens those; they
 * are small), K tiles as in the float32 forward, so that the products, their order and the one
 * rounding of each result are the float32 forward's on widened tensors, bit for bit, without the
 * widening and rounding passes over X and Y. The input gradient runs it per phase too.
 *
 * A bfloat16 element cannot be copied by cp.async (4 bytes at least), so B holds pairs: word
 * wd = 2q + h of a K row (tap) is, for the output pixels n0 + 2q and n0 + 2q + 1 (side by side
 * in one row: stride 1 along x, ow even), the 32-bit word of X at element e - par + 2h, where e
 * is the first pixel's element at that tap and par its parity. With w even, par depends on the
 * tap only ((j dw - pw) & 1), so it is one bit per K row (pmask, per stage); a word never spans
 * two rows of X, so its zero fill at the image's edges is exact. The products read the words as
 * the float32 build reads floats (TC_READ_AT) and, where par is 1, take the two middle halves of
 * the word pair: the pixels' values at that tap.
 *
 * An even stride along x (conv_mma_fwd_bx2) puts neighbouring output pixels two or more elements
 * apart, so B holds one word per pixel instead: word wd of a K row is the 32-bit word of X that
 * holds pixel n0 + wd's element e at that tap (at e - par), whose parity par is again the tap's
 * ((j dw - pw) & 1, with w even); where it is 1 the products take the word's upper half. The host
 * launches these where w, ow and the stride along x allow (runtime/backend/opencl/cl_conv.c,
 * bx_fits). */
#ifdef CM_XBF16
#ifndef NC_MMA_BF16
#error "conv_mma.cl: CM_XBF16 needs NC_MMA_BF16"
#endif

/* 4 bytes (bytes 4, or 0: zeros) from src to dst: a pair of bfloat16 */
#if !defined(NC_MMA_EMULATE) && !defined(TC_SYNC_COPY)
inline void cm_copy_pair(__local uint *dst, __global const uint *src, const int bytes) {
  __asm__ volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"((uint)(ulong)dst), "l"((ulong)src),
                   "r"(bytes)
                   : "memory");
}
#else
inline void cm_copy_pair(__local uint *dst, __global const uint *src, const int bytes) { *dst = bytes ? *src : 0u; }
#endif

/* K tile kt into stage st: A from the weights as in the float32 forward; B as word pairs (above;
 * ONE 0) or one word per pixel (ONE 1) at the work-item's words wd[u] (pixel columns decoded into
 * cy, cx, cofs as there, for the pair's first pixel); the rows' parities into pmask[st]. */
#define CM_BX_LOAD(BM, st, kt, ONE)                                                                \
  {                                                                                              \
    const int k0_ = kbeg + (kt) * TC_BK;                                                         \
    __local float *sa_ = smem + (st) * CM_STAGE(BM);                                              \
    __local uint *sb_ = (__local uint *)(sa_ + (BM) * TC_BK);                                     \
    CM_LOAD_A(BM, sa_, kend, CM_FWD_A)                                                           \
    CM_TAP_WALK(k0_)                                                                             \
    uint mask_ = 0;                                                                              \
    _Pragma("unroll") for (int r_ = 0; r_ < TC_BK; r_++) {                                       \
      const bool kok_ = k0_ + r_ < kend;                                                         \
      const int ry_ = i_ * p.dh, rx_ = j_ * p.dw, par_ = (rx_ - p.pw) & 1;                        \
      const int koff_ = c_ * hw + ry_ * p.w + rx_ - par_;                                         \
      mask_ |= (uint)par_ << r_;                                                                  \
      _Pragma("unroll") for (int u_ = 0; u_ < TC_BN / (BM); u_++) {                              \
        const int h_ = (ONE) ? 0 : wd[u_] & 1, x_ = cx[u_] + rx_ - par_ + 2 * h_;                 \
        const bool ok_ = kok_ && (h_ == 0 || par_) && (uint)(cy[u_] + ry_) < (uint)p.h && (uint)x_ < (uint)p.w; \
        cm_copy_pair(sb_ + r_ * TC_BN + TC_SWZ(wd[u_] >> 2, r_) * 4 + (wd[u_] & 3),              \
                     ok_ ? X2 + ((cofs[u_] + koff_) >> 1) + h_ : X2, ok_ ? 4 : 0);                \
      }                                                                                          \
      CM_TAP_NEXT                                                                                \
    }                                                                                            \
    if (lid == 0) pmask[st] = mask_;                                                             \
  }
#define CM_BX_LOAD_S(st, kt, A_K, B_K) CM_BX_LOAD(64, st, kt, 0)
#define CM_BX_LOAD_L(st, kt, A_K, B_K) CM_BX_LOAD(128, st, kt, 0)
#define CM_BX2_LOAD_S(st, kt, A_K, B_K) CM_BX_LOAD(64, st, kt, 1)
#define CM_BX2_LOAD_L(st, kt, A_K, B_K) CM_BX_LOAD(128, st, kt, 1)
/* The fragments of stage st, and the parities of the work-item's rows 4t .. 4t + 3 in pm_. */
#define CM_BX_READ(BM, st)                                                                         \
  CM_READ(BM, st)                                                                                \
  pm_ = pmask[st] >> (4 * t);
#define CM_BX_READ_S(st, A_K, B_K) CM_BX_READ(64, st)
#define CM_BX_READ_L(st, A_K, B_K) CM_BX_READ(128, st)
#define CM_BX2_READ_S CM_BX_READ_S
#define CM_BX2_READ_L CM_BX_READ_L

/* The products (the pipeline's TC_PRODUCTS in this build): A as in the float32 build; fb[u]
 * holds row 4t + u / (TC_FJ / 4)'s four words of four columns (word pairs, or with ONE a word per
 * column), w_[u] the two bfloat16 pairs of those columns after the row's shift (or choice of
 * halves); fragment j's column is column j % 4 of chunk j / 4, as the float32 build's TC_B. */
#define CM_BX_PAIR(lo, hi, sh, ONE)                                                                \
  ((ONE) ? ((sh) ? ((lo) >> 16) | ((hi) & 0xffff0000u) : ((lo) & 0xffffu) | ((hi) << 16))       \
         : ((sh) ? ((lo) >> 16) | ((hi) << 16) : (lo)))
#define CM_BX_PRODUCTS(A_K, ONE)                                                                   \
  {                                                                                              \
    uint w_[TC_FJ][2];                                                                           \
    _Pragma("unroll") for (int u_ = 0; u_ < TC_FJ; u_++) {                                       \
      const uint4 v_ = as_uint4(fb[u_]);                                                         \
      const bool sh_ = (pm_ >> (u_ / (TC_FJ / 4))) & 1u;                                          \
      w_[u_][0] = CM_BX_PAIR(v_.x, v_.y, sh_, ONE);                                               \
      w_[u_][1] = CM_BX_PAIR(v_.z, v_.w, sh_, ONE);                                               \
    }                                                                                            \
    TC_UNROLL for (int i = 0; i < 4; i++) {                                                      \
      const uint a_[4] = {tc_pack(TC_A(A_K, i, 0, 0), TC_A(A_K, i, 0, 1)), tc_pack(TC_A(A_K, i, 1, 0), TC_A(A_K, i, 1, 1)), \
                          tc_pack(TC_A(A_K, i, 0, 2), TC_A(A_K, i, 0, 3)), tc_pack(TC_A(A_K, i, 1, 2), TC_A(A_K, i, 1, 3))}; \
      TC_UNROLL for (int j = 0; j < TC_FJ; j++) {                                                \
        const int c_ = j / 4, q_ = (j >> 1) & 1;                                                 \
        const uint r0_ = w_[c_][q_], r1_ = w_[TC_FJ / 4 + c_][q_], r2_ = w_[TC_FJ / 2 + c_][q_],   \
                   r3_ = w_[3 * (TC_FJ / 4) + c_][q_];                                           \
        const uint b_[2] = {(j & 1) ? (r0_ >> 16) | (r1_ & 0xffff0000u) : (r0_ & 0xffffu) | (r1_ << 16), \
                            (j & 1) ? (r2_ >> 16) | (r3_ & 0xffff0000u) : (r2_ & 0xffffu) | (r3_ << 16)}; \
        MMA_SYNC(acc[i][j], a_, b_);                                                             \
      }                                                                                          \
    }                                                                                            \
  }

/* ---- the weight gradient of bfloat16 tensors (the same build): dY and X bfloat16, dW's partial
 * sums float32 (conv_mma_sum_bx rounds them once into dW). The K tiles, fragments and products
 * are the float32 weight gradient's on widened tensors, bit for bit.
 *
 * A (dY, K-major) as rows of 16 bfloat16 (two 16-byte copies; oh ow a multiple of 8), whose
 * fragment words are k 4t, 4t + 1 and 4t + 2, 4t + 3. B as word pairs along K: the rows (k, k +
 * 1) of a column (tap) are the neighbouring pixels (ox, ox + 1) of one image row (stride 1 along
 * x, ow even), so the word of X at element e - par (and e - par + 2 where par is 1), e the first
 * pixel's element at the column's tap, holds them: par is (j dw - pw) & 1, one bit per column,
 * fixed for the kernel. Row pair rp of a stage holds 128 columns of two words (lo, hi), its
 * 16-byte units XOR-permuted by CM_WX_SWZ so that the fragment reads (rows 2t, 2t + 1 of 8
 * lanes g, t) fall in distinct banks. */
#define CM_WX_SWZ(wd, rp) (((((wd) >> 2) ^ ((((rp) >> 1) & 1) | ((((rp) >> 1) & 2) << 1))) << 2) | ((wd) & 3))
#define CM_WX_LOAD(BM, st, kt, LOAD_A)                                                             \
  {                                                                                              \
    const int k0_ = kbeg + (kt) * TC_BK;                                                         \
    __local float *sa_ = smem + (st) * CM_STAGE(BM);                                              \
    __local uint *sb_ = (__local uint *)(sa_ + (BM) * TC_BK);                                     \
    LOAD_A(BM)                                                                                   \
    int b_ = CV_DIV_OHW(k0_), ox_ = k0_ - b_ * ohw, oy_ = CV_DIV_OW(ox_);                        \
    ox_ -= oy_ * p.ow;                                                                           \
    _Pragma("unroll") for (int rp_ = 0; rp_ < TC_BK / 2; rp_++) {                                \
      const bool kok_ = k0_ + 2 * rp_ < kend;                                                    \
      const int y_ = oy_ * p.sh, pofs_ = b_ * p.c * hw + y_ * p.w + ox_;                         \
      _Pragma("unroll") for (int u_ = 0; u_ < 2 * TC_BN / (BM); u_++) {                          \
        const int h_ = wd[u_] & 1, x_ = ox_ + rx[u_] - par[u_] + 2 * h_;                          \
        const bool ok_ = kok_ && (h_ == 0 || par[u_]) && (uint)(y_ + ry[u_]) < (uint)p.h && (uint)x_ < (uint)p.w; \
        cm_copy_pair(sb_ + rp_ * 2 * TC_BN + CM_WX_SWZ(wd[u_], rp_),                             \
                     ok_ ? X2 + ((pofs_ + tofs[u_] - par[u_]) >> 1) + h_ : X2, ok_ ? 4 : 0);      \
      }                                                                                          \
      ox_ += 2;                                                                                  \
      if (ox_ == p.ow) {                                                                         \
        ox_ = 0;                                                                                 \
        if (++oy_ == p.oh) oy_ = 0, b_++;                                                        \
      }                                                                                          \
    }                                                                                            \
  }
/* A as bfloat16: two 16-byte copies a row, chunk c_ = row c_ / 2, k 8 (c_ % 2) */
#define CM_WX_A16(BM)                                                                              \
  _Pragma("unroll") for (int i_ = 0; i_ < 2; i_++) {                                             \
    const int c_ = lid + i_ * (BM), r_ = m0 + (c_ >> 1), k_ = k0_ + (c_ & 1) * 8;                \
    const bool ok_ = r_ < M && k_ < kend;                                                        \
    tc_copy16(sa_ + c_ * 4, ok_ ? (__global const float *)(DY + (CV_DIV_OHW(k_) * (M - 1) * ohw + r_ * ohw + k_)) : Abase, \
              ok_ ? 16 : 0);                                                                     \
  }
/* A as float32 (a float32 dY: the tape's gradient of a bfloat16 activation), as the float32 build */
#define CM_WX_A32(BM) CM_LOAD_A(BM, sa_, kend, CM_WG_A)
#define CM_WX_LOAD_S(st, kt, A_K, B_K) CM_WX_LOAD(64, st, kt, CM_WX_A16)
#define CM_WX_LOAD_L(st, kt, A_K, B_K) CM_WX_LOAD(128, st, kt, CM_WX_A16)
#define CM_WF_LOAD_S(st, kt, A_K, B_K) CM_WX_LOAD(64, st, kt, CM_WX_A32)
#define CM_WF_LOAD_L(st, kt, A_K, B_K) CM_WX_LOAD(128, st, kt, CM_WX_A32)
/* Stage st's A and B as words, at sa_ and sb_ */
#define CM_STAGE_WORDS(BM, st)                                                                     \
  __local const uint *sa_ = (__local const uint *)(smem + (st) * CM_STAGE(BM));                   \
  __local const uint *sb_ = (__local const uint *)(smem + (st) * CM_STAGE(BM) + (BM) * TC_BK);
/* Stage st's fragments: fa2[2i + h] row wm 64 + 16 i + 8 h + g's words 2t, 2t + 1; fb4[2 s + v] of
 * chunk hh (columns 4 ch .. 4 ch + 3, ch = wn 16 + 8 hh + g), row pair 2t + s: unit 2 ch + v. */
#define CM_WX_READ(BM, st, READ_A)                                                                 \
  {                                                                                              \
    CM_STAGE_WORDS(BM, st)                                                                       \
    READ_A                                                                                       \
    _Pragma("unroll") for (int u_ = 0; u_ < TC_FJ; u_++) {                                       \
      const int hh_ = u_ / 4, rp_ = 2 * t + ((u_ >> 1) & 1), ch_ = wn * (TC_WN / 4) + hh_ * 8 + g; \
      fb4[u_] = *(__local const uint4 *)(sb_ + rp_ * 2 * TC_BN + CM_WX_SWZ(8 * ch_ + 4 * (u_ & 1), rp_)); \
    }                                                                                            \
  }
/* A's words: bfloat16 rows of 8 words (fa2), or float32 rows of 16 floats (fa, as TC_READ_AT) */
#define CM_WX_RA16                                                                                 \
  _Pragma("unroll") for (int u_ = 0; u_ < 8; u_++)                                               \
    fa2[u_] = *(__local const uint2 *)(sa_ + (wm * 64 + (u_ >> 1) * 16 + (u_ & 1) * 8 + g) * 8 + 2 * t);
#define CM_WX_RA32                                                                                 \
  _Pragma("unroll") for (int u_ = 0; u_ < 8; u_++)                                               \
    fa[u_] = as_float4(*(__local const uint4 *)(sa_ + (wm * 64 + (u_ >> 1) * 16 + (u_ & 1) * 8 + g) * 16 + t * 4));
#define CM_WX_READ_S(st, A_K, B_K) CM_WX_READ(64, st, CM_WX_RA16)
#define CM_WX_READ_L(st, A_K, B_K) CM_WX_READ(128, st, CM_WX_RA16)
#define CM_WF_READ_S(st, A_K, B_K) CM_WX_READ(64, st, CM_WX_RA32)
#define CM_WF_READ_L(st, A_K, B_K) CM_WX_READ(128, st, CM_WX_RA32)
/* The products: fragment j's column is column j % 4 of chunk j / 4 (the float32 build's): unit
 * (j % 4) / 2 of it, words (lo, hi) at .x, .y (an even column) or .z, .w; its two row pairs at
 * fb4[4 (j / 4) + 2 s + unit], shifted by the column's par (bit j of pc_). */
#define CM_WX_SHIFT(lo, hi, sh) ((sh) ? ((lo) >> 16) | ((hi) << 16) : (lo))
#define CM_WX_A16_FRAG(i) {fa2[2 * (i)].x, fa2[2 * (i) + 1].x, fa2[2 * (i)].y, fa2[2 * (i) + 1].y}
#define CM_WX_A32_FRAG(i)                                                                          \
  {tc_pack(TC_A(1, i, 0, 0), TC_A(1, i, 0, 1)), tc_pack(TC_A(1, i, 1, 0), TC_A(1, i, 1, 1)),       \
   tc_pack(TC_A(1, i, 0, 2), TC_A(1, i, 0, 3)), tc_pack(TC_A(1, i, 1, 2), TC_A(1, i, 1, 3))}
#define CM_WX_PRODUCTS(A_FRAG)                                                                     \
  TC_UNROLL for (int i = 0; i < 4; i++) {                                                        \
    const uint a_[4] = A_FRAG(i);                                                                \
    TC_UNROLL for (int j = 0; j < TC_FJ; j++) {                                                  \
      const uint4 v0_ = fb4[4 * (j / 4) + ((j >> 1) & 1)], v1_ = fb4[4 * (j / 4) + 2 + ((j >> 1) & 1)]; \
      const bool sh_ = (pc_ >> j) & 1u;                                                          \
      const uint b_[2] = {(j & 1) ? CM_WX_SHIFT(v0_.z, v0_.w, sh_) : CM_WX_SHIFT(v0_.x, v0_.y, sh_), \
                          (j & 1) ? CM_WX_SHIFT(v1_.z, v1_.w, sh_) : CM_WX_SHIFT(v1_.x, v1_.y, sh_)}; \
      MMA_SYNC(acc[i][j], a_, b_);                                                               \
    }                                                                                            \
  }

#if TC_FJ != 8
#error "conv_mma.cl: the bfloat16 build's fragment reads assume two warps along N"
#endif
/* The bfloat16 weight gradients' start: the work-item's place, its split of K, A's words. */
#define CM_WX_START(BM)                                                                            \
  CM_START(BM)                                                                                   \
  const int M = p.o, N = p.c * khw, split = get_group_id(2);                                     \
  const int kbeg = split * kchunk, kend = min(p.n * ohw, kbeg + kchunk);                        \
  const int ntiles = (kend - kbeg + TC_BK - 1) / TC_BK;                                          \
  __global const float *Abase = (__global const float *)DY; /* A's zero-fill address */        \
  __global const uint *X2 = (__global const uint *)X;                                            \
  uint2 fa2[8];

#define CM_WX_BODY(BM, LOAD, READ)                                                                 \
  CM_WX_START(BM)                                                                                \
  uint4 fb4[TC_FJ];                                                                              \
  int wd[2 * TC_BN / (BM)], ry[2 * TC_BN / (BM)], rx[2 * TC_BN / (BM)], tofs[2 * TC_BN / (BM)], par[2 * TC_BN / (BM)]; \
  _Pragma("unroll") for (int u = 0; u < 2 * TC_BN / (BM); u++) {                                 \
    wd[u] = lid + u * (BM);                                                                      \
    CM_TAP(u, n0 + (wd[u] >> 1))                                                                 \
    par[u] = rx[u] & 1;                                                                          \
  }                                                                                              \
  uint pc_ = 0; /* bit j: the par of fragment j's column */                                      \
  _Pragma("unroll") for (int j = 0; j < TC_FJ; j++) {                                            \
    const int n = n0 + wn * TC_WN + (j / 4) * 32 + 4 * g + j % 4, nn = n < N ? n : 0;            \
    const int r = nn - CV_DIV_KHW(nn) * khw, i = CV_DIV_KW(r);                                   \
    pc_ |= (uint)(((r - i * p.kw) * p.dw - p.pw) & 1) << j;                                      \
  }                                                                                              \
  TC_PIPELINE(LOAD, READ, 1, 0)                                                                  \
  CM_WG_EPILOGUE

#define CM_BX_BODY(BM, LOAD, READ) CM_BX_BODY_(BM, LOAD, READ, 0)
#define CM_BX2_BODY(BM, LOAD, READ) CM_BX_BODY_(BM, LOAD, READ, 1)
#define CM_BX_BODY_(BM, LOAD, READ, ONE)                                                           \
  CM_START(BM)                                                                                   \
  __local uint pmask[TC_STAGES];                                                                 \
  const int M = p.o, N = p.n * ohw, K = p.c * khw, split = get_group_id(2);                     \
  const int kbeg = split * kchunk, kend = min(K, kbeg + kchunk), ntiles = (kend - kbeg + TC_BK - 1) / TC_BK; \
  __global const float *Abase = Wt;                                                              \
  __global const uint *X2 = (__global const uint *)X;                                            \
  uint pm_ = 0;                                                                                  \
  int wd[TC_BN / (BM)], col[TC_BN / (BM)], cy[TC_BN / (BM)], cx[TC_BN / (BM)], cofs[TC_BN / (BM)]; \
  _Pragma("unroll") for (int u = 0; u < TC_BN / (BM); u++) {                                     \
    col[u] = wd[u] = lid + u * (BM);                                                             \
    CM_PIXEL(u, n0 + ((ONE) ? wd[u] : wd[u] & ~1))                                               \
  }                                                                                              \
  TC_PIPELINE(LOAD, READ, 1, 0)                                                                  \
  __global float *Ws = WS + (long)split * p.n * p.o * p.yp; /* split s of K: partial sums */    \
  const bool partial = get_num_groups(2) > 1;                                                    \
  CM_FWD_EPILOGUE(BM, CM_STORE_BX)
#define CM_STORE_BX(i, v)                                                                          \
  {                                                                                              \
    if (partial) Ws[i] = (v);                                                                    \
    else Y[i] = nc_to_bf16(v);                                                                   \
  }

/* Grid and splits as the float32 forward's; the splits' partial sums go to WS (a dense
 * [splits, n, o, oh, ow]), which conv_mma_sum_bx adds up into Y. */
#define CM_BX_ARGS                                                                                 \
  const nc_convi p, const int kchunk, __global const ushort *X, __global const float *Wt, __global const float *bias, \
      const int has_bias, __global ushort *Y, __global float *WS
/* NAME_s (64 work-items, a 64 x 128 tile) and NAME_l (128, 128 x 128): BODY with P's loads and reads */
#define CM_KERNELS(NAME, ARGS, BODY, P)                                                            \
  __kernel __attribute__((reqd_work_group_size(64, 1, 1))) void NAME##_s(ARGS) { BODY(64, P##_LOAD_S, P##_READ_S) } \
  __kernel __attribute__((reqd_work_group_size(128, 1, 1))) void NAME##_l(ARGS) { BODY(128, P##_LOAD_L, P##_READ_L) }
#undef TC_PRODUCTS
#define TC_PRODUCTS(A_K, B_K) CM_BX_PRODUCTS(A_K, 0)
CM_KERNELS(conv_mma_fwd_bx, CM_BX_ARGS, CM_BX_BODY, CM_BX)
/* The same for an even stride along x: one word per pixel (above). */
#undef TC_PRODUCTS
#define TC_PRODUCTS(A_K, B_K) CM_BX_PRODUCTS(A_K, 1)
CM_KERNELS(conv_mma_fwd_bx2, CM_BX_ARGS, CM_BX2_BODY, CM_BX2)

/* Grid and splits as the float32 weight gradient's; every split writes its partial sums to WS
 * (dense [splits, o, c kh kw]), which conv_mma_sum_bx adds up into dW. */
#undef TC_PRODUCTS
#define TC_PRODUCTS(A_K, B_K) CM_WX_PRODUCTS(CM_WX_A16_FRAG)
#define CM_WX_ARGS const nc_convi p, const int kchunk, __global const ushort *DY, __global const ushort *X, __global float *WS
CM_KERNELS(conv_mma_wgrad_bx, CM_WX_ARGS, CM_WX_BODY, CM_WX)

/* The same with a float32 dY (the tape's gradients of bfloat16 activations are float32): A as the
 * float32 weight gradient's; the splits' partial sums (or, alone, dW itself: float32) to WS,
 * which gf_sum_splits adds up. */
#undef TC_PRODUCTS
#define TC_PRODUCTS(A_K, B_K) CM_WX_PRODUCTS(CM_WX_A32_FRAG)
#define CM_WF_ARGS const nc_convi p, const int kchunk, __global const float *DY, __global const ushort *X, __global float *WS
CM_KERNELS(conv_mma_wgrad_bxf, CM_WF_ARGS, CM_WX_BODY, CM_WF)

/* ---- the weight gradient of a bfloat16 X by image rows (conv_mma_wgrad_bxr, bxrf: dY bfloat16 or
 * float32, as the kernels above, with their results bit for bit). The word pairs above copy two
 * words for every (tap, pixel pair), 2048 four-byte copies a K tile; but the kw taps (c, i, j)
 * of one (c, i) read the same row of X, shifted by j dw. Here a K tile is R = 16 / L image rows
 * of L = min(ow, 16) pixels (ow a multiple of 16, or 4 or 8; oh ow a multiple of 16, so that no
 * tile straddles two images or ends early), and B holds, for each (c, i) that the tile's 128
 * columns touch and each of its R rows, the words of X from the row's first pixel's window
 * start (rounded down to an even element) on: wps words, enough for L pixels and kw - 1 taps.
 * With stride 1 along x and w even, a word lies wholly inside or outside the image row, so the
 * zero fill stays exact. A work-item's fragment of column (c, i, j) and pixels 4t .. 4t + 3 (the
 * bfloat16 K slots: gemm_mma.cl) reads three words from its row's segment at element
 * 4t mod L + j dw + (pw & 1) and, where that is odd, takes the middle halves. For ResNet18's
 * 3 x 3 shapes a K tile is 440 to 704 copies. */
#define CM_WR_NS(BM) (768 / (BM)) /* the work-item's word slots: a stage holds at most 768 words of B */
#define CM_WR_LOAD(BM, st, kt, LOAD_A)                                                             \
  {                                                                                              \
    const int k0_ = kbeg + (kt) * TC_BK;                                                         \
    __local float *sa_ = smem + (st) * CM_STAGE(BM);                                              \
    __local uint *sb_ = (__local uint *)(sa_ + (BM) * TC_BK);                                     \
    LOAD_A(BM)                                                                                   \
    const int b_ = CV_DIV_OHW(k0_), q_ = k0_ - b_ * ohw, oy_ = CV_DIV_OW(q_), ox_ = q_ - oy_ * p.ow; \
    const int y_ = oy_ * p.sh, tofs_ = b_ * p.c * hw + y_ * p.w + ox_;                           \
    _Pragma("unroll") for (int u_ = 0; u_ < CM_WR_NS(BM); u_++) {                                \
      const bool ok_ = (uint)(y_ + sy[u_]) < (uint)p.h && (uint)(ox_ + sx[u_]) < (uint)p.w;       \
      cm_copy_pair(sb_ + lid + u_ * (BM), ok_ ? X2 + ((tofs_ + sofs[u_]) >> 1) : X2, ok_ ? 4 : 0); \
    }                                                                                            \
  }
#define CM_WR_LOAD_S(st, kt, A_K, B_K) CM_WR_LOAD(64, st, kt, CM_WX_A16)
#define CM_WR_LOAD_L(st, kt, A_K, B_K) CM_WR_LOAD(128, st, kt, CM_WX_A16)
#define CM_WRF_LOAD_S(st, kt, A_K, B_K) CM_WR_LOAD(64, st, kt, CM_WX_A32)
#define CM_WRF_LOAD_L(st, kt, A_K, B_K) CM_WR_LOAD(128, st, kt, CM_WX_A32)
/* Stage st's fragments: A as the word-pair kernels'; fragment j's two words of B in fw[j]. */
#define CM_WR_READ(BM, st, READ_A)                                                                 \
  {                                                                                              \
    CM_STAGE_WORDS(BM, st)                                                                       \
    READ_A                                                                                       \
    _Pragma("unroll") for (int j_ = 0; j_ < TC_FJ; j_++) {                                       \
      const uint w0_ = sb_[fo[j_]], w1_ = sb_[fo[j_] + 1], w2_ = sb_[fo[j_] + 2];                \
      const bool sh_ = (pc_ >> j_) & 1u;                                                         \
      fw[j_][0] = CM_WX_SHIFT(w0_, w1_, sh_);                                                    \
      fw[j_][1] = CM_WX_SHIFT(w1_, w2_, sh_);                                                    \
    }                                                                                            \
  }
#define CM_WR_READ_S(st, A_K, B_K) CM_WR_READ(64, st, CM_WX_RA16)
#define CM_WR_READ_L(st, A_K, B_K) CM_WR_READ(128, st, CM_WX_RA16)
#define CM_WRF_READ_S(st, A_K, B_K) CM_WR_READ(64, st, CM_WX_RA32)
#define CM_WRF_READ_L(st, A_K, B_K) CM_WR_READ(128, st, CM_WX_RA32)
#define CM_WR_PRODUCTS(A_FRAG)                                                                     \
  TC_UNROLL for (int i = 0; i < 4; i++) {                                                        \
    const uint a_[4] = A_FRAG(i);                                                                \
    TC_UNROLL for (int j = 0; j < TC_FJ; j++) {                                                  \
      const uint b_[2] = {fw[j][0], fw[j][1]};                                                   \
      MMA_SYNC(acc[i][j], a_, b_);                                                               \
    }                                                                                            \
  }
/* Slot u of the work-item is word q of segment (pair pi = (c, i), row r): sofs its offset from
 * the tile's first pixel (b, oy, ox) at (c, 0, 0) of X, sy and sx its row's and first element's
 * offsets from (oy sh, ox) (sx past the image where the slot is past the stage's words). */
#define CM_WR_BODY(BM, LOAD, READ)                                                                 \
  CM_WX_START(BM)                                                                                \
  uint fw[TC_FJ][2];                                                                             \
  const int L = min(p.ow, 16), R = 16 / L, pp = p.pw & 1, xb = -p.pw - pp;                       \
  const int wps = (L + (p.kw - 1) * p.dw + pp + 1) / 2, ci0 = n0 / p.kw;                          \
  const int npair = min(p.c * p.kh, (min(N, n0 + TC_BN) - 1) / p.kw + 1) - ci0;                  \
  int sofs[CM_WR_NS(BM)], sy[CM_WR_NS(BM)], sx[CM_WR_NS(BM)];                                     \
  _Pragma("unroll") for (int u = 0; u < CM_WR_NS(BM); u++) {                                     \
    const int s = lid + u * (BM), pi = s / (R * wps), rem = s - pi * R * wps, r = rem / wps;     \
    const int ci = ci0 + (pi < npair ? pi : 0), c = ci / p.kh, i = ci - c * p.kh;                \
    sy[u] = r * p.sh + i * p.dh - p.ph;                                                          \
    sx[u] = pi < npair ? xb + 2 * (rem - r * wps) : -(1 << 29);                                   \
    sofs[u] = c * hw + sy[u] * p.w + sx[u];                                                      \
  }                                                                                              \
  int fo[TC_FJ];                                                                                 \
  uint pc_ = 0; /* bit j: whether fragment j's first pixel sits at an odd element */            \
  _Pragma("unroll") for (int j = 0; j < TC_FJ; j++) {                                            \
    const int n = n0 + wn * TC_WN + (j / 4) * 32 + 4 * g + j % 4, nn = n < N ? n : n0;           \
    const int ci = nn / p.kw, jt = nn - ci * p.kw, r = (4 * t) / L, e = 4 * t - r * L + jt * p.dw + pp; \
    fo[j] = ((ci - ci0) * R + r) * wps + (e >> 1);                                               \
    pc_ |= (uint)(e & 1) << j;                                                                   \
  }                                                                                              \
  TC_PIPELINE(LOAD, READ, 1, 0)                                                                  \
  CM_WG_EPILOGUE
#undef TC_PRODUCTS
#define TC_PRODUCTS(A_K, B_K) CM_WR_PRODUCTS(CM_WX_A16_FRAG)
CM_KERNELS(conv_mma_wgrad_bxr, CM_WX_ARGS, CM_WR_BODY, CM_WR)
#undef TC_PRODUCTS
#define TC_PRODUCTS(A_K, B_K) CM_WR_PRODUCTS(CM_WX_A32_FRAG)
CM_KERNELS(conv_mma_wgrad_bxrf, CM_WF_ARGS, CM_WR_BODY, CM_WRF)

/* Y at p's output layout = the sum over s < splits of WS[s total + i], rounded once. */
__kernel void conv_mma_sum_bx(__global const float *WS, const int splits, const nc_convi p, __global ushort *Y) {
  CV_SUM_SPLITS(float, WS, splits, Y, nc_to_bf16)
}
#endif

#endif

/* 2-D convolution as implicit GEMM on gemm.cl's tiled engine (built as program "gemm+conv"
 * with the same tile options): the tile loaders gather im2col elements straight from the
 * NCHW tensors, so no im2col buffer exists. The index arithmetic is split: each work-group
 * decodes its NWG columns once, and each K tile's KWG rows at the start of the tile, into
 * small local tables; an element load is then a few adds, compares and one read. Grid dim 2
 * runs the groups (and, for the weight gradient, K splits). */

/* Only meaningful together with gemm.cl ("gemm+conv"); alone (--warmup) it is empty. */
#ifdef NC_GEMM_MAIN

typedef struct {
  long n, c, h, w;       /* input */
  long o, kh, kw;        /* weight [o, c/groups, kh, kw] */
  long oh, ow;           /* output */
  long sh, sw, ph, pw, dh, dw;
  long groups, cg, og;   /* channels per group */
} nc_conv;

/* Fills the K-tile table for rows k0..k0+KWG (FILL(t, k) for each row t), between barriers
 * so the previous tile's loads are done and this tile's loads see it. */
#define NC_KTABLE(FILL)                                                  \
  barrier(CLK_LOCAL_MEM_FENCE);                                          \
  NC_GROUP_FOR(int, t_, 0, lid, KWG, WGS) FILL(t_, k0 + t_);              \
  barrier(CLK_LOCAL_MEM_FENCE);

/* ---- forward: per group, Y[o, (b,p)] = W[o, (c,kh,kw)] X_col[(c,kh,kw), (b,p)] ----------- */

#define FWD_A(m, k) Wg[(m) * kdim + (k)]
#define FWD_FILL(t, k)                                                   \
  {                                                                      \
    const long c_ = (k) / khw, r_ = (k) - c_ * khw, i_ = r_ / p.kw;      \
    k_off[t] = c_ * hw;                                                  \
    k_y[t] = i_ * p.dh;                                                  \
    k_x[t] = (r_ - i_ * p.kw) * p.dw;                                    \
  }
#define FWD_B(k, n) fwd_b(X, p.h, p.w, col_base[(n) - n0] + k_off[(k) - k0], col_y[(n) - n0] + k_y[(k) - k0], \
                          col_x[(n) - n0] + k_x[(k) - k0])
inline REAL fwd_b(__global const REAL *X, long h, long w, long base, long y, long x) {
  return (y >= 0 && y < h && x >= 0 && x < w) ? X[base + y * w + x] : (REAL)0;
}
#define FWD_LOAD_B NC_KTABLE(FWD_FILL) NC_LOAD_B_GENERIC(FWD_B, 0)

#define FWD_STORE(m, n, v)                                                              \
  {                                                                                   \
    REAL r_ = (v);                                                                    \
    if (has_bias) r_ += bias[g * p.og + (m)];                                         \
    Y[col_out[(n) - n0] + (g * p.og + (m)) * ohw] = r_;                               \
  }

__kernel __attribute__((reqd_work_group_size(WGN, WGM, 1)))
void conv2d_fwd(const nc_conv p, __global const REAL *X, __global const REAL *Wt, __global const REAL *bias,
                const int has_bias, __global REAL *Y) {
  const long g = get_group_id(2); /* local size 1 in dim 2 */
  const long khw = p.kh * p.kw, hw = p.h * p.w, ohw = p.oh * p.ow;
  const long M = p.og, N = p.n * ohw, kdim = p.cg * khw, K = kdim;
  __global const REAL *Wg = Wt + g * p.og * kdim;
  const int lid = get_local_id(1) * WGN + get_local_id(0);
  const long m0 = (long)get_group_id(1) * MWG, n0 = (long)get_group_id(0) * NWG;
  __local long col_base[NWG], col_y[NWG], col_x[NWG], col_out[NWG], k_off[KWG], k_y[KWG], k_x[KWG];
  NC_GROUP_FOR(int, j, 0, lid, NWG, WGS) {
    const long n = n0 + j, b = n / ohw, q = n - b * ohw, oy = q / p.ow;
    col_base[j] = (b * p.c + g * p.cg) * hw;
    col_y[j] = oy * p.sh - p.ph;
    col_x[j] = (q - oy * p.ow) * p.sw - p.pw;
    col_out[j] = b * p.o * ohw + q;
  }
  NC_GEMM_MAIN(0, NC_LOAD_A_GENERIC(FWD_A, 1), FWD_LOAD_B)
  NC_GEMM_STORE(FWD_STORE)
}

/* ---- input gradient, stride 1 (the host sends strided convolutions, whose input gradient
 * would be mostly zero products here, and those with few channels per group to
 * conv2d_col2im): per group, dX[c, (b,y,x)] = sum over (o,kh,kw) W[o,c,kh,kw]
 * dY[b, o, y+ph-kh*dh, x+pw-kw*dw]. ------------------------------------------------------ */

#define BWI_FILL(t, k)                                                   \
  {                                                                      \
    const long o_ = (k) / khw, r_ = (k) - o_ * khw, i_ = r_ / p.kw;      \
    k_w[t] = (g * p.og + o_) * p.cg * khw + r_;                          \
    k_off[t] = (g * p.og + o_) * ohw;                                    \
    k_y[t] = p.ph - i_ * p.dh;                                           \
    k_x[t] = p.pw - (r_ - i_ * p.kw) * p.dw;                             \
  }
#define BWI_A(m, k) Wt[k_w[(k) - k0] + (m) * khw]
#define BWI_B(k, n) bwi_b(DY, &p, col_base[(n) - n0] + k_off[(k) - k0], col_y[(n) - n0] + k_y[(k) - k0], \
                          col_x[(n) - n0] + k_x[(k) - k0])
inline REAL bwi_b(__global const REAL *DY, const nc_conv *p, long base, long oy, long ox) {
  return (oy >= 0 && ox >= 0 && oy < p->oh && ox < p->ow) ? DY[base + oy * p->ow + ox] : (REAL)0;
}
/* The K table serves both operands, so A loads after it too. */
#define BWI_LOAD_A NC_KTABLE(BWI_FILL) NC_LOAD_A_GENERIC(BWI_A, 0)

#define BWI_STORE(m, n, v) DX[col_out[(n) - n0] + (g * p.cg + (m)) * hw] = (v);

__kernel __attribute__((reqd_work_group_size(WGN, WGM, 1)))
void conv2d_bwd_input(const nc_conv p, __global const REAL *DY, __global const REAL *Wt, __global REAL *DX) {
  const long g = get_group_id(2); /* local size 1 in dim 2 */
  const long khw = p.kh * p.kw, hw = p.h * p.w, ohw = p.oh * p.ow;
  const long M = p.cg, N = p.n * hw, K = p.og * khw;
  const int lid = get_local_id(1) * WGN + get_local_id(0);
  const long m0 = (long)get_group_id(1) * MWG, n0 = (long)get_group_id(0) * NWG;
  __local long col_base[NWG], col_y[NWG], col_x[NWG], col_out[NWG], k_w[KWG], k_off[KWG], k_y[KWG], k_x[KWG];
  NC_GROUP_FOR(int, j, 0, lid, NWG, WGS) {
    const long n = n0 + j, b = n / hw, q = n - b * hw, y = q / p.w;
    col_base[j] = b * p.o * ohw;
    col_y[j] = y;
    col_x[j] = q - y * p.w;
    col_out[j] = b * p.c * hw + q;
  }
  NC_GEMM_MAIN(0, BWI_LOAD_A, NC_LOAD_B_GENERIC(BWI_B, 0))
  NC_GEMM_STORE(BWI_STORE)
}

/* ---- weight gradient: per group, dW[o, (c,kh,kw)] = sum over (b,oy,ox) dY[b,o,oy,ox]
 * X[b, c, oy*sh-ph+kh*dh, ox*sw-pw+kw*dw]. K = N*OH*OW is long, so it is split into `splits`
 * ranges (grid dim 2 = group * splits + split); each writes a partial sum to WS[split] and
 * conv2d_sum_splits adds them. -------------------------------------------------------- */

#define BWW_FILL(t, k)                                                   \
  {                                                                      \
    const long b_ = (k) / ohw, q_ = (k) - b_ * ohw, oy_ = q_ / p.ow;     \
    k_dy[t] = b_ * p.o * ohw + q_;                                       \
    k_off[t] = (b_ * p.c + g * p.cg) * hw;                               \
    k_y[t] = oy_ * p.sh - p.ph;                                          \
    k_x[t] = (q_ - oy_ * p.ow) * p.sw - p.pw;                            \
  }
#define BWW_A(m, k) DY[k_dy[(k) - k0] + (g * p.og + (m)) * ohw]
#define BWW_B(k, n) fwd_b(X, p.h, p.w, k_off[(k) - k0] + col_base[(n) - n0], k_y[(k) - k0] + col_y[(n) - n0], \
                          k_x[(k) - k0] + col_x[(n) - n0])
#define BWW_LOAD_A NC_KTABLE(BWW_FILL) NC_LOAD_A_GENERIC(BWW_A, 1)

#define BWW_STORE(m, n, v) WS[(split * p.groups + g) * M * N + (m) * N + (n)] = (v);

__kernel __attribute__((reqd_work_group_size(WGN, WGM, 1)))
void conv2d_bwd_weight(const nc_conv p, const long splits, const long kchunk, __global const REAL *DY,
                       __global const REAL *X, __global REAL *WS) {
  const long g = get_group_id(2) / splits, split = get_group_id(2) % splits; /* local size 1 in dim 2 */
  const long khw = p.kh * p.kw, hw = p.h * p.w, ohw = p.oh * p.ow;
  const long M = p.og, N = p.cg * khw, KT = p.n * ohw;
  const long kbeg = split * kchunk, K = min(KT, kbeg + kchunk);
  const int lid = get_local_id(1) * WGN + get_local_id(0);
  const long m0 = (long)get_group_id(1) * MWG, n0 = (long)get_group_id(0) * NWG;
  __local long col_base[NWG], col_y[NWG], col_x[NWG], k_dy[KWG], k_off[KWG], k_y[KWG], k_x[KWG];
  NC_GROUP_FOR(int, t, 0, lid, NWG, WGS) {
    const long n = n0 + t, c = n / khw, r = n - c * khw, i = r / p.kw;
    col_base[t] = c * hw;
    col_y[t] = i * p.dh;
    col_x[t] = (r - i * p.kw) * p.dw;
  }
  NC_GEMM_MAIN(kbeg, BWW_LOAD_A, NC_LOAD_B_GENERIC(BWW_B, 1))
  NC_GEMM_STORE(BWW_STORE)
}

/* The input gradient's other route, for strided convolutions and for few input channels per
 * group (a tile of MWG rows would be mostly padding): the host computes the columns' gradient DCOL [b, (c,kh,kw), oy*ox]
 * for a chunk of images with the GEMM kernel, and this gathers them back: every dX element of
 * the chunk (group g) sums the column entries that its taps produced. */
__kernel void conv2d_col2im(const nc_conv p, const long g, const long n0, const long nb, __global const REAL *DCOL,
                            __global REAL *DX) {
  const long hw = p.h * p.w, ohw = p.oh * p.ow, khw = p.kh * p.kw, total = nb * p.cg * hw;
  NC_GRID_LOOP(e, total) {
    const long b = e / (p.cg * hw), r = e - b * p.cg * hw, c = r / hw, q = r - c * hw, y = q / p.w, x = q - y * p.w;
    __global const REAL *col = DCOL + (b * p.cg + c) * khw * ohw;
    REAL s = 0;
    for (long i = 0; i < p.kh; i++) {
      const long ty = y + p.ph - i * p.dh;
      if (ty < 0 || ty % p.sh) continue;
      const long oy = ty / p.sh;
      if (oy >= p.oh) continue;
      for (long j = 0; j < p.kw; j++) {
        const long tx = x + p.pw - j * p.dw;
        if (tx < 0 || tx % p.sw) continue;
        const long ox = tx / p.sw;
        if (ox < p.ow) s += col[(i * p.kw + j) * ohw + oy * p.ow + ox];
      }
    }
    DX[((n0 + b) * p.c + g * p.cg + c) * hw + q] = s;
  }
}

/* dW[g, m, n] = sum over splits of WS[split, g, m, n]; dW is [groups * M * N] contiguous. */
__kernel void conv2d_sum_splits(__global const REAL *WS, const long splits, const long total, __global REAL *DW) {
  NC_GRID_LOOP(i, total) {
    REAL s = 0;
    for (long t = 0; t < splits; t++) s += WS[t * total + i];
    DW[i] = s;
  }
}

#endif

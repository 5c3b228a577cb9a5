/* 2-D convolution as implicit GEMM on gemm.cl's tiled engine (built as program "gemm+conv"
 * with the same tile options): the tile loaders gather im2col elements straight from the
 * NCHW input, so no im2col buffer exists. Grid dim 2 runs the groups (and, for the weight
 * gradient, K splits). Geometry arrives as one struct. */

/* Only meaningful together with gemm.cl ("gemm+conv"); alone (--warmup) it is empty. */
#ifdef NC_GEMM_MAIN

typedef struct {
  long n, c, h, w;       /* input */
  long o, kh, kw;        /* weight [o, c/groups, kh, kw] */
  long oh, ow;           /* output */
  long sh, sw, ph, pw, dh, dw;
  long groups, cg, og;   /* channels per group */
} nc_conv;

/* ---- forward: per group, Y[o, (b,p)] = W[o, (c,kh,kw)] X_col[(c,kh,kw), (b,p)] ----------- */

#define FWD_A(m, k) Wg[(m) * kdim + (k)]

/* Columns n = (b, oh, ow) are decoded once per tile into local arrays. */
#define FWD_B(k, n) fwd_b(X, &p, xbase, col_b[(n) - n0], col_y[(n) - n0], col_x[(n) - n0], k)
inline REAL fwd_b(__global const REAL *X, const nc_conv *p, long xbase, long b, long y0, long x0, long k) {
  const long khw = p->kh * p->kw;
  const long c = k / khw, r = k - c * khw, i = r / p->kw, j = r - i * p->kw;
  const long y = y0 + i * p->dh, x = x0 + j * p->dw;
  if (y < 0 || y >= p->h || x < 0 || x >= p->w) return (REAL)0;
  return X[xbase + ((b * p->c + c) * p->h + y) * p->w + x];
}

#define FWD_STORE(m, n, v)                                                              \
  {                                                                                   \
    const long b_ = col_b[(n) - n0], q_ = (n) - b_ * ohw;                              \
    REAL r_ = (v);                                                                    \
    if (has_bias) r_ += bias[g * p.og + (m)];                                         \
    Y[(b_ * p.o + g * p.og + (m)) * ohw + q_] = r_;                                   \
  }

__kernel __attribute__((reqd_work_group_size(WGN, WGM, 1)))
void conv2d_fwd(const nc_conv p, __global const REAL *X, __global const REAL *Wt, __global const REAL *bias,
                const int has_bias, __global REAL *Y) {
  const long g = get_global_id(2);
  const long M = p.og, ohw = p.oh * p.ow, N = p.n * ohw, kdim = p.cg * p.kh * p.kw, K = kdim;
  __global const REAL *Wg = Wt + g * p.og * kdim;
  const long xbase = g * p.cg * p.h * p.w;
  const int lid = get_local_id(1) * WGN + get_local_id(0);
  const long m0 = (long)get_group_id(1) * MWG, n0 = (long)get_group_id(0) * NWG;
  __local long col_b[NWG], col_y[NWG], col_x[NWG];
  for (int j = lid; j < NWG; j += WGS) {
    const long n = n0 + j, b = n / ohw, q = n - b * ohw, oy = q / p.ow;
    col_b[j] = b;
    col_y[j] = oy * p.sh - p.ph;
    col_x[j] = (q - oy * p.ow) * p.sw - p.pw;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  NC_GEMM_MAIN(0, NC_LOAD_A_GENERIC(FWD_A, 1), NC_LOAD_B_GENERIC(FWD_B, 0))
  NC_GEMM_STORE(FWD_STORE)
}

/* ---- input gradient: per group, dX[c, (b,y,x)] = sum over (o,kh,kw) W[o,c,kh,kw] dY[b,o,oy,ox]
 * where y = oy*sh - ph + kh*dh (only the (kh, oy) pairs that land exactly on y count). ----- */

#define BWI_A(m, k) bwi_a(Wt, &p, g, m, k)
inline REAL bwi_a(__global const REAL *Wt, const nc_conv *p, long g, long c, long k) {
  const long khw = p->kh * p->kw, o = k / khw, r = k - o * khw;
  return Wt[((g * p->og + o) * p->cg + c) * khw + r];
}

#define BWI_B(k, n) bwi_b(DY, &p, g, col_b[(n) - n0], col_y[(n) - n0], col_x[(n) - n0], k)
inline REAL bwi_b(__global const REAL *DY, const nc_conv *p, long g, long b, long y, long x, long k) {
  const long khw = p->kh * p->kw;
  const long o = k / khw, r = k - o * khw, i = r / p->kw, j = r - i * p->kw;
  const long ty = y + p->ph - i * p->dh, tx = x + p->pw - j * p->dw;
  if (ty < 0 || tx < 0) return (REAL)0;
  const long oy = ty / p->sh, ox = tx / p->sw;
  if (oy * p->sh != ty || ox * p->sw != tx || oy >= p->oh || ox >= p->ow) return (REAL)0;
  return DY[((b * p->o + g * p->og + o) * p->oh + oy) * p->ow + ox];
}

#define BWI_STORE(m, n, v)                                                              \
  {                                                                                   \
    const long b_ = col_b[(n) - n0], q_ = (n) - b_ * hw;                               \
    DX[(b_ * p.c + g * p.cg + (m)) * hw + q_] = (v);                                  \
  }

__kernel __attribute__((reqd_work_group_size(WGN, WGM, 1)))
void conv2d_bwd_input(const nc_conv p, __global const REAL *DY, __global const REAL *Wt, __global REAL *DX) {
  const long g = get_global_id(2);
  const long hw = p.h * p.w, M = p.cg, N = p.n * hw, K = p.og * p.kh * p.kw;
  const int lid = get_local_id(1) * WGN + get_local_id(0);
  const long m0 = (long)get_group_id(1) * MWG, n0 = (long)get_group_id(0) * NWG;
  __local long col_b[NWG], col_y[NWG], col_x[NWG];
  for (int j = lid; j < NWG; j += WGS) {
    const long n = n0 + j, b = n / hw, q = n - b * hw, y = q / p.w;
    col_b[j] = b;
    col_y[j] = y;
    col_x[j] = q - y * p.w;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  NC_GEMM_MAIN(0, NC_LOAD_A_GENERIC(BWI_A, 0), NC_LOAD_B_GENERIC(BWI_B, 0))
  NC_GEMM_STORE(BWI_STORE)
}

/* ---- weight gradient: per group, dW[o, (c,kh,kw)] = sum over (b,oy,ox) dY[b,o,oy,ox]
 * X[b, c, oy*sh-ph+kh*dh, ox*sw-pw+kw*dw]. K = N*OH*OW is long, so it is split into `splits`
 * ranges (grid dim 2 = group * splits + split); each writes a partial sum to WS[split] and
 * conv2d_sum_splits adds them. -------------------------------------------------------- */

#define BWW_A(m, k) bww_a(DY, &p, g, m, k)
inline REAL bww_a(__global const REAL *DY, const nc_conv *p, long g, long o, long k) {
  const long ohw = p->oh * p->ow, b = k / ohw, q = k - b * ohw;
  return DY[(b * p->o + g * p->og + o) * ohw + q];
}

#define BWW_B(k, n) bww_b(X, &p, g, col_c[(n) - n0], col_i[(n) - n0], col_j[(n) - n0], k)
inline REAL bww_b(__global const REAL *X, const nc_conv *p, long g, long c, long i, long j, long k) {
  const long ohw = p->oh * p->ow, b = k / ohw, q = k - b * ohw, oy = q / p->ow, ox = q - oy * p->ow;
  const long y = oy * p->sh - p->ph + i, x = ox * p->sw - p->pw + j;
  if (y < 0 || y >= p->h || x < 0 || x >= p->w) return (REAL)0;
  return X[((b * p->c + g * p->cg + c) * p->h + y) * p->w + x];
}

#define BWW_STORE(m, n, v) WS[(split * p.groups + g) * M * N + (m) * N + (n)] = (v);

__kernel __attribute__((reqd_work_group_size(WGN, WGM, 1)))
void conv2d_bwd_weight(const nc_conv p, const long splits, const long kchunk, __global const REAL *DY,
                       __global const REAL *X, __global REAL *WS) {
  const long g = get_global_id(2) / splits, split = get_global_id(2) % splits;
  const long khw = p.kh * p.kw, M = p.og, N = p.cg * khw, KT = p.n * p.oh * p.ow;
  const long kbeg = split * kchunk, K = min(KT, kbeg + kchunk);
  const int lid = get_local_id(1) * WGN + get_local_id(0);
  const long m0 = (long)get_group_id(1) * MWG, n0 = (long)get_group_id(0) * NWG;
  __local long col_c[NWG], col_i[NWG], col_j[NWG];
  for (int t = lid; t < NWG; t += WGS) {
    const long n = n0 + t, c = n / khw, r = n - c * khw, i = r / p.kw;
    col_c[t] = c;
    col_i[t] = i * p.dh;
    col_j[t] = (r - i * p.kw) * p.dw;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  NC_GEMM_MAIN(kbeg, NC_LOAD_A_GENERIC(BWW_A, 1), NC_LOAD_B_GENERIC(BWW_B, 1))
  NC_GEMM_STORE(BWW_STORE)
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

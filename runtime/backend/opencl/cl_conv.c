/* OpenCL conv2d: implicit-GEMM kernels of kernels/conv.cl, built with the device's GEMM tile
 * variant. The weight gradient splits its long K (N*OH*OW) across work-groups when the
 * output alone would leave the device idle, and sums the partials with a second kernel. */
#include "core/check.h"
#include "cl_linalg.h"

/* Mirrors nc_conv in kernels/conv.cl. */
typedef struct {
  cl_long n, c, h, w, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, groups, cg, og;
} cl_conv;

static cl_conv geometry(const nc_conv2d_desc *p) {
  return (cl_conv){p->n,
                   p->c_in,
                   p->h,
                   p->w,
                   p->c_out,
                   p->kh,
                   p->kw,
                   p->oh,
                   p->ow,
                   p->stride[0],
                   p->stride[1],
                   p->padding[0],
                   p->padding[1],
                   p->dilation[0],
                   p->dilation[1],
                   p->groups,
                   p->c_in / p->groups,
                   p->c_out / p->groups};
}

static nc_status conv_kernel(nc_device *dev, nc_dtype dt, nc_cl_slot slot, const nc_cl_handle **k,
                             nc_gemm_config *cfg) {
  NC_TRY(nc_cl_check_real(dev, dt));
  NC_TRY(nc_cl_gemm_config(dev, dt, cfg));
  return nc_cl_gemm_kernel(dev, slot, dt, cfg, k);
}

static void grid(const nc_gemm_config *cfg, int64_t m, int64_t n, int64_t z, size_t global[3],
                 size_t local[3]) {
  nc_gemm_config_local(cfg, local);
  local[2] = 1;
  global[0] = (size_t)((n + cfg->nwg - 1) / cfg->nwg) * local[0];
  global[1] = (size_t)((m + cfg->mwg - 1) / cfg->mwg) * local[1];
  global[2] = (size_t)z;
}

/* ---- the large-tile path (kernels/gemm_fast.cl): float32, one group, 32-bit extents -------------- */

/* Mirrors nc_convi in kernels/mma.cl: the geometry, then the kernels' division constants
 * (nc_cl_divisor) for kw, kh * kw, ow and oh * ow, set by convi, then the output's layout (a dense
 * [n, o, oh, ow] from convi; element (b, m, oy, ox) at (b o + m) yp + oy yr + ox yc + y0). */
typedef struct {
  cl_int n, c, h, w, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw;
  cl_uint kw_m, khw_m, ow_m, ohw_m;
  cl_int kw_s, khw_s, ow_s, ohw_s;
  cl_int yp, yr, yc, y0;
} cl_convi;

void nc_cl_divisor(int32_t d, uint32_t *m, int32_t *sh) {
  if (d < 1) d = 1; /* an empty extent: no kernel divides by it, but the constants stay defined */
  int l = 0;
  while (((int64_t)1 << l) < d) l++;
  *sh = 31 + l;
  *m = (uint32_t)((((uint64_t)1 << *sh) + (uint64_t)d - 1) / (uint64_t)d);
}

/* The geometry, with its division constants. */
static cl_convi convi(cl_int n, cl_int c, cl_int h, cl_int w, cl_int o, cl_int kh, cl_int kw, cl_int oh, cl_int ow,
                      cl_int sh, cl_int sw, cl_int ph, cl_int pw, cl_int dh, cl_int dw) {
  cl_convi g = {.n = n, .c = c, .h = h, .w = w, .o = o, .kh = kh, .kw = kw, .oh = oh, .ow = ow,
                .sh = sh, .sw = sw, .ph = ph, .pw = pw, .dh = dh, .dw = dw,
                .yp = oh * ow, .yr = ow, .yc = 1, .y0 = 0};
  nc_cl_divisor(kw, &g.kw_m, &g.kw_s);
  nc_cl_divisor(kh * kw, &g.khw_m, &g.khw_s);
  nc_cl_divisor(ow, &g.ow_m, &g.ow_s);
  nc_cl_divisor(oh * ow, &g.ohw_m, &g.ohw_s);
  return g;
}

static bool fast_fits(const nc_conv2d_desc *p, nc_dtype dt) {
  const int64_t lim = (int64_t)1 << 31;
  return dt == NC_FLOAT32 && p->groups == 1 && p->n * p->c_in * p->h * p->w < lim &&
         p->n * p->c_out * p->oh * p->ow < lim && p->c_out * p->c_in * p->kh * p->kw < lim &&
         p->n * p->oh * p->ow + 64 < lim;
}

static cl_convi geometry_i(const nc_conv2d_desc *p) {
  return convi((cl_int)p->n, (cl_int)p->c_in, (cl_int)p->h, (cl_int)p->w, (cl_int)p->c_out, (cl_int)p->kh,
               (cl_int)p->kw, (cl_int)p->oh, (cl_int)p->ow, (cl_int)p->stride[0], (cl_int)p->stride[1],
               (cl_int)p->padding[0], (cl_int)p->padding[1], (cl_int)p->dilation[0], (cl_int)p->dilation[1]);
}


/* The tile of a convolution's product (m rows, n columns): 128 x 128 when there are more than 64
 * rows and about two such work-groups per compute unit (as nc_cl_gemm_fast's choice); for at most
 * 64 rows (64 channels), 64 x 128 when those fill the device as well; else 64 x 64. The weight
 * gradient (wgrad) splits K, which fills the device whatever the tile count; it takes 64 x 128
 * only under the tensor-core precisions: on an H100, 64 x 128 made the forward and input gradient
 * of 3x3 64->64 convolutions 5% faster and the float32 weight gradient 5% slower
 * (docs/performance.md). */
typedef enum { CONV_TILE_S, CONV_TILE_W, CONV_TILE_L } conv_tile;
static const struct {
  int bm, bn;
} CONV_TILES[] = {{64, 64}, {64, 128}, {128, 128}};

static conv_tile pick_tile(nc_device *dev, int64_t m, int64_t n, bool wgrad, nc_precision prec) {
  const int64_t cus = nc_cl_compute_units(dev);
  if (m > 64 && 10 * ((m + 127) / 128) * ((n + 127) / 128) >= 19 * cus) return CONV_TILE_L;
  const bool fills = wgrad ? prec != NC_PRECISION_HIGHEST : 10 * ((n + 127) / 128) >= 19 * cus;
  if (m <= 64 && n >= 128 && fills) return CONV_TILE_W;
  return CONV_TILE_S;
}

static nc_cl_slot tile_slot(conv_tile t, nc_cl_slot s, nc_cl_slot w, nc_cl_slot l) {
  return t == CONV_TILE_L ? l : t == CONV_TILE_W ? w : s;
}

/* OUT[i] = sum over s < splits of WS[s total + i] for i < total, in that order: gf_sum_splits, or
 * with a convolution's geometry g (total = its n o oh ow), conv_sum_splits, which stores element
 * i = (b, m, oy, ox) at g's output layout; or, given round_bf16 (conv_mma_sum_bx, with g), the
 * same into a bfloat16 OUT, each sum rounded once. */
static nc_status sum_splits(nc_device *dev, const nc_tensor *ws, int64_t splits, int64_t total, const cl_convi *g,
                            const nc_cl_handle *round_bf16, cl_mem out) {
  const nc_cl_handle *sum = round_bf16;
  if (!sum) NC_TRY(nc_cl_handle_get(dev, g ? NC_CL_K_CONV_SUM_SPLITS : NC_CL_K_GF_SUM_SPLITS, NC_FLOAT32, &sum));
  cl_mem wsm = nc_cl_mem(ws);
  cl_int sp = (cl_int)splits, tot = (cl_int)total;
  cl_long off = 0;
  if (g) {
    nc_cl_arg cargs[] = {NC_CL_ARG(wsm), NC_CL_ARG(sp), NC_CL_ARG(*g), NC_CL_ARG(out)};
    return nc_cl_launch(dev, sum->kernel, 4, cargs, nc_cl_global_size(dev, total), 0);
  }
  nc_cl_arg sargs[] = {NC_CL_ARG(wsm), NC_CL_ARG(sp), NC_CL_ARG(tot), NC_CL_ARG(out), NC_CL_ARG(off)};
  return nc_cl_launch(dev, sum->kernel, 5, sargs, nc_cl_global_size(dev, total), 0);
}

/* ---- the tensor-core kernels with asynchronous copies (kernels/conv_mma.cl) ------------------ */

/* Their tile: 64 x 128 (two warps, the _s kernels) for at most 64 rows (output channels, or
 * input channels for an input gradient), else 128 x 128 (four warps, _l); the work-group has BM
 * work-items. */
enum { MMA_BN = 128 };
static int64_t mma_bm(int64_t m) { return m > 64 ? 128 : 64; }

/* The conv_mma.cl kernel for precision prec and m rows, the forward (wgrad false) or the weight
 * gradient: the bfloat16 build under "medium" where the device has bfloat16 mma.sync, else tf32;
 * none (false) under "highest", without tensor cores, or where the device refused the program. */
static bool mma_kernel(nc_device *dev, nc_precision prec, bool wgrad, int64_t m, const nc_cl_handle **k) {
  nc_cl_device *cd = dev->impl;
  if (prec == NC_PRECISION_HIGHEST || !dev->info.tf32 || !__atomic_load_n(&cd->mma_conv, __ATOMIC_ACQUIRE))
    return false;
  const int which = (wgrad ? 2 : 0) + (mma_bm(m) == 128);
  _Static_assert(NC_CL_K_CONV_MMA_TF_WGRAD_L - NC_CL_K_CONV_MMA_TF_FWD_S == 3 &&
                     NC_CL_K_CONV_MMA_BF_WGRAD_L - NC_CL_K_CONV_MMA_BF_FWD_S == 3,
                 "conv_mma_<fwd|wgrad>_<s|l>");
  if (prec == NC_PRECISION_MEDIUM && dev->info.bf16_mma)
    return nc_cl_tensor_core_kernel(dev, NC_CL_K_CONV_MMA_BF_FWD_S + which, "-DNC_MMA_BF16=1 -DTC_CONV=1", 2,
                                    &cd->mma_conv, k);
  return nc_cl_tensor_core_kernel(dev, NC_CL_K_CONV_MMA_TF_FWD_S + which, "-DNC_MMA_TF32=1 -DTC_CONV=1", 1,
                                  &cd->mma_conv, k);
}

/* conv_mma.cl's kernels for bfloat16 tensors: the forward (X and Y bfloat16, W float32; BX_FWD,
 * or BX_FWD2 for an even stride along x), the weight gradient (dY and X bfloat16; BX_WGRAD, or a
 * float32 dY: BX_WGRAD_F32) for m rows, or the split sum that rounds (BX_SUM); false where the
 * device has no bfloat16 mma.sync or refused the program. */
#define BX_MODE "-DNC_MMA_BF16=1 -DTC_CONV=1 -DCM_XBF16=1 -DNC_HALF_CONVERSIONS_ONLY=1"
typedef enum { BX_FWD, BX_FWD2, BX_WGRAD, BX_WGRAD_F32, BX_WGRAD_R, BX_WGRAD_RF, BX_SUM } bx_which;
static bool bx_kernel(nc_device *dev, int64_t m, bx_which which, const nc_cl_handle **k) {
  nc_cl_device *cd = dev->impl;
  const bool l = mma_bm(m) == 128;
  const nc_cl_slot slot = which == BX_SUM         ? NC_CL_K_CONV_MMA_BX_SUM
                          : which == BX_WGRAD     ? (l ? NC_CL_K_CONV_MMA_BX_WGRAD_L : NC_CL_K_CONV_MMA_BX_WGRAD_S)
                          : which == BX_WGRAD_F32 ? (l ? NC_CL_K_CONV_MMA_BXF_WGRAD_L : NC_CL_K_CONV_MMA_BXF_WGRAD_S)
                          : which == BX_FWD2      ? (l ? NC_CL_K_CONV_MMA_BX2_FWD_L : NC_CL_K_CONV_MMA_BX2_FWD_S)
                          : which == BX_WGRAD_R   ? (l ? NC_CL_K_CONV_MMA_BXR_WGRAD_L : NC_CL_K_CONV_MMA_BXR_WGRAD_S)
                          : which == BX_WGRAD_RF  ? (l ? NC_CL_K_CONV_MMA_BXRF_WGRAD_L : NC_CL_K_CONV_MMA_BXRF_WGRAD_S)
                                                  : (l ? NC_CL_K_CONV_MMA_BX_FWD_L : NC_CL_K_CONV_MMA_BX_FWD_S);
  return dev->info.bf16_mma && nc_cl_tensor_core_kernel(dev, slot, BX_MODE, 2, &cd->mma_conv_bx, k);
}

/* Whether its weight gradient takes geometry g: where the float32 one runs on conv_mma.cl under
 * "medium" (a kernel of more than one tap), with dY's rows of 16-byte chunks (oh ow a multiple of
 * 8) and the word pairs of the forward (stride 1 along x, even widths). */
static bool bx_wgrad_fits(const cl_convi *g) {
  return g->kh * g->kw > 1 && (g->oh * g->ow) % 8 == 0 && g->sw == 1 && g->w % 2 == 0 && g->ow % 2 == 0;
}

/* Whether the weight gradient by image rows (conv_mma_wgrad_bxr, bxrf) takes geometry g, which
 * bx_wgrad_fits already does: K tiles of whole image rows or 16 pixels of one (ow a multiple of
 * 16, or 4 or 8; oh ow a multiple of 16), and a stage's segments within 768 words (conv_mma.cl). */
static bool bx_wgrad_rows(const cl_convi *g) {
  const int64_t l = g->ow < 16 ? g->ow : 16, r = 16 / l, pp = g->pw & 1;
  const int64_t wps = (l + (int64_t)(g->kw - 1) * g->dw + pp + 1) / 2;
  return (g->ow % 16 == 0 || g->ow == 4 || g->ow == 8) && (g->oh * g->ow) % 16 == 0 &&
         ((MMA_BN - 1) / g->kw + 2) * r * wps <= 768;
}

/* The bfloat16 weight gradient's kernel for geometry g (m = g->o rows) with a bfloat16 dY (bf16)
 * or a float32 one: by image rows where they fit, else word pairs; false where none runs. */
static bool bx_wgrad_kernel(nc_device *dev, const cl_convi *g, bool bf16, const nc_cl_handle **k) {
  if (!bx_wgrad_fits(g)) return false;
  const bool rows = bx_wgrad_rows(g);
  return bx_kernel(dev, g->o, rows ? (bf16 ? BX_WGRAD_R : BX_WGRAD_RF) : bf16 ? BX_WGRAD : BX_WGRAD_F32, k);
}

/* Which forward kernel takes geometry g (BX_FWD, BX_FWD2), or BX_SUM where none does: X's width
 * even, and either stride 1 along x with ow even (word pairs: conv_mma.cl) or an even stride (a
 * word per pixel); the A rows 16-byte aligned (c kh kw a multiple of 4). */
static bx_which bx_forward(const cl_convi *g) {
  const int64_t n = (int64_t)g->n * g->oh * g->ow, kt = (int64_t)g->c * g->kh * g->kw;
  if (g->w % 2 != 0 || kt % 4 != 0 || n + MMA_BN >= ((int64_t)1 << 31)) return BX_SUM;
  return g->sw == 1 && g->ow % 2 == 0 ? BX_FWD : g->sw % 2 == 0 ? BX_FWD2 : BX_SUM;
}

/* Whether the device runs a bfloat16 forward of geometry g for m = g->o rows: its kernel in *k. */
static bool bx_fits(nc_device *dev, const cl_convi *g, const nc_cl_handle **k) {
  const bx_which which = bx_forward(g);
  return which != BX_SUM && bx_kernel(dev, g->o, which, k);
}

/* Y = conv(X, W) + bias, with g's geometry (X: [n, c, h, w], W: [o, c, kh, kw]): conv_mma.cl's
 * forward under the tensor-core precisions where the weights' rows (c kh kw floats) start
 * 16-byte aligned, else gemm_fast.cl's (its tensor-core build under those precisions). An
 * output whose tiles number fewer than the compute units (ResNet18-CIFAR's layer 4 at batch 256:
 * 128 tiles; the phases of its strided input gradient, 64) splits K among about two work-groups
 * per compute unit, into a dense workspace that gf_sum_splits (conv_sum_splits for another
 * output layout) adds up in a fixed order. */
static nc_status fast_forward(nc_device *dev, nc_precision prec, const cl_convi *g, bool bx, cl_mem xm, cl_mem wm,
                              cl_mem bm, cl_int has_bias, cl_mem ym) {
  const int64_t m = g->o, n = (int64_t)g->n * g->oh * g->ow, kt = (int64_t)g->c * g->kh * g->kw;
  const nc_cl_handle *k, *round_bf16 = NULL;
  const bool mma = bx ? bx_fits(dev, g, &k) && bx_kernel(dev, m, BX_SUM, &round_bf16)
                      : kt % 4 == 0 && n + MMA_BN < ((int64_t)1 << 31) && mma_kernel(dev, prec, false, m, &k);
  if (bx && !mma)
    return nc_error(NC_ERR_UNSUPPORTED, "conv2d of bfloat16 tensors: no kernel for this geometry on this device");
  if (mma) {
    const int64_t bm_ = mma_bm(m), tiles = (n + MMA_BN - 1) / MMA_BN * ((m + bm_ - 1) / bm_);
    const bool dense = g->yc == 1 && g->yr == g->ow && g->y0 == 0 && g->yp == g->oh * g->ow;
    int64_t kc = (kt + 15) / 16 * 16, splits = 1;
    if (tiles < nc_cl_compute_units(dev) && n * m < ((int64_t)1 << 28)) splits = nc_cl_k_splits(dev, tiles, kt, 8, &kc);
    nc_tensor *ws = NULL;
    cl_convi gw = *g; /* the splits write a dense [n, o, oh, ow] each */
    if (splits > 1) {
      int64_t wshape[1] = {splits * n * m};
      NC_TRY(nc_tensor_empty(dev, NC_FLOAT32, 1, wshape, 0, &ws));
      gw.yp = g->oh * g->ow, gw.yr = g->ow, gw.yc = 1, gw.y0 = 0;
    }
    /* the float32 kernel writes its partial sums to Y's argument, the bfloat16 one to its last */
    cl_mem wsm = ws ? nc_cl_mem(ws) : ym, om = bx ? ym : wsm;
    cl_int kchunk = (cl_int)kc;
    nc_cl_arg args[] = {NC_CL_ARG(gw), NC_CL_ARG(kchunk),   NC_CL_ARG(xm), NC_CL_ARG(wm),
                        NC_CL_ARG(bm), NC_CL_ARG(has_bias), NC_CL_ARG(om), NC_CL_ARG(wsm)};
    size_t local[3] = {(size_t)bm_, 1, 1};
    size_t global[3] = {(size_t)((n + MMA_BN - 1) / MMA_BN * bm_), (size_t)((m + bm_ - 1) / bm_), (size_t)splits};
    nc_status s = nc_cl_launch_nd(dev, k->kernel, bx ? 8 : 7, args, 3, global, local);
    if (s == NC_OK && ws) s = sum_splits(dev, ws, splits, m * n, dense && !bx ? NULL : g, round_bf16, ym);
    nc_tensor_release(ws);
    return s;
  }
  nc_cl_arg args[] = {NC_CL_ARG(*g), NC_CL_ARG(xm), NC_CL_ARG(wm), NC_CL_ARG(bm), NC_CL_ARG(has_bias), NC_CL_ARG(ym)};
  const conv_tile tile = pick_tile(dev, m, n, false, prec);
  NC_TRY(nc_cl_fast_kernel(dev, tile_slot(tile, NC_CL_K_CONV_FAST_S, NC_CL_K_CONV_FAST_W, NC_CL_K_CONV_FAST_L), prec, &k));
  const int64_t bm_ = CONV_TILES[tile].bm, bn_ = CONV_TILES[tile].bn;
  size_t local[3] = {256, 1, 1};
  size_t global[3] = {(size_t)((n + bn_ - 1) / bn_) * 256, (size_t)((m + bm_ - 1) / bm_), 1};
  return nc_cl_launch_nd(dev, k->kernel, 6, args, 3, global, local);
}

/* The taps of one phase of an input gradient along one dim (extent x of dX, kernel k, stride s,
 * padding pd, dilation d, with d == 1 or s == 1): the pixels x = s i + ph of dX (i < n) take the
 * taps k0 + s m (m < t), tap m from dY[i + e0 - m d']; as a stride-1 forward convolution of dY
 * with those taps flipped, its dilation is d' (d where s == 1, else 1) and its padding
 * pad = (t - 1) d' - e0. t is 0 where no tap reaches the phase. */
typedef struct {
  cl_int n, k0, t, pad, dil;
} conv_phase;

static conv_phase phase_of(int64_t x, int64_t k, int64_t s, int64_t pd, int64_t d, int64_t ph) {
  conv_phase r = {.n = (cl_int)(ph < x ? (x - ph + s - 1) / s : 0), .dil = (cl_int)(s == 1 ? d : 1)};
  r.k0 = (cl_int)(s == 1 ? 0 : (ph + pd) % s);
  r.t = r.k0 < k ? (cl_int)((k - 1 - r.k0) / s + 1) : 0;
  const int64_t e0 = (ph + pd - r.k0 * d) / s;
  r.pad = (cl_int)((r.t - 1) * r.dil - e0);
  return r;
}

/* The forward convolution of phase (py, px) with taps a (along y) and b (along x): input dY [n, o,
 * oh, ow], c output channels, a.n x b.n pixels stored every s-th pixel of dX. */
static cl_convi phase_conv(const cl_convi *g, const conv_phase *a, const conv_phase *b, int py, int px) {
  cl_convi t = convi(g->n, g->o, g->oh, g->ow, g->c, a->t, b->t, a->n, b->n, 1, 1, a->pad, b->pad, a->dil, b->dil);
  t.yp = g->h * g->w, t.yr = g->sh * g->w, t.yc = g->sw, t.y0 = py * g->w + px;
  return t;
}

/* dX = the input gradient of a convolution with stride s (dilation 1 in each strided dim), as s_h
 * s_w stride-1 forward convolutions of dY, one per phase (py, px) of dX's pixels (y = s_h i + py,
 * x = s_w j + px), each with the weights of the taps that reach it (conv_phase_weight), storing
 * every s-th pixel of dX. The taps split among the phases, so the products add to those of the
 * convolution: no multiplications by the zeros a dilated dY would hold, and no col2im. Phases
 * no tap reaches are zeros. */
static nc_status fast_backward_input(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *w,
                                     nc_tensor *dx) {
  nc_device *dev = nc_tensor_device(dx);
  const bool bx = dx->dtype == NC_BFLOAT16; /* dY and dX bfloat16, W float32 */
  const cl_convi g = geometry_i(p);
  const nc_cl_handle *pw;
  NC_TRY(nc_cl_handle_get(dev, NC_CL_K_CONV_PHASE_WEIGHT, NC_FLOAT32, &pw));
  bool empty = false;
  for (int py = 0; py < g.sh; py++)
    for (int px = 0; px < g.sw; px++) {
      const conv_phase a = phase_of(g.h, g.kh, g.sh, g.ph, g.dh, py), b = phase_of(g.w, g.kw, g.sw, g.pw, g.dw, px);
      empty |= a.n > 0 && b.n > 0 && (a.t == 0 || b.t == 0);
    }
  nc_status s = empty ? nc_cl_fill(dx, 0.0) : NC_OK;
  cl_mem wm = nc_cl_mem(w), dym = nc_cl_mem(dy), dxm = nc_cl_mem(dx);
  for (int py = 0; s == NC_OK && py < g.sh; py++)
    for (int px = 0; s == NC_OK && px < g.sw; px++) {
      const conv_phase a = phase_of(g.h, g.kh, g.sh, g.ph, g.dh, py), b = phase_of(g.w, g.kw, g.sw, g.pw, g.dw, px);
      if (a.n == 0 || b.n == 0 || a.t == 0 || b.t == 0) continue;
      int64_t wshape[1] = {(int64_t)g.o * g.c * a.t * b.t};
      nc_tensor *wp;
      s = nc_tensor_empty(dev, NC_FLOAT32, 1, wshape, 0, &wp);
      if (s != NC_OK) break;
      cl_mem wpm = nc_cl_mem(wp);
      nc_cl_arg wargs[] = {NC_CL_ARG(wm),   NC_CL_ARG(g.o),  NC_CL_ARG(g.c),  NC_CL_ARG(g.kh),
                           NC_CL_ARG(g.kw), NC_CL_ARG(a.k0), NC_CL_ARG(b.k0), NC_CL_ARG(g.sh),
                           NC_CL_ARG(g.sw), NC_CL_ARG(a.t),  NC_CL_ARG(b.t),  NC_CL_ARG(wpm)};
      s = nc_cl_launch(dev, pw->kernel, 12, wargs, nc_cl_global_size(dev, wshape[0]), 0);
      /* dX's phase = conv(dY, WP) */
      const cl_convi t = phase_conv(&g, &a, &b, py, px);
      if (s == NC_OK) s = fast_forward(dev, p->precision, &t, bx, dym, wpm, wpm, 0, dxm);
      /* The workspace returns to the pool; the queue is in order, so its reuse waits for us. */
      nc_tensor_release(wp);
    }
  return s;
}

static nc_status fast_backward_weight(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *x,
                                      nc_tensor *dw) {
  nc_device *dev = nc_tensor_device(dw);
  const cl_convi g = geometry_i(p);
  const int64_t m = g.o, n = (int64_t)g.c * g.kh * g.kw, kt = (int64_t)g.n * g.oh * g.ow;
  /* conv_mma.cl's weight gradient under the tensor-core precisions where dY's rows of four
   * pixels start 16-byte aligned (oh ow a multiple of 4), but for 1 x 1 kernels and, under "high",
   * for at most 64 output channels, where gemm_fast.cl's was faster on an H100 (ResNet18-CIFAR's
   * shapes, docs/performance.md); else gemm_fast.cl's */
  const nc_cl_handle *k, *round_bf16 = NULL;
  int64_t bm_, bn_, items;
  /* a bfloat16 X (nc_cl_conv2d_storage), with dY and dW bfloat16, or both float32 */
  const bool bx = x->dtype == NC_BFLOAT16, bx16 = bx && dy->dtype == NC_BFLOAT16;
  if (bx && !(bx_wgrad_kernel(dev, &g, bx16, &k) && (!bx16 || bx_kernel(dev, m, BX_SUM, &round_bf16))))
    return nc_error(NC_ERR_UNSUPPORTED, "conv2d weight gradient of bfloat16 tensors: no kernel for this geometry on this device");
  if (bx) {
    bm_ = items = mma_bm(m), bn_ = MMA_BN;
  } else if ((g.oh * g.ow) % 4 == 0 && g.kh * g.kw > 1 && (p->precision == NC_PRECISION_MEDIUM || m > 64) &&
             mma_kernel(dev, p->precision, true, m, &k)) {
    bm_ = items = mma_bm(m), bn_ = MMA_BN;
  } else {
    const conv_tile tile = pick_tile(dev, m, n, true, p->precision);
    NC_TRY(nc_cl_fast_kernel(
        dev, tile_slot(tile, NC_CL_K_CONV_WGRAD_FAST_S, NC_CL_K_CONV_WGRAD_FAST_W, NC_CL_K_CONV_WGRAD_FAST_L),
        p->precision, &k));
    bm_ = CONV_TILES[tile].bm, bn_ = CONV_TILES[tile].bn, items = 256;
  }
  /* Split K so that the grid gives every compute unit about two work-groups. */
  const int64_t tiles = ((m + bm_ - 1) / bm_) * ((n + bn_ - 1) / bn_);
  int64_t kc = 0;
  const int64_t splits = nc_cl_k_splits(dev, tiles, kt, INT64_MAX, &kc);
  cl_int kchunk = (cl_int)kc;
  nc_tensor *ws = NULL;
  if (splits > 1 || bx16) { /* the bfloat16 kernel's results are float32 partial sums, even alone */
    int64_t wshape[1] = {splits * m * n};
    NC_TRY(nc_tensor_empty(dev, NC_FLOAT32, 1, wshape, 0, &ws));
  }
  cl_mem dym = nc_cl_mem(dy), xm = nc_cl_mem(x), dwm = nc_cl_mem(dw), wsm = ws ? nc_cl_mem(ws) : dwm;
  nc_cl_arg args[] = {NC_CL_ARG(g), NC_CL_ARG(kchunk), NC_CL_ARG(dym), NC_CL_ARG(xm), NC_CL_ARG(wsm)};
  size_t local[3] = {(size_t)items, 1, 1};
  size_t global[3] = {(size_t)((n + bn_ - 1) / bn_ * items), (size_t)((m + bm_ - 1) / bm_), (size_t)splits};
  nc_status s = nc_cl_launch_nd(dev, k->kernel, 5, args, 3, global, local);
  /* dW [m, n] as a convolution output of one image, m channels and 1 x n pixels, for the rounding sum */
  const cl_convi dense = {.n = 1, .o = (cl_int)m, .oh = 1, .ow = (cl_int)n, .yp = (cl_int)n, .yr = (cl_int)n, .yc = 1};
  if (s == NC_OK && ws) s = sum_splits(dev, ws, splits, m * n, bx16 ? &dense : NULL, round_bf16, dwm);
  nc_tensor_release(ws);
  return s;
}

/* Input gradients by phases (fast_backward_input): one group, 32-bit extents, and per dim a stride
 * or a dilation of 1. */
static bool by_phases(const nc_conv2d_desc *p) {
  return fast_fits(p, NC_FLOAT32) && (p->stride[0] == 1 || p->dilation[0] == 1) &&
         (p->stride[1] == 1 || p->dilation[1] == 1);
}

bool nc_cl_conv2d_storage(nc_device *dev, nc_op op, const nc_conv2d_desc *p, nc_dtype dt) {
  const nc_cl_handle *k;
  if (dt != NC_BFLOAT16 || p->precision != NC_PRECISION_MEDIUM || !fast_fits(p, NC_FLOAT32) ||
      !bx_kernel(dev, 0, BX_SUM, &k))
    return false;
  const cl_convi g = geometry_i(p);
  if (op == NC_OP_CONV2D) return bx_fits(dev, &g, &k);
  if (op == NC_OP_CONV2D_BWD_WEIGHT)
    return bx_wgrad_kernel(dev, &g, true, &k) && bx_wgrad_kernel(dev, &g, false, &k);
  if (op != NC_OP_CONV2D_BWD_INPUT || !by_phases(p)) return false;
  for (int py = 0; py < g.sh; py++)
    for (int px = 0; px < g.sw; px++) {
      const conv_phase a = phase_of(g.h, g.kh, g.sh, g.ph, g.dh, py), b = phase_of(g.w, g.kw, g.sw, g.pw, g.dw, px);
      if (a.n == 0 || b.n == 0 || a.t == 0 || b.t == 0) continue;
      const cl_convi t = phase_conv(&g, &a, &b, py, px);
      if (!bx_fits(dev, &t, &k)) return false;
    }
  return true;
}

nc_status nc_cl_conv2d(const nc_conv2d_desc *p, const nc_tensor *x, const nc_tensor *w, const nc_tensor *bias,
                       nc_tensor *y) {
  nc_device *dev = nc_tensor_device(y);
  const bool bx = y->dtype == NC_BFLOAT16; /* X and Y bfloat16, W and bias float32 (nc_cl_conv2d_storage) */
  if (bx && !fast_fits(p, NC_FLOAT32))
    return nc_error(NC_ERR_UNSUPPORTED, "conv2d of bfloat16 tensors: no kernel for this geometry on this device");
  if (fast_fits(p, bx ? NC_FLOAT32 : y->dtype)) {
    const cl_convi g = geometry_i(p);
    return fast_forward(dev, p->precision, &g, bx, nc_cl_mem(x), nc_cl_mem(w), bias ? nc_cl_mem(bias) : nc_cl_mem(w),
                        bias != NULL, nc_cl_mem(y));
  }
  nc_gemm_config cfg;
  const nc_cl_handle *k;
  NC_TRY(conv_kernel(dev, y->dtype, NC_CL_K_CONV2D_FWD, &k, &cfg));
  cl_conv geo = geometry(p);
  cl_mem xm = nc_cl_mem(x), wm = nc_cl_mem(w), bm = bias ? nc_cl_mem(bias) : nc_cl_mem(w), ym = nc_cl_mem(y);
  cl_int has_bias = bias != NULL;
  nc_cl_arg args[] = {NC_CL_ARG(geo), NC_CL_ARG(xm),       NC_CL_ARG(wm),
                      NC_CL_ARG(bm),  NC_CL_ARG(has_bias), NC_CL_ARG(ym)};
  size_t global[3], local[3];
  grid(&cfg, geo.og, geo.n * geo.oh * geo.ow, geo.groups, global, local);
  return nc_cl_launch_nd(dev, k->kernel, 6, args, 3, global, local);
}

/* Strided or few input channels per group: the columns' gradient per chunk of images as a batched GEMM
 * (W_g^T @ dY_b, read through strides) into a workspace of at most about 64 MiB, then
 * conv2d_col2im. */
static nc_status backward_input_cols(const cl_conv *geo, nc_precision prec, const nc_gemm_config *cfg,
                                     const nc_tensor *dy, const nc_tensor *w, nc_tensor *dx) {
  nc_device *dev = nc_tensor_device(dx);
  const int64_t kdim = geo->cg * geo->kh * geo->kw, ohw = geo->oh * geo->ow,
                es = (int64_t)nc_dtype_size(dx->dtype);
  int64_t nb = ((int64_t)64 << 20) / (kdim * ohw * es);
  if (nb < 1) nb = 1;
  if (nb > geo->n) nb = geo->n;
  int64_t wshape[1] = {nb * kdim * ohw};
  nc_tensor *ws;
  NC_TRY(nc_tensor_empty(dev, dx->dtype, 1, wshape, 0, &ws));
  const nc_cl_handle *k;
  nc_status s = nc_cl_gemm_kernel(dev, NC_CL_K_CONV2D_COL2IM, dx->dtype, cfg, &k);
  cl_mem wsm = nc_cl_mem(ws), dxm = nc_cl_mem(dx);
  for (cl_long n0 = 0; s == NC_OK && n0 < geo->n; n0 += nb) {
    cl_long cnt = geo->n - n0 < nb ? geo->n - n0 : nb;
    for (cl_long g = 0; s == NC_OK && g < geo->groups; g++) {
      nc_gemm_desc d = {.a = w,
                        .b = dy,
                        .c = ws,
                        .batch = cnt,
                        .m = kdim,
                        .n = ohw,
                        .k = geo->og,
                        .a_off = g * geo->og * kdim,
                        .a_sb = 0,
                        .a_sm = 1,
                        .a_sk = kdim,
                        .b_off = (n0 * geo->o + g * geo->og) * ohw,
                        .b_sb = geo->o * ohw,
                        .b_sk = ohw,
                        .b_sn = 1,
                        .c_sb = kdim * ohw,
                        .c_sm = ohw,
                        .c_sn = 1,
                        .alpha = 1,
                        .beta = 0,
                        .precision = prec};
      s = d.c->dtype == NC_FLOAT32 && nc_cl_gemm_fast_fits(&d) ? nc_cl_gemm_fast(&d, NC_GEMM_FAST_AUTO)
                                                             : nc_cl_gemm_with(&d, cfg);
      cl_long total = cnt * geo->cg * geo->h * geo->w;
      nc_cl_arg args[] = {NC_CL_ARG(*geo), NC_CL_ARG(g),   NC_CL_ARG(n0),
                          NC_CL_ARG(cnt),  NC_CL_ARG(wsm), NC_CL_ARG(dxm)};
      if (s == NC_OK) s = nc_cl_launch(dev, k->kernel, 6, args, nc_cl_global_size(dev, total), 0);
    }
  }
  nc_tensor_release(ws);
  return s;
}

nc_status nc_cl_conv2d_backward_input(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *w,
                                      nc_tensor *dx) {
  nc_device *dev = nc_tensor_device(dx);
  /* Forward convolutions, one per phase of a stride (fast_backward_input); bfloat16 dY and dX
   * (with float32 W) only there (nc_cl_conv2d_storage). */
  if ((dx->dtype == NC_FLOAT32 || dx->dtype == NC_BFLOAT16) && by_phases(p)) return fast_backward_input(p, dy, w, dx);
  nc_gemm_config cfg;
  const nc_cl_handle *k;
  NC_TRY(conv_kernel(dev, dx->dtype, NC_CL_K_CONV2D_BWD_INPUT, &k, &cfg));
  cl_conv geo = geometry(p);
  /* Strided convolutions would multiply mostly zeros in the implicit form (3 of 4 terms at
   * stride 2), and few channels per group would leave most of a tile's rows empty. */
  if (geo.cg * 4 <= cfg.mwg || geo.sh > 1 || geo.sw > 1) return backward_input_cols(&geo, p->precision, &cfg, dy, w, dx);
  cl_mem dym = nc_cl_mem(dy), wm = nc_cl_mem(w), dxm = nc_cl_mem(dx);
  nc_cl_arg args[] = {NC_CL_ARG(geo), NC_CL_ARG(dym), NC_CL_ARG(wm), NC_CL_ARG(dxm)};
  size_t global[3], local[3];
  grid(&cfg, geo.cg, geo.n * geo.h * geo.w, geo.groups, global, local);
  return nc_cl_launch_nd(dev, k->kernel, 4, args, 3, global, local);
}

nc_status nc_cl_conv2d_backward_weight(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *x,
                                       nc_tensor *dw) {
  nc_device *dev = nc_tensor_device(dw);
  if (fast_fits(p, x->dtype == NC_BFLOAT16 ? NC_FLOAT32 : dw->dtype)) return fast_backward_weight(p, dy, x, dw);
  nc_gemm_config cfg;
  const nc_cl_handle *k;
  NC_TRY(conv_kernel(dev, dw->dtype, NC_CL_K_CONV2D_BWD_WEIGHT, &k, &cfg));
  cl_conv geo = geometry(p);
  int64_t m = geo.og, n = geo.cg * geo.kh * geo.kw, kt = geo.n * geo.oh * geo.ow;
  /* Enough work-groups to fill every compute unit a few times over, each with >= 8 K tiles. */
  int64_t tiles = ((m + cfg.mwg - 1) / cfg.mwg) * ((n + cfg.nwg - 1) / cfg.nwg) * geo.groups;
  int64_t want =
      (4 * nc_cl_compute_units(dev) + tiles - 1) / tiles;
  int64_t max_splits = kt / (8 * cfg.kwg);
  cl_long splits = want < max_splits ? want : max_splits;
  if (splits < 1) splits = 1;
  if (splits > 64) splits = 64;
  cl_long kchunk = (kt + splits - 1) / splits;
  kchunk = (kchunk + cfg.kwg - 1) / cfg.kwg * cfg.kwg;
  splits = (kt + kchunk - 1) / kchunk;
  nc_tensor *ws = NULL;
  if (splits > 1) {
    int64_t wshape[1] = {splits * geo.groups * m * n};
    NC_TRY(nc_tensor_empty(dev, dw->dtype, 1, wshape, 0, &ws));
  }
  cl_mem dym = nc_cl_mem(dy), xm = nc_cl_mem(x), wsm = ws ? nc_cl_mem(ws) : nc_cl_mem(dw);
  nc_cl_arg args[] = {NC_CL_ARG(geo), NC_CL_ARG(splits), NC_CL_ARG(kchunk),
                      NC_CL_ARG(dym), NC_CL_ARG(xm),     NC_CL_ARG(wsm)};
  size_t global[3], local[3];
  grid(&cfg, m, n, geo.groups * splits, global, local);
  nc_status s = nc_cl_launch_nd(dev, k->kernel, 6, args, 3, global, local);
  if (s == NC_OK && ws) {
    const nc_cl_handle *sum;
    s = nc_cl_gemm_kernel(dev, NC_CL_K_CONV2D_SUM_SPLITS, dw->dtype, &cfg, &sum);
    cl_long total = geo.groups * m * n;
    cl_mem dwm = nc_cl_mem(dw);
    nc_cl_arg sargs[] = {NC_CL_ARG(wsm), NC_CL_ARG(splits), NC_CL_ARG(total), NC_CL_ARG(dwm)};
    if (s == NC_OK) s = nc_cl_launch(dev, sum->kernel, 4, sargs, nc_cl_global_size(dev, total), 0);
  }
  /* The workspace returns to the pool; the queue is in order, so its reuse waits for us. */
  nc_tensor_release(ws);
  return s;
}

/* The OpenCL GEMM entry: one launch of kernels/gemm.cl per batched product, with the tile
 * variant the tuner chose for the device. */
#include <stdio.h>
#include <stdlib.h>
#include "core/check.h"
#include <string.h>
#include "cl_linalg.h"

nc_status nc_cl_check_real(nc_device *dev, nc_dtype dt) {
  if (dt == NC_FLOAT64 && !dev->info.fp64)
    return nc_error(NC_ERR_UNSUPPORTED, "%s has no float64 support (cl_khr_fp64)", dev->info.name);
  if (dt != NC_FLOAT32 && dt != NC_FLOAT64)
    return nc_error(NC_ERR_DTYPE, "expected float32 or float64, got %s", nc_dtype_name(dt));
  return NC_OK;
}

void nc_gemm_config_options(const nc_gemm_config *c, nc_dtype dt, char *buf, size_t n) {
  snprintf(buf, n, "-DREAL=%s -DMWG=%d -DNWG=%d -DKWG=%d -DTM=%d -DTNV=%d -DVW=%d",
           dt == NC_FLOAT64 ? "double" : "float", c->mwg, c->nwg, c->kwg, c->tm, c->tnv, c->vw);
}

void nc_gemm_config_local(const nc_gemm_config *c, size_t local[2]) {
  local[0] = (size_t)(c->nwg / (c->vw * c->tnv));
  local[1] = (size_t)(c->mwg / c->tm);
}

nc_status nc_cl_gemm_kernel(nc_device *dev, nc_cl_slot slot, nc_dtype dt, const nc_gemm_config *cfg,
                            const nc_cl_handle **out) {
  const int tiles[6] = {cfg->mwg, cfg->nwg, cfg->kwg, cfg->tm, cfg->tnv, cfg->vw};
  const nc_cl_handle *h = nc_cl_handle_peek(dev, slot, dt);
  if (h && memcmp(h->tiles, tiles, sizeof tiles) == 0) return *out = h, NC_OK;
  char opts[256];
  nc_gemm_config_options(cfg, dt, opts, sizeof opts);
  return nc_cl_resolve(dev, slot, dt, opts, tiles, out);
}

bool nc_gemm_config_fits(nc_device *dev, const nc_gemm_config *c, nc_dtype dt) {
  size_t local[2];
  nc_gemm_config_local(c, local);
  size_t es = dt == NC_FLOAT64 ? 8 : 4;
  /* The A and B tiles, plus the conv kernels' index tables (kernels/conv.cl: up to 4 longs
   * per tile column and per K row), since those share the variant. */
  size_t need = (size_t)(c->mwg + c->nwg) * (size_t)c->kwg * es + (size_t)(c->nwg + c->kwg) * 4 * 8;
  const nc_cl_device *cd = dev->impl;
  const cl_ulong have = cd->local_mem ? cd->local_mem : 32768;
  return local[0] * local[1] <= dev->info.max_work_group_size && need <= have;
}

/* A scalar kernel argument of the operands' dtype. */
typedef union {
  cl_float f;
  cl_double d;
} real_arg;

static nc_cl_arg real_of(nc_dtype dt, double v, real_arg *r) {
  if (dt == NC_FLOAT64) {
    r->d = v;
    return (nc_cl_arg){sizeof r->d, &r->d};
  }
  r->f = (cl_float)v;
  return (nc_cl_arg){sizeof r->f, &r->f};
}

nc_status nc_cl_gemm_with(const nc_gemm_desc *g, const nc_gemm_config *cfg) {
  nc_device *dev = nc_tensor_device(g->c);
  nc_dtype dt = g->c->dtype;
  NC_TRY(nc_cl_check_real(dev, dt));
  const nc_cl_handle *k;
  NC_TRY(nc_cl_gemm_kernel(dev, NC_CL_K_GEMM, dt, cfg, &k));
  cl_mem a = nc_cl_mem(g->a), b = nc_cl_mem(g->b), c = nc_cl_mem(g->c);
  cl_mem bias = g->bias ? nc_cl_mem(g->bias) : c;
  cl_long M = g->m, N = g->n, K = g->k;
  cl_long a_off = g->a_off, a_sb = g->a_sb, a_sm = g->a_sm, a_sk = g->a_sk;
  cl_long b_off = g->b_off, b_sb = g->b_sb, b_sk = g->b_sk, b_sn = g->b_sn;
  cl_long c_off = g->c_off, c_sb = g->c_sb, c_sm = g->c_sm, c_sn = g->c_sn;
  cl_long bias_off = g->bias_off, bias_sm = g->bias_sm, bias_sn = g->bias_sn;
  cl_int has_bias = g->bias != NULL;
  real_arg alpha, beta;
  nc_cl_arg args[] = {NC_CL_ARG(M),
                      NC_CL_ARG(N),
                      NC_CL_ARG(K),
                      NC_CL_ARG(a),
                      NC_CL_ARG(a_off),
                      NC_CL_ARG(a_sb),
                      NC_CL_ARG(a_sm),
                      NC_CL_ARG(a_sk),
                      NC_CL_ARG(b),
                      NC_CL_ARG(b_off),
                      NC_CL_ARG(b_sb),
                      NC_CL_ARG(b_sk),
                      NC_CL_ARG(b_sn),
                      NC_CL_ARG(c),
                      NC_CL_ARG(c_off),
                      NC_CL_ARG(c_sb),
                      NC_CL_ARG(c_sm),
                      NC_CL_ARG(c_sn),
                      NC_CL_ARG(bias),
                      NC_CL_ARG(bias_off),
                      NC_CL_ARG(bias_sm),
                      NC_CL_ARG(bias_sn),
                      NC_CL_ARG(has_bias),
                      real_of(dt, g->alpha, &alpha),
                      real_of(dt, g->beta, &beta)};
  size_t local[3] = {0, 0, 1};
  nc_gemm_config_local(cfg, local);
  size_t global[3] = {(size_t)((g->n + cfg->nwg - 1) / cfg->nwg) * local[0],
                      (size_t)((g->m + cfg->mwg - 1) / cfg->mwg) * local[1], (size_t)g->batch};
  return nc_cl_launch_nd(dev, k->kernel, (int)(sizeof args / sizeof args[0]), args, 3, global, local);
}

/* ---- the large-tile float32 kernel ----------------------------------------------------------- */

bool nc_cl_mma_emulated(void) {
  const char *e = getenv("NETCL_MMA_EMULATE");
  return e && strcmp(e, "1") == 0;
}

bool nc_cl_tensor_core_kernel(nc_device *dev, nc_cl_slot slot, const char *mode, int mark, bool *capable,
                               const nc_cl_handle **out) {
  char opts[160];
  snprintf(opts, sizeof opts, "%s%s", mode, nc_cl_mma_emulated() ? " -DNC_MMA_EMULATE=1" : "");
  const int tiles[6] = {mark};
  return nc_cl_handle_optional(dev, slot, NC_FLOAT32, opts, tiles, capable, out);
}

_Static_assert(NC_CL_K_GEMM_FAST_L_CC - NC_CL_K_GEMM_FAST_L_RR == 3 && NC_CL_K_GEMM_TC_L_CC - NC_CL_K_GEMM_TC_L_RR == 3 &&
                   NC_CL_K_GEMM_BF_L_CC - NC_CL_K_GEMM_BF_L_RR == 3 &&
                   NC_CL_K_GEMM_TF32_CC - NC_CL_K_GEMM_TF32_RR == 3 && NC_CL_K_GEMM_MMA_BF_CC - NC_CL_K_GEMM_MMA_BF_RR == 3,
               "gemm_fast_l_<layout>: rr, rc, cr, cc");

nc_status nc_cl_fast_kernel(nc_device *dev, nc_cl_slot slot, nc_precision precision, const nc_cl_handle **out) {
  nc_cl_slot tc, bf;
  switch (slot) {
    case NC_CL_K_GEMM_FAST_L_RR:
    case NC_CL_K_GEMM_FAST_L_RC:
    case NC_CL_K_GEMM_FAST_L_CR:
    case NC_CL_K_GEMM_FAST_L_CC:
      tc = NC_CL_K_GEMM_TC_L_RR + (slot - NC_CL_K_GEMM_FAST_L_RR), bf = NC_CL_K_GEMM_BF_L_RR + (slot - NC_CL_K_GEMM_FAST_L_RR);
      break;
    case NC_CL_K_GEMM_FAST_M: tc = NC_CL_K_GEMM_TC_M, bf = NC_CL_K_GEMM_BF_M; break;
    case NC_CL_K_GEMM_FAST_S: tc = NC_CL_K_GEMM_TC_S, bf = NC_CL_K_GEMM_BF_S; break;
    case NC_CL_K_CONV_FAST_L: tc = NC_CL_K_CONV_TC_L, bf = NC_CL_K_CONV_BF_L; break;
    case NC_CL_K_CONV_FAST_S: tc = NC_CL_K_CONV_TC_S, bf = NC_CL_K_CONV_BF_S; break;
    case NC_CL_K_CONV_WGRAD_FAST_L: tc = NC_CL_K_CONV_WGRAD_TC_L, bf = NC_CL_K_CONV_WGRAD_BF_L; break;
    case NC_CL_K_CONV_WGRAD_FAST_S: tc = NC_CL_K_CONV_WGRAD_TC_S, bf = NC_CL_K_CONV_WGRAD_BF_S; break;
    case NC_CL_K_CONV_FAST_W: tc = NC_CL_K_CONV_TC_W, bf = NC_CL_K_CONV_BF_W; break;
    case NC_CL_K_CONV_WGRAD_FAST_W: tc = NC_CL_K_CONV_WGRAD_TC_W, bf = NC_CL_K_CONV_WGRAD_BF_W; break;
    default: return nc_error(NC_ERR_ARG, "OpenCL slot %d has no tensor-core variant", (int)slot);
  }
  /* "medium": bfloat16 mma.sync; a driver that refuses it leaves "high"'s tf32 */
  if (precision == NC_PRECISION_MEDIUM && nc_cl_tensor_core_kernel(dev, bf, "-DNC_MMA_BF16=1", 2, &dev->info.bf16_mma, out))
    return NC_OK;
  if (precision != NC_PRECISION_HIGHEST && nc_cl_tensor_core_kernel(dev, tc, "-DNC_MMA_TF32=1", 1, &dev->info.tf32, out))
    return NC_OK;
  return nc_cl_handle_get(dev, slot, NC_FLOAT32, out);
}

static const struct {
  nc_cl_slot slot;
  int bm, bn;
} fast_tiles[] = {
    [NC_GEMM_FAST_L] = {NC_CL_K_GEMM_FAST_L_RR, 128, 128}, /* + the layout (layout_of) */
    [NC_GEMM_FAST_M] = {NC_CL_K_GEMM_FAST_M, 128, 64},
    [NC_GEMM_FAST_S] = {NC_CL_K_GEMM_FAST_S, 64, 64},
};

/* The kernel forms element indices within one batch entry in 32 bits: row (or column) index
 * times the leading dimension plus the other index, for edge tiles up to a tile past the end. */
static bool index_fits(int64_t outer, int64_t ld, int64_t inner) {
  const int64_t lim = (int64_t)1 << 31;
  return outer < lim && inner < lim && ld >= 0 && ld < lim && (ld == 0 || outer <= (lim - 1 - inner) / ld);
}

/* g's operands have contiguous rows or columns and its indices fit the kernels' 32-bit math. */
static bool layout_fits(const nc_gemm_desc *g) {
  if (g->m <= 0 || g->n <= 0 || g->k < 0) return false;
  if (g->a_sk != 1 && g->a_sm != 1) return false;
  if (g->b_sn != 1 && g->b_sk != 1) return false;
  const int64_t lda = g->a_sk == 1 ? g->a_sm : g->a_sk, ldb = g->b_sn == 1 ? g->b_sk : g->b_sn;
  const bool a_ok = g->a_sk == 1 ? index_fits(g->m + 128, lda, g->k + 16) : index_fits(g->k + 16, lda, g->m + 128);
  const bool b_ok = g->b_sn == 1 ? index_fits(g->k + 16, ldb, g->n + 128) : index_fits(g->n + 128, ldb, g->k + 16);
  return a_ok && b_ok;
}

bool nc_cl_gemm_fast_fits(const nc_gemm_desc *g) { return g->c->dtype == NC_FLOAT32 && layout_fits(g); }

/* The 128 x 128 tile when it still gives the device about two work-groups per compute unit,
 * else 64 x 64 (on the H200, 64 x 64 was faster for M = 64 and for grids of about one 128 x 128
 * group per compute unit; tests/bench/bench_gpu.lua and docs/performance.md). */
static nc_gemm_fast_tile pick_tile(const nc_gemm_desc *g, nc_device *dev) {
  const int64_t cus = nc_cl_compute_units(dev);
  const int64_t groups_l = ((g->m + 127) / 128) * ((g->n + 127) / 128) * g->batch;
  return g->m > 64 && 10 * groups_l >= 19 * cus ? NC_GEMM_FAST_L : NC_GEMM_FAST_S;
}

/* One launch of a large-tile kernel (bm x bn tiles, work-groups of items): g's product over
 * batch entries of g (their K, strides and offsets as given), into c (offset, strides), alpha,
 * beta and bias as given. */
static nc_status launch_fast(const nc_gemm_desc *g, const nc_cl_handle *k, int bm, int bn, size_t items, cl_long K,
                             cl_long a_off, cl_long b_off, cl_long batch, cl_long a_sb, cl_long b_sb, cl_mem c,
                             cl_long c_off, cl_long c_sb, cl_long c_sm, cl_long c_sn, cl_float beta, bool bias_on) {
  nc_device *dev = nc_tensor_device(g->c);
  cl_mem a = nc_cl_mem(g->a), b = nc_cl_mem(g->b);
  cl_mem bias = bias_on ? nc_cl_mem(g->bias) : c;
  cl_long M = g->m, N = g->n;
  cl_long a_sm = g->a_sm, a_sk = g->a_sk, b_sk = g->b_sk, b_sn = g->b_sn;
  cl_long bias_off = g->bias_off, bias_sm = g->bias_sm, bias_sn = g->bias_sn;
  cl_int has_bias = bias_on;
  cl_float alpha = (cl_float)g->alpha;
  nc_cl_arg args[] = {NC_CL_ARG(M),     NC_CL_ARG(N),       NC_CL_ARG(K),        NC_CL_ARG(a),
                      NC_CL_ARG(a_off), NC_CL_ARG(a_sb),    NC_CL_ARG(a_sm),     NC_CL_ARG(a_sk),
                      NC_CL_ARG(b),     NC_CL_ARG(b_off),   NC_CL_ARG(b_sb),     NC_CL_ARG(b_sk),
                      NC_CL_ARG(b_sn),  NC_CL_ARG(c),       NC_CL_ARG(c_off),    NC_CL_ARG(c_sb),
                      NC_CL_ARG(c_sm),  NC_CL_ARG(c_sn),    NC_CL_ARG(bias),     NC_CL_ARG(bias_off),
                      NC_CL_ARG(bias_sm), NC_CL_ARG(bias_sn), NC_CL_ARG(has_bias), NC_CL_ARG(alpha),
                      NC_CL_ARG(beta)};
  size_t local[3] = {items, 1, 1};
  size_t global[3] = {(size_t)((g->n + bn - 1) / bn) * items, (size_t)((g->m + bm - 1) / bm), (size_t)batch};
  return nc_cl_launch_nd(dev, k->kernel, (int)(sizeof args / sizeof args[0]), args, 3, global, local);
}

int64_t nc_cl_k_splits(nc_device *dev, int64_t tiles, int64_t k, int64_t max_splits, int64_t *kchunk) {
  const int64_t cus = nc_cl_compute_units(dev);
  int64_t splits = (2 * cus + tiles - 1) / tiles;
  if (splits > k / (32 * 16)) splits = k / (32 * 16);
  if (splits > max_splits) splits = max_splits;
  if (splits < 1) splits = 1;
  *kchunk = ((k + splits - 1) / splits + 15) / 16 * 16;
  return (k + *kchunk - 1) / *kchunk;
}

/* Splits of K for a product whose tiles leave most compute units idle (a weight gradient: M and N
 * small, K the batch), as the convolution's weight gradient does (cl_conv.c). Only plain products
 * (one batch entry, beta 0, no bias, C contiguous) are split: the split sums are added by
 * gf_sum_splits, in order. */
static int64_t k_splits(const nc_gemm_desc *g, nc_device *dev, nc_gemm_fast_tile tile, int64_t *kchunk) {
  if (g->batch != 1 || g->beta != 0 || g->bias || g->c_sn != 1 || g->c_sm != g->n) return 1;
  const int64_t cus = nc_cl_compute_units(dev);
  const int64_t tiles = ((g->m + fast_tiles[tile].bm - 1) / fast_tiles[tile].bm) *
                        ((g->n + fast_tiles[tile].bn - 1) / fast_tiles[tile].bn);
  if (tiles >= cus || g->m * g->n > ((int64_t)1 << 30)) return 1;
  const int64_t splits = nc_cl_k_splits(dev, tiles, g->k, 64, kchunk);
  /* Equal chunks go as one launch; a shorter last chunk needs a second launch, which runs its
   * few tiles alone on the device for as long as a whole chunk. So a count near the planned one
   * that cuts K into equal multiples of 16 (each at least 32 tiles of K) is taken, the larger
   * first at equal distance. */
  for (int64_t d = 0; splits > 1 && d <= splits / 2; d++)
    for (int sign = 1; sign >= -1; sign -= 2) {
      const int64_t s = splits + sign * d;
      if (s < 2 || s > 64 || g->k % (16 * s) != 0 || g->k / s < 32 * 16) continue;
      *kchunk = g->k / s;
      return s;
    }
  return splits;
}

/* g's layout as an offset from an rr slot (the kernels <name>_<a><b>: a is r when A's rows are
 * contiguous, a_sk == 1, tested first as the kernels do, else c; b likewise for B, b_sn == 1). */
static int layout_of(const nc_gemm_desc *g) { return (g->a_sk == 1 ? 0 : 2) + (g->b_sn == 1 ? 0 : 1); }

/* The kernel of a tile built for g's layout: gemm_fast_l_<a><b> for the 128 x 128 tile. */
static nc_cl_slot layout_slot(const nc_gemm_desc *g, nc_gemm_fast_tile tile) {
  if (tile != NC_GEMM_FAST_L) return fast_tiles[tile].slot;
  return (nc_cl_slot)(fast_tiles[tile].slot + layout_of(g));
}

/* Every row of both operands starts 16-byte aligned (buffers themselves are): their offsets,
 * leading dimensions and batch strides are multiples of per16 elements (4 floats, 8 bfloat16). */
static bool operands_aligned(const nc_gemm_desc *g, int64_t per16) {
  const int64_t lda = g->a_sk == 1 ? g->a_sm : g->a_sk, ldb = g->b_sn == 1 ? g->b_sk : g->b_sn;
  return g->a_off % per16 == 0 && lda % per16 == 0 && (g->batch == 1 || g->a_sb % per16 == 0) &&
         g->b_off % per16 == 0 && ldb % per16 == 0 && (g->batch == 1 || g->b_sb % per16 == 0);
}

/* The work-group sizes of kernels/gemm_mma.cl and gemm_tf32.cl (TC_ITEMS, TF_ITEMS: four warps). */
enum { MMA_ASYNC_ITEMS = 128, TF32_ITEMS = 128 };

/* The 128 x 128 tensor-core kernel with asynchronous copies for g's layout, under g's precision:
 * kernels/gemm_tf32.cl for "high", gemm_mma.cl for "medium" (bfloat16 products of float32
 * operands; "high" where the device has no bfloat16 mma.sync), where the device runs them and
 * g's rows are aligned for their 16-byte copies (a split of K keeps that: its chunks are
 * multiples of 16). The kernel's work-group size, with *out set; 0: none. */
static size_t mma_async_kernel(const nc_gemm_desc *g, nc_device *dev, const nc_cl_handle **out) {
  nc_cl_device *cd = dev->impl;
  if (g->precision == NC_PRECISION_HIGHEST || !dev->info.tf32 || !__atomic_load_n(&cd->mma_async, __ATOMIC_ACQUIRE))
    return 0;
  if (!operands_aligned(g, 4)) return 0;
  const int layout = layout_of(g);
  if (g->precision == NC_PRECISION_MEDIUM && dev->info.bf16_mma &&
      nc_cl_tensor_core_kernel(dev, NC_CL_K_GEMM_MMA_BF_RR + layout, "-DNC_MMA_BF16=1", 2, &cd->mma_async, out))
    return MMA_ASYNC_ITEMS;
  return nc_cl_tensor_core_kernel(dev, NC_CL_K_GEMM_TF32_RR + layout, "-DNC_MMA_TF32=1", 1, &cd->mma_async, out) ? TF32_ITEMS
                                                                                                           : 0;
}

nc_status nc_cl_gemm_fast(const nc_gemm_desc *g, nc_gemm_fast_tile tile) {
  nc_device *dev = nc_tensor_device(g->c);
  if (!nc_cl_gemm_fast_fits(g)) return nc_error(NC_ERR_ARG, "this product does not suit the large-tile GEMM kernel");
  const bool chosen = tile == NC_GEMM_FAST_AUTO;
  if (chosen) tile = pick_tile(g, dev);
  const nc_cl_handle *k;
  size_t items = tile == NC_GEMM_FAST_L ? mma_async_kernel(g, dev, &k) : 0;
  if (!items) {
    items = 256;
    NC_TRY(nc_cl_fast_kernel(dev, layout_slot(g, tile), g->precision, &k));
  }
  const int bm = fast_tiles[tile].bm, bn = fast_tiles[tile].bn;
  int64_t kchunk = 0, splits = chosen ? k_splits(g, dev, tile, &kchunk) : 1;
  if (splits == 1)
    return launch_fast(g, k, bm, bn, items, g->k, g->a_off, g->b_off, g->batch, g->a_sb, g->b_sb,
                       nc_cl_mem(g->c), g->c_off, g->c_sb, g->c_sm, g->c_sn, (cl_float)g->beta,
                       g->bias != NULL);
  /* the chunks of kchunk as one batched launch; a last, shorter chunk as a second */
  const int64_t mn = g->m * g->n, last = g->k - (splits - 1) * kchunk,
                full = last == kchunk ? splits : splits - 1;
  const int64_t wshape[1] = {splits * mn};
  nc_tensor *ws = NULL;
  NC_TRY(nc_tensor_empty(dev, NC_FLOAT32, 1, wshape, 0, &ws));
  cl_mem wsm = nc_cl_mem(ws);
  nc_status s = launch_fast(g, k, bm, bn, items, kchunk, g->a_off, g->b_off, full, kchunk * g->a_sk,
                            kchunk * g->b_sk, wsm, 0, mn, g->n, 1, 0, false);
  if (s == NC_OK && full < splits)
    s = launch_fast(g, k, bm, bn, items, last, g->a_off + (splits - 1) * kchunk * g->a_sk,
                    g->b_off + (splits - 1) * kchunk * g->b_sk, 1, 0, 0, wsm, (splits - 1) * mn, mn, g->n, 1,
                    0, false);
  const nc_cl_handle *sum = NULL;
  if (s == NC_OK) s = nc_cl_handle_get(dev, NC_CL_K_GF_SUM_SPLITS, NC_FLOAT32, &sum);
  if (s == NC_OK) {
    cl_mem cm = nc_cl_mem(g->c);
    cl_int sp = (cl_int)splits, total = (cl_int)mn;
    cl_long coff = g->c_off;
    nc_cl_arg sargs[] = {NC_CL_ARG(wsm), NC_CL_ARG(sp), NC_CL_ARG(total), NC_CL_ARG(cm), NC_CL_ARG(coff)};
    s = nc_cl_launch(dev, sum->kernel, 5, sargs, nc_cl_global_size(dev, total), 0);
  }
  nc_tensor_release(ws);
  return s;
}

/* ---- bfloat16 tensors: kernels/gemm_bf16.cl ---------------------------------------------------- */

_Static_assert(NC_CL_K_GEMM_BF16_CC - NC_CL_K_GEMM_BF16_RR == 3 && NC_CL_K_GEMM_BF16F_CC - NC_CL_K_GEMM_BF16F_RR == 3 &&
                   NC_CL_K_GEMM_BF16W_CC - NC_CL_K_GEMM_BF16W_RR == 3 &&
                   NC_CL_K_GEMM_BF16FW_CC - NC_CL_K_GEMM_BF16FW_RR == 3,
               "gemm_bf16_<layout>: rr, rc, cr, cc");

/* The work-group size of kernels/gemm_bf16.cl's builds (its HB_ITEMS: eight warps, of 64 x 32 in
 * the 128 x 128 tile, of 64 x 64 in the wide 128 x 256 one). */
enum { BF16_ITEMS = 256 };

/* The wide tile (-DHB_BN=256: one work-group a multiprocessor, four stages, a quarter fewer
 * bytes copied per product than 128 x 128) where its grid still fills the device about twice;
 * the 128 x 128 tile (two work-groups a multiprocessor) below that. Measured on the H100
 * (docs/performance.md, "Tensor-core GEMMs"). */
static bool bf16_wide(const nc_gemm_desc *g, nc_device *dev) {
  nc_cl_device *cd = dev->impl;
  const int64_t tiles = ((g->m + 127) / 128) * ((g->n + 255) / 256) * g->batch;
  return tiles >= 2 * nc_cl_compute_units(dev) && __atomic_load_n(&cd->gemm_bf16_wide, __ATOMIC_ACQUIRE);
}

bool nc_cl_gemm_bf16_takes(const nc_gemm_desc *g) {
  nc_device *dev = nc_tensor_device(g->c);
  nc_cl_device *cd = dev->impl;
  if (!dev->info.bf16_mma || !__atomic_load_n(&cd->gemm_bf16, __ATOMIC_ACQUIRE) || g->k <= 0) return false;
  /* Few tiles over a long K (a weight gradient) would leave most compute units idle: the float32
   * path splits K over work-groups instead (k_splits). */
  const int64_t tiles = ((g->m + 127) / 128) * ((g->n + 127) / 128) * g->batch;
  return tiles >= nc_cl_compute_units(dev) || g->k < 1024;
}

bool nc_cl_gemm_bf16_mma(const nc_gemm_desc *g, nc_status *st) {
  nc_device *dev = nc_tensor_device(g->c);
  nc_cl_device *cd = dev->impl;
  const nc_dtype ct = g->c->dtype;
  if (g->a->dtype != NC_BFLOAT16 || g->b->dtype != NC_BFLOAT16 || (ct != NC_BFLOAT16 && ct != NC_FLOAT32))
    return false;
  if (!nc_cl_gemm_bf16_takes(g) || !layout_fits(g) || !operands_aligned(g, 8)) return false;
  const nc_cl_handle *k;
  const bool f32 = ct == NC_FLOAT32;
  bool wide = bf16_wide(g, dev);
  static const char *const opts[2][2] = {
      {"-DNC_MMA_BF16=1", "-DNC_MMA_BF16=1 -DHB_OUT_F32=1"},
      {"-DNC_MMA_BF16=1 -DHB_BN=256 -DHB_WARPS_N=4 -DHB_STAGES=4",
       "-DNC_MMA_BF16=1 -DHB_OUT_F32=1 -DHB_BN=256 -DHB_WARPS_N=4 -DHB_STAGES=4"}};
  static const nc_cl_slot slots[2][2] = {{NC_CL_K_GEMM_BF16_RR, NC_CL_K_GEMM_BF16F_RR},
                                         {NC_CL_K_GEMM_BF16W_RR, NC_CL_K_GEMM_BF16FW_RR}};
  /* a driver that refuses the wide tile (its local memory) leaves the 128 x 128 one */
  if (wide &&
      !nc_cl_tensor_core_kernel(dev, slots[1][f32] + layout_of(g), opts[1][f32], 4 + f32, &cd->gemm_bf16_wide, &k))
    wide = false;
  if (!wide &&
      !nc_cl_tensor_core_kernel(dev, slots[0][f32] + layout_of(g), opts[0][f32], 2 + f32, &cd->gemm_bf16, &k))
    return false;
  *st = launch_fast(g, k, 128, wide ? 256 : 128, BF16_ITEMS, g->k, g->a_off, g->b_off, g->batch, g->a_sb,
                    g->b_sb, nc_cl_mem(g->c), g->c_off, g->c_sb, g->c_sm, g->c_sn, (cl_float)g->beta,
                    g->bias != NULL);
  return true;
}

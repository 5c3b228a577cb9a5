/* The tiled flash-attention kernels (kernels/attention.cl, *_tiled): the variant for a call's
 * head dim, with block sizes that fit the device's local memory, or none (the op-table row
 * kernels run instead: float64 on a device with little local memory, head dim 256 backward on
 * a 48 KB GPU, a device whose work-groups cannot hold 256 items). The tiled kernels run on GPUs;
 * on CPU devices the row kernels run unless NETCL_FLASH_TILED=1 asks for the tiled ones: PoCL 5.0's
 * pthread device gave wrong tiled results in the parity and attention suites (PoCL 3.1 and the
 * H200 agree with the CPU backend), and until that is understood a CPU device takes the kernels
 * every OpenCL we test agrees on. NETCL_FLASH_TILED=0 turns the tiled kernels off everywhere (the
 * benchmark's comparison); ctest's lua.test_attention.opencl_tiled and parity.attention_tiled
 * force them on PoCL.
 *
 * Where the device has tf32 mma.sync (NVIDIA, compute capability 8.0 or later), float32 with head
 * dims up to 64 takes the tensor-core kernels of kernels/attention_mma.cl instead, their products
 * split in three tf32 products under the matmul precision "highest" and one otherwise.
 * NETCL_FLASH_MMA=0 keeps the float32 tiled kernels (for comparison); NETCL_MMA_EMULATE=1 runs the
 * tensor-core kernels on any device with their mma.sync through local memory (ctest's
 * lua.test_attention.opencl_mma and parity.attention_mma). NETCL_FLASH_MMA_OPTS adds build
 * options to them (their block sizes, -DAM_QBC=64 and the like): a tuning hook, read once. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cl_linalg.h"
#include "core/check.h"

#define ATT_LS 256 /* kernels/attention.cl: ATT_T x ATT_T work-items */

/* Per head-dim class: rows of the query and key blocks of the forward, dq and dk/dv kernels. */
typedef struct {
  int hd, fbr, fbc, qbr, qbc, kbr, kbc;
} att_variant;

static const att_variant VARIANTS[] = {
    {32, 64, 64, 64, 32, 32, 64},
    {64, 64, 32, 32, 32, 32, 32},
    {128, 32, 32, 16, 16, 16, 16},
    {256, 16, 16, 16, 16, 16, 16},
};

/* Local memory (elements) of each kernel, as kernels/attention.cl declares it. */
static size_t local_elems(const att_variant *a, nc_op op) {
  const size_t ld = (size_t)a->hd + 4; /* rows padded by 4 (ATT_LD, ATT_PLD) */
  switch (op) {
    case NC_OP_FLASH_ATTENTION:
      return (size_t)(a->fbr + a->fbc) * ld + (size_t)a->fbr * (a->fbc + 4) + (size_t)a->fbr * 16;
    case NC_OP_FLASH_ATTENTION_BWD_Q:
      return 2 * (size_t)(a->qbr + a->qbc) * ld + (size_t)a->qbr * (a->qbc + 4);
    default:
      return 2 * (size_t)(a->kbr + a->kbc) * ld + 2 * (size_t)a->kbc * (a->kbr + 4) + 2 * (size_t)a->kbr;
  }
}

static bool tiled_enabled(const nc_device *dev) {
  const char *e = getenv("NETCL_FLASH_TILED");
  if (e && strcmp(e, "0") == 0) return false;
  if (e && strcmp(e, "1") == 0) return true;
  return dev->info.is_gpu;
}

#define ATT_MMA_LS 128 /* kernels/attention_mma.cl: AM_ITEMS, four warps */
#define ATT_MMA_ROWS 64 /* its AM_ROWS: query rows (forward, dq) or key rows (dk/dv) per work-group */

/* NETCL_FLASH_MMA and NETCL_FLASH_MMA_OPTS, read once */
static bool mma_off;
static char mma_extra[128];
static pthread_once_t mma_env_once = PTHREAD_ONCE_INIT;
static void read_mma_env(void) {
  const char *e = getenv("NETCL_FLASH_MMA");
  mma_off = e && strcmp(e, "0") == 0;
  e = getenv("NETCL_FLASH_MMA_OPTS");
  snprintf(mma_extra, sizeof mma_extra, "%s", e ? e : "");
}

/* The tensor-core kernel in slot for c (float32, head dim <= 64) where the device builds it,
 * else NULL. */
static const nc_cl_handle *mma_kernel(const nc_kernel_call *c, nc_device *dev, nc_cl_slot slot) {
  pthread_once(&mma_env_once, read_mma_env);
  nc_cl_device *cd = dev->impl;
  const int64_t d = c->i[4];
  if (c->t[0]->dtype != NC_FLOAT32 || d > 64 || !dev->info.tf32 || mma_off ||
      !__atomic_load_n(&cd->mma_attention, __ATOMIC_ACQUIRE))
    return NULL;
  const int hd = d <= 32 ? 32 : 64, split = c->precision == NC_PRECISION_HIGHEST;
  const int tiles[6] = {hd, split, -1};
  const nc_cl_handle *h = nc_cl_handle_peek(dev, slot, NC_FLOAT32);
  if (!h || memcmp(h->tiles, tiles, sizeof tiles) != 0) {
    char opts[256];
    snprintf(opts, sizeof opts, "-DNC_MMA_TF32=1 -DHD=%d -DNC_ATT_SPLIT=%d%s %s", hd, split,
             nc_cl_mma_emulated() ? " -DNC_MMA_EMULATE=1" : "", mma_extra);
    if (nc_cl_resolve(dev, slot, NC_FLOAT32, opts, tiles, &h) != NC_OK) {
      __atomic_store_n(&cd->mma_attention, false, __ATOMIC_RELEASE); /* the tiled kernels from now on */
      return NULL;
    }
  }
  return h->local >= ATT_MMA_LS ? h : NULL;
}

nc_status nc_cl_attention_tiled(const nc_kernel_call *c, const nc_cl_handle **out, int64_t *groups, size_t *items) {
  *out = NULL;
  nc_cl_slot slot, mma_slot;
  switch (c->op) {
    case NC_OP_FLASH_ATTENTION: slot = NC_CL_K_FLASH_ATTENTION_FWD, mma_slot = NC_CL_K_FLASH_ATTENTION_FWD_MMA; break;
    case NC_OP_FLASH_ATTENTION_BWD_Q: slot = NC_CL_K_FLASH_ATTENTION_BWD_Q, mma_slot = NC_CL_K_FLASH_ATTENTION_BWD_Q_MMA; break;
    case NC_OP_FLASH_ATTENTION_BWD_KV: slot = NC_CL_K_FLASH_ATTENTION_BWD_KV, mma_slot = NC_CL_K_FLASH_ATTENTION_BWD_KV_MMA; break;
    default: return NC_OK;
  }
  /* integers: h, hkv, tq, tk, d, causal; the first tensor is q (forward) or dout */
  const int64_t tq = c->i[2], tk = c->i[3], d = c->i[4];
  const nc_tensor *first = c->t[0];
  nc_device *dev = nc_tensor_device(first);
  if (!tiled_enabled(dev)) return NC_OK;
  const nc_cl_handle *mma = mma_kernel(c, dev, mma_slot);
  if (mma) {
    const int64_t rows = c->op == NC_OP_FLASH_ATTENTION_BWD_KV ? tk : tq;
    *groups = c->rows / rows * ((rows + ATT_MMA_ROWS - 1) / ATT_MMA_ROWS);
    *items = ATT_MMA_LS;
    *out = mma;
    return NC_OK;
  }
  const att_variant *a = NULL;
  for (size_t i = 0; i < sizeof VARIANTS / sizeof VARIANTS[0] && !a; i++)
    if (d <= VARIANTS[i].hd) a = &VARIANTS[i];
  if (!a || dev->info.max_work_group_size < ATT_LS) return NC_OK;
  const size_t es = first->dtype == NC_FLOAT64 ? 8 : 4;
  const nc_cl_device *cd = dev->impl;
  /* dk/dv: query blocks of 32 need 44 KB at head dim 64; smaller local memories take 16 */
  att_variant v = *a;
  while (c->op == NC_OP_FLASH_ATTENTION_BWD_KV && v.kbr > 16 && local_elems(&v, c->op) * es > cd->local_mem) v.kbr /= 2;
  a = &v;
  if (local_elems(a, c->op) * es > cd->local_mem) return NC_OK;
  const int tiles[6] = {a->hd, a->fbr, a->fbc, a->qbr, a->qbc, a->kbc * 1000 + a->kbr};
  const nc_cl_handle *hd = nc_cl_handle_peek(dev, slot, first->dtype);
  if (!hd || memcmp(hd->tiles, tiles, sizeof tiles) != 0) {
    char opts[256];
    snprintf(opts, sizeof opts, "-DREAL=%s -DHD=%d -DFBR=%d -DFBC=%d -DQBR=%d -DQBC=%d -DKBR=%d -DKBC=%d",
             first->dtype == NC_FLOAT64 ? "double -DNC_REAL_DOUBLE=1" : "float", a->hd, a->fbr, a->fbc, a->qbr,
             a->qbc, a->kbr, a->kbc);
    NC_TRY(nc_cl_resolve(dev, slot, first->dtype, opts, tiles, &hd));
  }
  if (hd->local < ATT_LS) return NC_OK; /* the kernel's registers leave no room for 256 items */
  const int64_t bh = c->rows / (c->op == NC_OP_FLASH_ATTENTION_BWD_KV ? tk : tq); /* B*H or B*Hkv */
  if (c->op == NC_OP_FLASH_ATTENTION)
    *groups = bh * ((tq + a->fbr - 1) / a->fbr);
  else if (c->op == NC_OP_FLASH_ATTENTION_BWD_Q)
    *groups = bh * ((tq + a->qbr - 1) / a->qbr);
  else
    *groups = bh * ((tk + a->kbc - 1) / a->kbc);
  *items = ATT_LS;
  *out = hd;
  return NC_OK;
}

/* The OpenCL backend's linear-algebra and layer entries, and GEMM tile configuration. */
#ifndef NETCL_CL_LINALG_H
#define NETCL_CL_LINALG_H

#include "cl_backend.h"

/* One GEMM tile variant (see kernels/gemm.cl): work-group tile MWG x NWG, K step KWG; each
 * work-item computes TM rows by TNV vectors of VW columns. */
typedef struct {
  int mwg, nwg, kwg, tm, tnv, vw;
} nc_gemm_config;

/* Build options for a variant and dtype ("-DREAL=float -DMWG=64 ..."). */
void nc_gemm_config_options(const nc_gemm_config *c, nc_dtype dt, char *buf, size_t n);
/* Work-group shape of a variant: (items along N, items along M). */
void nc_gemm_config_local(const nc_gemm_config *c, size_t local[2]);
/* The handle of a TILED kernel slot (NC_CL_K_GEMM, NC_CL_K_CONV2D_*) built with variant cfg: the
 * one held when it was built with cfg, else resolved anew (the tuner tries several variants). */
nc_status nc_cl_gemm_kernel(nc_device *dev, nc_cl_slot slot, nc_dtype dt, const nc_gemm_config *cfg,
                            const nc_cl_handle **out);
/* Whether the device can run a variant (work-group size and local memory). */
bool nc_gemm_config_fits(nc_device *dev, const nc_gemm_config *c, nc_dtype dt);

/* The variant GEMMs of dtype dt use on dev: the tuned one cached on disk for this device,
 * driver and kernel source, else (NETCL_TUNE=1) a fresh tuning run, else a default. */
nc_status nc_cl_gemm_config(nc_device *dev, nc_dtype dt, nc_gemm_config *out);

/* Times every candidate (at most max_candidates of them; 0 = all) on n x n x n products and
 * stores the fastest for dev in memory and in the disk cache. *gflops (may be NULL) gets its
 * speed. */
nc_status nc_cl_gemm_tune(nc_device *dev, int max_candidates, int64_t n, nc_gemm_config *best,
                          double *gflops);

/* Candidate variants the tuner tries, and how many. */
extern const nc_gemm_config nc_gemm_candidates[];
extern const int nc_gemm_candidate_count;

/* Runs g with an explicit variant (the tuner's measurements). */
nc_status nc_cl_gemm_with(const nc_gemm_desc *g, const nc_gemm_config *cfg);

/* float32 and float64 products: the large-tile kernel where it fits, else the tuned variant. */
nc_status nc_cl_gemm(const nc_gemm_desc *g);
/* bfloat16 and float16 products (cl_gemm_lowp.c): through float32 temporaries and nc_cl_gemm, the
 * result rounded once into C. */
nc_status nc_cl_gemm_lowp(const nc_gemm_desc *g);
/* The backend's GEMM entry (cl_gemm_lowp.c): nc_cl_gemm_lowp for the storage dtypes, else
 * nc_cl_gemm. */
nc_status nc_cl_gemm_entry(const nc_gemm_desc *g);

/* The large-tile float32 kernel (kernels/gemm_fast.cl): whether g suits it (float32; A with
 * unit stride along K or M, B along N or K; every extent and offset reach within a batch
 * below 2^31 elements), and a run with a given tile shape (AUTO: the largest that still gives
 * the device a few work-groups per compute unit). */
typedef enum { NC_GEMM_FAST_AUTO = -1, NC_GEMM_FAST_L, NC_GEMM_FAST_M, NC_GEMM_FAST_S } nc_gemm_fast_tile;

/* The kernel of a large-tile slot (NC_CL_K_GEMM_FAST_*, CONV_FAST_*, CONV_WGRAD_FAST_*) for a
 * product at precision: its tensor-core build (kernels/gemm_fast.cl with -DNC_MMA_TF32=1) when
 * precision is not HIGHEST and the device has tf32 tensor cores, else the float32 one. A
 * tensor-core program that fails to build clears the device's tf32 flag and the float32 kernel
 * runs (the build log is dropped: the product still runs, at float32). */
nc_status nc_cl_fast_kernel(nc_device *dev, nc_cl_slot slot, nc_precision precision, const nc_cl_handle **out);

/* The test hook NETCL_MMA_EMULATE=1: every OpenCL device reports tf32 tensor cores, and the
 * tensor-core kernels compute mma.sync through local memory (kernels/gemm_fast.cl), so that
 * their tiling and indexing run against the CPU backend on devices without tensor cores. */
bool nc_cl_mma_emulated(void);
/* The tensor-core build of slot (mode: "-DNC_MMA_TF32=1" or "-DNC_MMA_BF16=1" and any further
 * options, marked by tiles {mark}; the emulation's option added under NETCL_MMA_EMULATE=1) while
 * *capable holds; a build the driver refuses clears *capable. Whether *out was set. */
bool nc_cl_tensor_core_kernel(nc_device *dev, nc_cl_slot slot, const char *mode, int mark, bool *capable,
                              const nc_cl_handle **out);
bool nc_cl_gemm_fast_fits(const nc_gemm_desc *g);
/* A product of bfloat16 operands on the tensor-core kernel kernels/gemm_bf16.cl, into a
 * bfloat16 C (or a float32 one: the "medium" products of float32 tensors, cl_gemm_lowp.c), where
 * nc_cl_gemm_bf16_takes(g) and the operands suit it (contiguous rows or columns, rows 16-byte
 * aligned): whether it was launched, with its status in *st. Other products are left to the
 * caller. */
bool nc_cl_gemm_bf16_mma(const nc_gemm_desc *g, nc_status *st);
/* Whether g's shape goes to that kernel on g's device: the device has bfloat16 mma.sync (or the
 * test hook NETCL_MMA_EMULATE=1) and built it, K > 0, and not fewer tiles than compute units over
 * a K of 1024 or more (which the float32 path splits along K). */
bool nc_cl_gemm_bf16_takes(const nc_gemm_desc *g);
/* Splits of a long K for a product of `tiles` work-groups (cl_gemm.c): enough for about two
 * work-groups per compute unit, each with at least 32 K tiles of 16, at most max_splits; *kchunk
 * (a multiple of 16) is the K of every split but the last, which gets the rest. 1: no split. */
int64_t nc_cl_k_splits(nc_device *dev, int64_t tiles, int64_t k, int64_t max_splits, int64_t *kchunk);
nc_status nc_cl_gemm_fast(const nc_gemm_desc *g, nc_gemm_fast_tile tile);
/* Whether op (NC_OP_CONV2D, NC_OP_CONV2D_BWD_INPUT or NC_OP_CONV2D_BWD_WEIGHT) of geometry p takes
 * tensors of dtype dt directly: bfloat16 under "medium" on conv_mma.cl's bfloat16 build, with X,
 * Y (dY, dX, dW) bfloat16 and the weights and bias (of the forward and input gradient) float32;
 * the weight gradient also with dY and dW float32 beside a bfloat16 X. */
bool nc_cl_conv2d_storage(nc_device *dev, nc_op op, const nc_conv2d_desc *p, nc_dtype dt);
nc_status nc_cl_conv2d(const nc_conv2d_desc *p, const nc_tensor *x, const nc_tensor *w, const nc_tensor *bias,
                       nc_tensor *y);
nc_status nc_cl_conv2d_backward_input(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *w,
                                      nc_tensor *dx);
nc_status nc_cl_conv2d_backward_weight(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *x,
                                       nc_tensor *dw);
nc_status nc_cl_pool2d(const nc_pool2d_desc *p, const nc_tensor *x, nc_tensor *y, nc_tensor *indices);
nc_status nc_cl_pool2d_backward(const nc_pool2d_desc *p, const nc_tensor *dy, const nc_tensor *indices,
                                nc_tensor *dx);
nc_status nc_cl_batch_norm(const nc_tensor *x, const nc_tensor *weight, const nc_tensor *bias,
                           nc_tensor *running_mean, nc_tensor *running_var, bool training, double momentum,
                           double eps, nc_tensor *y, nc_tensor *save_mean, nc_tensor *save_invstd);
nc_status nc_cl_batch_norm_backward(const nc_tensor *dy, const nc_tensor *x, const nc_tensor *weight,
                                    const nc_tensor *mean, const nc_tensor *invstd, bool training,
                                    nc_tensor *dx, nc_tensor *dweight, nc_tensor *dbias);
nc_status nc_cl_row_norm(bool rms, const nc_tensor *x, const nc_tensor *weight, const nc_tensor *bias,
                         double eps, nc_tensor *y, nc_tensor *mean, nc_tensor *rstd);
nc_status nc_cl_row_norm_backward(bool rms, const nc_tensor *dy, const nc_tensor *x, const nc_tensor *weight,
                                  const nc_tensor *mean, const nc_tensor *rstd, nc_tensor *dx,
                                  nc_tensor *dweight, nc_tensor *dbias);
nc_status nc_cl_embedding(const nc_tensor *weight, const nc_tensor *idx, nc_tensor *out, nc_index_verdict *bad);
nc_status nc_cl_embedding_backward(const nc_tensor *dout, const nc_tensor *idx, int64_t padding_idx,
                                   nc_tensor *dweight);
nc_status nc_cl_cross_entropy(const nc_tensor *logits, const nc_tensor *targets, int64_t ignore_index,
                              double label_smoothing, int reduction, nc_tensor *loss, nc_tensor *lse,
                              nc_index_verdict *bad);
nc_status nc_cl_cross_entropy_backward(const nc_tensor *dloss, const nc_tensor *logits,
                                       const nc_tensor *targets, const nc_tensor *lse, int64_t ignore_index,
                                       double label_smoothing, int reduction, nc_tensor *dlogits);

/* Work-group size of reduction kernels: the largest power of two <= min(256, the device's
 * limit). */
size_t nc_cl_group_size(nc_device *dev);

/* A device int32 flag holding INT_MAX, which kernels atomic-min a bad position + 1 into, and
 * its read-back (0 = nothing bad). */
nc_status nc_cl_flag_new(nc_device *dev, nc_tensor **out);
void nc_cl_flag_verdict(nc_tensor *flag, nc_index_verdict *bad);

/* The constants of kernels/gemm_fast.cl's NC_DIV for a divisor 1 <= d < 2^31: floor(n m / 2^sh)
 * is n / d for every 0 <= n < 2^31, with sh = 31 + ceil(log2 d) and m = ceil(2^sh / d), which
 * fits 32 bits. (m = (2^sh + e) / d with 0 <= e < d <= 2^(sh - 31), so n m / 2^sh exceeds n / d
 * by n e / (d 2^sh) < 1 / d: never enough to reach the next integer.) */
void nc_cl_divisor(int32_t d, uint32_t *m, int32_t *sh);

/* The layer kernels take float32, and float64 where the device has cl_khr_fp64. */
nc_status nc_cl_check_real(nc_device *dev, nc_dtype dt);

#endif

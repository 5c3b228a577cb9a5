/* The OpenCL backend: device discovery, the per-device context and queue, the program cache,
 * pinned staging, and the launch helpers that op kernels use. */
#ifndef NETCL_CL_BACKEND_H
#define NETCL_CL_BACKEND_H

#include "cl_api.h"
#include "backend/dispatch.h"
#include "core/device_impl.h"

typedef struct nc_cl_kernel_entry {
  char name[96];
  cl_kernel kernel;
  struct nc_cl_kernel_entry *next;
} nc_cl_kernel_entry;

typedef struct nc_cl_program {
  uint64_t key;
  cl_program program;
  nc_cl_kernel_entry *kernels;
  struct nc_cl_program *next;
} nc_cl_program;

typedef struct nc_cl_staging nc_cl_staging;

/* ---- kernel slots ------------------------------------------------------------------------------
 * Every kernel the backend launches has a slot. The per-op fast elementwise kernels
 * ("<op>_<T>" of elementwise.cl) take their op's id; the others are listed here:
 * X(ID, program, name, naming), where naming says how (name, dtype) become the kernel's name
 * and build options:
 *   TYPED  "<name>_<T>"                 T: the dtype's name
 *   BYTES  "<name>_<size of T>"          (kernels that only move elements)
 *   COPY   "copy_<T>_<name>"             (name: the source dtype; one slot per source dtype)
 *   REAL   "<name>", built with -DREAL=double for float64 (the layer kernels)
 *   REAL16 as REAL, and for bfloat16 and float16 "<name>" of a build of their own: half.cl's
 *          conversions in front, -DNC_STORAGE=<T> (kernels whose elements may be those dtypes:
 *          batch norm's, kernels/norm.cl)
 *   TILED  "<name>", built with a variant's options (GEMM tiles: cl_linalg.h; flash attention:
 *          cl_attention.c; the warp softmax's PTX or emulated shuffles: cl_reduce.c) */
#define NC_CL_KERNELS(X)                                                     \
  X(UNARY, "elementwise", "unary", TYPED)                                    \
  X(BINARY, "elementwise", "binary", TYPED)                                  \
  X(COMPARE, "elementwise", "compare", TYPED)                                \
  X(WHERE, "elementwise", "where", TYPED)                                    \
  X(FILL, "core", "fill", TYPED)                                             \
  X(ARANGE, "core", "arange", TYPED)                                         \
  X(UNIFORM, "core", "uniform", TYPED)                                       \
  X(NORMAL, "core", "normal", TYPED)                                         \
  X(STRIDED_COPY, "core", "strided_copy", BYTES)                            \
  X(COPY_FROM_FLOAT32, "core", "float32", COPY)                              \
  X(COPY_FROM_FLOAT64, "core", "float64", COPY)                              \
  X(COPY_FROM_INT32, "core", "int32", COPY)                                  \
  X(COPY_FROM_INT64, "core", "int64", COPY)                                  \
  X(COPY_FROM_UINT8, "core", "uint8", COPY)                                  \
  X(COPY_FROM_BOOL, "core", "bool", COPY)                                    \
  X(HALF_FROM_FLOAT32, "half", "float32", COPY)                              \
  X(HALF_FROM_FLOAT64, "half", "float64", COPY)                              \
  X(HALF_FROM_INT32, "half", "int32", COPY)                                  \
  X(HALF_FROM_INT64, "half", "int64", COPY)                                  \
  X(HALF_FROM_UINT8, "half", "uint8", COPY)                                  \
  X(HALF_FROM_BOOL, "half", "bool", COPY)                                    \
  X(HALF_FROM_BFLOAT16, "half", "bfloat16", COPY)                            \
  X(HALF_FROM_FLOAT16, "half", "float16", COPY)                              \
  X(HALF_WIDEN, "half", "half_widen", TYPED)                                 \
  X(HALF_NARROW, "half", "half_narrow", TYPED)                               \
  X(REDUCE_ROWS, "reduce", "reduce_rows", TYPED)                             \
  X(REDUCE_SUM, "reduce", "reduce_sum", TYPED)                               \
  X(REDUCE_GROUPS, "reduce", "reduce_groups", TYPED)                         \
  X(REDUCE_PARTIALS, "reduce", "reduce_partials", TYPED)                     \
  X(CUMSUM_ROWS, "reduce", "cumsum_rows", TYPED)                             \
  X(CUMSUM_GROUPS, "reduce", "cumsum_groups", TYPED)                         \
  X(SOFTMAX_ROWS, "reduce", "softmax_rows", TYPED)                           \
  X(SOFTMAX_GROUPS, "reduce", "softmax_groups", TYPED)                       \
  X(SCATTER_ADD, "index", "scatter_add", TYPED)                              \
  X(TAKE, "index", "take", BYTES)                                            \
  X(SORT_INIT, "sort", "sort_init", TYPED)                                   \
  X(SORT_STEP, "sort", "sort_step", TYPED)                                   \
  X(BERNOULLI, "random", "bernoulli", TYPED)                                 \
  X(RANDINT, "random", "randint", TYPED)                                     \
  X(SGD, "half+optim", "sgd", TYPED)                                         \
  X(RMSPROP, "half+optim", "rmsprop", TYPED)                                 \
  X(ADAM, "half+optim", "adam", TYPED)                                       \
  X(SUM_SQUARES, "half+optim", "sum_squares", TYPED)                         \
  X(BATCH_NORM_FWD, "norm", "batch_norm_fwd", REAL16)                        \
  X(BATCH_NORM_BWD, "norm", "batch_norm_bwd", REAL16)                        \
  X(BN_STATS, "norm", "bn_stats", REAL16)                                    \
  X(BN_FINISH, "norm", "bn_finish", REAL16)                                  \
  X(BN_APPLY, "norm", "bn_apply", REAL16)                                    \
  X(BN_BWD_SUMS, "norm", "bn_bwd_sums", REAL16)                              \
  X(BN_BWD_FINISH, "norm", "bn_bwd_finish", REAL16)                          \
  X(BN_BWD_APPLY, "norm", "bn_bwd_apply", REAL16)                            \
  X(ROW_NORM_FWD, "norm", "row_norm_fwd", REAL)                              \
  X(ROW_NORM_BWD_DX, "norm", "row_norm_bwd_dx", REAL)                        \
  X(ROW_NORM_BWD_DW, "norm", "row_norm_bwd_dw", REAL)                        \
  X(ROW_NORM_DW_PART, "norm", "row_norm_dw_part", REAL)                      \
  X(ROW_NORM_DW_SUM, "norm", "row_norm_dw_sum", REAL)                        \
  X(MAX_POOL_FWD, "pool", "max_pool_fwd", REAL)                              \
  X(AVG_POOL_FWD, "pool", "avg_pool_fwd", REAL)                              \
  X(MAX_POOL_BWD, "pool", "max_pool_bwd", REAL)                              \
  X(AVG_POOL_BWD, "pool", "avg_pool_bwd", REAL)                              \
  X(CE_FWD, "loss", "ce_fwd", REAL)                                          \
  X(CE_REDUCE, "loss", "ce_reduce", REAL)                                    \
  X(CE_COUNT, "loss", "ce_count", REAL)                                      \
  X(CE_BWD, "loss", "ce_bwd", REAL)                                          \
  X(EMBEDDING_FWD_INT64, "embedding", "embedding_fwd_int64", REAL)           \
  X(EMBEDDING_FWD_INT32, "embedding", "embedding_fwd_int32", REAL)           \
  X(EMBEDDING_ZERO, "embedding", "embedding_zero", REAL)                     \
  X(EMBEDDING_BWD_INT64, "embedding", "embedding_bwd_int64", REAL)           \
  X(EMBEDDING_BWD_INT32, "embedding", "embedding_bwd_int32", REAL)           \
  X(GEMM, "gemm", "gemm", TILED)                                             \
  X(GEMM_FAST_L_RR, "mma+gemm_fast", "gemm_fast_l_rr", REAL)                 \
  X(GEMM_FAST_L_RC, "mma+gemm_fast", "gemm_fast_l_rc", REAL)                 \
  X(GEMM_FAST_L_CR, "mma+gemm_fast", "gemm_fast_l_cr", REAL)                 \
  X(GEMM_FAST_L_CC, "mma+gemm_fast", "gemm_fast_l_cc", REAL)                 \
  X(GEMM_FAST_M, "mma+gemm_fast", "gemm_fast_m", REAL)                       \
  X(GEMM_FAST_S, "mma+gemm_fast", "gemm_fast_s", REAL)                       \
  X(CONV_FAST_L, "mma+gemm_fast", "conv_fast_l", REAL)                       \
  X(CONV_FAST_S, "mma+gemm_fast", "conv_fast_s", REAL)                       \
  X(CONV_WGRAD_FAST_L, "mma+gemm_fast", "conv_wgrad_fast_l", REAL)           \
  X(CONV_WGRAD_FAST_S, "mma+gemm_fast", "conv_wgrad_fast_s", REAL)           \
  X(GEMM_TC_L_RR, "mma+gemm_fast", "gemm_fast_l_rr", TILED)                  \
  X(GEMM_TC_L_RC, "mma+gemm_fast", "gemm_fast_l_rc", TILED)                  \
  X(GEMM_TC_L_CR, "mma+gemm_fast", "gemm_fast_l_cr", TILED)                  \
  X(GEMM_TC_L_CC, "mma+gemm_fast", "gemm_fast_l_cc", TILED)                  \
  X(GEMM_TC_M, "mma+gemm_fast", "gemm_fast_m", TILED)                        \
  X(GEMM_TC_S, "mma+gemm_fast", "gemm_fast_s", TILED)                        \
  X(CONV_TC_L, "mma+gemm_fast", "conv_fast_l", TILED)                        \
  X(CONV_TC_S, "mma+gemm_fast", "conv_fast_s", TILED)                        \
  X(CONV_WGRAD_TC_L, "mma+gemm_fast", "conv_wgrad_fast_l", TILED)            \
  X(CONV_WGRAD_TC_S, "mma+gemm_fast", "conv_wgrad_fast_s", TILED)            \
  X(GEMM_BF_L_RR, "mma+gemm_fast", "gemm_fast_l_rr", TILED)                  \
  X(GEMM_BF_L_RC, "mma+gemm_fast", "gemm_fast_l_rc", TILED)                  \
  X(GEMM_BF_L_CR, "mma+gemm_fast", "gemm_fast_l_cr", TILED)                  \
  X(GEMM_BF_L_CC, "mma+gemm_fast", "gemm_fast_l_cc", TILED)                  \
  X(GEMM_BF_M, "mma+gemm_fast", "gemm_fast_m", TILED)                        \
  X(GEMM_BF_S, "mma+gemm_fast", "gemm_fast_s", TILED)                        \
  X(CONV_BF_L, "mma+gemm_fast", "conv_fast_l", TILED)                        \
  X(CONV_BF_S, "mma+gemm_fast", "conv_fast_s", TILED)                        \
  X(CONV_WGRAD_BF_L, "mma+gemm_fast", "conv_wgrad_fast_l", TILED)            \
  X(CONV_WGRAD_BF_S, "mma+gemm_fast", "conv_wgrad_fast_s", TILED)            \
  X(GEMM_MMA_BF_RR, "mma+gemm_mma", "gemm_mma_rr", TILED)                    \
  X(GEMM_MMA_BF_RC, "mma+gemm_mma", "gemm_mma_rc", TILED)                    \
  X(GEMM_MMA_BF_CR, "mma+gemm_mma", "gemm_mma_cr", TILED)                    \
  X(GEMM_MMA_BF_CC, "mma+gemm_mma", "gemm_mma_cc", TILED)                    \
  X(CONV_MMA_TF_FWD_S, "mma+gemm_mma+conv_mma", "conv_mma_fwd_s", TILED)     \
  X(CONV_MMA_TF_FWD_L, "mma+gemm_mma+conv_mma", "conv_mma_fwd_l", TILED)     \
  X(CONV_MMA_TF_WGRAD_S, "mma+gemm_mma+conv_mma", "conv_mma_wgrad_s", TILED) \
  X(CONV_MMA_TF_WGRAD_L, "mma+gemm_mma+conv_mma", "conv_mma_wgrad_l", TILED) \
  X(CONV_MMA_BF_FWD_S, "mma+gemm_mma+conv_mma", "conv_mma_fwd_s", TILED)     \
  X(CONV_MMA_BF_FWD_L, "mma+gemm_mma+conv_mma", "conv_mma_fwd_l", TILED)     \
  X(CONV_MMA_BF_WGRAD_S, "mma+gemm_mma+conv_mma", "conv_mma_wgrad_s", TILED) \
  X(CONV_MMA_BF_WGRAD_L, "mma+gemm_mma+conv_mma", "conv_mma_wgrad_l", TILED) \
  X(CONV_MMA_BX_FWD_S, "half+mma+gemm_mma+conv_mma", "conv_mma_fwd_bx_s", TILED) \
  X(CONV_MMA_BX_FWD_L, "half+mma+gemm_mma+conv_mma", "conv_mma_fwd_bx_l", TILED) \
  X(CONV_MMA_BX2_FWD_S, "half+mma+gemm_mma+conv_mma", "conv_mma_fwd_bx2_s", TILED) \
  X(CONV_MMA_BX2_FWD_L, "half+mma+gemm_mma+conv_mma", "conv_mma_fwd_bx2_l", TILED) \
  X(CONV_MMA_BX_SUM, "half+mma+gemm_mma+conv_mma", "conv_mma_sum_bx", TILED)    \
  X(CONV_MMA_BX_WGRAD_S, "half+mma+gemm_mma+conv_mma", "conv_mma_wgrad_bx_s", TILED) \
  X(CONV_MMA_BX_WGRAD_L, "half+mma+gemm_mma+conv_mma", "conv_mma_wgrad_bx_l", TILED) \
  X(CONV_MMA_BXF_WGRAD_S, "half+mma+gemm_mma+conv_mma", "conv_mma_wgrad_bxf_s", TILED) \
  X(CONV_MMA_BXF_WGRAD_L, "half+mma+gemm_mma+conv_mma", "conv_mma_wgrad_bxf_l", TILED) \
  X(CONV_MMA_BXR_WGRAD_S, "half+mma+gemm_mma+conv_mma", "conv_mma_wgrad_bxr_s", TILED) \
  X(CONV_MMA_BXR_WGRAD_L, "half+mma+gemm_mma+conv_mma", "conv_mma_wgrad_bxr_l", TILED) \
  X(CONV_MMA_BXRF_WGRAD_S, "half+mma+gemm_mma+conv_mma", "conv_mma_wgrad_bxrf_s", TILED) \
  X(CONV_MMA_BXRF_WGRAD_L, "half+mma+gemm_mma+conv_mma", "conv_mma_wgrad_bxrf_l", TILED) \
  X(GEMM_TF32_RR, "mma+gemm_tf32", "gemm_tf32_rr", TILED)                    \
  X(GEMM_TF32_RC, "mma+gemm_tf32", "gemm_tf32_rc", TILED)                    \
  X(GEMM_TF32_CR, "mma+gemm_tf32", "gemm_tf32_cr", TILED)                    \
  X(GEMM_TF32_CC, "mma+gemm_tf32", "gemm_tf32_cc", TILED)                    \
  X(GEMM_BF16_RR, "mma+gemm_bf16", "gemm_bf16_rr", TILED)                    \
  X(GEMM_BF16_RC, "mma+gemm_bf16", "gemm_bf16_rc", TILED)                    \
  X(GEMM_BF16_CR, "mma+gemm_bf16", "gemm_bf16_cr", TILED)                    \
  X(GEMM_BF16_CC, "mma+gemm_bf16", "gemm_bf16_cc", TILED)                    \
  X(GEMM_BF16F_RR, "mma+gemm_bf16", "gemm_bf16_rr", TILED)                   \
  X(GEMM_BF16F_RC, "mma+gemm_bf16", "gemm_bf16_rc", TILED)                   \
  X(GEMM_BF16F_CR, "mma+gemm_bf16", "gemm_bf16_cr", TILED)                   \
  X(GEMM_BF16F_CC, "mma+gemm_bf16", "gemm_bf16_cc", TILED)                   \
  X(GEMM_BF16W_RR, "mma+gemm_bf16", "gemm_bf16_rr", TILED)                   \
  X(GEMM_BF16W_RC, "mma+gemm_bf16", "gemm_bf16_rc", TILED)                   \
  X(GEMM_BF16W_CR, "mma+gemm_bf16", "gemm_bf16_cr", TILED)                   \
  X(GEMM_BF16W_CC, "mma+gemm_bf16", "gemm_bf16_cc", TILED)                   \
  X(GEMM_BF16FW_RR, "mma+gemm_bf16", "gemm_bf16_rr", TILED)                  \
  X(GEMM_BF16FW_RC, "mma+gemm_bf16", "gemm_bf16_rc", TILED)                  \
  X(GEMM_BF16FW_CR, "mma+gemm_bf16", "gemm_bf16_cr", TILED)                  \
  X(GEMM_BF16FW_CC, "mma+gemm_bf16", "gemm_bf16_cc", TILED)                  \
  X(CONV_FAST_W, "mma+gemm_fast", "conv_fast_w", REAL)                       \
  X(CONV_TC_W, "mma+gemm_fast", "conv_fast_w", TILED)                        \
  X(CONV_BF_W, "mma+gemm_fast", "conv_fast_w", TILED)                        \
  X(CONV_WGRAD_FAST_W, "mma+gemm_fast", "conv_wgrad_fast_w", REAL)           \
  X(CONV_WGRAD_TC_W, "mma+gemm_fast", "conv_wgrad_fast_w", TILED)            \
  X(CONV_WGRAD_BF_W, "mma+gemm_fast", "conv_wgrad_fast_w", TILED)            \
  X(GF_SUM_SPLITS, "mma+gemm_fast", "gf_sum_splits", REAL)                   \
  X(CONV_SUM_SPLITS, "mma+gemm_fast", "conv_sum_splits", REAL)               \
  X(CONV_PHASE_WEIGHT, "mma+gemm_fast", "conv_phase_weight", REAL)             \
  X(CONV2D_FWD, "gemm+conv", "conv2d_fwd", TILED)                            \
  X(CONV2D_BWD_INPUT, "gemm+conv", "conv2d_bwd_input", TILED)                \
  X(CONV2D_BWD_WEIGHT, "gemm+conv", "conv2d_bwd_weight", TILED)              \
  X(CONV2D_COL2IM, "gemm+conv", "conv2d_col2im", TILED)                      \
  X(CONV2D_SUM_SPLITS, "gemm+conv", "conv2d_sum_splits", TILED)             \
  X(FLASH_ATTENTION_FWD, "attention", "flash_attention_fwd_tiled", TILED)    \
  X(FLASH_ATTENTION_BWD_Q, "attention", "flash_attention_bwd_q_tiled", TILED) \
  X(FLASH_ATTENTION_BWD_KV, "attention", "flash_attention_bwd_kv_tiled", TILED) \
  X(FLASH_ATTENTION_FWD_MMA, "mma+attention_mma", "flash_attention_fwd_mma", TILED) \
  X(FLASH_ATTENTION_BWD_Q_MMA, "mma+attention_mma", "flash_attention_bwd_q_mma", TILED) \
  X(FLASH_ATTENTION_BWD_KV_MMA, "mma+attention_mma", "flash_attention_bwd_kv_mma", TILED) \
  X(KMEANS_ASSIGN_TILED, "cluster", "kmeans_assign_tiled", REAL)              \
  X(KMEANS_UPDATE_SLICED, "cluster", "kmeans_update_sliced", REAL)            \
  X(SOFTMAX_WARP_1, "softmax_warp", "softmax_warp_1", TILED)                 \
  X(SOFTMAX_WARP_2, "softmax_warp", "softmax_warp_2", TILED)                 \
  X(SOFTMAX_WARP_4, "softmax_warp", "softmax_warp_4", TILED)                 \
  X(SOFTMAX_WARP_8, "softmax_warp", "softmax_warp_8", TILED)                 \
  X(SOFTMAX_WARP_16, "softmax_warp", "softmax_warp_16", TILED)               \
  X(SOFTMAX_WARP_32, "softmax_warp", "softmax_warp_32", TILED)               \
  X(SOFTMAX_WARP4_4, "softmax_warp", "softmax_warp4_4", TILED)               \
  X(SOFTMAX_WARP4_8, "softmax_warp", "softmax_warp4_8", TILED)               \
  X(SOFTMAX_WARP4_16, "softmax_warp", "softmax_warp4_16", TILED)             \
  X(SOFTMAX_WARP4_32, "softmax_warp", "softmax_warp4_32", TILED)

/* Slots: 0 .. NC_OP_COUNT-1 are the ops' fast kernels, then NC_CL_K_<ID>. */
typedef enum {
  NC_CL_K_BEFORE_ = NC_OP_COUNT - 1,
#define NC_CL_SLOT_ENUM_(id, program, name, naming) NC_CL_K_##id,
  NC_CL_KERNELS(NC_CL_SLOT_ENUM_)
#undef NC_CL_SLOT_ENUM_
  NC_CL_SLOT_COUNT
} nc_cl_slot;

/* A resolved kernel: the cl_kernel and what launching it needs, immutable once published. */
typedef struct nc_cl_handle {
  cl_kernel kernel;
  size_t local;     /* nc_cl_kernel_local_size of the kernel */
  int tiles[6];     /* TILED slots: the GEMM variant it was built for (zeros otherwise) */
  struct nc_cl_handle *next; /* the device's list of handles, which owns them */
} nc_cl_handle;

/* The devices of one platform, which share one context (nc_cl_ready): buffers of any of them
 * are then valid on all, and copy between them on the devices (nc_cl_peer_copy). The context
 * is made at the first use of any of the devices, for all of them; a device whose platform
 * cannot make such a context (a driver refusing some device) gets one of its own. */
typedef struct {
  cl_platform_id id;
  cl_uint ndev;
  cl_device_id *ids;
  pthread_mutex_t lock;
  bool tried;      /* the shared context was attempted (ctx NULL: it failed) */
  cl_context ctx;  /* NULL once every device that used it has shut down */
  int users;       /* devices holding a reference to ctx */
} nc_cl_platform;

typedef struct {
  cl_platform_id platform;
  nc_cl_platform *plat;
  cl_device_id id;
  char platform_name[256];
  pthread_mutex_t init_lock;
  bool ready;
  nc_status init_status;
  char init_error[768];
  cl_context ctx;
  bool shared; /* ctx is plat's shared context */
  cl_command_queue queue;
  pthread_mutex_t programs_lock;
  nc_cl_program *programs;
  nc_cl_staging *staging;
  struct nc_cl_pending_read *reads; /* pending reads that hold a staging buffer (dev->lock guards it) */
  /* The bounded queue (nc_cl_enqueued): commands enqueued since the last marker, and that
   * marker's event (NULL when none is pending); dev->lock guards both. */
  unsigned since_mark, queue_batch;
  cl_event mark;
  uint64_t programs_built, programs_loaded;
  cl_ulong local_mem; /* CL_DEVICE_LOCAL_MEM_SIZE, read at discovery (0 if the driver did not say) */
  /* Softmax takes the warp-shuffle kernels (kernels/softmax_warp.cl): NVIDIA GPUs, whose compiler
   * takes inline PTX, and any device under the test hook NETCL_SHFL_EMULATE=1 (nc_cl_shfl_emulated).
   * Cleared when their program fails to build (nc_cl_handle_optional). */
  bool warp_shuffle;
  /* The tensor-core GEMMs with asynchronous copies (cp.async) of float32 operands,
   * kernels/gemm_tf32.cl ("high") and gemm_mma.cl ("medium"): set with info.tf32, cleared when
   * either program fails to build (the precisions then stay on gemm_fast.cl's tensor-core
   * builds). */
  bool mma_async;
  /* The convolutions on the same pipeline (kernels/conv_mma.cl, tf32 and bfloat16 builds): set
   * with info.tf32, cleared when either program fails to build (they then stay on gemm_fast.cl's
   * tensor-core builds). */
  bool mma_conv;
  /* Its passes on bfloat16 tensors (the program built with -DCM_XBF16=1): set with
   * info.bf16_mma, cleared when refused (the op layer then widens bfloat16 convolutions). */
  bool mma_conv_bx;
  bool mma_attention; /* kernels/attention_mma.cl builds (cleared when the driver refuses it) */
  bool gemm_bf16;     /* kernels/gemm_bf16.cl builds (set with info.bf16_mma, cleared when refused) */
  bool gemm_bf16_wide; /* its 128 x 256 tile builds (96 KB of local memory; cleared when refused) */
  /* Kernel handles by slot and dtype: NULL until first resolved, then published with a
   * release store (under programs_lock) and read with an acquire load, lock-free. */
  const nc_cl_handle *handles[NC_CL_SLOT_COUNT][NC_DTYPE_COUNT];
  nc_cl_handle *handle_list;
  struct nc_cl_profile *profile; /* kernel timings (cl_profile.c); NULL unless NETCL_PROFILE is set */
} nc_cl_device;

/* The binary of prog for cd's device (malloc'd, *len set), or NULL: a program made in a context
 * of several devices (the platform's shared one) lists one per device, empty for those it was
 * not built for. */
unsigned char *nc_cl_program_binary(nc_cl_device *cd, cl_program prog, size_t *len);

/* PTX directives for NVIDIA builds (cl_ptx.c): the program to keep for prog, built from source
 * for cd with options (prog itself, or a rebuild from its patched PTX that replaces it), and the
 * rules' text fed to the binary cache's key. */
cl_program nc_cl_ptx_directives(nc_cl_device *cd, cl_program prog, const char *options);
/* ptx[0..len) with the directives of the rules that apply under options inserted (malloc'd,
 * *out_len set), or NULL when none applies or the text is not PTX. */
char *nc_cl_ptx_patch(const char *ptx, size_t len, const char *options, size_t *out_len);
struct XXH64_state_s;
void nc_cl_ptx_rules_hash(struct XXH64_state_s *h);

/* Finds every OpenCL device and hands each to add (the registry). Silent when there is no
 * loader or no platform. */
void nc_opencl_discover(nc_status (*add)(nc_device *dev));

/* The device's context and queue, created on first use: the platform's shared context when it
 * could be made, else one of the device's own. */
nc_status nc_cl_ready(nc_device *dev, nc_cl_device **out);
/* Drops the device's reference to its context (shutdown; the queue released first). */
void nc_cl_context_release(nc_cl_device *cd);

/* Device-to-device copies between devices of one context: whether a and b have one (both made
 * ready), and a copy of n bytes that waits for the work queued on src before it and that later
 * work on src waits for (events both ways), queued on dst's queue without blocking. */
bool nc_cl_peers(nc_device *a, nc_device *b);
nc_status nc_cl_peer_copy(nc_device *dst, void *dh, size_t doff, nc_device *src, void *sh, size_t soff, size_t n);

/* The bounded queue: called after each command enqueued, with dev->lock held. Every
 * NC_CL_QUEUE_BATCH commands (NETCL_QUEUE_BATCH overrides it) it enqueues a marker and waits for the previous one, so at most two
 * batches are ever queued: a loop that never syncs keeps flat memory (a driver holds each
 * queued command's arguments and bookkeeping until it runs). Within a batch it also flushes
 * (without waiting) after NC_CL_EARLY_FLUSH commands and after 4 times as many, so the device
 * starts on a step's first kernels while the host queues the rest. Returns the marker's failure. */
#define NC_CL_QUEUE_BATCH 256
#define NC_CL_EARLY_FLUSH 16 /* flushes after this many commands of a batch and 4 times as many */
nc_status nc_cl_enqueued(nc_device *dev, nc_cl_device *cd);
/* Drops the pending marker after the queue was drained (dev->lock held). */
void nc_cl_forget_mark(nc_cl_device *cd);

/* Kernel timings (cl_profile.c), on when NETCL_PROFILE is set (read once): whether it is on;
 * the profile made with the queue; the event slot for the next launch (NULL when off), then the
 * launch's record (its kernel and global size; dev->lock held for both); and the table printed
 * to stderr and freed at shutdown. */
typedef struct nc_cl_profile nc_cl_profile;
bool nc_cl_profiling(void);
void nc_cl_profile_start(nc_cl_device *cd);
cl_event *nc_cl_profile_event(nc_cl_device *cd);
void nc_cl_profile_record(nc_cl_device *cd, cl_kernel k, int dims, const size_t *global);
void nc_cl_profile_report(nc_cl_device *cd, const char *device_name);

/* At process exit (the device interface's shutdown): drains the queue and releases the staging
 * buffers, kernels, programs, queue and context; the device then refuses work. */
void nc_cl_shutdown(nc_device *dev);

/* Layout of a tensor as kernels take it (mirrors nc_layout in kernels/common.cl). */
typedef struct {
  cl_long offset;
  cl_int ndim;
  cl_int contiguous;
  cl_long shape[NC_MAX_DIMS];
  cl_long strides[NC_MAX_DIMS];
} nc_cl_layout;

void nc_cl_layout_of(const nc_tensor *t, nc_cl_layout *l);

/* Layouts of n same-shaped operands (ts[0] gives the shape) with size-1 dims dropped and
 * neighbouring dims merged where every operand allows it, so kernels index fewer dims and more
 * operands take the contiguous path. A NULL entry (a scalar operand) gets a contiguous layout. */
void nc_cl_layouts(int n, const nc_tensor *const *ts, nc_cl_layout *ls);

/* An embedded kernel source (NULL if absent), and the on-disk cache directory (created). */
const char *nc_cl_source(const char *file, size_t *len);
nc_status nc_cl_cache_dir(char *buf, size_t n);

/* Builds (or loads from the disk cache) every program for the device: --warmup. */
nc_status nc_cl_build_all(nc_device *dev);

typedef struct {
  size_t size;
  const void *value;
} nc_cl_arg;

#define NC_CL_ARG(v) ((nc_cl_arg){sizeof(v), &(v)})

/* Sets the arguments and enqueues k over `global` work-items (1-D; local 0 = driver's choice).
 * Serialized per device so several threads may launch. */
nc_status nc_cl_launch(nc_device *dev, cl_kernel k, int nargs, const nc_cl_arg *args, size_t global,
                       size_t local);

/* nc_cl_launch over a 1-, 2- or 3-D range (local NULL = driver's choice). */
nc_status nc_cl_launch_nd(nc_device *dev, cl_kernel k, int nargs, const nc_cl_arg *args, int dims,
                          const size_t *global, const size_t *local);

/* Work-items for a grid-stride loop over n elements. */
size_t nc_cl_global_size(nc_device *dev, int64_t n);

/* Work-items for an op kernel over n elements: one per element (a multiple of the local size),
 * capped at 2^30 beyond which kernels' grid-stride loops take several elements each. CPU
 * drivers run a work-group's items as a loop, so one element per item keeps their accesses
 * sequential; GPUs want one per element anyway. */
size_t nc_cl_grid(nc_device *dev, int64_t n);

/* The work-group size op kernels launch with: fixed per device (drivers such as PoCL compile a
 * kernel once per work-group size), a power of two, at most 256. */
size_t nc_cl_local_size(nc_device *dev);

/* The work-group size for kernel k: nc_cl_local_size, lowered to the largest power of two the
 * kernel itself allows (a kernel using many registers or much local memory may allow fewer
 * items than the device). */
size_t nc_cl_kernel_local_size(nc_device *dev, cl_kernel k);

/* NC_ERR_UNSUPPORTED for float64 on a device without cl_khr_fp64. */
nc_status nc_cl_check_dtype(nc_device *dev, nc_dtype dt);

/* A scalar as a kernel argument of dtype dt (bool and uint8 as uchar; bfloat16 and float16 as float32,
 * the type their kernels compute in). */
typedef union {
  cl_float f;
  cl_double d;
  cl_int i;
  cl_long l;
  cl_uchar u;
} nc_cl_scalar;
nc_cl_arg nc_cl_scalar_arg(nc_dtype dt, const nc_scalar *s, nc_cl_scalar *store);

/* ---- kernel handles ------------------------------------------------------------------------------
 * A launch finds its kernel by (slot, dtype) in the device's table: one acquire load, no name
 * built and nothing hashed. The first use of a (slot, dtype) resolves it: builds the name and
 * options, gets the program from the program cache (memory, then disk, then a build), creates
 * the kernel and asks its work-group limit, and publishes the handle. */

/* The handle of (slot, dt) on dev if resolved, else NULL. */
static inline const nc_cl_handle *nc_cl_handle_peek(nc_device *dev, int slot, nc_dtype dt) {
  nc_cl_device *cd = dev->impl;
  return __atomic_load_n(&cd->handles[slot][dt], __ATOMIC_ACQUIRE);
}

/* Resolves (slot, dt) (the slow path of nc_cl_handle_get). TILED slots pass the variant's build
 * options and tiles, and replace a handle held for another variant; others pass NULL for both. */
nc_status nc_cl_resolve(nc_device *dev, int slot, nc_dtype dt, const char *options, const int tiles[6],
                        const nc_cl_handle **out);

/* The handle of kernel slot (an op id or NC_CL_K_*, not TILED) for dtype dt. */
static inline nc_status nc_cl_handle_get(nc_device *dev, int slot, nc_dtype dt, const nc_cl_handle **out) {
  const nc_cl_handle *h = nc_cl_handle_peek(dev, slot, dt);
  if (h) return *out = h, NC_OK;
  return nc_cl_resolve(dev, slot, dt, NULL, NULL, out);
}

/* The handle of a TILED slot of one variant whose build the device's compiler may refuse
 * (inline PTX), while *capable holds: the one held, else a build with options and tiles. A build
 * that fails clears *capable for good and returns false with its error dropped: the caller runs
 * its portable kernel instead, and the op still succeeds. */
bool nc_cl_handle_optional(nc_device *dev, int slot, nc_dtype dt, const char *options, const int tiles[6],
                           bool *capable, const nc_cl_handle **out);

/* The cl_mem under a tensor. */
static inline cl_mem nc_cl_mem(const nc_tensor *t) { return (cl_mem)nc_storage_handle(t->storage); }

/* Staging (cl_staging.c): asynchronous host-to-device writes through pinned buffers. */
nc_status nc_cl_staging_write(nc_device *dev, nc_cl_device *cd, cl_mem dst, size_t off, const void *src, size_t n);
void nc_cl_staging_free(nc_cl_device *cd);
uint64_t nc_cl_staging_bytes(nc_cl_device *cd);

/* A free pinned staging buffer of at least n bytes, held (no write or other read takes it)
 * until nc_cl_staging_unhold; *host gets its mapped memory. NULL when pinned memory is at its
 * cap. dev->lock held for both. */
nc_cl_staging *nc_cl_staging_hold(nc_cl_device *cd, size_t n, void **host);
void nc_cl_staging_unhold(nc_cl_staging *b);

/* Reads that do not wait (cl_read_async.c): the device interface's read_start, read_ready and
 * read_end, and the completion of every pending read, with dev->lock held and the queue drained
 * (nc_cl_sync, nc_cl_shutdown): each one's bytes land in its destination and its staging
 * buffer is freed. Returns the first failure. */
nc_status nc_cl_read_start(nc_device *dev, void *h, size_t off, void *dst, size_t n, void **token);
bool nc_cl_read_ready(nc_device *dev, void *token);
nc_status nc_cl_read_end(nc_device *dev, void *token);
nc_status nc_cl_reads_complete(nc_device *dev, nc_cl_device *cd);

nc_status nc_cl_fail(cl_int err, const char *what, const nc_device *dev);
/* The device's compute units, at least 1 (grid sizing). */
static inline int64_t nc_cl_compute_units(const nc_device *dev) {
  return dev->info.compute_units > 0 ? dev->info.compute_units : 1;
}

/* Whether kernels with two access patterns take the GPU one (coalesced, many groups) on dev: GPU
 * drivers do, CPU drivers take blocked runs. NETCL_CL_PATTERN=gpu or cpu overrides it, so the
 * tests run the GPU paths on PoCL's CPU device. */
bool nc_cl_gpu_pattern(const nc_device *dev);

/* The test hook NETCL_SHFL_EMULATE=1: every OpenCL device takes softmax's warp-shuffle kernels,
 * built with the shuffles exchanged through local memory (kernels/softmax_warp.cl), so that
 * devices without PTX run their indexing against the CPU backend. */
bool nc_cl_shfl_emulated(void);

/* The device interface (cl_backend.c): buffers, transfers, counters. */
nc_status nc_cl_alloc(nc_device *dev, size_t n, void **h);
void nc_cl_release(nc_device *dev, void *h);
void *nc_cl_host_ptr(nc_device *dev, void *h);
nc_status nc_cl_write(nc_device *dev, void *h, size_t off, const void *src, size_t n);
nc_status nc_cl_read(nc_device *dev, void *h, size_t off, void *dst, size_t n);
nc_status nc_cl_sync(nc_device *dev);
void nc_cl_stats(nc_device *dev, nc_memory_stats *st);

/* The foundation ops (cl_backend.c). */
nc_status nc_cl_fill(nc_tensor *t, double v);
nc_status nc_cl_copy(nc_tensor *dst, const nc_tensor *src);
nc_status nc_cl_arange(nc_tensor *t, double start, double step);
nc_status nc_cl_random(nc_tensor *t, int kind, uint64_t seed, uint64_t offset, double a, double b);

/* Every op defined by its op-table row: the kernel its row names ("<program>.cl:<name>_<T>",
 * T the first tensor's dtype), with each tensor as (buffer, element offset; offset -1 for an
 * absent optional input), then the integers as long and the reals in the tensor dtype, over
 * one work-group of nc_cl_local_size work-items per row (cl_kernel_call.c). */
nc_status nc_cl_kernel_call(const nc_kernel_call *c);
/* The tiled flash-attention kernel for c (cl_attention.c), its number of work-groups and their
 * size; *out NULL when c is another op or no tiled variant covers it. */
nc_status nc_cl_attention_tiled(const nc_kernel_call *c, const nc_cl_handle **out, int64_t *groups, size_t *items);
/* kmeans_assign's tiled kernel or kmeans_update's sliced one for c (cl_cluster.c), the same way. */
nc_status nc_cl_kmeans_tiled(const nc_kernel_call *c, const nc_cl_handle **out, int64_t *groups);

/* Op entries (backend/dispatch.h), one file per family. */
nc_status nc_cl_unary(nc_op op, nc_tensor *out, const nc_tensor *x, const nc_scalar *p);
nc_status nc_cl_binary(nc_op op, nc_tensor *out, const nc_operand *a, const nc_operand *b);
nc_status nc_cl_where(nc_tensor *out, const nc_tensor *cond, const nc_operand *a, const nc_operand *b);
nc_status nc_cl_reduce(nc_op op, nc_tensor *out, nc_tensor *idx, const nc_tensor *x, int nred,
                       const nc_reduce_args *args);
nc_status nc_cl_scan(nc_op op, nc_tensor *out, const nc_tensor *x);
nc_status nc_cl_softmax(nc_op op, nc_tensor *out, const nc_tensor *x);
nc_status nc_cl_index(nc_op op, nc_tensor *out, const nc_tensor *x, const nc_tensor *idx, int dim);
nc_status nc_cl_sort(nc_tensor *indices, const nc_tensor *x, bool descending);
nc_status nc_cl_sample(nc_op op, nc_tensor *out, const nc_tensor *p, uint64_t seed, uint64_t offset, int64_t lo,
                       uint64_t range);
nc_status nc_cl_sgd_step(nc_tensor *param, const nc_tensor *grad, nc_tensor *buf,
                         const nc_sgd_kernel_args *a);
nc_status nc_cl_rmsprop_step(nc_tensor *param, const nc_tensor *grad, nc_tensor *square_avg,
                             nc_tensor *grad_avg, nc_tensor *buf, const nc_rmsprop_kernel_args *a);
nc_status nc_cl_adam_step(nc_tensor *param, const nc_tensor *grad, nc_tensor *exp_avg, nc_tensor *exp_avg_sq,
                          nc_tensor *max_exp_avg_sq, const nc_adam_kernel_args *a);
nc_status nc_cl_sum_squares(nc_tensor *parts, int64_t at, const nc_tensor *x);

#endif

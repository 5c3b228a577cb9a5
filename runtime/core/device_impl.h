/* The backend interface and the device structure, shared by core and the backends.
 * Core calls backends only through this table; backends register devices with
 * nc_device_register. Shapes and devices are validated by the ops layer before any entry here
 * is called; entries may assume same-device operands and matching element counts. */
#ifndef NETCL_CORE_DEVICE_IMPL_H
#define NETCL_CORE_DEVICE_IMPL_H

#include <pthread.h>
#include "netcl/device.h"
#include "netcl/elementwise.h"
#include "netcl/reduce.h"
#include "netcl/memory.h"
#include "netcl/tensor.h"

struct nc_pool;
struct nc_conv2d_desc;
struct nc_pool2d_desc;

/* One batched matrix product, C[b] = alpha * A[b] @ B[b] + beta * C[b] (+ bias), over raw
 * layouts: the tensors give storage and dtype (one floating dtype for all), the fields give
 * element offsets and strides, so transposed or broadcast operands need no copy. When beta is
 * 0, C is not read. bias (may be NULL) adds bias[bias_off + m*bias_sm + n*bias_sn]. C's
 * elements do not overlap (the ops layer allocates it). */
typedef struct {
  const nc_tensor *a, *b, *bias;
  nc_tensor *c;
  int64_t batch, m, n, k;
  int64_t a_off, a_sb, a_sm, a_sk;
  int64_t b_off, b_sb, b_sk, b_sn;
  int64_t c_off, c_sb, c_sm, c_sn;
  int64_t bias_off, bias_sm, bias_sn;
  double alpha, beta;
} nc_gemm_desc;

enum { NC_RANDOM_UNIFORM = 0, NC_RANDOM_NORMAL = 1 };

/* Scalars of the fused optimizer updates (netcl/optim.h), derived on the host in double
 * precision by runtime/ops/optim.c, as PyTorch derives them in Python before handing them to
 * its tensor ops; backends convert each to the tensor dtype and use them in PyTorch's order of
 * operations. The use_* flags say which optional terms exist (PyTorch skips them, so a zero
 * weight decay must not touch an infinite param). */
typedef struct {
  double neg_lr, weight_decay, momentum, one_minus_dampening;
  bool use_weight_decay, use_momentum, first, nesterov;
} nc_sgd_kernel_args;

typedef struct {
  double neg_lr, weight_decay, alpha, one_minus_alpha, eps, momentum;
  bool use_weight_decay, centered, use_momentum;
} nc_rmsprop_kernel_args;

typedef struct {
  double neg_step_size, weight_decay, decay, one_minus_beta1, beta2, one_minus_beta2, eps,
      bias_correction2_sqrt;
  bool use_weight_decay, decoupled, amsgrad;
} nc_adam_kernel_args;

/* Partial sums each backend's sum_squares writes per tensor (fixed, so results do not depend on
 * thread counts or work-group sizes). */
#define NC_SUM_SQUARES_PARTS 64

typedef struct nc_backend {
  const char *name;
  /* Raw buffers (the pool caches them). alloc may fail with NC_ERR_OOM. */
  nc_status (*alloc)(nc_device *d, size_t nbytes, void **handle);
  void (*release)(nc_device *d, void *handle);
  void *(*host_ptr)(nc_device *d, void *handle); /* NULL when not host-addressable */
  /* write is asynchronous and stages src; read waits for queued work. */
  nc_status (*write)(nc_device *d, void *handle, size_t off, const void *src, size_t n);
  nc_status (*read)(nc_device *d, void *handle, size_t off, void *dst, size_t n);
  nc_status (*sync)(nc_device *d);
  /* Backend counters merged into nc_memory_stats (programs built/loaded, pinned bytes). */
  void (*stats)(nc_device *d, nc_memory_stats *st);
  /* Ops. */
  nc_status (*fill)(nc_tensor *t, double v);
  /* dst = src elementwise with dtype conversion; same shape (src strides may be 0). */
  nc_status (*copy)(nc_tensor *dst, const nc_tensor *src);
  nc_status (*arange)(nc_tensor *t, double start, double step);
  /* kind: NC_RANDOM_*; (a, b) = (lo, hi) or (mean, std). Floating dtypes only. */
  nc_status (*random)(nc_tensor *t, int kind, uint64_t seed, uint64_t offset, double a, double b);
  /* Builds (or loads from the disk cache) every kernel program the device uses; NULL when the
   * backend compiles nothing. */
  nc_status (*warmup)(nc_device *d);

  /* ---- Op families. runtime/ops has validated shapes and dtypes, promoted, broadcast and
   * allocated before calling these; op is a row of the op table (netcl/optable.h). Outputs may
   * have any non-overlapping layout and never alias an input with a different layout. */
  /* out = op(x). x has out's shape and the compute dtype; out has the compute dtype, or bool
   * for predicates (isnan, isinf). p: the op's scalars (clamp: lo, hi), within the dtype. */
  nc_status (*unary)(nc_op op, nc_tensor *out, const nc_tensor *x, const nc_scalar *p);
  /* out = op(a, b). Tensor operands have out's shape (strides may be 0) and the compute dtype;
   * out has the compute dtype, or bool for comparisons. */
  nc_status (*binary)(nc_op op, nc_tensor *out, const nc_operand *a, const nc_operand *b);
  /* out = cond ? a : b; cond is bool; a, b and out share a dtype. */
  nc_status (*where)(nc_tensor *out, const nc_tensor *cond, const nc_operand *a, const nc_operand *b);
  /* Reduces the last nred dims of x (float32, float64 or int64) into out (x's first ndim - nred
   * dims, x's dtype; an empty row gives the identity). idx (int64, out's shape) receives the
   * positions for argmax/argmin and is NULL otherwise. Deterministic. */
  nc_status (*reduce)(nc_op op, nc_tensor *out, nc_tensor *idx, const nc_tensor *x, int nred,
                      const nc_reduce_args *args);
  /* Inclusive cumsum along the last dim (float32, float64, int64); out has x's shape. */
  nc_status (*scan)(nc_op op, nc_tensor *out, const nc_tensor *x);
  /* softmax / log_softmax along the last dim (float32, float64); out has x's shape. */
  nc_status (*softmax)(nc_op op, nc_tensor *out, const nc_tensor *x);
  /* Index family (idx int64, positions already checked to be in range; dim 0-based):
   * INDEX_SELECT: out = x at positions idx (1-D) along dim; out has x's shape with dim resized.
   * GATHER: out[.., j, ..] = x[.., idx[.., j, ..], ..] along dim; idx has out's shape.
   * SCATTER_ADD: out[.., idx[.., j, ..], ..] += x[.., j, ..] along dim (x is the source; idx is
   * no larger than x, nor than out outside dim); additions happen in index order. */
  nc_status (*index)(nc_op op, nc_tensor *out, const nc_tensor *x, const nc_tensor *idx, int dim);
  /* Positions (int64, contiguous, x's shape) that sort x along its last dim (float32, float64
   * or int64), in the order of netcl/sort.h. */
  nc_status (*sort)(nc_tensor *indices, const nc_tensor *x, bool descending);
  /* Random family into a contiguous out; element i uses Philox counter offset + i.
   * BERNOULLI: out (p's dtype, float32 or float64) = u < p[i] (p: out's shape, any layout),
   * with u from word 0 (24 bits) for float32 and words 0-1 (53 bits) for float64.
   * RANDINT: out (int64) = lo + (w1:w0 mod range), range > 0. */
  nc_status (*sample)(nc_op op, nc_tensor *out, const nc_tensor *p, uint64_t seed, uint64_t offset, int64_t lo,
                      uint64_t range);

  /* ---- linear algebra and layers (linalg.h, conv.h, pool.h, norm.h, embedding.h, loss.h).
   * Float operands of one dtype; the ops layer validates shapes and allocates contiguous
   * outputs (inputs may be strided unless stated). */
  nc_status (*gemm)(const nc_gemm_desc *g);
  /* y = conv2d(x, w) + bias (bias may be NULL). x, w contiguous NCHW / OIHW. */
  nc_status (*conv2d)(const struct nc_conv2d_desc *p, const nc_tensor *x, const nc_tensor *w,
                      const nc_tensor *bias, nc_tensor *y);
  /* dx = conv2d's input gradient from dy (contiguous), w. Overwrites dx. */
  nc_status (*conv2d_backward_input)(const struct nc_conv2d_desc *p, const nc_tensor *dy,
                                     const nc_tensor *w, nc_tensor *dx);
  /* dw = weight gradient from dy, x (contiguous). Overwrites dw. */
  nc_status (*conv2d_backward_weight)(const struct nc_conv2d_desc *p, const nc_tensor *dy,
                                      const nc_tensor *x, nc_tensor *dw);
  /* Pooling over NCHW (contiguous x, y). kind: NC_POOL_*. indices (int64, max only) hold the
   * flat h*W+w position of each maximum in its input plane. */
  nc_status (*pool2d)(const struct nc_pool2d_desc *p, const nc_tensor *x, nc_tensor *y, nc_tensor *indices);
  nc_status (*pool2d_backward)(const struct nc_pool2d_desc *p, const nc_tensor *dy,
                               const nc_tensor *indices, nc_tensor *dx);
  /* Batch norm over x viewed as [N, C, S] (contiguous). Training: normalizes with the batch
   * mean and biased variance, and updates the running stats (may be NULL) with momentum and
   * the unbiased variance. Inference: normalizes with the running stats. Either way
   * save_mean/save_invstd ([C]) receive the mean and 1/sqrt(var + eps) used. weight, bias may
   * be NULL. */
  nc_status (*batch_norm)(const nc_tensor *x, const nc_tensor *weight, const nc_tensor *bias,
                          nc_tensor *running_mean, nc_tensor *running_var, bool training,
                          double momentum, double eps, nc_tensor *y, nc_tensor *save_mean,
                          nc_tensor *save_invstd);
  /* dx, dweight, dbias (each may be NULL) from dy, x and the saved mean/invstd; training says
   * whether the statistics depended on x. */
  nc_status (*batch_norm_backward)(const nc_tensor *dy, const nc_tensor *x, const nc_tensor *weight,
                                   const nc_tensor *mean, const nc_tensor *invstd, bool training,
                                   nc_tensor *dx, nc_tensor *dweight, nc_tensor *dbias);
  /* Row norms over x viewed as [R, D] (contiguous): layer norm (rms = false) or RMS norm
   * (rms = true; mean is NULL and bias ignored). Saves per-row mean and rstd. */
  nc_status (*row_norm)(bool rms, const nc_tensor *x, const nc_tensor *weight, const nc_tensor *bias,
                        double eps, nc_tensor *y, nc_tensor *mean, nc_tensor *rstd);
  nc_status (*row_norm_backward)(bool rms, const nc_tensor *dy, const nc_tensor *x, const nc_tensor *weight,
                                 const nc_tensor *mean, const nc_tensor *rstd, nc_tensor *dx,
                                 nc_tensor *dweight, nc_tensor *dbias);
  /* out[i, :] = weight[idx[i], :]; idx int64 or int32 (contiguous). Sets *bad to the first
   * out-of-range index position + 1 when one is found (0 otherwise). */
  nc_status (*embedding)(const nc_tensor *weight, const nc_tensor *idx, nc_tensor *out, int64_t *bad);
  /* dweight (zeroed here) += scatter of dout rows by idx, skipping padding_idx (< 0: none). */
  nc_status (*embedding_backward)(const nc_tensor *dout, const nc_tensor *idx, int64_t padding_idx,
                                  nc_tensor *dweight);
  /* Cross entropy over logits [N, C, S] (contiguous) and int64 targets [N, S]. reduction
   * (NC_REDUCTION_*): NONE writes per-position losses into loss [N, S] (0 where target ==
   * ignore_index); MEAN (over non-ignored positions) and SUM write one value into loss (0-dim).
   * lse [N, S] receives the log-sum-exp of each position. *bad as for embedding. */
  nc_status (*cross_entropy)(const nc_tensor *logits, const nc_tensor *targets, int64_t ignore_index,
                             double label_smoothing, int reduction, nc_tensor *loss, nc_tensor *lse,
                             int64_t *bad);
  /* dlogits from the upstream gradient dloss ([N, S] for NONE, 0-dim otherwise). */
  nc_status (*cross_entropy_backward)(const nc_tensor *dloss, const nc_tensor *logits, const nc_tensor *targets,
                                      const nc_tensor *lse, int64_t ignore_index, double label_smoothing,
                                      int reduction, nc_tensor *dlogits);
  /* Fused optimizer updates: param and state contiguous, grad contiguous and not overlapping
   * them, all of param's shape and dtype (float32 or float64); a state pointer is NULL exactly
   * when its flag in the args is off (buf: use_momentum; grad_avg: centered; max_exp_avg_sq:
   * amsgrad). */
  nc_status (*sgd_step)(nc_tensor *param, const nc_tensor *grad, nc_tensor *buf, const nc_sgd_kernel_args *a);
  nc_status (*rmsprop_step)(nc_tensor *param, const nc_tensor *grad, nc_tensor *square_avg,
                            nc_tensor *grad_avg, nc_tensor *buf, const nc_rmsprop_kernel_args *a);
  nc_status (*adam_step)(nc_tensor *param, const nc_tensor *grad, nc_tensor *exp_avg, nc_tensor *exp_avg_sq,
                         nc_tensor *max_exp_avg_sq, const nc_adam_kernel_args *a);
  /* Sum of the squares of x (float32 or float64, any layout) as NC_SUM_SQUARES_PARTS partial
   * sums into parts[at .. at + NC_SUM_SQUARES_PARTS) (parts: contiguous, float64, or float32 on
   * a device without float64); deterministic. */
  nc_status (*sum_squares)(nc_tensor *parts, int64_t at, const nc_tensor *x);
} nc_backend;

struct nc_device {
  nc_device_info info;
  const nc_backend *backend;
  void *impl; /* backend state */
  struct nc_pool *pool;       /* BufferPool */
  struct nc_pool *persistent; /* PersistentBufferPool */
  pthread_mutex_t lock;       /* serializes launches from several threads */
};

/* Adds a device to the registry (takes ownership of dev; called during nc_init only). */
nc_status nc_device_register(nc_device *dev);

#endif

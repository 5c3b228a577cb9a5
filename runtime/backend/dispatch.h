/* Op dispatch: each backend's table of implementations indexed by op id, and the checked
 * wrappers through which the ops layer reaches them.
 *
 * A backend implements an op through one of the entries below (its row in the op table names
 * the entry). It fills its nc_dispatch once, usually with nc_dispatch_entry, which sets every op
 * of the table that uses that entry; an op it leaves unset is unsupported, and the wrappers
 * return NC_ERR_UNSUPPORTED naming the op and the backend instead of calling through NULL.
 *
 * Shapes, dtypes and devices are validated by the ops layer before any wrapper is called;
 * implementations may assume same-device operands and matching element counts. Outputs may have
 * any non-overlapping layout and never alias an input with a different layout. */
#ifndef NETCL_BACKEND_DISPATCH_H
#define NETCL_BACKEND_DISPATCH_H

#include "netcl/op_desc.h"
#include "netcl/optable.h"
#include "netcl/tensor.h"

/* One batched matrix product, C[b] = alpha * A[b] @ B[b] + beta * C[b] (+ bias), over raw
 * layouts: the tensors give storage and dtype (one floating dtype for all), the fields give
 * element offsets and strides, so transposed or broadcast operands need no copy. When beta is
 * 0, C is not read. For bfloat16 and float16, each product of stored values is summed in float32
 * (at least), alpha, beta and bias apply in float32, and the result is rounded once into C (to
 * nearest even). bias (may be NULL) adds bias[bias_off + m*bias_sm + n*bias_sn]. C's
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
  nc_precision precision; /* float32 products may use tf32 matrix units unless HIGHEST */
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
  /* NULL, or a contiguous bfloat16 or float16 tensor of the float32 param's shape that receives
   * the updated param rounded to its dtype (half.h's rounding), in the same pass */
  nc_tensor *rounded;
} nc_sgd_kernel_args;

typedef struct {
  double neg_lr, weight_decay, alpha, one_minus_alpha, eps, momentum;
  bool use_weight_decay, centered, use_momentum;
  nc_tensor *rounded; /* as nc_sgd_kernel_args' */
} nc_rmsprop_kernel_args;

typedef struct {
  double neg_step_size, weight_decay, decay, one_minus_beta1, beta2, one_minus_beta2, eps,
      bias_correction2_sqrt;
  bool use_weight_decay, decoupled, amsgrad;
  nc_tensor *rounded; /* as nc_sgd_kernel_args' */
} nc_adam_kernel_args;

/* Partial sums each backend's sum_squares writes per tensor (fixed, so results do not depend on
 * thread counts or work-group sizes). */
#define NC_SUM_SQUARES_PARTS 64

/* ---- the entries ------------------------------------------------------------------------------ */
/* ENTRY(NAME, return-less signature). Each becomes the type nc_<name>_fn and the wrapper
 * nc_bk_<name>, which takes the op first and then these arguments. */

/* out = op(x). x has out's shape and the compute dtype; out has the compute dtype, or bool
 * for predicates (isnan, isinf). p: the op's scalars (clamp: lo, hi), within the dtype. */
typedef nc_status (*nc_unary_fn)(nc_op op, nc_tensor *out, const nc_tensor *x, const nc_scalar *p);
/* out = op(a, b). Tensor operands have out's shape (strides may be 0) and the compute dtype;
 * out has the compute dtype, or bool for comparisons. */
typedef nc_status (*nc_binary_fn)(nc_op op, nc_tensor *out, const nc_operand *a, const nc_operand *b);
/* out = cond ? a : b; cond is bool; a, b and out share a dtype. */
typedef nc_status (*nc_where_fn)(nc_tensor *out, const nc_tensor *cond, const nc_operand *a, const nc_operand *b);
/* Reduces the last nred dims of x (float32, float64 or int64) into out (x's first ndim - nred
 * dims, x's dtype; an empty row gives the identity). idx (int64, out's shape) receives the
 * positions for argmax/argmin and is NULL otherwise. Deterministic. */
typedef nc_status (*nc_reduce_fn)(nc_op op, nc_tensor *out, nc_tensor *idx, const nc_tensor *x, int nred,
                                  const nc_reduce_args *args);
/* Inclusive cumsum along the last dim (float32, float64, int64); out has x's shape. */
typedef nc_status (*nc_scan_fn)(nc_op op, nc_tensor *out, const nc_tensor *x);
/* softmax / log_softmax along the last dim (float32, float64); out has x's shape. */
typedef nc_status (*nc_softmax_fn)(nc_op op, nc_tensor *out, const nc_tensor *x);
/* Index family (idx int64, positions already checked to be in range; dim 0-based):
 * INDEX_SELECT: out = x at positions idx (1-D) along dim; out has x's shape with dim resized.
 * GATHER: out[.., j, ..] = x[.., idx[.., j, ..], ..] along dim; idx has out's shape.
 * SCATTER_ADD: out[.., idx[.., j, ..], ..] += x[.., j, ..] along dim (x is the source; idx is
 * no larger than x, nor than out outside dim); additions happen in index order. */
typedef nc_status (*nc_index_fn)(nc_op op, nc_tensor *out, const nc_tensor *x, const nc_tensor *idx, int dim);
/* Positions (int64, contiguous, x's shape) that sort x along its last dim (float32, float64
 * or int64), in the order of netcl/sort.h. */
typedef nc_status (*nc_sort_fn)(nc_tensor *indices, const nc_tensor *x, bool descending);
/* Random family into a contiguous out; element i uses Philox counter offset + i.
 * BERNOULLI: out (p's dtype, float32 or float64) = u < p[i] (p: out's shape, any layout),
 * with u from word 0 (24 bits) for float32 and words 0-1 (53 bits) for float64.
 * RANDINT: out (int64) = lo + (w1:w0 mod range), range > 0. */
typedef nc_status (*nc_sample_fn)(nc_op op, nc_tensor *out, const nc_tensor *p, uint64_t seed, uint64_t offset,
                                  int64_t lo, uint64_t range);
/* kind: NC_RANDOM_*; (a, b) = (lo, hi) or (mean, std). Floating dtypes only. */
typedef nc_status (*nc_random_fn)(nc_tensor *t, int kind, uint64_t seed, uint64_t offset, double a, double b);
typedef nc_status (*nc_fill_fn)(nc_tensor *t, double v);
/* dst = src elementwise with dtype conversion; same shape (src strides may be 0). */
typedef nc_status (*nc_copy_fn)(nc_tensor *dst, const nc_tensor *src);
typedef nc_status (*nc_arange_fn)(nc_tensor *t, double start, double step);

/* Linear algebra and layers: float operands of one dtype; the ops layer validates shapes and
 * allocates contiguous outputs (inputs may be strided unless stated). */
typedef nc_status (*nc_gemm_fn)(const nc_gemm_desc *g);
/* y = conv2d(x, w) + bias (bias may be NULL). x, w contiguous NCHW / OIHW. */
typedef nc_status (*nc_conv2d_fn)(const nc_conv2d_desc *p, const nc_tensor *x, const nc_tensor *w,
                                  const nc_tensor *bias, nc_tensor *y);
/* dx = conv2d's input gradient from dy (contiguous), w. Overwrites dx. */
typedef nc_status (*nc_conv2d_bwd_input_fn)(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *w,
                                            nc_tensor *dx);
/* dw = weight gradient from dy, x (contiguous). Overwrites dw. */
typedef nc_status (*nc_conv2d_bwd_weight_fn)(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *x,
                                             nc_tensor *dw);
/* Pooling over NCHW (contiguous x, y). kind: NC_POOL_*. indices (int64, max only) hold the
 * flat h*W+w position of each maximum in its input plane. */
typedef nc_status (*nc_pool2d_fn)(const nc_pool2d_desc *p, const nc_tensor *x, nc_tensor *y, nc_tensor *indices);
typedef nc_status (*nc_pool2d_bwd_fn)(const nc_pool2d_desc *p, const nc_tensor *dy, const nc_tensor *indices,
                                      nc_tensor *dx);
/* Batch norm over x viewed as [N, C, S] (contiguous). Training: normalizes with the batch
 * mean and biased variance, and updates the running stats (may be NULL) with momentum and
 * the unbiased variance. Inference: normalizes with the running stats. Either way
 * save_mean/save_invstd ([C]) receive the mean and 1/sqrt(var + eps) used. weight, bias may
 * be NULL. x (and y) may be bfloat16 or float16: then weight, bias and the running stats have
 * x's dtype or are float32 (all one), save_mean/save_invstd are float32, and the results are the
 * float32 computation on the widened values, rounded once into each output's dtype. */
typedef nc_status (*nc_batch_norm_fn)(const nc_tensor *x, const nc_tensor *weight, const nc_tensor *bias,
                                      nc_tensor *running_mean, nc_tensor *running_var, bool training,
                                      double momentum, double eps, nc_tensor *y, nc_tensor *save_mean,
                                      nc_tensor *save_invstd);
/* dx, dweight, dbias (each may be NULL) from dy, x and the saved mean/invstd; training says
 * whether the statistics depended on x. For a bfloat16 or float16 x: dy and dx have x's dtype
 * or are both float32, weight (with dweight and dbias) has it or is float32, mean/invstd are
 * float32; computed as for float32 and rounded once. */
typedef nc_status (*nc_batch_norm_bwd_fn)(const nc_tensor *dy, const nc_tensor *x, const nc_tensor *weight,
                                          const nc_tensor *mean, const nc_tensor *invstd, bool training,
                                          nc_tensor *dx, nc_tensor *dweight, nc_tensor *dbias);
/* Row norms over x viewed as [R, D] (contiguous): layer norm (rms = false) or RMS norm
 * (rms = true; mean is NULL and bias ignored). Saves per-row mean and rstd. */
typedef nc_status (*nc_row_norm_fn)(bool rms, const nc_tensor *x, const nc_tensor *weight, const nc_tensor *bias,
                                    double eps, nc_tensor *y, nc_tensor *mean, nc_tensor *rstd);
typedef nc_status (*nc_row_norm_bwd_fn)(bool rms, const nc_tensor *dy, const nc_tensor *x, const nc_tensor *weight,
                                        const nc_tensor *mean, const nc_tensor *rstd, nc_tensor *dx,
                                        nc_tensor *dweight, nc_tensor *dbias);
/* The verdict of the index check an op's kernels make: `bad`, the first out-of-range position + 1
 * (0: none), when the backend knows it on return (CPU); else `flag`, a new int32 device tensor
 * that the queued kernels leave at INT32_MAX or set to that position + 1 (OpenCL: the op defers
 * reading it to the next sync point, nc_device_defer_check, so the launch does not wait). */
typedef struct {
  int64_t bad;
  nc_tensor *flag;
} nc_index_verdict;
/* out[i, :] = weight[idx[i], :]; idx int64 or int32 (contiguous). Out-of-range indices give
 * zero rows and the verdict in *bad. */
typedef nc_status (*nc_embedding_fn)(const nc_tensor *weight, const nc_tensor *idx, nc_tensor *out,
                                     nc_index_verdict *bad);
/* dweight (zeroed here) += scatter of dout rows by idx, skipping padding_idx (< 0: none). */
typedef nc_status (*nc_embedding_bwd_fn)(const nc_tensor *dout, const nc_tensor *idx, int64_t padding_idx,
                                         nc_tensor *dweight);
/* Cross entropy over logits [N, C, S] (contiguous) and int64 targets [N, S]. reduction
 * (NC_REDUCTION_*): NONE writes per-position losses into loss [N, S] (0 where target ==
 * ignore_index); MEAN (over non-ignored positions) and SUM write one value into loss (0-dim).
 * lse [N, S] receives the log-sum-exp of each position. Targets outside [0, C) that are not
 * ignore_index count as ignored, with the verdict in *bad as for embedding. */
typedef nc_status (*nc_cross_entropy_fn)(const nc_tensor *logits, const nc_tensor *targets, int64_t ignore_index,
                                         double label_smoothing, int reduction, nc_tensor *loss, nc_tensor *lse,
                                         nc_index_verdict *bad);
/* dlogits from the upstream gradient dloss ([N, S] for NONE, 0-dim otherwise). */
typedef nc_status (*nc_cross_entropy_bwd_fn)(const nc_tensor *dloss, const nc_tensor *logits,
                                             const nc_tensor *targets, const nc_tensor *lse, int64_t ignore_index,
                                             double label_smoothing, int reduction, nc_tensor *dlogits);
/* Fused optimizer updates: param and state contiguous, grad contiguous and not overlapping
 * them, all of param's shape and dtype (float32 or float64); a state pointer is NULL exactly
 * when its flag in the args is off (buf: use_momentum; grad_avg: centered; max_exp_avg_sq:
 * amsgrad). */
typedef nc_status (*nc_sgd_step_fn)(nc_tensor *param, const nc_tensor *grad, nc_tensor *buf,
                                    const nc_sgd_kernel_args *a);
typedef nc_status (*nc_rmsprop_step_fn)(nc_tensor *param, const nc_tensor *grad, nc_tensor *square_avg,
                                        nc_tensor *grad_avg, nc_tensor *buf, const nc_rmsprop_kernel_args *a);
typedef nc_status (*nc_adam_step_fn)(nc_tensor *param, const nc_tensor *grad, nc_tensor *exp_avg,
                                     nc_tensor *exp_avg_sq, nc_tensor *max_exp_avg_sq, const nc_adam_kernel_args *a);
/* Sum of the squares of x (float32 or float64, any layout) as NC_SUM_SQUARES_PARTS partial
 * sums into parts[at .. at + NC_SUM_SQUARES_PARTS) (parts: contiguous, float64, or float32 on
 * a device without float64); deterministic. */
typedef nc_status (*nc_sum_squares_fn)(nc_tensor *parts, int64_t at, const nc_tensor *x);

/* The entry of ops defined by their row (KERNEL(name, sig) in the op table). The ops layer
 * hands over contiguous tensors: the inputs first, then the outputs it allocated, in the order
 * of the op's kernels; an absent optional input is NULL. Integers and reals follow, and rows:
 * the number of independent rows of work (OpenCL launches one work-group per row, and a kernel
 * loops over its row with the group's work-items; the CPU backend may ignore it). */
#define NC_KERNEL_MAX_TENSORS 8
#define NC_KERNEL_MAX_SCALARS 8
typedef struct {
  nc_op op;
  int nt, ni, nf;
  nc_tensor *t[NC_KERNEL_MAX_TENSORS];
  int64_t i[NC_KERNEL_MAX_SCALARS];
  double f[NC_KERNEL_MAX_SCALARS];
  int64_t rows;
  nc_precision precision; /* the matmul precision, for kernels whose products may use matrix units */
} nc_kernel_call;
typedef nc_status (*nc_kernel_fn)(const nc_kernel_call *c);

/* The entries, as the op table's "backend entry" column names them. */
typedef enum {
  NC_ENTRY_NONE, /* composed of other ops: no entry of its own */
  NC_ENTRY_UNARY,
  NC_ENTRY_BINARY,
  NC_ENTRY_WHERE,
  NC_ENTRY_REDUCE,
  NC_ENTRY_SCAN,
  NC_ENTRY_SOFTMAX,
  NC_ENTRY_INDEX,
  NC_ENTRY_SORT,
  NC_ENTRY_SAMPLE,
  NC_ENTRY_RANDOM,
  NC_ENTRY_FILL,
  NC_ENTRY_COPY,
  NC_ENTRY_ARANGE,
  NC_ENTRY_GEMM,
  NC_ENTRY_CONV2D,
  NC_ENTRY_CONV2D_BWD_INPUT,
  NC_ENTRY_CONV2D_BWD_WEIGHT,
  NC_ENTRY_POOL2D,
  NC_ENTRY_POOL2D_BWD,
  NC_ENTRY_BATCH_NORM,
  NC_ENTRY_BATCH_NORM_BWD,
  NC_ENTRY_ROW_NORM,
  NC_ENTRY_ROW_NORM_BWD,
  NC_ENTRY_EMBEDDING,
  NC_ENTRY_EMBEDDING_BWD,
  NC_ENTRY_CROSS_ENTROPY,
  NC_ENTRY_CROSS_ENTROPY_BWD,
  NC_ENTRY_SGD_STEP,
  NC_ENTRY_RMSPROP_STEP,
  NC_ENTRY_ADAM_STEP,
  NC_ENTRY_SUM_SQUARES,
  NC_ENTRY_KERNEL, /* an op defined by its row: KERNEL(name, (signature)) */
  NC_ENTRY_COUNT
} nc_entry;

/* The entry op uses (NC_ENTRY_NONE for an id out of range). */
nc_entry nc_op_entry(nc_op op);

/* A generic function pointer: tables store entries as this and the wrappers cast them back to
 * their entry's type (C allows the round trip). */
typedef void (*nc_backend_fn)(void);
#define NC_BACKEND_FN(f) ((nc_backend_fn)(f))

typedef struct nc_dispatch {
  const char *name; /* the backend's name, for messages: "cpu", "opencl" */
  nc_backend_fn fn[NC_OP_COUNT];
  /* Whether conv2d (op NC_OP_CONV2D), its input gradient (NC_OP_CONV2D_BWD_INPUT) or its weight
   * gradient (NC_OP_CONV2D_BWD_WEIGHT) of geometry p takes tensors of the storage dtype dt as they
   * are (but the weights and bias, float32; the weight gradient's dY and dW may be float32 too);
   * NULL: never, and the op layer widens them. */
  bool (*conv2d_storage)(nc_device *dev, nc_op op, const nc_conv2d_desc *p, nc_dtype dt);
} nc_dispatch;

/* Sets fn for every op of the table that uses entry e. */
void nc_dispatch_entry(nc_dispatch *d, nc_entry e, nc_backend_fn fn);

/* The dispatch table of dev (set by its backend when the device is made). */
const nc_dispatch *nc_device_dispatch(const nc_device *dev);

/* dev's implementation of op, or NC_ERR_UNSUPPORTED naming the op and the backend. */
nc_status nc_dispatch_lookup(const nc_device *dev, nc_op op, nc_backend_fn *out);

/* ---- checked wrappers (the device is the first tensor argument's) ------------------------------ */
nc_status nc_bk_unary(nc_op op, nc_tensor *out, const nc_tensor *x, const nc_scalar *p);
nc_status nc_bk_binary(nc_op op, nc_tensor *out, const nc_operand *a, const nc_operand *b);
nc_status nc_bk_where(nc_op op, nc_tensor *out, const nc_tensor *cond, const nc_operand *a, const nc_operand *b);
nc_status nc_bk_reduce(nc_op op, nc_tensor *out, nc_tensor *idx, const nc_tensor *x, int nred,
                       const nc_reduce_args *args);
nc_status nc_bk_scan(nc_op op, nc_tensor *out, const nc_tensor *x);
nc_status nc_bk_softmax(nc_op op, nc_tensor *out, const nc_tensor *x);
nc_status nc_bk_index(nc_op op, nc_tensor *out, const nc_tensor *x, const nc_tensor *idx, int dim);
nc_status nc_bk_sort(nc_op op, nc_tensor *indices, const nc_tensor *x, bool descending);
nc_status nc_bk_sample(nc_op op, nc_tensor *out, const nc_tensor *p, uint64_t seed, uint64_t offset, int64_t lo,
                       uint64_t range);
/* op: NC_OP_UNIFORM or NC_OP_NORMAL. */
nc_status nc_bk_random(nc_op op, nc_tensor *t, uint64_t seed, uint64_t offset, double a, double b);
nc_status nc_bk_fill(nc_tensor *t, double v);
nc_status nc_bk_copy(nc_tensor *dst, const nc_tensor *src);
nc_status nc_bk_arange(nc_tensor *t, double start, double step);
nc_status nc_bk_gemm(nc_op op, const nc_gemm_desc *g);
nc_status nc_bk_conv2d(const nc_conv2d_desc *p, const nc_tensor *x, const nc_tensor *w, const nc_tensor *bias,
                       nc_tensor *y);
nc_status nc_bk_conv2d_bwd_input(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *w, nc_tensor *dx);
/* The backend's conv2d_storage answer for dev (false where it has none). */
bool nc_bk_conv2d_storage(nc_device *dev, nc_op op, const nc_conv2d_desc *p, nc_dtype dt);
nc_status nc_bk_conv2d_bwd_weight(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *x, nc_tensor *dw);
/* The op follows from p->kind. */
nc_status nc_bk_pool2d(const nc_pool2d_desc *p, const nc_tensor *x, nc_tensor *y, nc_tensor *indices);
nc_status nc_bk_pool2d_bwd(const nc_pool2d_desc *p, const nc_tensor *dy, const nc_tensor *indices, nc_tensor *dx);
nc_status nc_bk_batch_norm(const nc_tensor *x, const nc_tensor *weight, const nc_tensor *bias,
                           nc_tensor *running_mean, nc_tensor *running_var, bool training, double momentum,
                           double eps, nc_tensor *y, nc_tensor *save_mean, nc_tensor *save_invstd);
nc_status nc_bk_batch_norm_bwd(const nc_tensor *dy, const nc_tensor *x, const nc_tensor *weight,
                               const nc_tensor *mean, const nc_tensor *invstd, bool training, nc_tensor *dx,
                               nc_tensor *dweight, nc_tensor *dbias);
/* op: NC_OP_LAYER_NORM or NC_OP_RMS_NORM (and their _BWD rows for the backward). */
nc_status nc_bk_row_norm(nc_op op, const nc_tensor *x, const nc_tensor *weight, const nc_tensor *bias, double eps,
                         nc_tensor *y, nc_tensor *mean, nc_tensor *rstd);
nc_status nc_bk_row_norm_bwd(nc_op op, const nc_tensor *dy, const nc_tensor *x, const nc_tensor *weight,
                             const nc_tensor *mean, const nc_tensor *rstd, nc_tensor *dx, nc_tensor *dweight,
                             nc_tensor *dbias);
nc_status nc_bk_embedding(const nc_tensor *weight, const nc_tensor *idx, nc_tensor *out, nc_index_verdict *bad);
nc_status nc_bk_embedding_bwd(const nc_tensor *dout, const nc_tensor *idx, int64_t padding_idx, nc_tensor *dweight);
nc_status nc_bk_cross_entropy(const nc_tensor *logits, const nc_tensor *targets, int64_t ignore_index,
                              double label_smoothing, int reduction, nc_tensor *loss, nc_tensor *lse, nc_index_verdict *bad);
nc_status nc_bk_cross_entropy_bwd(const nc_tensor *dloss, const nc_tensor *logits, const nc_tensor *targets,
                                  const nc_tensor *lse, int64_t ignore_index, double label_smoothing, int reduction,
                                  nc_tensor *dlogits);
nc_status nc_bk_sgd_step(nc_tensor *param, const nc_tensor *grad, nc_tensor *buf, const nc_sgd_kernel_args *a);
nc_status nc_bk_rmsprop_step(nc_tensor *param, const nc_tensor *grad, nc_tensor *square_avg, nc_tensor *grad_avg,
                             nc_tensor *buf, const nc_rmsprop_kernel_args *a);
nc_status nc_bk_adam_step(nc_tensor *param, const nc_tensor *grad, nc_tensor *exp_avg, nc_tensor *exp_avg_sq,
                          nc_tensor *max_exp_avg_sq, const nc_adam_kernel_args *a);
nc_status nc_bk_sum_squares(nc_tensor *parts, int64_t at, const nc_tensor *x);
/* An op defined by its row; the device is the first tensor's. */
nc_status nc_bk_kernel(const nc_kernel_call *c);

/* Sets the implementation of the op named name (a KERNEL row) to fn. */
void nc_dispatch_kernel(nc_dispatch *d, const char *name, nc_backend_fn fn);

#endif

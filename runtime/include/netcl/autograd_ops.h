/* Differentiable ops on autograd nodes.
 *
 * Each function computes its forward with the pure op (so values are exactly the op's), wraps
 * the result in a new node (*out, one reference to the caller) and, when t is non-NULL and some
 * node input requires a gradient, records the op on t with a backward rule composed of ops.
 * With t NULL nothing is recorded or saved and *out does not require a gradient. Tensors that
 * are not nodes (conditions, masks, index tensors, targets) are constants: no gradient flows
 * into them. Dims are 0-based. Errors are the pure op's (shape, dtype, device, index).
 *
 * The op table's gradient column (netcl/optable.h) lists every differentiable op and its function
 * here. The Lua binding must register each (it checks at load), and the gradient-check suite
 * (tests/lua/test_autograd_gradcheck.lua) needs a case for each: adding a row without a case
 * fails the suite. docs/architecture.md explains how to add an op. */
#ifndef NETCL_AUTOGRAD_OPS_H
#define NETCL_AUTOGRAD_OPS_H

#include "autograd.h"
#include "conv.h"
#include "elementwise.h"
#include "loss.h"
#include "pool.h"
#include "random.h"
#include "reduce.h"
#include "table_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The differentiable ops: the op table's rows whose gradient column is DIFF(nc_ag_<fn>)
 * (netcl/optable.h), by name, in table order, and their count. */
extern const char *const nc_ag_op_names[];
extern const int nc_ag_op_count;
/* Whether name is a differentiable op. */
bool nc_ag_op_known(const char *name);

/* ---- elementwise ---------------------------------------------------------------------------- */

/* A node, or (n == NULL) the number s: an operand of a binary op. */
typedef struct {
  nc_node *n;
  nc_scalar s;
} nc_ag_operand;

static inline nc_ag_operand nc_ag_node(nc_node *n) {
  nc_ag_operand o = {n, {false, 0, 0.0}};
  return o;
}
static inline nc_ag_operand nc_ag_scalar(nc_scalar s) {
  nc_ag_operand o = {NULL, s};
  return o;
}

/* op of the unary family that is differentiable (abs ... sign; floor, ceil, round and sign have
 * a zero gradient). gelu is exact (erf); gelu_tanh its tanh approximation. */
nc_status nc_ag_unary(nc_tape *t, nc_op op, nc_node *x, nc_node **out);

/* clamp(x, lo, hi), either bound NULL (open). The gradient passes where lo <= x <= hi. */
nc_status nc_ag_clamp(nc_tape *t, nc_node *x, const nc_scalar *lo, const nc_scalar *hi, nc_node **out);

/* add sub mul div pow maximum minimum with NumPy broadcasting; at least one operand is a node.
 * Gradients are summed back to each input's shape. maximum/minimum split the gradient evenly
 * between equal operands; pow's gradient is 0 where it is undefined but the limit is 0
 * (0^b with b >= 0 for the exponent, b == 0 for the base). */
nc_status nc_ag_binary(nc_tape *t, nc_op op, nc_ag_operand a, nc_ag_operand b, nc_node **out);

/* cond ? a : b (cond a bool tensor; all three broadcast). */
nc_status nc_ag_where(nc_tape *t, nc_tensor *cond, nc_ag_operand a, nc_ag_operand b, nc_node **out);

/* x with value where mask (bool, broadcast to x) is true. */
nc_status nc_ag_masked_fill(nc_tape *t, nc_node *x, nc_tensor *mask, nc_scalar value, nc_node **out);

/* ---- reductions --------------------------------------------------------------------------- */

/* sum mean prod max min var std norm logsumexp over dims[0..ndims) (0: every dim), as
 * nc_reduce (args NULL: defaults). max and min spread the gradient evenly over tied extremes;
 * prod handles zeros exactly; std and the 2-norm have gradient 0 where they are 0. */
nc_status nc_ag_reduce(nc_tape *t, nc_op op, nc_node *x, int ndims, const int *dims, bool keepdim,
                       const nc_reduce_args *args, nc_node **out);
nc_status nc_ag_cumsum(nc_tape *t, nc_node *x, int dim, nc_node **out);
/* op: NC_OP_SOFTMAX or NC_OP_LOG_SOFTMAX. */
nc_status nc_ag_softmax(nc_tape *t, nc_op op, nc_node *x, int dim, nc_node **out);

/* ---- views and copies ------------------------------------------------------------------------ */
/* Outputs of views share storage with the input's value, as the tensor views do. */

/* shape may hold one -1. view fails where nc_tensor_view does; reshape copies instead. */
nc_status nc_ag_view(nc_tape *t, nc_node *x, int ndim, const int64_t *shape, nc_node **out);
nc_status nc_ag_reshape(nc_tape *t, nc_node *x, int ndim, const int64_t *shape, nc_node **out);
nc_status nc_ag_transpose(nc_tape *t, nc_node *x, int d1, int d2, nc_node **out);
nc_status nc_ag_permute(nc_tape *t, nc_node *x, const int *dims, nc_node **out);
nc_status nc_ag_narrow(nc_tape *t, nc_node *x, int dim, int64_t start, int64_t len, nc_node **out);
nc_status nc_ag_select(nc_tape *t, nc_node *x, int dim, int64_t index, nc_node **out);
/* The gradient of an expand sums over the expanded dims. */
nc_status nc_ag_expand(nc_tape *t, nc_node *x, int ndim, const int64_t *shape, nc_node **out);
nc_status nc_ag_squeeze(nc_tape *t, nc_node *x, int dim /* -1: every size-1 dim */, nc_node **out);
nc_status nc_ag_unsqueeze(nc_tape *t, nc_node *x, int dim, nc_node **out);
/* Dims d1..d2 (inclusive) merged into one; a 0-dim x becomes [1]. */
nc_status nc_ag_flatten(nc_tape *t, nc_node *x, int d1, int d2, nc_node **out);
/* contiguous returns a node over x's value itself when it is already contiguous (still a new
 * node); clone always copies. */
nc_status nc_ag_contiguous(nc_tape *t, nc_node *x, nc_node **out);
nc_status nc_ag_clone(nc_tape *t, nc_node *x, nc_node **out);

/* ---- indexing and joins ----------------------------------------------------------------------- */
/* Index tensors (0-based int64 positions) are constants. Gradients of selections scatter-add
 * into zeros, so repeated positions accumulate. */

nc_status nc_ag_index_select(nc_tape *t, nc_node *x, int dim, nc_tensor *idx, nc_node **out);
nc_status nc_ag_gather(nc_tape *t, nc_node *x, int dim, nc_tensor *idx, nc_node **out);
/* x + src scattered at idx along dim (nc_scatter_add); differentiable in x and src. */
nc_status nc_ag_scatter_add(nc_tape *t, nc_node *x, int dim, nc_tensor *idx, nc_node *src, nc_node **out);
nc_status nc_ag_cat(nc_tape *t, int n, nc_node *const *xs, int dim, nc_node **out);
nc_status nc_ag_stack(nc_tape *t, int n, nc_node *const *xs, int dim, nc_node **out);
/* n consecutive slices of dim with the given sizes (summing to its size): parts receives n
 * nodes (views). chunk is split with nc_split_sizes. */
nc_status nc_ag_split(nc_tape *t, nc_node *x, int dim, int n, const int64_t *sizes, nc_node **parts);

/* ---- matrix products -------------------------------------------------------------------------- */

/* matmul (PyTorch's: 1-D operands, broadcasting batch dims), mm (2-D) and bmm (3-D); gradients
 * are products with the other operand transposed, summed over broadcast batch dims. */
nc_status nc_ag_matmul(nc_tape *t, nc_node *a, nc_node *b, nc_node **out);
nc_status nc_ag_mm(nc_tape *t, nc_node *a, nc_node *b, nc_node **out);
nc_status nc_ag_bmm(nc_tape *t, nc_node *a, nc_node *b, nc_node **out);
/* x W^T + b (bias may be NULL). */
nc_status nc_ag_linear(nc_tape *t, nc_node *x, nc_node *weight, nc_node *bias, nc_node **out);

/* ---- layers ------------------------------------------------------------------------------------ */

/* bias may be NULL; params as for nc_conv2d. */
nc_status nc_ag_conv2d(nc_tape *t, nc_node *x, nc_node *weight, nc_node *bias, const nc_conv2d_desc *params,
                       nc_node **out);
/* Max, average or adaptive average pooling by params->kind (nc_pool2d). */
nc_status nc_ag_pool2d(nc_tape *t, nc_node *x, const nc_pool2d_desc *params, nc_node **out);
/* As nc_batch_norm (running statistics are buffers: updated in training, no gradient); weight
 * and bias may be NULL. */
nc_status nc_ag_batch_norm(nc_tape *t, nc_node *x, nc_node *weight, nc_node *bias, nc_tensor *running_mean,
                           nc_tensor *running_var, bool training, double momentum, double eps, nc_node **out);
nc_status nc_ag_layer_norm(nc_tape *t, nc_node *x, int normalized_ndim, nc_node *weight, nc_node *bias,
                           double eps, nc_node **out);
nc_status nc_ag_rms_norm(nc_tape *t, nc_node *x, int normalized_ndim, nc_node *weight, double eps,
                         nc_node **out);
/* Training: each element is zeroed with probability p (a Bernoulli mask drawn from g) and the
 * rest scaled by 1 / (1 - p); p == 1 gives zeros. Not training (or p == 0): the identity. */
nc_status nc_ag_dropout(nc_tape *t, nc_node *x, double p, bool training, nc_rng *g, nc_node **out);
/* weight [V, D] rows at idx (0-based); rows named padding_idx (< 0: none) get no gradient. */
nc_status nc_ag_embedding(nc_tape *t, nc_node *weight, nc_tensor *idx, int64_t padding_idx, nc_node **out);

/* ---- losses and similarities -------------------------------------------------------------------- */
/* reduction: NC_REDUCTION_NONE, _MEAN or _SUM (netcl/loss.h). */

/* Class-index targets (int64): the fused op (nc_cross_entropy: label smoothing, ignore_index).
 * Probability targets (float, the logits' shape): -sum_c t_c log_softmax(x)_c, smoothed the
 * same way; ignore_index does not apply. */
nc_status nc_ag_cross_entropy(nc_tape *t, nc_node *logits, nc_tensor *targets,
                              const nc_cross_entropy_opts *opts, nc_node **out);
/* -logp[n, target[n]] for log-probabilities [N, C, ...] and int64 targets [N, ...]; targets equal
 * to ignore_index count nothing and mean divides by the number of the others. */
nc_status nc_ag_nll_loss(nc_tape *t, nc_node *logp, nc_tensor *targets, int64_t ignore_index, int reduction,
                         nc_node **out);
/* (input - target)^2 and |input - target| (target may be a constant node). */
nc_status nc_ag_mse_loss(nc_tape *t, nc_node *input, nc_node *target, int reduction, nc_node **out);
nc_status nc_ag_l1_loss(nc_tape *t, nc_node *input, nc_node *target, int reduction, nc_node **out);
/* Binary cross entropy of logits x against targets y in [0, 1], computed stably. */
nc_status nc_ag_bce_with_logits(nc_tape *t, nc_node *input, nc_node *target, int reduction, nc_node **out);
/* sum(a b, dim) / (max(|a|, eps) max(|b|, eps)) in the broadcast shape of a and b. */
nc_status nc_ag_cosine_similarity(nc_tape *t, nc_node *a, nc_node *b, int dim, double eps, nc_node **out);

/* ---- ops defined by their op-table row ---------------------------------------------------------- */
/* nc_ag_<name>(t, the pure op's arguments without its saved outputs, nc_node **out) for every
 * differentiable KERNEL row (netcl/table_ops.h, netcl/op_sig.h). */
NC_OPS(NC_SIG_DECLARE_AG_)

#ifdef __cplusplus
}
#endif

#endif

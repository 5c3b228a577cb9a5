/* Optimizer updates and gradient clipping.
 *
 * Each update follows PyTorch's published rule (torch.optim, the single-tensor form it uses on
 * the CPU, in the same order of operations) and is one fused kernel launch per parameter tensor:
 * it reads param, grad and the state and writes param and the state in place, bumping their
 * storage versions.
 *
 * Common rules. param, grad and every state tensor have the same shape, device and dtype
 * (float32 or float64). param and the state tensors are contiguous and do not overlap one
 * another; grad may have any layout (a non-contiguous grad, or one overlapping what the update
 * writes, is copied first). A state tensor is passed exactly when the options need it, and holds
 * what the previous update left there (zeros before the first update: nc_optim_state_new).
 * Hyper-parameters are checked as PyTorch checks them. Errors: NC_ERR_SHAPE, NC_ERR_DTYPE,
 * NC_ERR_DEVICE, NC_ERR_ARG (a bad hyper-parameter, a missing or extra state tensor, a
 * non-contiguous or overlapping param/state), NC_ERR_UNSUPPORTED (float64 on a device without
 * it). */
#ifndef NETCL_OPTIM_H
#define NETCL_OPTIM_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* SGD. d = grad (+ weight_decay * param when weight_decay != 0). With momentum != 0:
 * buf = d on the first update (first == true), else buf = momentum * buf + (1 - dampening) * d,
 * and then d = nesterov ? d + momentum * buf : buf. Finally param -= lr * d.
 * Needs lr, momentum, dampening, weight_decay >= 0; nesterov needs momentum > 0 and
 * dampening == 0. momentum_buffer: when momentum != 0. */
typedef struct {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
  /* NULL, or a bfloat16 or float16 tensor of param's shape and device (param float32, the master
   * copy of a storage-dtype parameter): it receives the updated param rounded once to its dtype,
   * in the update's pass where it is contiguous (else copied after it). */
  nc_tensor *rounded;
} nc_sgd_options;

nc_status nc_sgd_step(nc_tensor *param, nc_tensor *grad, nc_tensor *momentum_buffer, bool first,
                      const nc_sgd_options *o);

/* RMSprop. g = grad (+ weight_decay * param); square_avg = alpha * square_avg + (1 - alpha) g^2;
 * centered: grad_avg = lerp(grad_avg, g, 1 - alpha), avg = sqrt(square_avg - grad_avg^2) + eps;
 * else avg = sqrt(square_avg) + eps. With momentum > 0: buf = momentum * buf + g / avg,
 * param -= lr * buf; else param -= lr * g / avg.
 * Needs lr, alpha, eps, momentum, weight_decay >= 0. grad_avg: when centered;
 * momentum_buffer: when momentum > 0. */
typedef struct {
  double lr, alpha, eps, weight_decay, momentum;
  bool centered;
  nc_tensor *rounded; /* as nc_sgd_options' */
} nc_rmsprop_options;

nc_status nc_rmsprop_step(nc_tensor *param, nc_tensor *grad, nc_tensor *square_avg, nc_tensor *grad_avg,
                          nc_tensor *momentum_buffer, const nc_rmsprop_options *o);

/* Adam (decoupled == false) and AdamW (decoupled == true), update number step (from 1).
 * Adam adds weight_decay * param to grad; AdamW first multiplies param by 1 - lr * weight_decay.
 * exp_avg = lerp(exp_avg, g, 1 - beta1); exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) g^2;
 * amsgrad: max_exp_avg_sq = max(max_exp_avg_sq, exp_avg_sq), used in place of exp_avg_sq below;
 * denom = sqrt(exp_avg_sq) / sqrt(1 - beta2^step) + eps;
 * param -= lr / (1 - beta1^step) * exp_avg / denom.
 * Needs lr, eps, weight_decay >= 0, 0 <= beta1, beta2 < 1, step >= 1. max_exp_avg_sq: when
 * amsgrad. */
typedef struct {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled, amsgrad;
  int64_t step;
  nc_tensor *rounded; /* as nc_sgd_options' */
} nc_adam_options;

nc_status nc_adam_step(nc_tensor *param, nc_tensor *grad, nc_tensor *exp_avg, nc_tensor *exp_avg_sq,
                       nc_tensor *max_exp_avg_sq, const nc_adam_options *o);

/* Clips the gradients grads[0..n) (float32 or float64, any layout, one device; NULL entries are
 * skipped) by their joint L2 norm as torch.nn.utils.clip_grad_norm_: total = sqrt(sum of every
 * element squared), coef = max_norm / (total + 1e-6), and each gradient is multiplied by coef
 * when coef < 1 (or is nan: a nan or infinite total spreads, as in PyTorch). The sums of
 * squares take one pass over each gradient, accumulated in float64 where the device has it,
 * into one buffer read back once. *total_norm receives total. max_norm >= 0 (inf: measure
 * only). */
nc_status nc_clip_grad_norm(int n, nc_tensor *const *grads, double max_norm, double *total_norm);

/* A zero-filled contiguous tensor with like's shape, dtype and device, from the persistent
 * pool (optimizer state outlives the churn of activations). For a storage dtype (bfloat16,
 * float16) like, the tensor is float32: such parameters are stepped through a float32 master
 * copy (netcl.optim), and all their state is float32. */
nc_status nc_optim_state_new(const nc_tensor *like, nc_tensor **out);

#ifdef __cplusplus
}
#endif

#endif

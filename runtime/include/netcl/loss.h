/* Cross entropy with log-softmax fused in. */
#ifndef NETCL_LOSS_H
#define NETCL_LOSS_H

#include "op_desc.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif


typedef struct {
  int64_t ignore_index;   /* targets equal to it add nothing (PyTorch default -100) */
  double label_smoothing; /* in [0, 1] */
  nc_reduction reduction; /* MEAN divides by the number of non-ignored targets */
} nc_cross_entropy_opts;

nc_cross_entropy_opts nc_cross_entropy_defaults(void);

/* logits [N, C] or [N, C, d1, ...] (float), targets int64 [N] or [N, d1, ...] holding class
 * indices. *loss: 0-dim for MEAN/SUM, targets' shape for NONE. *lse (may be NULL: not
 * returned) is the log-sum-exp per position, shaped like targets, for the backward op.
 * Errors: NC_ERR_DTYPE for targets that are not int64 class indices, NC_ERR_SHAPE, and
 * NC_ERR_INDEX for a target outside [0, C) that is not ignore_index. */
nc_status nc_cross_entropy(nc_tensor *logits, nc_tensor *targets, const nc_cross_entropy_opts *opts,
                           nc_tensor **loss, nc_tensor **lse);

/* d loss / d logits given the upstream gradient dloss (shaped like the loss) and the lse the
 * forward op returned. */
nc_status nc_cross_entropy_backward(nc_tensor *dloss, nc_tensor *logits, nc_tensor *targets, nc_tensor *lse,
                                    const nc_cross_entropy_opts *opts, nc_tensor **dlogits);

#ifdef __cplusplus
}
#endif

#endif

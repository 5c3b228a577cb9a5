/* Reverse-mode autograd: nodes (a value and its gradient), a tape of recorded ops, and
 * backward rules composed of ops, so every backend gets gradients for free.
 *
 * An op applied to nodes computes its forward with the pure ops (runtime/ops), then, when a
 * tape is given and some input requires a gradient, records an entry: the inputs, the output,
 * what the rule saves, and the rule. nc_tape_backward walks the entries in reverse recording
 * order (a topological order), accumulating gradients on every node that requires one. */
#ifndef NETCL_AUTOGRAD_H
#define NETCL_AUTOGRAD_H

#include <stdbool.h>
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nc_node nc_node;
typedef struct nc_tape nc_tape;
typedef struct nc_ag_ctx nc_ag_ctx;

/* ---- nodes -------------------------------------------------------------------------------- */

/* A node over value (retained). Leaf nodes are made here; op outputs are made by the ops. */
nc_status nc_node_new(nc_tensor *value, bool requires_grad, nc_node **out);
nc_node *nc_node_retain(nc_node *n);
void nc_node_release(nc_node *n);
nc_tensor *nc_node_value(const nc_node *n);      /* borrowed */
nc_tensor *nc_node_grad(const nc_node *n);       /* borrowed; NULL when none yet */
void nc_node_set_grad(nc_node *n, nc_tensor *g); /* retains g; NULL clears */
/* Replaces a leaf's value (retains v): moving parameters to another device or dtype. Entries
 * already recorded keep the old value. NC_ERR_STATE for a node made by an op. */
nc_status nc_node_set_value(nc_node *n, nc_tensor *v);
bool nc_node_requires_grad(const nc_node *n);
void nc_node_set_requires_grad(nc_node *n, bool on);
bool nc_node_is_leaf(const nc_node *n);   /* not produced by a recorded op */
const char *nc_node_op(const nc_node *n); /* the recording op's name, or NULL */

/* ---- tapes -------------------------------------------------------------------------------- */

nc_status nc_tape_new(nc_tape **out);
void nc_tape_free(nc_tape *t);
size_t nc_tape_size(const nc_tape *t);   /* recorded entries */
bool nc_tape_consumed(const nc_tape *t); /* true after a backward without retain */

/* Rule signature: given the gradient of the output, set grad_in[i] (a new reference, or NULL
 * for no gradient) for each input. The engine reduces nothing: a rule returns gradients of
 * exactly its inputs' shapes. */
typedef nc_status (*nc_backward_fn)(nc_ag_ctx *ctx, nc_tensor *grad_out, nc_tensor **grad_in);

/* True when recording n inputs onto t would be useful (t non-NULL and some input needs a
 * gradient); ops skip saving anything otherwise. */
bool nc_ag_should_record(const nc_tape *t, int n, nc_node *const *in);

/* Records out = op(in[0..n)) with rule fn; *ctx receives the entry's context for saving. */
nc_status nc_tape_record(nc_tape *t, const char *op, nc_backward_fn fn, int n, nc_node *const *in,
                         nc_node *out, nc_ag_ctx **ctx);

/* Backward from out. grad: the gradient of out (NULL = 1 for a one-element out; required
 * otherwise). Accumulates into .grad of every node that requires a gradient and was reached.
 * Without retain, the tape's entries and saved tensors are freed afterwards and a second
 * backward is an error. */
nc_status nc_tape_backward(nc_tape *t, nc_node *out, nc_tensor *grad, bool retain);

/* A gradient hook: called with a leaf (a node that requires a gradient and was not produced on
 * the tape) once its .grad is final for this pass, i.e. once every entry that uses it has run.
 * An error stops the backward pass and becomes its result. */
typedef nc_status (*nc_grad_hook)(nc_node *leaf, void *ud);
/* nc_tape_backward, calling hook(leaf, ud) once per leaf that received a gradient in this pass,
 * as soon as that gradient is final: in reverse order of the leaves' first use on the tape
 * (the order in which their gradients complete), leaves first used by one entry in input order.
 * hook may run ops and read .grad, but must not record on, backward or free t (NC_ERR_STATE).
 * After a hook's error the pass stops: gradients gathered so far stay in .grad, and the tape is
 * freed (or kept, with retain) as after any failed backward. */
nc_status nc_tape_backward_hooked(nc_tape *t, nc_node *out, nc_tensor *grad, bool retain, nc_grad_hook hook,
                                  void *ud);
/* True while a backward pass walks t (its hook runs). */
bool nc_tape_busy(const nc_tape *t);

/* ---- rule context ------------------------------------------------------------------------- */

#define NC_AG_MAX_SAVED 8

/* Saves t (retained) with its storage version; returns its slot. */
int nc_ag_save(nc_ag_ctx *ctx, nc_tensor *t);
/* The saved tensor of slot i (borrowed). Fails with NC_ERR_STATE when it was modified in place
 * since it was saved. */
nc_status nc_ag_saved(nc_ag_ctx *ctx, int i, nc_tensor **t);
/* Scalar parameters a rule keeps (dims, eps, ...). */
double *nc_ag_params(nc_ag_ctx *ctx);   /* 16 doubles */
int64_t *nc_ag_iparams(nc_ag_ctx *ctx); /* 16 integers */
/* Input i's shape and whether it needs a gradient (rules skip work for those that don't). */
const nc_tensor *nc_ag_input_value(nc_ag_ctx *ctx, int i);
bool nc_ag_needs_grad(nc_ag_ctx *ctx, int i);
int nc_ag_n_inputs(nc_ag_ctx *ctx);
/* For rules of broadcasting ops: grad summed over the dims that broadcasting added or
 * stretched, so that it has shape (ndim, shape). grad itself (retained) when it already has. */
nc_status nc_ag_reduce_to(nc_tensor *grad, int ndim, const int64_t *shape, nc_tensor **out);

/* Opaque data for rules defined outside C (the Lua binding's ag.Function); free(user) runs
 * when the entry is freed. */
void nc_ag_set_user(nc_ag_ctx *ctx, void *user, void (*free_fn)(void *user));
void *nc_ag_user(nc_ag_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif

/* Temporaries of a backward rule (autograd-internal).
 *
 * A rule is a short chain of ops, and each op's result is a new reference. Releasing each one
 * on every error path would bury the math, so a rule runs its ops through a scope: every result
 * is owned by the scope, the first failure is remembered and turns every later op into a no-op
 * that returns NULL, and ag_end releases everything. ag_keep hands a result out (a new
 * reference) as an input's gradient; the engine releases those itself when the rule fails. */
#ifndef NETCL_AUTOGRAD_SCOPE_H
#define NETCL_AUTOGRAD_SCOPE_H

#include "netcl/autograd.h"
#include "netcl/elementwise.h"
#include "netcl/reduce.h"

#define AG_SCOPE_MAX 64

typedef struct {
  nc_status s;
  int n;
  nc_tensor *t[AG_SCOPE_MAX];
} ag_scope;

#define AG_SCOPE       \
  {                    \
    NC_OK, 0, { NULL } \
  }

/* Operands: a tensor, or a real number. */
#define AG_T(x) nc_operand_tensor(x)
#define AG_F(v) nc_operand_scalar(nc_scalar_float(v))

/* Takes *r (the result of an op that returned s; read only after s is known, as in
 * ag_take(S, nc_op(..., &r), &r)) into the scope. NULL once anything failed. */
nc_tensor *ag_take(ag_scope *S, nc_status s, nc_tensor **r);
/* Whether the scope can still run ops (no failure so far). */
static inline bool ag_ok(const ag_scope *S) { return S->s == NC_OK; }
/* Records a failure (status and message already set) and returns NULL. */
nc_tensor *ag_fail(ag_scope *S, nc_status s);

/* A new reference to t for a gradient slot; NULL once anything failed. */
nc_tensor *ag_keep(ag_scope *S, nc_tensor *t);
/* Releases every temporary; returns the first failure (or NC_OK). */
nc_status ag_end(ag_scope *S);

/* Saved tensor i of the rule's context (borrowed: the context owns it). */
nc_tensor *ag_saved(ag_scope *S, nc_ag_ctx *c, int i);
/* t as float32 when it has a storage dtype (bfloat16, float16), else t itself (NULL stays NULL):
 * rules compute with widened saved values and gradients, so that the gradients of those dtypes
 * are float32 and are rounded nowhere on the way (docs/autograd.md). */
nc_tensor *ag_widen(ag_scope *S, nc_tensor *t);

/* Elementwise ops. */
nc_tensor *ag_un(ag_scope *S, nc_op op, nc_tensor *x);
nc_tensor *ag_bin(ag_scope *S, nc_op op, nc_operand a, nc_operand b);
nc_tensor *ag_mul(ag_scope *S, nc_tensor *a, nc_tensor *b);
nc_tensor *ag_muls(ag_scope *S, nc_tensor *a, double v);
nc_tensor *ag_where(ag_scope *S, nc_tensor *cond, nc_operand a, nc_operand b);

/* Reductions (netcl/reduce.h): op over dims[0..ndims) (0: all), keepdim. args may be NULL. */
nc_tensor *ag_reduce(ag_scope *S, nc_op op, nc_tensor *x, int ndims, const int *dims, bool keepdim,
                     const nc_reduce_args *args);
nc_tensor *ag_sum_keep(ag_scope *S, nc_tensor *x, int ndims, const int *dims);
/* g summed to the shape of like (nc_ag_reduce_to). */
nc_tensor *ag_reduce_to(ag_scope *S, nc_tensor *g, const nc_tensor *like);

/* Zeros shaped (ndim, shape), of t's dtype on t's device. */
nc_tensor *ag_zeros(ag_scope *S, const nc_tensor *t, int ndim, const int64_t *shape);
nc_tensor *ag_zeros_like(ag_scope *S, const nc_tensor *t);

/* Layout: reshape (a view when possible) and a contiguous copy. */
nc_tensor *ag_reshape(ag_scope *S, nc_tensor *x, int ndim, const int64_t *shape);
nc_tensor *ag_contiguous(ag_scope *S, nc_tensor *x);
/* x broadcast (an expanded view) to like's shape. */
nc_tensor *ag_expand(ag_scope *S, nc_tensor *x, const nc_tensor *like);

#endif

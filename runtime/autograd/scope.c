#include "scope.h"
#include "netcl/copy.h"
#include "netcl/creation.h"

nc_tensor *ag_fail(ag_scope *S, nc_status s) {
  if (S->s == NC_OK) S->s = s;
  return NULL;
}

nc_tensor *ag_take(ag_scope *S, nc_status s, nc_tensor **rp) {
  if (s != NC_OK) return ag_fail(S, s);
  nc_tensor *r = *rp;
  if (S->n == AG_SCOPE_MAX) {
    nc_tensor_release(r);
    return ag_fail(S, nc_error(NC_ERR_STATE, "a backward rule used more than %d temporaries", AG_SCOPE_MAX));
  }
  S->t[S->n++] = r;
  return r;
}

nc_tensor *ag_keep(ag_scope *S, nc_tensor *t) { return ag_ok(S) && t ? nc_tensor_retain(t) : NULL; }

nc_status ag_end(ag_scope *S) {
  for (int i = 0; i < S->n; i++) nc_tensor_release(S->t[i]);
  S->n = 0;
  return S->s;
}

nc_tensor *ag_saved(ag_scope *S, nc_ag_ctx *c, int i) {
  if (!ag_ok(S)) return NULL;
  nc_tensor *t;
  nc_status s = nc_ag_saved(c, i, &t);
  return s == NC_OK ? t : ag_fail(S, s);
}

nc_tensor *ag_widen(ag_scope *S, nc_tensor *t) {
  if (!ag_ok(S) || !t || !nc_dtype_is_storage(t->dtype)) return t;
  nc_tensor *r = NULL;
  return ag_take(S, nc_to(t, nc_tensor_device(t), NC_FLOAT32, &r), &r);
}

nc_tensor *ag_un(ag_scope *S, nc_op op, nc_tensor *x) {
  if (!ag_ok(S)) return NULL;
  nc_tensor *r = NULL;
  return ag_take(S, nc_unary(op, x, &r), &r);
}

nc_tensor *ag_bin(ag_scope *S, nc_op op, nc_operand a, nc_operand b) {
  if (!ag_ok(S)) return NULL;
  nc_tensor *r = NULL;
  return ag_take(S, nc_binary(op, a, b, &r), &r);
}

nc_tensor *ag_mul(ag_scope *S, nc_tensor *a, nc_tensor *b) { return ag_bin(S, NC_OP_MUL, AG_T(a), AG_T(b)); }
nc_tensor *ag_muls(ag_scope *S, nc_tensor *a, double v) { return ag_bin(S, NC_OP_MUL, AG_T(a), AG_F(v)); }

nc_tensor *ag_where(ag_scope *S, nc_tensor *cond, nc_operand a, nc_operand b) {
  if (!ag_ok(S)) return NULL;
  nc_tensor *r = NULL;
  return ag_take(S, nc_where(cond, a, b, &r), &r);
}

nc_tensor *ag_zeros(ag_scope *S, const nc_tensor *t, int ndim, const int64_t *shape) {
  if (!ag_ok(S)) return NULL;
  nc_tensor *r = NULL;
  nc_status s = nc_tensor_empty(nc_tensor_device(t), t->dtype, ndim, shape, 0, &r);
  if (s == NC_OK) {
    s = nc_fill(r, 0.0);
    if (s != NC_OK) nc_tensor_release(r);
  }
  return ag_take(S, s, &r);
}

nc_tensor *ag_zeros_like(ag_scope *S, const nc_tensor *t) { return ag_zeros(S, t, t->ndim, t->shape); }

nc_tensor *ag_reshape(ag_scope *S, nc_tensor *x, int ndim, const int64_t *shape) {
  if (!ag_ok(S)) return NULL;
  nc_tensor *r = NULL;
  return ag_take(S, nc_reshape(x, ndim, shape, &r), &r);
}

nc_tensor *ag_contiguous(ag_scope *S, nc_tensor *x) {
  if (!ag_ok(S)) return NULL;
  nc_tensor *r = NULL;
  return ag_take(S, nc_contiguous(x, &r), &r);
}

nc_tensor *ag_expand(ag_scope *S, nc_tensor *x, const nc_tensor *like) {
  if (!ag_ok(S)) return NULL;
  nc_tensor *r = NULL;
  return ag_take(S, nc_tensor_expand(x, like->ndim, like->shape, &r), &r);
}

nc_tensor *ag_reduce(ag_scope *S, nc_op op, nc_tensor *x, int ndims, const int *dims, bool keepdim,
                     const nc_reduce_args *args) {
  if (!ag_ok(S)) return NULL;
  nc_tensor *r = NULL;
  return ag_take(S, nc_reduce(op, x, ndims, dims, keepdim, args, &r), &r);
}

nc_tensor *ag_sum_keep(ag_scope *S, nc_tensor *x, int ndims, const int *dims) {
  return ag_reduce(S, NC_OP_SUM, x, ndims, dims, true, NULL);
}

nc_tensor *ag_reduce_to(ag_scope *S, nc_tensor *g, const nc_tensor *like) {
  if (!ag_ok(S)) return NULL;
  nc_tensor *r = NULL;
  return ag_take(S, nc_ag_reduce_to(g, like->ndim, like->shape, &r), &r);
}

/* Reductions over dims (sum mean prod max min var std norm logsumexp) and cumsum. A rule first
 * views the output's gradient (and the saved output) with the reduced dims kept as size 1, so
 * that plain broadcasting against the input spreads it back over the reduced elements. */
#include <math.h>
#include <string.h>
#include "core/check.h"
#include "netcl/autograd_ops.h"
#include "record.h"
#include "scope.h"

/* iparams: [0] op, [1] ndims, [2..9] dims (0-based; ndims 0: all); params: [0] p, [1] correction.
 * Saved (except for sum and mean): x, then y. */
typedef struct {
  nc_op op;
  int ndims, dims[NC_MAX_DIMS];
  nc_reduce_args args;
} reduce_spec;

static reduce_spec load_spec(nc_ag_ctx *c) {
  const int64_t *ip = nc_ag_iparams(c);
  reduce_spec r = {(nc_op)ip[0], (int)ip[1], {0}, {nc_ag_params(c)[0], nc_ag_params(c)[1]}};
  for (int i = 0; i < r.ndims; i++) r.dims[i] = (int)ip[2 + i];
  return r;
}

/* t (a reduction's output, with or without the reduced dims) viewed with them as size 1. */
static nc_tensor *keepdims(ag_scope *S, nc_tensor *t, const nc_tensor *x, const reduce_spec *r) {
  int64_t shape[NC_MAX_DIMS];
  memcpy(shape, x->shape, sizeof shape);
  if (r->ndims == 0)
    for (int i = 0; i < x->ndim; i++) shape[i] = 1;
  for (int i = 0; i < r->ndims; i++) shape[r->dims[i]] = 1;
  return ag_reshape(S, t, x->ndim, shape);
}

/* Elements reduced into each output element. */
static double reduced_count(const nc_tensor *x, const reduce_spec *r) {
  double n = 1;
  if (r->ndims == 0) return (double)nc_tensor_numel(x);
  for (int i = 0; i < r->ndims; i++) n *= (double)x->shape[r->dims[i]];
  return n;
}

/* g spread evenly over the elements where x equals the extreme y (max, min, inf-norms). */
static nc_tensor *to_extremes(ag_scope *S, nc_tensor *g, nc_tensor *x, nc_tensor *y, const reduce_spec *r) {
  nc_tensor *hit = ag_bin(S, NC_OP_EQ, AG_T(x), AG_T(y));
  nc_tensor *count = ag_sum_keep(S, hit, r->ndims, r->dims);
  return ag_where(S, hit, AG_T(ag_bin(S, NC_OP_DIV, AG_T(g), AG_T(count))), AG_F(0.0));
}

/* 0 where y == 0 (the limit PyTorch uses for std and norms at 0), d elsewhere. */
static nc_tensor *zero_where_zero(ag_scope *S, nc_tensor *y, nc_tensor *d) {
  return ag_where(S, ag_bin(S, NC_OP_EQ, AG_T(y), AG_F(0.0)), AG_F(0.0), AG_T(d));
}

static nc_tensor *norm_grad(ag_scope *S, nc_tensor *g, nc_tensor *x, nc_tensor *y, const reduce_spec *r) {
  double p = r->args.p;
  if (p == 0) return ag_zeros_like(S, x);
  if (p == 1) return ag_mul(S, g, ag_un(S, NC_OP_SIGN, x));
  if (isinf(p)) return ag_mul(S, ag_un(S, NC_OP_SIGN, x), to_extremes(S, g, ag_un(S, NC_OP_ABS, x), y, r));
  if (p == 2) return zero_where_zero(S, y, ag_mul(S, g, ag_bin(S, NC_OP_DIV, AG_T(x), AG_T(y))));
  /* |x|_p = (sum |x|^p)^(1/p) -> sign(x) |x|^(p-1) / y^(p-1) */
  nc_tensor *num =
      ag_mul(S, ag_un(S, NC_OP_SIGN, x), ag_bin(S, NC_OP_POW, AG_T(ag_un(S, NC_OP_ABS, x)), AG_F(p - 1)));
  nc_tensor *den = ag_bin(S, NC_OP_POW, AG_T(y), AG_F(p - 1));
  return zero_where_zero(S, y, ag_mul(S, g, ag_bin(S, NC_OP_DIV, AG_T(num), AG_T(den))));
}

static nc_status reduce_rule(nc_ag_ctx *c, nc_tensor *g_out, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  reduce_spec r = load_spec(c);
  bool linear = r.op == NC_OP_SUM || r.op == NC_OP_MEAN; /* these read neither x nor y */
  /* storage-dtype values and gradients widened: the gradient is float32 */
  nc_tensor *x = linear ? NULL : ag_widen(&S, ag_saved(&S, c, 0));
  nc_tensor *y_out = linear ? NULL : ag_widen(&S, ag_saved(&S, c, 1));
  g_out = ag_widen(&S, g_out);
  const nc_tensor *xs = nc_ag_input_value(c, 0);
  nc_tensor *g = keepdims(&S, g_out, xs, &r), *y = linear ? NULL : keepdims(&S, y_out, xs, &r), *d = NULL;
  switch (r.op) {
    case NC_OP_SUM:
      d = ag_expand(&S, g, xs);
      break;
    case NC_OP_MEAN:
      d = ag_expand(&S, ag_muls(&S, g, 1.0 / reduced_count(xs, &r)), xs);
      break;
    case NC_OP_PROD: {
      /* d/dx_i = prod of the others: y / x_i where x_i != 0; where x_i == 0, the product of the
       * nonzero others when x_i is the only zero, else 0. */
      nc_tensor *zero = ag_bin(&S, NC_OP_EQ, AG_T(x), AG_F(0.0));
      nc_tensor *nonzero_prod =
          ag_reduce(&S, NC_OP_PROD, ag_where(&S, zero, AG_F(1.0), AG_T(x)), r.ndims, r.dims, true, NULL);
      nc_tensor *one_zero = ag_bin(&S, NC_OP_EQ, AG_T(ag_sum_keep(&S, zero, r.ndims, r.dims)),
                                   nc_operand_scalar(nc_scalar_int(1)));
      nc_tensor *at_zero = ag_where(&S, one_zero, AG_T(nonzero_prod), AG_F(0.0));
      nc_tensor *others = ag_where(&S, zero, AG_T(at_zero), AG_T(ag_bin(&S, NC_OP_DIV, AG_T(y), AG_T(x))));
      d = ag_mul(&S, g, others);
      break;
    }
    case NC_OP_MAX:
    case NC_OP_MIN:
      d = to_extremes(&S, g, x, y, &r);
      break;
    case NC_OP_VAR:
    case NC_OP_STD: {
      /* var = sum (x - mean)^2 / (n - c): d var / dx = 2 (x - mean) / (n - c);
       * std = sqrt(var): d std / dx = (x - mean) / ((n - c) std) */
      nc_tensor *centered =
          ag_bin(&S, NC_OP_SUB, AG_T(x), AG_T(ag_reduce(&S, NC_OP_MEAN, x, r.ndims, r.dims, true, NULL)));
      double div = reduced_count(xs, &r) - r.args.correction;
      if (r.op == NC_OP_VAR)
        d = ag_mul(&S, g, ag_muls(&S, centered, 2.0 / div));
      else
        d = zero_where_zero(&S, y,
                            ag_mul(&S, g, ag_bin(&S, NC_OP_DIV, AG_T(centered), AG_T(ag_muls(&S, y, div)))));
      break;
    }
    case NC_OP_NORM:
      d = norm_grad(&S, g, x, y, &r);
      break;
    case NC_OP_LOGSUMEXP:
      d = ag_mul(&S, g, ag_un(&S, NC_OP_EXP, ag_bin(&S, NC_OP_SUB, AG_T(x), AG_T(y))));
      break;
    default:
      ag_fail(&S, nc_error(NC_ERR_STATE, "no gradient for reduction %s", nc_op_get(r.op)->name));
  }
  gi[0] = ag_keep(&S, d);
  return ag_end(&S);
}

nc_status nc_ag_reduce(nc_tape *t, nc_op op, nc_node *x, int ndims, const int *dims, bool keepdim,
                       const nc_reduce_args *args, nc_node **out) {
  const nc_op_info *info = nc_op_get(op);
  if (!info || info->family != NC_FAMILY_REDUCE || !nc_ag_op_known(info->name))
    return nc_error(NC_ERR_ARG, "%s is not a differentiable reduction", info ? info->name : "?");
  nc_reduce_args a = args ? *args : nc_reduce_defaults();
  nc_tensor *y;
  NC_TRY(nc_reduce(op, nc_node_value(x), ndims, dims, keepdim, &a, &y));
  nc_ag_ctx *c;
  NC_TRY(ag_output(t, info->name, reduce_rule, 1, &x, y, out, &c));
  if (c) {
    int64_t *ip = nc_ag_iparams(c);
    ip[0] = op;
    ip[1] = ndims;
    for (int i = 0; i < ndims; i++) ip[2 + i] = dims[i];
    nc_ag_params(c)[0] = a.p;
    nc_ag_params(c)[1] = a.correction;
    if (op != NC_OP_SUM && op != NC_OP_MEAN) {
      nc_ag_save(c, nc_node_value(x));
      nc_ag_save(c, nc_node_value(*out));
    }
  }
  return NC_OK;
}

/* ---- cumsum -------------------------------------------------------------------------------------- */
/* out_i = sum_{j <= i} x_j -> dx_j = sum_{i >= j} g_i = total - (inclusive prefix of g) + g_j */
static nc_status cumsum_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  int dim = (int)nc_ag_iparams(c)[0];
  nc_tensor *prefix = NULL;
  if (ag_ok(&S)) ag_take(&S, nc_cumsum(g, dim, &prefix), &prefix);
  nc_tensor *total = ag_sum_keep(&S, g, 1, &dim);
  nc_tensor *suffix = ag_bin(&S, NC_OP_ADD, AG_T(ag_bin(&S, NC_OP_SUB, AG_T(total), AG_T(prefix))), AG_T(g));
  gi[0] = ag_keep(&S, suffix);
  return ag_end(&S);
}

nc_status nc_ag_cumsum(nc_tape *t, nc_node *x, int dim, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_cumsum(nc_node_value(x), dim, &y));
  nc_ag_ctx *c;
  NC_TRY(ag_output(t, "cumsum", cumsum_rule, 1, &x, y, out, &c));
  if (c) nc_ag_iparams(c)[0] = dim;
  return NC_OK;
}

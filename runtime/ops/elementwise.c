/* Elementwise dispatch: dtype promotion, broadcasting, destinations, then one backend call. */
#include <math.h>
#include <string.h>
#include "core/check.h"
#include "netcl/reduce.h"
#include "support.h"

nc_dtype nc_dtype_with_scalar(nc_dtype d, nc_scalar s) {
  if (s.is_int) return d == NC_BOOL ? NC_INT64 : d;
  return nc_dtype_is_float(d) ? d : NC_FLOAT32;
}

nc_status nc_broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b, int *ndim, int64_t *shape) {
  int n = na > nb ? na : nb;
  int64_t r[NC_MAX_DIMS];
  for (int i = 0; i < n; i++) {
    int64_t x = i < n - na ? 1 : a[i - (n - na)], y = i < n - nb ? 1 : b[i - (n - nb)];
    if (x != y && x != 1 && y != 1) {
      char sa[128], sb[128];
      return nc_error(NC_ERR_SHAPE, "shapes %s and %s cannot be broadcast",
                      nc_shape_str(na, a, sa, sizeof sa), nc_shape_str(nb, b, sb, sizeof sb));
    }
    r[i] = x == 1 ? y : x;
  }
  *ndim = n;
  if (n) memcpy(shape, r, sizeof(int64_t) * (size_t)n);
  return NC_OK;
}

static nc_status not_taken(const nc_op_info *o, nc_dtype d) { return nc_op_check_dtype(o->op, d); }

static nc_dtype operand_dtype(const nc_operand *x) {
  if (x->t) return x->t->dtype;
  return x->s.is_int ? NC_INT64 : NC_FLOAT32;
}

/* The dtype the op computes in: promotion, then the FLOAT rule. */
static nc_status compute_dtype(const nc_op_info *o, const nc_operand *a, const nc_operand *b, nc_dtype *out) {
  nc_dtype d;
  if (!b)
    d = operand_dtype(a);
  else if (a->t && b->t)
    d = nc_dtype_promote(a->t->dtype, b->t->dtype);
  else if (a->t)
    d = nc_dtype_with_scalar(a->t->dtype, b->s);
  else if (b->t)
    d = nc_dtype_with_scalar(b->t->dtype, a->s);
  else
    d = nc_dtype_promote(operand_dtype(a), operand_dtype(b));
  if (o->result == NC_RES_FLOAT && !nc_dtype_is_float(d))
    d = NC_FLOAT32;
  else if (!(o->dtypes & (1u << d)))
    return not_taken(o, d);
  *out = d;
  return NC_OK;
}

nc_status nc_result_dtype(nc_op op, const nc_operand *a, const nc_operand *b, nc_dtype *out) {
  const nc_op_info *o = nc_op_get(op);
  if (!o) return nc_error(NC_ERR_ARG, "unknown op %d", (int)op);
  NC_TRY(compute_dtype(o, a, o->arity >= 2 ? b : NULL, out));
  if (o->result == NC_RES_BOOL) *out = NC_BOOL;
  return NC_OK;
}

/* One elementwise call: operands, the dtype each tensor operand is read in, and the dtype the
 * backend writes. */
typedef struct {
  nc_op op;
  int n;
  nc_operand in[3];
  nc_dtype in_dtype[3];
  nc_dtype out_dtype;
  nc_scalar params[2];
} ew_call;

static nc_status ew_launch(ew_call *c, nc_tensor *target, nc_operand *in) {
  switch (nc_op_get(c->op)->family) {
    case NC_FAMILY_UNARY:
      return nc_bk_unary(c->op, target, in[0].t, c->params);
    case NC_FAMILY_BINARY:
      return nc_bk_binary(c->op, target, &in[0], &in[1]);
    case NC_FAMILY_WHERE:
      return nc_bk_where(c->op, target, in[0].t, &in[1], &in[2]);
    default:
      return nc_error(NC_ERR_ARG, "%s is not an elementwise op", nc_op_get(c->op)->name);
  }
}

static bool has_shape(const nc_tensor *t, int ndim, const int64_t *shape) {
  return t->ndim == ndim && (ndim == 0 || memcmp(t->shape, shape, sizeof(int64_t) * (size_t)ndim) == 0);
}

static nc_status ew_run(ew_call *c, nc_tensor *dst, nc_tensor **out) {
  nc_tensor *ts[4] = {NULL, NULL, NULL, dst};
  nc_device *dev = NULL;
  int ndim = 0;
  int64_t shape[NC_MAX_DIMS];
  for (int i = 0; i < c->n; i++) {
    if (!(ts[i] = c->in[i].t)) continue;
    if (!dev) dev = nc_tensor_device(ts[i]);
    NC_TRY(nc_broadcast_shapes(ndim, shape, ts[i]->ndim, ts[i]->shape, &ndim, shape));
  }
  if (!dev) return nc_error(NC_ERR_ARG, "%s needs at least one tensor operand", nc_op_get(c->op)->name);
  NC_TRY(nc_check_devices(dev, 4, ts));
  if (dst) NC_TRY(nc_check_dst(dst, ndim, shape, c->out_dtype));

  nc_tensor *target = dst;
  if (!dst || dst->dtype != c->out_dtype) NC_TRY(nc_tensor_empty(dev, c->out_dtype, ndim, shape, 0, &target));
  nc_operand in[3];
  nc_tensor *held[3] = {NULL, NULL, NULL};
  nc_status s = NC_OK;
  for (int i = 0; i < c->n && s == NC_OK; i++) {
    in[i] = c->in[i];
    if (!in[i].t) {
      in[i].s = nc_scalar_cast(in[i].s, c->in_dtype[i]);
      continue;
    }
    nc_tensor *ready;
    s = nc_input_for(in[i].t, c->in_dtype[i], target, &ready);
    if (s == NC_OK && has_shape(ready, ndim, shape)) {
      held[i] = ready; /* already the result's shape: no expanded header needed */
      in[i].t = held[i];
    } else if (s == NC_OK) {
      s = nc_tensor_expand(ready, ndim, shape, &held[i]);
      nc_tensor_release(ready);
      in[i].t = held[i];
    }
  }
  if (s == NC_OK && nc_tensor_numel(target) > 0) {
    nc_storage_bump_version(target->storage);
    s = ew_launch(c, target, in);
  }
  if (s == NC_OK && target != dst && dst) s = nc_copy(dst, target);
  for (int i = 0; i < 3; i++) nc_tensor_release(held[i]);
  if (target != dst && (dst || s != NC_OK))
    nc_tensor_release(target);
  else if (!dst)
    *out = target;
  return s;
}

/* ---- unary ---------------------------------------------------------------------------------- */
static nc_status unary_impl(nc_op op, nc_tensor *dst, nc_tensor *x, nc_tensor **out) {
  const nc_op_info *o = nc_op_get(op);
  if (!o || o->family != NC_FAMILY_UNARY || op == NC_OP_CLAMP)
    return nc_error(NC_ERR_ARG, "%s is not a unary op without arguments", o ? o->name : "?");
  ew_call c = {.op = op, .n = 1, .in = {nc_operand_tensor(x)}};
  if (!(o->dtypes & (1u << x->dtype))) return not_taken(o, x->dtype);
  NC_TRY(compute_dtype(o, &c.in[0], NULL, &c.in_dtype[0]));
  c.out_dtype = o->result == NC_RES_BOOL ? NC_BOOL : c.in_dtype[0];
  return ew_run(&c, dst, out);
}

nc_status nc_unary(nc_op op, nc_tensor *x, nc_tensor **out) { return unary_impl(op, NULL, x, out); }
nc_status nc_unary_into(nc_op op, nc_tensor *dst, nc_tensor *x) { return unary_impl(op, dst, x, NULL); }

static nc_status clamp_impl(nc_tensor *dst, nc_tensor *x, const nc_scalar *lo, const nc_scalar *hi,
                            nc_tensor **out) {
  const nc_op_info *o = nc_op_get(NC_OP_CLAMP);
  if (!(o->dtypes & (1u << x->dtype))) return not_taken(o, x->dtype);
  nc_dtype d = x->dtype;
  if (lo) d = nc_dtype_with_scalar(d, *lo);
  if (hi) d = nc_dtype_with_scalar(d, *hi);
  ew_call c = {.op = NC_OP_CLAMP, .n = 1, .in = {nc_operand_tensor(x)}, .in_dtype = {d}, .out_dtype = d};
  if (nc_dtype_is_float(d)) {
    c.params[0] = nc_scalar_float(lo ? (lo->is_int ? (double)lo->i : lo->f) : -INFINITY);
    c.params[1] = nc_scalar_float(hi ? (hi->is_int ? (double)hi->i : hi->f) : INFINITY);
  } else {
    /* Integer bounds are clipped to the dtype first, so that they convert exactly. */
    int64_t tmin, tmax;
    nc_dtype_int_range(d, &tmin, &tmax);
    c.params[0] = nc_scalar_int(lo && lo->i > tmin ? (lo->i < tmax ? lo->i : tmax) : tmin);
    c.params[1] = nc_scalar_int(hi && hi->i < tmax ? (hi->i > tmin ? hi->i : tmin) : tmax);
  }
  return ew_run(&c, dst, out);
}

nc_status nc_clamp(nc_tensor *x, const nc_scalar *lo, const nc_scalar *hi, nc_tensor **out) {
  return clamp_impl(NULL, x, lo, hi, out);
}
nc_status nc_clamp_into(nc_tensor *dst, nc_tensor *x, const nc_scalar *lo, const nc_scalar *hi) {
  return clamp_impl(dst, x, lo, hi, NULL);
}

/* ---- binary ---------------------------------------------------------------------------------- */
/* Integer floor_divide and remainder by zero are errors, as in PyTorch and Lua (the kernels would
 * give 0). A tensor divisor is checked on its device (eq, any), which waits for it once. */
static nc_status check_int_divisor(const nc_op_info *o, nc_operand b) {
  bool zero;
  if (!b.t) {
    zero = b.s.is_int ? b.s.i == 0 : b.s.f == 0;
  } else {
    nc_tensor *eq = NULL, *any = NULL;
    nc_status s = nc_binary(NC_OP_EQ, b, nc_operand_scalar(nc_scalar_int(0)), &eq);
    if (s == NC_OK) s = nc_reduce(NC_OP_ANY, eq, 0, NULL, false, NULL, &any);
    uint8_t v = 0;
    if (s == NC_OK) s = nc_read_values(any, &v, 1);
    nc_tensor_release(eq);
    nc_tensor_release(any);
    NC_TRY(s);
    zero = v != 0;
  }
  return zero ? nc_error(NC_ERR_ARG, "division by zero in integer %s", o->name) : NC_OK;
}

static nc_status binary_impl(nc_op op, nc_tensor *dst, nc_operand a, nc_operand b, nc_tensor **out) {
  const nc_op_info *o = nc_op_get(op);
  if (!o || o->family != NC_FAMILY_BINARY)
    return nc_error(NC_ERR_ARG, "%s is not a binary op", o ? o->name : "?");
  if (!a.t && !b.t) return nc_error(NC_ERR_ARG, "%s needs at least one tensor operand", o->name);
  if (a.t && !(o->dtypes & (1u << a.t->dtype))) return not_taken(o, a.t->dtype);
  if (b.t && !(o->dtypes & (1u << b.t->dtype))) return not_taken(o, b.t->dtype);
  ew_call c = {.op = op, .n = 2, .in = {a, b}};
  nc_dtype d;
  NC_TRY(compute_dtype(o, &a, &b, &d));
  if (op == NC_OP_POW && !nc_dtype_is_float(d) && !b.t && b.s.is_int && b.s.i < 0)
    return nc_error(NC_ERR_ARG, "integers to negative integer powers are not allowed");
  if ((op == NC_OP_FLOOR_DIVIDE || op == NC_OP_REMAINDER) && !nc_dtype_is_float(d))
    NC_TRY(check_int_divisor(o, b));
  c.in_dtype[0] = c.in_dtype[1] = d;
  c.out_dtype = o->result == NC_RES_BOOL ? NC_BOOL : d;
  return ew_run(&c, dst, out);
}

nc_status nc_binary(nc_op op, nc_operand a, nc_operand b, nc_tensor **out) {
  return binary_impl(op, NULL, a, b, out);
}
nc_status nc_binary_into(nc_op op, nc_tensor *dst, nc_operand a, nc_operand b) {
  return binary_impl(op, dst, a, b, NULL);
}

/* ---- where and masked_fill ----------------------------------------------------------------------- */
static nc_status check_bool(const nc_tensor *t, const char *what) {
  if (t->dtype != NC_BOOL)
    return nc_error(NC_ERR_DTYPE, "%s must be a bool tensor, got %s (compare with eq/ne/gt... to make one)",
                    what, nc_dtype_name(t->dtype));
  return NC_OK;
}

static nc_status where_impl(nc_tensor *dst, nc_tensor *cond, nc_operand a, nc_operand b, nc_tensor **out) {
  NC_TRY(check_bool(cond, "the condition"));
  nc_dtype d;
  if (a.t && b.t)
    d = nc_dtype_promote(a.t->dtype, b.t->dtype);
  else if (a.t)
    d = nc_dtype_with_scalar(a.t->dtype, b.s);
  else if (b.t)
    d = nc_dtype_with_scalar(b.t->dtype, a.s);
  else
    d = nc_dtype_promote(operand_dtype(&a), operand_dtype(&b));
  ew_call c = {.op = NC_OP_WHERE,
               .n = 3,
               .in = {nc_operand_tensor(cond), a, b},
               .in_dtype = {NC_BOOL, d, d},
               .out_dtype = d};
  return ew_run(&c, dst, out);
}

nc_status nc_where(nc_tensor *cond, nc_operand a, nc_operand b, nc_tensor **out) {
  return where_impl(NULL, cond, a, b, out);
}
nc_status nc_where_into(nc_tensor *dst, nc_tensor *cond, nc_operand a, nc_operand b) {
  return where_impl(dst, cond, a, b, NULL);
}

static nc_status masked_fill_impl(nc_tensor *dst, nc_tensor *x, nc_tensor *mask, nc_scalar v,
                                  nc_tensor **out) {
  NC_TRY(check_bool(mask, "the mask"));
  int ndim;
  int64_t shape[NC_MAX_DIMS];
  if (nc_broadcast_shapes(x->ndim, x->shape, mask->ndim, mask->shape, &ndim, shape) != NC_OK ||
      ndim != x->ndim || memcmp(shape, x->shape, sizeof(int64_t) * (size_t)ndim) != 0) {
    char a[128], b[128];
    return nc_error(NC_ERR_SHAPE, "a mask of shape %s cannot be broadcast to the tensor's shape %s",
                    nc_shape_str(mask->ndim, mask->shape, a, sizeof a),
                    nc_shape_str(x->ndim, x->shape, b, sizeof b));
  }
  ew_call c = {.op = NC_OP_WHERE,
               .n = 3,
               .in = {nc_operand_tensor(mask), nc_operand_scalar(v), nc_operand_tensor(x)},
               .in_dtype = {NC_BOOL, x->dtype, x->dtype},
               .out_dtype = x->dtype};
  return ew_run(&c, dst, out);
}

nc_status nc_masked_fill(nc_tensor *x, nc_tensor *mask, nc_scalar value, nc_tensor **out) {
  return masked_fill_impl(NULL, x, mask, value, out);
}
nc_status nc_masked_fill_into(nc_tensor *dst, nc_tensor *x, nc_tensor *mask, nc_scalar value) {
  return masked_fill_impl(dst, x, mask, value, NULL);
}

/* Broadcasting binary ops (add sub mul div pow maximum minimum floor_divide remainder), where and
 * masked_fill.
 * Either operand of a binary op may be a number; the rule keeps numbers as parameters and
 * reduces each tensor gradient back to its input's shape. */
#include <math.h>
#include "core/check.h"
#include "netcl/autograd_ops.h"
#include "record.h"
#include "scope.h"

/* One operand of a recorded binary op: whether it is a node, its saved value (when the rule
 * needs it) and the operand the rule computes with (that value, or the number). */
typedef struct {
  bool node;
  nc_tensor *t;
  nc_operand o;
} side;

/* What each op's rule reads besides g. */
static void needs(nc_op op, bool *a, bool *b, bool *y) {
  *a = op == NC_OP_MUL || op == NC_OP_POW || op == NC_OP_MAXIMUM || op == NC_OP_MINIMUM || op == NC_OP_REMAINDER;
  *b = *a || op == NC_OP_DIV || op == NC_OP_REMAINDER;
  *y = op == NC_OP_DIV || op == NC_OP_POW;
}

/* iparams: [0] op, [1] a is a node, [2] b is a node, [3..5] saved slots of a, b, y (-1: none);
 * params: [0] a's number, [1] b's number. */
static void load_sides(ag_scope *S, nc_ag_ctx *c, side *a, side *b, nc_tensor **y) {
  const int64_t *ip = nc_ag_iparams(c);
  const double *p = nc_ag_params(c);
  a->node = ip[1];
  b->node = ip[2];
  a->t = ip[3] >= 0 ? ag_widen(S, ag_saved(S, c, (int)ip[3])) : NULL;
  b->t = ip[4] >= 0 ? ag_widen(S, ag_saved(S, c, (int)ip[4])) : NULL;
  *y = ip[5] >= 0 ? ag_widen(S, ag_saved(S, c, (int)ip[5])) : NULL;
  a->o = a->t ? AG_T(a->t) : AG_F(p[0]);
  b->o = b->t ? AG_T(b->t) : AG_F(p[1]);
}

/* The gradients of op's operands before reduction (NULL where an operand is a number). */
static void grads(ag_scope *S, nc_op op, nc_tensor *g, side a, side b, nc_tensor *y, nc_tensor **ga,
                  nc_tensor **gb) {
  *ga = *gb = NULL;
  switch (op) {
    case NC_OP_ADD:
      if (a.node) *ga = g;
      if (b.node) *gb = g;
      break;
    case NC_OP_SUB:
      if (a.node) *ga = g;
      if (b.node) *gb = ag_un(S, NC_OP_NEG, g);
      break;
    case NC_OP_MUL:
      if (a.node) *ga = ag_bin(S, NC_OP_MUL, AG_T(g), b.o);
      if (b.node) *gb = ag_bin(S, NC_OP_MUL, AG_T(g), a.o);
      break;
    case NC_OP_DIV: { /* y = a / b: dy/da = 1 / b, dy/db = -y / b */
      nc_tensor *g_b = ag_bin(S, NC_OP_DIV, AG_T(g), b.o);
      if (a.node) *ga = g_b;
      if (b.node) *gb = ag_un(S, NC_OP_NEG, ag_mul(S, g_b, y));
      break;
    }
    case NC_OP_POW: /* y = a^b: dy/da = b a^(b-1), dy/db = y log a */
      if (a.node && !b.node) {
        double e = b.o.s.f;
        *ga = e == 0 ? ag_zeros_like(S, g)
                     : ag_mul(S, g, ag_muls(S, ag_bin(S, NC_OP_POW, AG_T(a.t), AG_F(e - 1)), e));
      } else if (a.node) { /* 0 where b == 0, where b a^(b-1) would be 0 * inf at a == 0 */
        nc_tensor *d =
            ag_mul(S, b.t, ag_bin(S, NC_OP_POW, AG_T(a.t), AG_T(ag_bin(S, NC_OP_SUB, b.o, AG_F(1.0)))));
        *ga = ag_where(S, ag_bin(S, NC_OP_EQ, b.o, AG_F(0.0)), AG_F(0.0), AG_T(ag_mul(S, g, d)));
      }
      if (b.node) { /* 0 where a == 0 and b >= 0: the limit, where y log a would be 0 * -inf */
        nc_tensor *log_a = a.node ? ag_un(S, NC_OP_LOG, a.t) : NULL;
        nc_operand la = a.node ? AG_T(log_a) : AG_F(log(a.o.s.f));
        nc_tensor *d = ag_mul(S, g, ag_bin(S, NC_OP_MUL, AG_T(y), la));
        nc_tensor *b_nonneg = ag_bin(S, NC_OP_GE, b.o, AG_F(0.0));
        nc_tensor *undefined = a.node         ? ag_mul(S, ag_bin(S, NC_OP_EQ, a.o, AG_F(0.0)), b_nonneg)
                               : a.o.s.f == 0 ? b_nonneg
                                              : NULL;
        *gb = undefined ? ag_where(S, undefined, AG_F(0.0), AG_T(d)) : d;
      }
      break;
    case NC_OP_MAXIMUM:
    case NC_OP_MINIMUM: { /* the larger (smaller) operand takes g; equal operands split it */
      nc_op wins = op == NC_OP_MAXIMUM ? NC_OP_GT : NC_OP_LT;
      nc_tensor *half = ag_where(S, ag_bin(S, NC_OP_EQ, a.o, b.o), AG_T(ag_muls(S, g, 0.5)), AG_F(0.0));
      if (a.node) *ga = ag_where(S, ag_bin(S, wins, a.o, b.o), AG_T(g), AG_T(half));
      if (b.node) *gb = ag_where(S, ag_bin(S, wins, b.o, a.o), AG_T(g), AG_T(half));
      break;
    }
    case NC_OP_FLOOR_DIVIDE: /* piecewise constant: zero almost everywhere, as in PyTorch */
      if (a.node) *ga = ag_zeros_like(S, g);
      if (b.node) *gb = ag_zeros_like(S, g);
      break;
    case NC_OP_REMAINDER: /* y = a - floor_divide(a, b) b: dy/da = 1, dy/db = -floor_divide(a, b) */
      if (a.node) *ga = g;
      if (b.node) *gb = ag_un(S, NC_OP_NEG, ag_mul(S, g, ag_bin(S, NC_OP_FLOOR_DIVIDE, a.o, b.o)));
      break;
    default:
      ag_fail(S, nc_error(NC_ERR_STATE, "no gradient for binary op %s", nc_op_get(op)->name));
  }
}

static nc_status binary_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  side a, b;
  nc_tensor *y, *ga, *gb;
  load_sides(&S, c, &a, &b, &y);
  grads(&S, (nc_op)nc_ag_iparams(c)[0], ag_widen(&S, g), a, b, y, &ga, &gb);
  int i = 0;
  if (a.node) {
    gi[i] = ag_keep(&S, ag_reduce_to(&S, ga, nc_ag_input_value(c, i)));
    i++;
  }
  if (b.node) gi[i] = ag_keep(&S, ag_reduce_to(&S, gb, nc_ag_input_value(c, i)));
  return ag_end(&S);
}

static nc_operand operand_of(nc_ag_operand x) {
  return x.n ? AG_T(nc_node_value(x.n)) : nc_operand_scalar(x.s);
}

/* The node operands of a and b, in order; returns their count. */
static int node_inputs(nc_ag_operand a, nc_ag_operand b, nc_node **in) {
  int n = 0;
  if (a.n) in[n++] = a.n;
  if (b.n) in[n++] = b.n;
  return n;
}

nc_status nc_ag_binary(nc_tape *t, nc_op op, nc_ag_operand a, nc_ag_operand b, nc_node **out) {
  const nc_op_info *info = nc_op_get(op);
  if (!info || info->family != NC_FAMILY_BINARY || !nc_ag_op_known(info->name))
    return nc_error(NC_ERR_ARG, "%s is not a differentiable binary op", info ? info->name : "?");
  if (!a.n && !b.n) return nc_error(NC_ERR_ARG, "%s needs at least one node operand", info->name);
  nc_tensor *y;
  NC_TRY(nc_binary(op, operand_of(a), operand_of(b), &y));
  nc_node *in[2];
  int n = node_inputs(a, b, in);
  nc_ag_ctx *c;
  NC_TRY(ag_output(t, info->name, binary_rule, n, in, y, out, &c));
  if (c) {
    bool na, nb, ny;
    needs(op, &na, &nb, &ny);
    int64_t *ip = nc_ag_iparams(c);
    ip[0] = op;
    ip[1] = a.n != NULL;
    ip[2] = b.n != NULL;
    ip[3] = na && a.n ? nc_ag_save(c, nc_node_value(a.n)) : -1;
    ip[4] = nb && b.n ? nc_ag_save(c, nc_node_value(b.n)) : -1;
    ip[5] = ny ? nc_ag_save(c, nc_node_value(*out)) : -1;
    nc_ag_params(c)[0] = a.s.f;
    nc_ag_params(c)[1] = b.s.f;
  }
  return NC_OK;
}

/* ---- where, masked_fill ------------------------------------------------------------------------ */
/* iparams: [0] a is a node, [1] b is a node; saved: cond. */
static nc_status where_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  const int64_t *ip = nc_ag_iparams(c);
  nc_tensor *cond = ag_saved(&S, c, 0);
  int i = 0;
  if (ip[0]) {
    gi[i] = ag_keep(&S, ag_reduce_to(&S, ag_where(&S, cond, AG_T(g), AG_F(0.0)), nc_ag_input_value(c, i)));
    i++;
  }
  if (ip[1])
    gi[i] = ag_keep(&S, ag_reduce_to(&S, ag_where(&S, cond, AG_F(0.0), AG_T(g)), nc_ag_input_value(c, i)));
  return ag_end(&S);
}

nc_status nc_ag_where(nc_tape *t, nc_tensor *cond, nc_ag_operand a, nc_ag_operand b, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_where(cond, operand_of(a), operand_of(b), &y));
  nc_node *in[2];
  int n = node_inputs(a, b, in);
  nc_ag_ctx *c;
  NC_TRY(ag_output(t, "where", where_rule, n, in, y, out, &c));
  if (c) {
    nc_ag_save(c, cond);
    nc_ag_iparams(c)[0] = a.n != NULL;
    nc_ag_iparams(c)[1] = b.n != NULL;
  }
  return NC_OK;
}

static nc_status masked_fill_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  nc_tensor *mask = ag_saved(&S, c, 0), *r = NULL;
  if (ag_ok(&S)) ag_take(&S, nc_masked_fill(g, mask, nc_scalar_float(0.0), &r), &r);
  gi[0] = ag_keep(&S, r);
  return ag_end(&S);
}

nc_status nc_ag_masked_fill(nc_tape *t, nc_node *x, nc_tensor *mask, nc_scalar value, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_masked_fill(nc_node_value(x), mask, value, &y));
  nc_ag_ctx *c;
  NC_TRY(ag_output(t, "masked_fill", masked_fill_rule, 1, &x, y, out, &c));
  if (c) nc_ag_save(c, mask);
  return NC_OK;
}

/* Elementwise unary ops, clamp and the activations defined by their op-table rows. Each rule
 * states d out / d x with ops, from the saved input x and/or the saved output y, whichever gives
 * the cheaper and more accurate formula. */
#include <math.h>
#include "core/check.h"
#include "netcl/autograd_ops.h"
#include "netcl/table_ops.h"
#include "record.h"
#include "scope.h"

enum { SAVED_X = 1, SAVED_Y = 2 };

/* What each rule reads; floor, ceil, round and sign read nothing (zero gradient). */
static int saves(nc_op op) {
  switch (op) {
    case NC_OP_NEG:
    case NC_OP_FLOOR:
    case NC_OP_CEIL:
    case NC_OP_ROUND:
    case NC_OP_SIGN:
      return 0;
    case NC_OP_EXP:
    case NC_OP_SQRT:
    case NC_OP_RSQRT:
    case NC_OP_TANH:
    case NC_OP_SIGMOID:
    case NC_OP_RELU:
      return SAVED_Y;
    case NC_OP_GELU:
      return SAVED_X | SAVED_Y;
    default:
      return SAVED_X;
  }
}

/* d out / d x for op, or NULL on failure. */
static nc_tensor *derivative(ag_scope *S, nc_op op, nc_tensor *x, nc_tensor *y) {
  switch (op) {
    case NC_OP_ABS:
      return ag_un(S, NC_OP_SIGN, x);
    case NC_OP_EXP:
      return y;
    case NC_OP_LOG:
      return ag_bin(S, NC_OP_DIV, AG_F(1.0), AG_T(x));
    case NC_OP_LOG1P:
      return ag_bin(S, NC_OP_DIV, AG_F(1.0), AG_T(ag_bin(S, NC_OP_ADD, AG_T(x), AG_F(1.0))));
    case NC_OP_SQRT:
      return ag_bin(S, NC_OP_DIV, AG_F(0.5), AG_T(y));
    case NC_OP_RSQRT: /* x^(-1/2) -> -x^(-3/2) / 2 = -y^3 / 2 */
      return ag_muls(S, ag_bin(S, NC_OP_POW, AG_T(y), AG_F(3.0)), -0.5);
    case NC_OP_SIN:
      return ag_un(S, NC_OP_COS, x);
    case NC_OP_COS:
      return ag_un(S, NC_OP_NEG, ag_un(S, NC_OP_SIN, x));
    case NC_OP_TANH:
      return ag_bin(S, NC_OP_SUB, AG_F(1.0), AG_T(ag_mul(S, y, y)));
    case NC_OP_SIGMOID:
      return ag_mul(S, y, ag_bin(S, NC_OP_SUB, AG_F(1.0), AG_T(y)));
    case NC_OP_GELU: {
      /* x Phi(x) -> Phi(x) + x phi(x). There is no erf op, but the forward already computed
       * y = x Phi(x): Phi = y / x, exact to rounding (Phi(0) = 1/2). */
      nc_tensor *phi_cdf = ag_where(S, ag_bin(S, NC_OP_EQ, AG_T(x), AG_F(0.0)), AG_F(0.5),
                                    AG_T(ag_bin(S, NC_OP_DIV, AG_T(y), AG_T(x))));
      nc_tensor *pdf =
          ag_muls(S, ag_un(S, NC_OP_EXP, ag_muls(S, ag_mul(S, x, x), -0.5)), 0.39894228040143267794);
      return ag_bin(S, NC_OP_ADD, AG_T(phi_cdf), AG_T(ag_mul(S, x, pdf)));
    }
    case NC_OP_GELU_TANH: {
      /* y = x (1 + tanh u) / 2, u = c (x + k x^3):
       * y' = (1 + t) / 2 + x (1 - t^2) c (1 + 3 k x^2) / 2 */
      const double c = 0.79788456080286535588, k = 0.044715;
      nc_tensor *x2 = ag_mul(S, x, x);
      nc_tensor *u = ag_muls(S, ag_mul(S, x, ag_bin(S, NC_OP_ADD, AG_T(ag_muls(S, x2, k)), AG_F(1.0))), c);
      nc_tensor *t = ag_un(S, NC_OP_TANH, u);
      nc_tensor *half1t = ag_muls(S, ag_bin(S, NC_OP_ADD, AG_T(t), AG_F(1.0)), 0.5);
      nc_tensor *sech2 = ag_bin(S, NC_OP_SUB, AG_F(1.0), AG_T(ag_mul(S, t, t)));
      nc_tensor *du = ag_muls(S, ag_bin(S, NC_OP_ADD, AG_T(ag_muls(S, x2, 3 * k)), AG_F(1.0)), 0.5 * c);
      return ag_bin(S, NC_OP_ADD, AG_T(half1t), AG_T(ag_mul(S, ag_mul(S, x, sech2), du)));
    }
    case NC_OP_SILU: { /* x s(x) -> s (1 + x (1 - s)) */
      nc_tensor *s = ag_un(S, NC_OP_SIGMOID, x);
      nc_tensor *one_s = ag_bin(S, NC_OP_SUB, AG_F(1.0), AG_T(s));
      return ag_mul(S, s, ag_bin(S, NC_OP_ADD, AG_T(ag_mul(S, x, one_s)), AG_F(1.0)));
    }
    default:
      return ag_fail(S, nc_error(NC_ERR_STATE, "no derivative for unary op %s", nc_op_get(op)->name));
  }
}

static nc_status unary_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  nc_op op = (nc_op)nc_ag_iparams(c)[0];
  int what = saves(op), slot = 0;
  ag_scope S = AG_SCOPE;
  if (op == NC_OP_NEG) {
    gi[0] = ag_keep(&S, ag_un(&S, NC_OP_NEG, ag_widen(&S, g)));
  } else if (op == NC_OP_RELU) {
    /* 0 where y <= 0 whatever g holds, else g (PyTorch's threshold_backward): one pass of the
     * fused op, which reads y in its own dtype (bfloat16 too) */
    nc_tensor *gw = ag_widen(&S, g), *r = NULL;
    if (ag_ok(&S)) gi[0] = ag_keep(&S, ag_take(&S, nc_relu_backward(gw, ag_saved(&S, c, 0), &r), &r));
  } else if (!what) {
    gi[0] = ag_keep(&S, ag_zeros_like(&S, ag_widen(&S, g)));
  } else {
    nc_tensor *x = what & SAVED_X ? ag_widen(&S, ag_saved(&S, c, slot++)) : NULL;
    nc_tensor *y = what & SAVED_Y ? ag_widen(&S, ag_saved(&S, c, slot++)) : NULL;
    gi[0] = ag_keep(&S, ag_mul(&S, ag_widen(&S, g), derivative(&S, op, x, y)));
  }
  return ag_end(&S);
}

nc_status nc_ag_unary(nc_tape *t, nc_op op, nc_node *x, nc_node **out) {
  const nc_op_info *info = nc_op_get(op);
  if (!info || info->family != NC_FAMILY_UNARY || op == NC_OP_CLAMP || !nc_ag_op_known(info->name))
    return nc_error(NC_ERR_ARG, "%s is not a differentiable unary op", info ? info->name : "?");
  nc_tensor *y;
  NC_TRY(nc_unary(op, nc_node_value(x), &y));
  nc_ag_ctx *c;
  NC_TRY(ag_output(t, info->name, unary_rule, 1, &x, y, out, &c));
  if (c) {
    nc_ag_iparams(c)[0] = op;
    if (saves(op) & SAVED_X) nc_ag_save(c, nc_node_value(x));
    if (saves(op) & SAVED_Y) nc_ag_save(c, nc_node_value(*out));
  }
  return NC_OK;
}

/* ---- clamp ------------------------------------------------------------------------------------ */
static nc_status clamp_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  const int64_t *ip = nc_ag_iparams(c);
  const double *p = nc_ag_params(c);
  nc_tensor *x = ag_saved(&S, c, 0), *inside = NULL;
  if (ip[0]) inside = ag_bin(&S, NC_OP_GE, AG_T(x), AG_F(p[0]));
  if (ip[1]) {
    nc_tensor *below = ag_bin(&S, NC_OP_LE, AG_T(x), AG_F(p[1]));
    inside = inside ? ag_mul(&S, inside, below) : below; /* bool * bool: and */
  }
  gi[0] = ag_keep(&S, ag_where(&S, inside, AG_T(ag_widen(&S, g)), AG_F(0.0)));
  return ag_end(&S);
}

nc_status nc_ag_clamp(nc_tape *t, nc_node *x, const nc_scalar *lo, const nc_scalar *hi, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_clamp(nc_node_value(x), lo, hi, &y));
  nc_ag_ctx *c;
  NC_TRY(ag_output(t, "clamp", clamp_rule, 1, &x, y, out, &c));
  if (c) {
    nc_ag_save(c, nc_node_value(x));
    nc_ag_iparams(c)[0] = lo != NULL;
    nc_ag_iparams(c)[1] = hi != NULL;
    nc_ag_params(c)[0] = lo ? lo->f : 0;
    nc_ag_params(c)[1] = hi ? hi->f : 0;
  }
  return NC_OK;
}

/* ---- activations defined by their op-table rows: elu, softplus, mish, leaky_relu ---------------- */
/* iparams: [0] the op; params: its numbers; saved: x. d out / d x is composed of ops, and follows
 * torch's backward formulas down to their comparisons, so that a nan input gets torch's gradient
 * too (elu: 1, leaky_relu: negative_slope, softplus and mish: nan). */
static nc_status activation_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  ag_scope S = AG_SCOPE;
  const nc_op op = (nc_op)nc_ag_iparams(c)[0];
  const double *p = nc_ag_params(c);
  nc_tensor *x = ag_widen(&S, ag_saved(&S, c, 0)), *d = NULL;
  g = ag_widen(&S, g);
  switch (op) {
    case NC_OP_ELU: /* alpha exp(x) for x <= 0, else 1 */
      d = ag_where(&S, ag_bin(&S, NC_OP_LE, AG_T(x), AG_F(0.0)),
                   AG_T(ag_muls(&S, ag_un(&S, NC_OP_EXP, x), p[0])), AG_F(1.0));
      break;
    case NC_OP_SOFTPLUS: { /* sigmoid(beta x), and 1 where beta x > threshold */
      nc_tensor *bx = ag_muls(&S, x, p[0]);
      d = ag_where(&S, ag_bin(&S, NC_OP_GT, AG_T(bx), AG_F(p[1])), AG_F(1.0),
                   AG_T(ag_un(&S, NC_OP_SIGMOID, bx)));
      break;
    }
    case NC_OP_MISH: { /* x tanh(sp(x)) -> tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2), sp = softplus */
      nc_tensor *sp = NULL, *r;
      if (ag_ok(&S)) sp = ag_take(&S, nc_softplus(x, 1.0, 20.0, &r), &r);
      nc_tensor *t = ag_un(&S, NC_OP_TANH, sp);
      nc_tensor *sech2 = ag_bin(&S, NC_OP_SUB, AG_F(1.0), AG_T(ag_mul(&S, t, t)));
      d = ag_bin(&S, NC_OP_ADD, AG_T(t), AG_T(ag_mul(&S, ag_mul(&S, x, ag_un(&S, NC_OP_SIGMOID, x)), sech2)));
      break;
    }
    case NC_OP_LEAKY_RELU: /* g for x > 0, else g negative_slope: scaling g keeps its precision */
      gi[0] = ag_keep(
          &S, ag_where(&S, ag_bin(&S, NC_OP_GT, AG_T(x), AG_F(0.0)), AG_T(g), AG_T(ag_muls(&S, g, p[0]))));
      return ag_end(&S);
    default:
      ag_fail(&S, nc_error(NC_ERR_STATE, "no derivative for activation %s", nc_op_get(op)->name));
  }
  gi[0] = ag_keep(&S, ag_mul(&S, g, d));
  return ag_end(&S);
}

/* Wraps the activation op's result y of node x (with numbers p[0 .. np)) and records its rule. */
static nc_status record_activation(nc_tape *t, nc_op op, nc_node *x, nc_tensor *y, int np, const double *p,
                                   nc_node **out) {
  nc_ag_ctx *c;
  NC_TRY(ag_output(t, nc_op_get(op)->name, activation_rule, 1, &x, y, out, &c));
  if (c) {
    nc_ag_iparams(c)[0] = op;
    for (int i = 0; i < np; i++) nc_ag_params(c)[i] = p[i];
    nc_ag_save(c, nc_node_value(x));
  }
  return NC_OK;
}

nc_status nc_ag_elu(nc_tape *t, nc_node *x, double alpha, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_elu(nc_node_value(x), alpha, &y));
  return record_activation(t, NC_OP_ELU, x, y, 1, &alpha, out);
}

nc_status nc_ag_softplus(nc_tape *t, nc_node *x, double beta, double threshold, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_softplus(nc_node_value(x), beta, threshold, &y));
  const double p[2] = {beta, threshold};
  return record_activation(t, NC_OP_SOFTPLUS, x, y, 2, p, out);
}

nc_status nc_ag_mish(nc_tape *t, nc_node *x, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_mish(nc_node_value(x), &y));
  return record_activation(t, NC_OP_MISH, x, y, 0, NULL, out);
}

nc_status nc_ag_leaky_relu(nc_tape *t, nc_node *x, double negative_slope, nc_node **out) {
  nc_tensor *y;
  NC_TRY(nc_leaky_relu(nc_node_value(x), negative_slope, &y));
  return record_activation(t, NC_OP_LEAKY_RELU, x, y, 1, &negative_slope, out);
}

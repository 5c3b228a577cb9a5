/* The autograd engine in C (CPU backend): recording, the reverse walk, accumulation over reuse,
 * retain and consumed tapes, nothing recorded without a tape, saved-tensor version checks, rule
 * errors, nc_ag_reduce_to, and the op table's lookup. */
#include <stdlib.h>
#include "check.h"
#include "netcl/netcl.h"

static nc_device *cpu;

static nc_tensor *vec(int n, const double *v) {
  int64_t shape[1] = {n};
  nc_tensor *t;
  CHECK_OK(nc_tensor_empty(cpu, NC_FLOAT64, 1, shape, 0, &t));
  CHECK_OK(nc_tensor_write_host(t, v, sizeof(double) * (size_t)n));
  return t;
}

static nc_node *leaf(int n, const double *v, bool requires_grad) {
  nc_tensor *t = vec(n, v);
  nc_node *x;
  CHECK_OK(nc_node_new(t, requires_grad, &x));
  nc_tensor_release(t);
  return x;
}

/* Element i of t (any shape, float64). */
static double val(nc_tensor *t, int64_t i) {
  int64_t n = nc_tensor_numel(t);
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1)), r;
  CHECK_OK(nc_read_values(t, v, sizeof(double) * (size_t)n));
  r = v[i];
  free(v);
  return r;
}

static nc_node *sum_all(nc_tape *t, nc_node *x) {
  nc_node *s;
  CHECK_OK(nc_ag_reduce(t, NC_OP_SUM, x, 0, NULL, false, NULL, &s));
  return s;
}

static void test_reuse_accumulates(void) {
  const double v[3] = {1, 2, 3};
  nc_node *x = leaf(3, v, true), *sq, *y, *s;
  nc_tape *t;
  CHECK_OK(nc_tape_new(&t));
  CHECK_OK(nc_ag_binary(t, NC_OP_MUL, nc_ag_node(x), nc_ag_node(x), &sq)); /* x used twice */
  CHECK_OK(nc_ag_binary(t, NC_OP_ADD, nc_ag_node(sq), nc_ag_node(x), &y)); /* and a third time */
  s = sum_all(t, y);
  CHECK(nc_tape_size(t) == 3 && !nc_node_is_leaf(s) && !strcmp(nc_node_op(s), "sum"));
  CHECK_OK(nc_tape_backward(t, s, NULL, false));
  CHECK(nc_node_grad(x) && val(nc_node_grad(x), 0) == 3 && val(nc_node_grad(x), 2) == 7); /* 2x + 1 */
  CHECK(nc_tape_size(t) == 0 && nc_tape_consumed(t));
  CHECK_ERR(nc_tape_backward(t, s, NULL, false), NC_ERR_STATE, "backward called twice");
  nc_node_release(sq), nc_node_release(y), nc_node_release(s), nc_node_release(x);
  nc_tape_free(t);
}

static void test_retain(void) {
  const double v[2] = {1, -1};
  nc_node *x = leaf(2, v, true), *e, *s;
  nc_tape *t;
  CHECK_OK(nc_tape_new(&t));
  CHECK_OK(nc_ag_unary(t, NC_OP_EXP, x, &e));
  s = sum_all(t, e);
  CHECK_OK(nc_tape_backward(t, s, NULL, true));
  CHECK_OK(nc_tape_backward(t, s, NULL, false));
  CHECK(fabs(val(nc_node_grad(x), 0) - 2 * exp(1.0)) < 1e-12);
  nc_node_release(e), nc_node_release(s), nc_node_release(x);
  nc_tape_free(t);
}

static void test_nothing_recorded_without_need(void) {
  const double v[2] = {1, 2};
  nc_node *x = leaf(2, v, true), *c = leaf(2, v, false), *y;
  CHECK_OK(nc_ag_unary(NULL, NC_OP_EXP, x, &y)); /* no tape */
  CHECK(!nc_node_requires_grad(y) && nc_node_is_leaf(y));
  nc_node_release(y);
  nc_tape *t;
  CHECK_OK(nc_tape_new(&t));
  CHECK_OK(nc_ag_unary(t, NC_OP_EXP, c, &y)); /* no input needs a gradient */
  CHECK(nc_tape_size(t) == 0 && !nc_node_requires_grad(y));
  CHECK_ERR(nc_tape_backward(t, y, NULL, false), NC_ERR_STATE, "does not require a gradient");
  nc_node_release(y), nc_node_release(c), nc_node_release(x);
  nc_tape_free(t);
}

static void test_saved_tensor_versions(void) {
  const double v[2] = {1, 2}, w[2] = {3, 4};
  nc_node *x = leaf(2, v, false), *p = leaf(2, w, true), *y, *s;
  nc_tape *t;
  CHECK_OK(nc_tape_new(&t));
  CHECK_OK(nc_ag_binary(t, NC_OP_MUL, nc_ag_node(p), nc_ag_node(x), &y)); /* saves x */
  s = sum_all(t, y);
  CHECK_OK(nc_fill(nc_node_value(x), 5)); /* in place, behind the tape's back */
  CHECK_ERR(nc_tape_backward(t, s, NULL, false), NC_ERR_STATE, "modified in place");
  CHECK(strstr(nc_last_error(), "backward of mul") != NULL);
  CHECK(nc_node_grad(p) == NULL);
  nc_node_release(y), nc_node_release(s), nc_node_release(x), nc_node_release(p);
  nc_tape_free(t);
}

static nc_status wrong_shape_rule(nc_ag_ctx *c, nc_tensor *g, nc_tensor **gi) {
  int64_t one = 1;
  return nc_tensor_empty(nc_tensor_device(g), g->dtype, 1, &one, 0, &gi[0]);
}

static void test_rule_errors(void) {
  const double v[3] = {1, 2, 3};
  nc_node *x = leaf(3, v, true), *y;
  nc_tape *t;
  CHECK_OK(nc_tape_new(&t));
  CHECK_OK(nc_node_new(nc_node_value(x), false, &y));
  CHECK_OK(nc_tape_record(t, "broken", wrong_shape_rule, 1, &x, y, NULL));
  CHECK_ERR(nc_tape_backward(t, y, NULL, false), NC_ERR_SHAPE, "non-scalar");
  CHECK_ERR(nc_tape_backward(t, y, nc_node_value(x), true), NC_ERR_STATE,
            "backward of broken produced a gradient of the wrong shape");
  nc_node_release(y), nc_node_release(x);
  nc_tape_free(t);
}

static void test_reduce_to(void) {
  int64_t shape[3] = {2, 1, 3};
  nc_tensor *g, *r;
  CHECK_OK(nc_tensor_empty(cpu, NC_FLOAT64, 3, shape, 0, &g));
  CHECK_OK(nc_arange_fill(g, 1, 1)); /* [[[1,2,3]],[[4,5,6]]] */
  int64_t s1[1] = {3};
  CHECK_OK(nc_ag_reduce_to(g, 1, s1, &r));
  CHECK(r->ndim == 1 && val(r, 0) == 5 && val(r, 2) == 9);
  nc_tensor_release(r);
  int64_t s2[3] = {2, 1, 1};
  CHECK_OK(nc_ag_reduce_to(g, 3, s2, &r));
  CHECK(r->ndim == 3 && val(r, 0) == 6 && val(r, 1) == 15);
  nc_tensor_release(r);
  CHECK_OK(nc_ag_reduce_to(g, 0, NULL, &r));
  CHECK(r->ndim == 0 && val(r, 0) == 21);
  nc_tensor_release(r);
  CHECK_OK(nc_ag_reduce_to(g, 3, shape, &r));
  CHECK(r == g);
  nc_tensor_release(r);
  int64_t bad[1] = {2};
  CHECK_ERR(nc_ag_reduce_to(g, 1, bad, &r), NC_ERR_SHAPE, "cannot be reduced");
  nc_tensor_release(g);
}

static void test_op_table(void) {
  CHECK(nc_ag_op_count > 50);
  CHECK(nc_ag_op_known("matmul") && nc_ag_op_known("cross_entropy") && !nc_ag_op_known("argmax"));
  nc_node *x, *y;
  const double v[1] = {1};
  x = leaf(1, v, true);
  CHECK_ERR(nc_ag_unary(NULL, NC_OP_ISNAN, x, &y), NC_ERR_ARG, "not a differentiable unary op");
  nc_node_release(x);
}

int main(void) {
  CHECK_OK(nc_init());
  CHECK_OK(nc_device_find("cpu", &cpu));
  test_reuse_accumulates();
  test_retain();
  test_nothing_recorded_without_need();
  test_saved_tensor_versions();
  test_rule_errors();
  test_reduce_to();
  test_op_table();
  CHECK_DONE();
}

/* The op layer's C API: the op table, promotion and broadcasting rules, error statuses and
 * messages, and a computation per family on every device (the CPU backend and each OpenCL
 * device); values in depth are the Lua suites' and the parity harness's job. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "backend/dispatch.h"
#include "core/device_impl.h"
#include "netcl/netcl.h"

static int failures, checks;

#define EXPECT(cond)                                                      \
  do {                                                                    \
    checks++;                                                             \
    if (!(cond)) {                                                        \
      failures++;                                                         \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
    }                                                                     \
  } while (0)

#define EXPECT_OK(expr)                                                               \
  do {                                                                                \
    nc_status s_ = (expr);                                                            \
    checks++;                                                                         \
    if (s_ != NC_OK) {                                                                \
      failures++;                                                                     \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, nc_last_error()); \
    }                                                                                 \
  } while (0)

/* expr fails with status code and a message containing needle */
#define EXPECT_ERR(expr, code, needle)                                                                \
  do {                                                                                                \
    nc_status s_ = (expr);                                                                            \
    checks++;                                                                                         \
    if (s_ != (code) || !strstr(nc_last_error(), needle)) {                                           \
      failures++;                                                                                     \
      fprintf(stderr, "%s:%d: %s: expected %s '%s', got %s '%s'\n", __FILE__, __LINE__, #expr, #code, \
              needle, nc_status_name(s_), nc_last_error());                                           \
    }                                                                                                 \
  } while (0)

static nc_tensor *vec(nc_device *dev, nc_dtype dt, int n, const double *v) {
  int64_t shape = n;
  nc_tensor *t, *c;
  nc_tensor_empty(nc_device_get(0), NC_FLOAT64, 1, &shape, 0, &t);
  nc_tensor_write_host(t, v, sizeof(double) * (size_t)n);
  EXPECT_OK(nc_to(t, dev, dt, &c));
  nc_tensor_release(t);
  return c;
}

static void values(nc_tensor *t, double *out, int n) {
  nc_tensor *d;
  EXPECT_OK(nc_to(t, nc_device_get(0), NC_FLOAT64, &d));
  EXPECT(nc_tensor_numel(d) == n);
  nc_read_values(d, out, sizeof(double) * (size_t)n);
  nc_tensor_release(d);
}

static void test_optable(void) {
  for (int i = 0; i < NC_OP_COUNT; i++) {
    const nc_op_info *o = nc_op_get((nc_op)i);
    EXPECT(o && o->op == (nc_op)i && o->name && o->kernel && o->cpu);
    EXPECT(nc_op_find(o->name) == o); /* names are unique */
    EXPECT(o->family < NC_FAMILY_COUNT && strcmp(nc_op_family_name(o->family), "unknown") != 0);
  }
  EXPECT(nc_op_get(NC_OP_COUNT) == NULL && nc_op_find("no_such_op") == NULL);
  EXPECT(nc_op_accepts(NC_OP_ADD, NC_BOOL) && !nc_op_accepts(NC_OP_SUB, NC_BOOL));
  /* every backend implements every op of the table */
  for (int i = 0; i < nc_device_count(); i++)
    for (int op = 0; op < NC_OP_COUNT; op++) EXPECT(nc_device_supports_op(nc_device_get(i), (nc_op)op));
  EXPECT(!nc_device_supports_op(nc_device_get(0), NC_OP_COUNT));
}

/* A backend that lacks an op answers NC_ERR_UNSUPPORTED naming the op and the backend, through
 * the checked wrappers, instead of calling through a missing entry. */
static void test_unsupported_op(void) {
  nc_device fake = *nc_device_get(0);
  static nc_dispatch partial = {.name = "partial"};
  partial.fn[NC_OP_ADD] = nc_device_dispatch(nc_device_get(0))->fn[NC_OP_ADD];
  fake.dispatch = &partial;
  EXPECT(!nc_device_supports_op(&fake, NC_OP_RELU) && nc_device_supports_op(&fake, NC_OP_ADD));
  EXPECT(nc_device_supports_op(&fake, NC_OP_CAT)); /* composed of other ops */
  float host[4] = {-1, 2, -3, 4};
  nc_storage *st;
  EXPECT_OK(nc_storage_wrap_host_on(&fake, host, sizeof host, NULL, NULL, &st));
  int64_t shape = 4, stride = 1;
  nc_tensor *t;
  EXPECT_OK(nc_tensor_from_storage(st, NC_FLOAT32, 1, &shape, &stride, 0, &t));
  nc_storage_release(st);
  EXPECT(nc_bk_unary(NC_OP_RELU, t, t, NULL) == NC_ERR_UNSUPPORTED);
  EXPECT(strstr(nc_last_error(), "relu") && strstr(nc_last_error(), "partial"));
  nc_operand a = nc_operand_tensor(t), b = nc_operand_scalar(nc_scalar_int(1));
  EXPECT_OK(nc_bk_binary(NC_OP_ADD, t, &a, &b));
  EXPECT(host[0] == 0 && host[3] == 5);
  nc_tensor_release(t);
}

static void test_promotion(void) {
  nc_dtype d;
  nc_device *cpu = nc_device_get(0);
  int64_t one = 1;
  nc_tensor *i32, *u8, *b, *f32;
  nc_tensor_empty(cpu, NC_INT32, 1, &one, 0, &i32);
  nc_tensor_empty(cpu, NC_UINT8, 1, &one, 0, &u8);
  nc_tensor_empty(cpu, NC_BOOL, 1, &one, 0, &b);
  nc_tensor_empty(cpu, NC_FLOAT32, 1, &one, 0, &f32);
  nc_operand I = nc_operand_tensor(i32), U = nc_operand_tensor(u8), B = nc_operand_tensor(b),
             F = nc_operand_tensor(f32);
  nc_operand si = nc_operand_scalar(nc_scalar_int(3)), sf = nc_operand_scalar(nc_scalar_float(0.5));
  EXPECT_OK(nc_result_dtype(NC_OP_ADD, &I, &U, &d));
  EXPECT(d == NC_INT32);
  EXPECT_OK(nc_result_dtype(NC_OP_ADD, &I, &si, &d));
  EXPECT(d == NC_INT32);
  EXPECT_OK(nc_result_dtype(NC_OP_MUL, &si, &U, &d));
  EXPECT(d == NC_UINT8);
  EXPECT_OK(nc_result_dtype(NC_OP_ADD, &I, &sf, &d));
  EXPECT(d == NC_FLOAT32);
  EXPECT_OK(nc_result_dtype(NC_OP_ADD, &B, &si, &d));
  EXPECT(d == NC_INT64);
  EXPECT_OK(nc_result_dtype(NC_OP_ADD, &B, &B, &d));
  EXPECT(d == NC_BOOL);
  EXPECT_OK(nc_result_dtype(NC_OP_DIV, &I, &I, &d));
  EXPECT(d == NC_FLOAT32);
  EXPECT_OK(nc_result_dtype(NC_OP_LT, &I, &F, &d));
  EXPECT(d == NC_BOOL);
  EXPECT_OK(nc_result_dtype(NC_OP_EXP, &U, NULL, &d));
  EXPECT(d == NC_FLOAT32);
  EXPECT_OK(nc_result_dtype(NC_OP_ISNAN, &F, NULL, &d));
  EXPECT(d == NC_BOOL);
  EXPECT_ERR(nc_result_dtype(NC_OP_SUB, &B, &B, &d), NC_ERR_DTYPE, "sub does not take bool tensors");
  EXPECT(nc_dtype_promote(NC_UINT8, NC_BOOL) == NC_UINT8 &&
         nc_dtype_promote(NC_INT64, NC_FLOAT32) == NC_FLOAT32);
  nc_tensor_release(i32), nc_tensor_release(u8), nc_tensor_release(b), nc_tensor_release(f32);
}

static void test_broadcast(void) {
  int nd;
  int64_t out[NC_MAX_DIMS];
  const int64_t a[] = {2, 1, 3}, b[] = {4, 1}, c[] = {4};
  EXPECT_OK(nc_broadcast_shapes(3, a, 2, b, &nd, out));
  EXPECT(nd == 3 && out[0] == 2 && out[1] == 4 && out[2] == 3);
  const int64_t x[] = {2, 3};
  EXPECT_ERR(nc_broadcast_shapes(2, x, 1, c, &nd, out), NC_ERR_SHAPE,
             "shapes [2,3] and [4] cannot be broadcast");
}

/* One computation per family on dev. */
static void test_device(nc_device *dev) {
  const double av[] = {1, -2, 3, 4}, bv[] = {10, 20, 30, 40};
  nc_tensor *a = vec(dev, NC_FLOAT32, 4, av), *b = vec(dev, NC_FLOAT32, 4, bv), *r = NULL, *i = NULL;
  double got[8];
  const int64_t shape22[] = {2, 2};
  nc_tensor *m;
  EXPECT_OK(nc_tensor_view(a, 2, shape22, &m));

  EXPECT_OK(nc_binary(NC_OP_SUB, nc_operand_scalar(nc_scalar_int(1)), nc_operand_tensor(b), &r));
  values(r, got, 4);
  EXPECT(got[0] == -9 && got[3] == -39);
  nc_tensor_release(r);

  EXPECT_OK(nc_unary(NC_OP_RELU, a, &r));
  values(r, got, 4);
  EXPECT(got[1] == 0 && got[2] == 3);
  nc_tensor_release(r);

  const nc_scalar lo = nc_scalar_float(0.5);
  EXPECT_OK(nc_clamp(a, &lo, NULL, &r));
  values(r, got, 4);
  EXPECT(got[0] == 1 && got[1] == 0.5f);
  nc_tensor_release(r);

  int dim = 1;
  EXPECT_OK(nc_reduce(NC_OP_SUM, m, 1, &dim, false, NULL, &r)); /* [[1,-2],[3,4]] -> [-1, 7] */
  values(r, got, 2);
  EXPECT(got[0] == -1 && got[1] == 7);
  nc_tensor_release(r);
  EXPECT_OK(nc_reduce_indexed(NC_OP_MAX, m, 0, true, &r, &i)); /* [[3, 4]], [[1, 1]] */
  values(r, got, 2);
  EXPECT(got[0] == 3 && got[1] == 4 && r->ndim == 2);
  values(i, got, 2);
  EXPECT(got[0] == 1 && got[1] == 1 && i->dtype == NC_INT64);
  nc_tensor_release(r), nc_tensor_release(i);

  EXPECT_OK(nc_softmax(NC_OP_LOG_SOFTMAX, m, 1, &r));
  values(r, got, 4);
  EXPECT(fabs(got[0] + log(1 + exp(-3.0))) < 1e-6 &&
         fabs(got[1] + log(1 + exp(3.0))) < 1e-5); /* row [1, -2] */
  nc_tensor_release(r);

  EXPECT_OK(nc_sort(a, 0, true, &r, &i));
  values(i, got, 4);
  EXPECT(got[0] == 3 && got[1] == 2 && got[2] == 0 && got[3] == 1);
  nc_tensor_release(r), nc_tensor_release(i);

  const double iv[] = {2, 0};
  nc_tensor *idx = vec(dev, NC_INT64, 2, iv);
  EXPECT_OK(nc_index_select(a, 0, idx, &r));
  values(r, got, 2);
  EXPECT(got[0] == 3 && got[1] == 1);
  nc_tensor_release(r);

  nc_rng g;
  nc_rng_seed(&g, 9);
  int64_t n = 100;
  EXPECT_OK(nc_tensor_empty(dev, NC_INT64, 1, &n, 0, &r));
  EXPECT_OK(nc_randperm(r, &g));
  EXPECT(g.offset == 100); /* one counter per element */
  nc_tensor *sum;
  EXPECT_OK(nc_reduce(NC_OP_SUM, r, 0, NULL, false, NULL, &sum));
  values(sum, got, 1);
  EXPECT(got[0] == 4950);
  nc_tensor_release(sum), nc_tensor_release(r);

  /* errors, with the status codes C callers branch on */
  const double fv[] = {1};
  nc_tensor *fidx = vec(dev, NC_FLOAT32, 1, fv), *bad = vec(dev, NC_INT64, 2, (const double[]){0, 4});
  EXPECT_ERR(nc_index_select(a, 0, fidx, &r), NC_ERR_DTYPE, "must be int64 (or int32), got float32");
  EXPECT_ERR(nc_index_select(a, 0, bad, &r), NC_ERR_INDEX, "index 4 is out of range for dim 1 of size 4");
  int bad_dim = 2;
  EXPECT_ERR(nc_reduce(NC_OP_SUM, m, 1, &bad_dim, false, NULL, &r), NC_ERR_INDEX, "dim 3 is out of range");
  EXPECT_ERR(nc_binary(NC_OP_ADD, nc_operand_tensor(m), nc_operand_tensor(b), &r), NC_ERR_SHAPE,
             "shapes [2,2] and [4] cannot be broadcast");
  nc_tensor_release(fidx), nc_tensor_release(bad), nc_tensor_release(idx);
  nc_tensor_release(m), nc_tensor_release(a), nc_tensor_release(b);
}

int main(void) {
  if (nc_init() != NC_OK) {
    fprintf(stderr, "nc_init: %s\n", nc_last_error());
    return 1;
  }
  test_optable();
  test_unsupported_op();
  test_promotion();
  test_broadcast();
  for (int i = 0; i < nc_device_count(); i++) test_device(nc_device_get(i));
  printf("%d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}

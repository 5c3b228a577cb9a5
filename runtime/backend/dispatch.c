/* Dispatch tables and the checked wrappers: the only way the ops layer reaches a backend. */
#include "dispatch.h"
#include "core/check.h"
#include "core/device_impl.h"

#define NC_ENTRY_OF_ENTRY(e) NC_ENTRY_##e,
#define NC_ENTRY_OF_KERNEL(n, sig) NC_ENTRY_KERNEL,
#define NC_OP_ENTRY_(id, name, family, arity, dtypes, result, entry, grad, kernel, cpu) \
  NC_PP_CAT(NC_ENTRY_OF_, entry)
static const nc_entry entries[NC_OP_COUNT] = {NC_OPS(NC_OP_ENTRY_)};
#undef NC_OP_ENTRY_

nc_entry nc_op_entry(nc_op op) { return (unsigned)op < NC_OP_COUNT ? entries[op] : NC_ENTRY_NONE; }

void nc_dispatch_entry(nc_dispatch *d, nc_entry e, nc_backend_fn fn) {
  for (int i = 0; i < NC_OP_COUNT; i++)
    if (entries[i] == e) d->fn[i] = fn;
}

void nc_dispatch_kernel(nc_dispatch *d, const char *name, nc_backend_fn fn) {
  const nc_op_info *o = nc_op_find(name);
  NC_ASSERT(o && entries[o->op] == NC_ENTRY_KERNEL);
  if (o) d->fn[o->op] = fn;
}

const nc_dispatch *nc_device_dispatch(const nc_device *dev) { return dev->dispatch; }

bool nc_device_supports_op(const nc_device *dev, nc_op op) {
  if (!dev || (unsigned)op >= NC_OP_COUNT) return false;
  /* A composed op is supported when its parts are; they report their own errors. */
  return entries[op] == NC_ENTRY_NONE || dev->dispatch->fn[op] != NULL;
}

nc_status nc_dispatch_lookup(const nc_device *dev, nc_op op, nc_backend_fn *out) {
  const nc_op_info *o = nc_op_get(op);
  NC_ASSERT(o && entries[op] != NC_ENTRY_NONE);
  *out = dev->dispatch->fn[op];
  if (!*out)
    return nc_error(NC_ERR_UNSUPPORTED, "%s is not supported by the %s backend (device %s)", o->name,
                    dev->dispatch->name, dev->info.spec);
  return NC_OK;
}

/* The storage dtypes (bfloat16, float16) reach a backend only through the ops whose row takes
 * them (fill, copy, the layout copies, the matrix products, the elementwise families and batch
 * norm): one check here covers every op, those composed of others included, whatever checks the
 * op made itself. The ops that widen them in the op layer (NC_DT_WIDEN) hand their backends float32, so
 * this check refuses a storage tensor to them too. */
static nc_status storage_guard(nc_op op, int n, const nc_tensor *const *ts) {
  const nc_op_info *o = nc_op_get(op);
  for (int i = 0; i < n; i++)
    if (ts[i] && nc_dtype_is_storage(ts[i]->dtype) && !(o && (o->dtypes & (1u << ts[i]->dtype))))
      return nc_storage_dtype_error(ts[i]->dtype);
  return NC_OK;
}
#define GUARD(op, ...)                                                         \
  do {                                                                         \
    const nc_tensor *const g_[] = {__VA_ARGS__};                               \
    NC_TRY(storage_guard((op), (int)(sizeof g_ / sizeof g_[0]), g_));          \
  } while (0)
#define OPT(x) ((x) ? (x)->t : NULL)

/* Looks up op (whose row must name entry E) on t's device and calls it as type with the
 * arguments that follow. */
#define CALL(t, op, E, type, ...)                                  \
  do {                                                             \
    nc_backend_fn fn_;                                             \
    NC_ASSERT(nc_op_entry(op) == NC_ENTRY_##E);                    \
    NC_TRY(nc_dispatch_lookup(nc_tensor_device(t), (op), &fn_));   \
    return ((type)fn_)(__VA_ARGS__);                               \
  } while (0)

nc_status nc_bk_unary(nc_op op, nc_tensor *out, const nc_tensor *x, const nc_scalar *p) {
  GUARD(op, out, x);
  CALL(out, op, UNARY, nc_unary_fn, op, out, x, p);
}
nc_status nc_bk_binary(nc_op op, nc_tensor *out, const nc_operand *a, const nc_operand *b) {
  GUARD(op, out, OPT(a), OPT(b));
  CALL(out, op, BINARY, nc_binary_fn, op, out, a, b);
}
nc_status nc_bk_where(nc_op op, nc_tensor *out, const nc_tensor *cond, const nc_operand *a, const nc_operand *b) {
  GUARD(op, out, cond, OPT(a), OPT(b));
  CALL(out, op, WHERE, nc_where_fn, out, cond, a, b);
}
nc_status nc_bk_reduce(nc_op op, nc_tensor *out, nc_tensor *idx, const nc_tensor *x, int nred,
                       const nc_reduce_args *args) {
  GUARD(op, out, x);
  CALL(out, op, REDUCE, nc_reduce_fn, op, out, idx, x, nred, args);
}
nc_status nc_bk_scan(nc_op op, nc_tensor *out, const nc_tensor *x) {
  GUARD(op, out, x); CALL(out, op, SCAN, nc_scan_fn, op, out, x); }
nc_status nc_bk_softmax(nc_op op, nc_tensor *out, const nc_tensor *x) {
  GUARD(op, out, x); CALL(out, op, SOFTMAX, nc_softmax_fn, op, out, x); }
nc_status nc_bk_index(nc_op op, nc_tensor *out, const nc_tensor *x, const nc_tensor *idx, int dim) {
  GUARD(op, out, x, idx);
  CALL(out, op, INDEX, nc_index_fn, op, out, x, idx, dim);
}
nc_status nc_bk_sort(nc_op op, nc_tensor *indices, const nc_tensor *x, bool descending) {
  GUARD(op, x);
  CALL(indices, op, SORT, nc_sort_fn, indices, x, descending);
}
nc_status nc_bk_sample(nc_op op, nc_tensor *out, const nc_tensor *p, uint64_t seed, uint64_t offset, int64_t lo,
                       uint64_t range) {
  GUARD(op, out, p);
  CALL(out, op, SAMPLE, nc_sample_fn, op, out, p, seed, offset, lo, range);
}
nc_status nc_bk_random(nc_op op, nc_tensor *t, uint64_t seed, uint64_t offset, double a, double b) {
  GUARD(op, t);
  int kind = op == NC_OP_NORMAL ? NC_RANDOM_NORMAL : NC_RANDOM_UNIFORM;
  CALL(t, op, RANDOM, nc_random_fn, t, kind, seed, offset, a, b);
}
nc_status nc_bk_fill(nc_tensor *t, double v) {
  GUARD(NC_OP_FILL, t); CALL(t, NC_OP_FILL, FILL, nc_fill_fn, t, v); }
nc_status nc_bk_copy(nc_tensor *dst, const nc_tensor *src) {
  GUARD(NC_OP_COPY, dst, src); CALL(dst, NC_OP_COPY, COPY, nc_copy_fn, dst, src); }
nc_status nc_bk_arange(nc_tensor *t, double start, double step) {
  GUARD(NC_OP_ARANGE, t);
  CALL(t, NC_OP_ARANGE, ARANGE, nc_arange_fn, t, start, step);
}
nc_status nc_bk_gemm(nc_op op, const nc_gemm_desc *g) {
  GUARD(op, g->a, g->b, g->bias, g->c); CALL(g->c, op, GEMM, nc_gemm_fn, g); }
nc_status nc_bk_conv2d(const nc_conv2d_desc *p, const nc_tensor *x, const nc_tensor *w, const nc_tensor *bias,
                       nc_tensor *y) {
  GUARD(NC_OP_CONV2D, x, w, bias, y);
  CALL(y, NC_OP_CONV2D, CONV2D, nc_conv2d_fn, p, x, w, bias, y);
}
nc_status nc_bk_conv2d_bwd_input(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *w, nc_tensor *dx) {
  GUARD(NC_OP_CONV2D_BWD_INPUT, dy, w, dx);
  CALL(dx, NC_OP_CONV2D_BWD_INPUT, CONV2D_BWD_INPUT, nc_conv2d_bwd_input_fn, p, dy, w, dx);
}
bool nc_bk_conv2d_storage(nc_device *dev, nc_op op, const nc_conv2d_desc *p, nc_dtype dt) {
  return dev && dev->dispatch->conv2d_storage && dev->dispatch->conv2d_storage(dev, op, p, dt);
}
nc_status nc_bk_conv2d_bwd_weight(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *x, nc_tensor *dw) {
  GUARD(NC_OP_CONV2D_BWD_WEIGHT, dy, x, dw);
  CALL(dw, NC_OP_CONV2D_BWD_WEIGHT, CONV2D_BWD_WEIGHT, nc_conv2d_bwd_weight_fn, p, dy, x, dw);
}

static nc_op pool_op(int kind, bool backward) {
  if (kind == NC_POOL_MAX) return backward ? NC_OP_MAX_POOL2D_BWD : NC_OP_MAX_POOL2D;
  if (kind == NC_POOL_AVG) return backward ? NC_OP_AVG_POOL2D_BWD : NC_OP_AVG_POOL2D;
  return backward ? NC_OP_ADAPTIVE_AVG_POOL2D_BWD : NC_OP_ADAPTIVE_AVG_POOL2D;
}

nc_status nc_bk_pool2d(const nc_pool2d_desc *p, const nc_tensor *x, nc_tensor *y, nc_tensor *indices) {
  GUARD(pool_op(p->kind, false), x, y);
  CALL(y, pool_op(p->kind, false), POOL2D, nc_pool2d_fn, p, x, y, indices);
}
nc_status nc_bk_pool2d_bwd(const nc_pool2d_desc *p, const nc_tensor *dy, const nc_tensor *indices, nc_tensor *dx) {
  GUARD(pool_op(p->kind, true), dy, dx);
  CALL(dx, pool_op(p->kind, true), POOL2D_BWD, nc_pool2d_bwd_fn, p, dy, indices, dx);
}
nc_status nc_bk_batch_norm(const nc_tensor *x, const nc_tensor *weight, const nc_tensor *bias,
                           nc_tensor *running_mean, nc_tensor *running_var, bool training, double momentum,
                           double eps, nc_tensor *y, nc_tensor *save_mean, nc_tensor *save_invstd) {
  GUARD(NC_OP_BATCH_NORM, x, weight, bias, running_mean, running_var, y);
  CALL(y, NC_OP_BATCH_NORM, BATCH_NORM, nc_batch_norm_fn, x, weight, bias, running_mean, running_var, training, momentum, eps,
       y, save_mean, save_invstd);
}
nc_status nc_bk_batch_norm_bwd(const nc_tensor *dy, const nc_tensor *x, const nc_tensor *weight,
                               const nc_tensor *mean, const nc_tensor *invstd, bool training, nc_tensor *dx,
                               nc_tensor *dweight, nc_tensor *dbias) {
  GUARD(NC_OP_BATCH_NORM_BWD, dy, x, weight, dx, dweight, dbias);
  CALL(dy, NC_OP_BATCH_NORM_BWD, BATCH_NORM_BWD, nc_batch_norm_bwd_fn, dy, x, weight, mean, invstd, training, dx, dweight, dbias);
}
nc_status nc_bk_row_norm(nc_op op, const nc_tensor *x, const nc_tensor *weight, const nc_tensor *bias, double eps,
                         nc_tensor *y, nc_tensor *mean, nc_tensor *rstd) {
  GUARD(op, x, weight, bias, y);
  CALL(y, op, ROW_NORM, nc_row_norm_fn, op == NC_OP_RMS_NORM, x, weight, bias, eps, y, mean, rstd);
}
nc_status nc_bk_row_norm_bwd(nc_op op, const nc_tensor *dy, const nc_tensor *x, const nc_tensor *weight,
                             const nc_tensor *mean, const nc_tensor *rstd, nc_tensor *dx, nc_tensor *dweight,
                             nc_tensor *dbias) {
  GUARD(op, dy, x, weight, dx, dweight, dbias);
  CALL(dy, op, ROW_NORM_BWD, nc_row_norm_bwd_fn, op == NC_OP_RMS_NORM_BWD, dy, x, weight, mean, rstd, dx, dweight, dbias);
}
nc_status nc_bk_embedding(const nc_tensor *weight, const nc_tensor *idx, nc_tensor *out, nc_index_verdict *bad) {
  GUARD(NC_OP_EMBEDDING, weight, out);
  CALL(out, NC_OP_EMBEDDING, EMBEDDING, nc_embedding_fn, weight, idx, out, bad);
}
nc_status nc_bk_embedding_bwd(const nc_tensor *dout, const nc_tensor *idx, int64_t padding_idx, nc_tensor *dweight) {
  GUARD(NC_OP_EMBEDDING_BWD, dout, dweight);
  CALL(dweight, NC_OP_EMBEDDING_BWD, EMBEDDING_BWD, nc_embedding_bwd_fn, dout, idx, padding_idx, dweight);
}
nc_status nc_bk_cross_entropy(const nc_tensor *logits, const nc_tensor *targets, int64_t ignore_index,
                              double label_smoothing, int reduction, nc_tensor *loss, nc_tensor *lse, nc_index_verdict *bad) {
  GUARD(NC_OP_CROSS_ENTROPY, logits, targets, loss);
  CALL(loss, NC_OP_CROSS_ENTROPY, CROSS_ENTROPY, nc_cross_entropy_fn, logits, targets, ignore_index, label_smoothing, reduction,
       loss, lse, bad);
}
nc_status nc_bk_cross_entropy_bwd(const nc_tensor *dloss, const nc_tensor *logits, const nc_tensor *targets,
                                  const nc_tensor *lse, int64_t ignore_index, double label_smoothing, int reduction,
                                  nc_tensor *dlogits) {
  GUARD(NC_OP_CROSS_ENTROPY_BWD, dloss, logits, targets, dlogits);
  CALL(dlogits, NC_OP_CROSS_ENTROPY_BWD, CROSS_ENTROPY_BWD, nc_cross_entropy_bwd_fn, dloss, logits, targets, lse, ignore_index,
       label_smoothing, reduction, dlogits);
}
nc_status nc_bk_sgd_step(nc_tensor *param, const nc_tensor *grad, nc_tensor *buf, const nc_sgd_kernel_args *a) {
  GUARD(NC_OP_SGD_STEP, param, grad, buf);
  CALL(param, NC_OP_SGD_STEP, SGD_STEP, nc_sgd_step_fn, param, grad, buf, a);
}
nc_status nc_bk_rmsprop_step(nc_tensor *param, const nc_tensor *grad, nc_tensor *square_avg, nc_tensor *grad_avg,
                             nc_tensor *buf, const nc_rmsprop_kernel_args *a) {
  GUARD(NC_OP_RMSPROP_STEP, param, grad, square_avg, grad_avg, buf);
  CALL(param, NC_OP_RMSPROP_STEP, RMSPROP_STEP, nc_rmsprop_step_fn, param, grad, square_avg, grad_avg, buf, a);
}
nc_status nc_bk_adam_step(nc_tensor *param, const nc_tensor *grad, nc_tensor *exp_avg, nc_tensor *exp_avg_sq,
                          nc_tensor *max_exp_avg_sq, const nc_adam_kernel_args *a) {
  GUARD(NC_OP_ADAM_STEP, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq);
  CALL(param, NC_OP_ADAM_STEP, ADAM_STEP, nc_adam_step_fn, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, a);
}
nc_status nc_bk_kernel(const nc_kernel_call *c) {
  const nc_tensor *first = NULL;
  for (int i = 0; i < c->nt && !first; i++) first = c->t[i];
  NC_ASSERT(first);
  NC_TRY(storage_guard(c->op, c->nt, (const nc_tensor *const *)c->t));
  CALL(first, c->op, KERNEL, nc_kernel_fn, c);
}

nc_status nc_bk_sum_squares(nc_tensor *parts, int64_t at, const nc_tensor *x) {
  GUARD(NC_OP_SUM_SQUARES, x);
  CALL(parts, NC_OP_SUM_SQUARES, SUM_SQUARES, nc_sum_squares_fn, parts, at, x);
}

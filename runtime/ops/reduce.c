/* Reduction, scan and softmax dispatch. The input is viewed with the reduced dims last (a
 * permutation, no copy), so every backend reduces "rows" of a strided tensor; outputs are
 * written through views of the destination. */
#include <math.h>
#include <string.h>
#include "core/check.h"
#include "support.h"

nc_reduce_args nc_reduce_defaults(void) { return (nc_reduce_args){2.0, 1.0}; }

/* The dtype a backend reduces in: float32, float64 or int64. The storage dtypes (bfloat16,
 * float16; rows with NC_DT_WIDEN) are widened to float32 with the input's copy, and the float32
 * result is rounded once into the storage dtype when it is copied into the result. */
static nc_dtype compute_dtype(const nc_op_info *o, nc_dtype in) {
  if (nc_dtype_is_storage(in)) return NC_FLOAT32;
  if (nc_dtype_is_float(in)) return in;
  return o->result == NC_RES_FLOAT ? NC_FLOAT32 : NC_INT64;
}

static nc_dtype result_dtype(const nc_op_info *o, nc_dtype in) {
  switch (o->result) {
    case NC_RES_FLOAT:
      return nc_dtype_is_float(in) ? in : NC_FLOAT32;
    case NC_RES_SUM:
      return nc_dtype_is_float(in) ? in : NC_INT64;
    case NC_RES_INDEX:
      return NC_INT64;
    case NC_RES_BOOL:
      return NC_BOOL;
    default:
      return in;
  }
}

/* A view of t with only the kept dims (reduced dims, of size 1 under keepdim, dropped). */
static nc_status kept_view(nc_tensor *t, const bool *reduced, bool keepdim, nc_tensor **out) {
  if (!keepdim) return nc_tensor_alias(t, out);
  int64_t shape[NC_MAX_DIMS], strides[NC_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < t->ndim; i++)
    if (!reduced[i]) {
      shape[n] = t->shape[i];
      strides[n++] = t->strides[i];
    }
  return nc_tensor_from_storage(t->storage, t->dtype, n, shape, strides, t->offset, out);
}

typedef struct {
  nc_tensor *dst;    /* user destination or NULL */
  nc_tensor *target; /* what the result goes into (dst or a new tensor) */
  nc_tensor *work;   /* what the backend writes (kept dims only, compute dtype) */
} reduce_out;

/* Prepares an output of the reduction: target (dst, or new) with the result shape, and work, a
 * kept-dims view of it when its dtype is what the backend writes, else a new tensor. */
static nc_status out_prepare(reduce_out *r, nc_device *dev, nc_dtype res, nc_dtype work_dt, int ndim,
                             const int64_t *shape, const bool *reduced, bool keepdim, int nkept,
                             const int64_t *kshape) {
  if (r->dst) {
    NC_TRY(nc_check_dst(r->dst, ndim, shape, res));
    r->target = nc_tensor_retain(r->dst);
  } else {
    NC_TRY(nc_tensor_empty(dev, res, ndim, shape, 0, &r->target));
  }
  if (r->target->dtype == work_dt) return kept_view(r->target, reduced, keepdim, &r->work);
  return nc_tensor_empty(dev, work_dt, nkept, kshape, 0, &r->work);
}

/* Copies work into target when they are different tensors (a dtype conversion), releases work,
 * and hands target to *result on success. */
static nc_status out_finish(reduce_out *r, nc_status s, nc_tensor **result) {
  if (s == NC_OK && r->work->storage != r->target->storage) {
    nc_tensor *v = NULL; /* target without its size-1 reduced dims: always a view */
    s = nc_tensor_view(r->target, r->work->ndim, r->work->shape, &v);
    if (s == NC_OK) s = nc_copy(v, r->work);
    nc_tensor_release(v);
  }
  nc_tensor_release(r->work);
  r->work = NULL;
  if (s == NC_OK && result)
    *result = r->target;
  else
    nc_tensor_release(r->target);
  r->target = NULL;
  return s;
}

typedef struct {
  int nred, nkept, ndim;
  bool reduced[NC_MAX_DIMS];
  int perm[NC_MAX_DIMS];
  int64_t shape[NC_MAX_DIMS];  /* result shape (keepdim honoured) */
  int64_t kshape[NC_MAX_DIMS]; /* kept dims */
  int64_t count;               /* elements per row */
} reduce_plan;

static nc_status plan_dims(const nc_tensor *x, int ndims, const int *dims, bool keepdim, reduce_plan *p) {
  memset(p, 0, sizeof *p);
  for (int i = 0; i < ndims; i++) {
    NC_TRY(nc_check_dim(dims[i], x->ndim));
    if (x->ndim == 0) continue;
    if (p->reduced[dims[i]]) return nc_error(NC_ERR_INDEX, "dim %d appears twice", dims[i] + 1);
    p->reduced[dims[i]] = true;
  }
  if (ndims == 0)
    for (int i = 0; i < x->ndim; i++) p->reduced[i] = true;
  p->count = 1;
  for (int i = 0; i < x->ndim; i++) {
    if (p->reduced[i]) {
      p->count *= x->shape[i];
      if (keepdim) p->shape[p->ndim++] = 1;
    } else {
      p->perm[p->nkept] = i;
      p->kshape[p->nkept++] = x->shape[i];
      p->shape[p->ndim++] = x->shape[i];
    }
  }
  for (int i = 0; i < x->ndim; i++)
    if (p->reduced[i]) p->perm[p->nkept + p->nred++] = i;
  return NC_OK;
}

static nc_status check_nonempty(const nc_op_info *o, const reduce_plan *p) {
  bool needs = o->op == NC_OP_MAX || o->op == NC_OP_MIN || o->op == NC_OP_ARGMAX || o->op == NC_OP_ARGMIN;
  int64_t rows = 1;
  for (int i = 0; i < p->nkept; i++) rows *= p->kshape[i];
  if (needs && p->count == 0 && rows > 0)
    return nc_error(NC_ERR_SHAPE, "%s of an empty dimension has no value (the reduced dims hold 0 elements)",
                    o->name);
  return NC_OK;
}

/* x converted to the compute dtype (and away from dst) and permuted so the reduced dims come
 * last. */
static nc_status permuted_input(nc_tensor *x, nc_dtype dt, const reduce_plan *p, const nc_tensor *dst,
                                nc_tensor **out) {
  nc_tensor *c;
  NC_TRY(nc_input_for(x, dt, dst, &c));
  nc_status s = x->ndim ? nc_tensor_permute(c, p->perm, out) : nc_tensor_alias(c, out);
  nc_tensor_release(c);
  return s;
}

static void out_discard(reduce_out *r) {
  nc_tensor_release(r->work);
  nc_tensor_release(r->target);
  r->work = r->target = NULL;
}

/* out: the values (or, for argmax/argmin, the positions); indices: positions next to values
 * (max/min with indices), or NULL. */
static nc_status reduce_impl(nc_op op, nc_tensor *dst, nc_tensor *x, int ndims, const int *dims, bool keepdim,
                             const nc_reduce_args *args, nc_tensor **out, nc_tensor **indices) {
  const nc_op_info *o = nc_op_get(op);
  if (!o || o->family != NC_FAMILY_REDUCE)
    return nc_error(NC_ERR_ARG, "%s is not a reduction", o ? o->name : "?");
  NC_TRY(nc_op_check_dtype(o->op, x->dtype));
  nc_reduce_args a = args ? *args : nc_reduce_defaults();
  reduce_plan p;
  NC_TRY(plan_dims(x, ndims, dims, keepdim, &p));
  NC_TRY(check_nonempty(o, &p));
  nc_device *dev = nc_tensor_device(x);
  if (dst) NC_TRY(nc_check_devices(dev, 1, &dst));
  const nc_dtype cdt = compute_dtype(o, x->dtype), res = result_dtype(o, x->dtype);
  const bool arg = op == NC_OP_ARGMAX || op == NC_OP_ARGMIN, with_pos = arg || indices;

  reduce_out vals = {.dst = arg ? NULL : dst}, pos = {.dst = arg ? dst : NULL};
  nc_status s =
      out_prepare(&vals, dev, arg ? cdt : res, cdt, p.ndim, p.shape, p.reduced, keepdim, p.nkept, p.kshape);
  if (s == NC_OK && with_pos)
    s = out_prepare(&pos, dev, NC_INT64, NC_INT64, p.ndim, p.shape, p.reduced, keepdim, p.nkept, p.kshape);
  nc_tensor *xp = NULL;
  if (s == NC_OK) s = permuted_input(x, cdt, &p, dst, &xp);
  if (s == NC_OK && nc_tensor_numel(vals.work) > 0) {
    nc_storage_bump_version(vals.target->storage);
    if (with_pos) nc_storage_bump_version(pos.target->storage);
    s = nc_bk_reduce(op, vals.work, with_pos ? pos.work : NULL, xp, p.nred, &a);
  }
  nc_tensor_release(xp);
  if (arg) {
    out_discard(&vals);
    if (s != NC_OK) {
      out_discard(&pos);
      return s;
    }
    return out_finish(&pos, s, out);
  }
  if (s != NC_OK) {
    out_discard(&vals);
    out_discard(&pos);
    return s;
  }
  s = out_finish(&vals, s, out);
  if (with_pos) {
    if (s != NC_OK) {
      out_discard(&pos);
      return s;
    }
    s = out_finish(&pos, s, indices);
    if (s != NC_OK) nc_tensor_release(*out);
  }
  return s;
}

nc_status nc_reduce(nc_op op, nc_tensor *x, int ndims, const int *dims, bool keepdim,
                    const nc_reduce_args *args, nc_tensor **out) {
  return reduce_impl(op, NULL, x, ndims, dims, keepdim, args, out, NULL);
}

nc_status nc_reduce_into(nc_op op, nc_tensor *dst, nc_tensor *x, int ndims, const int *dims, bool keepdim,
                         const nc_reduce_args *args) {
  return reduce_impl(op, dst, x, ndims, dims, keepdim, args, NULL, NULL);
}

nc_status nc_reduce_indexed(nc_op op, nc_tensor *x, int dim, bool keepdim, nc_tensor **values,
                            nc_tensor **indices) {
  if (op != NC_OP_MAX && op != NC_OP_MIN)
    return nc_error(NC_ERR_ARG, "values with indices come from max or min, not %s",
                    nc_op_get(op) ? nc_op_get(op)->name : "?");
  return reduce_impl(op, NULL, x, 1, &dim, keepdim, NULL, values, indices);
}

/* ---- along one dim: cumsum, softmax ---------------------------------------------------------------- */
/* t with dim swapped to the end (a view). */
static nc_status dim_last(nc_tensor *t, int dim, nc_tensor **out) {
  if (t->ndim == 0) return nc_tensor_alias(t, out);
  return nc_tensor_transpose(t, dim, t->ndim - 1, out);
}

static nc_status along_dim(nc_op op, nc_tensor *dst, nc_tensor *x, int dim, nc_tensor **out) {
  const nc_op_info *o = nc_op_get(op);
  NC_TRY(nc_op_check_dtype(o->op, x->dtype));
  NC_TRY(nc_check_dim(dim, x->ndim));
  nc_device *dev = nc_tensor_device(x);
  if (dst) NC_TRY(nc_check_devices(dev, 1, &dst));
  nc_dtype cdt = compute_dtype(o, x->dtype), res = result_dtype(o, x->dtype);
  nc_tensor *target = NULL, *work = NULL, *xc = NULL, *xv = NULL, *wv = NULL;
  nc_status s = NC_OK;
  if (dst) {
    s = nc_check_dst(dst, x->ndim, x->shape, res);
    if (s == NC_OK) target = nc_tensor_retain(dst);
  } else {
    s = nc_tensor_empty(dev, res, x->ndim, x->shape, 0, &target);
  }
  if (s == NC_OK) {
    if (target->dtype == cdt)
      work = nc_tensor_retain(target);
    else
      s = nc_tensor_empty(dev, cdt, x->ndim, x->shape, 0, &work);
  }
  if (s == NC_OK) s = nc_input_for(x, cdt, work, &xc);
  if (s == NC_OK) s = dim_last(xc, dim, &xv);
  if (s == NC_OK) s = dim_last(work, dim, &wv);
  if (s == NC_OK && nc_tensor_numel(x) > 0) {
    nc_storage_bump_version(work->storage);
    s = o->family == NC_FAMILY_SCAN ? nc_bk_scan(op, wv, xv) : nc_bk_softmax(op, wv, xv);
  }
  if (s == NC_OK && work != target) s = nc_copy(target, work);
  nc_tensor_release(wv);
  nc_tensor_release(xv);
  nc_tensor_release(xc);
  nc_tensor_release(work);
  if (s == NC_OK && out)
    *out = target;
  else
    nc_tensor_release(target);
  return s;
}

nc_status nc_cumsum(nc_tensor *x, int dim, nc_tensor **out) {
  return along_dim(NC_OP_CUMSUM, NULL, x, dim, out);
}
nc_status nc_cumsum_into(nc_tensor *dst, nc_tensor *x, int dim) {
  return along_dim(NC_OP_CUMSUM, dst, x, dim, NULL);
}

static nc_status check_softmax(nc_op op) {
  if (op != NC_OP_SOFTMAX && op != NC_OP_LOG_SOFTMAX)
    return nc_error(NC_ERR_ARG, "%s is not softmax or log_softmax",
                    nc_op_get(op) ? nc_op_get(op)->name : "?");
  return NC_OK;
}

nc_status nc_softmax(nc_op op, nc_tensor *x, int dim, nc_tensor **out) {
  NC_TRY(check_softmax(op));
  return along_dim(op, NULL, x, dim, out);
}

nc_status nc_softmax_into(nc_op op, nc_tensor *dst, nc_tensor *x, int dim) {
  NC_TRY(check_softmax(op));
  return along_dim(op, dst, x, dim, NULL);
}

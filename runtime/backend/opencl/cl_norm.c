/* OpenCL norms: kernels/norm.cl. Batch norm spreads each channel over several work-groups
 * (statistics or gradient sums per chunk, merged per channel in order, then an elementwise pass);
 * tensors of 2^31 elements or more, and layer/RMS norm, take one work-group per channel or row;
 * a row norm's weight and bias gradients are column sums over chunks of rows, added in order.
 *
 * Batch norm takes bfloat16 and float16 tensors as they are (its kernels' storage build,
 * norm.cl): x, y, dy and dx in the input's dtype (dy and dx may both be float32), the
 * parameters, running statistics and affine gradients in the input's dtype or float32, the saved
 * mean and invstd and the scratch buffers float32, computed exactly as the float32 kernels
 * compute them. */
#include <limits.h>
#include "core/check.h"
#include "cl_linalg.h"

typedef union {
  cl_float f;
  cl_double d;
} real_arg;

static nc_cl_arg real_of(nc_dtype dt, double v, real_arg *r) {
  if (dt == NC_FLOAT64) return r->d = v, (nc_cl_arg){sizeof r->d, &r->d};
  return r->f = (cl_float)v, (nc_cl_arg){sizeof r->f, &r->f};
}

size_t nc_cl_group_size(nc_device *dev) {
  size_t cap = dev->info.max_work_group_size < 256 ? dev->info.max_work_group_size : 256, g = 1;
  while (g * 2 <= cap) g *= 2;
  return g;
}

/* The buffer of t, or of `fallback` when t is absent (the kernel does not touch it then). */
static cl_mem mem_or(const nc_tensor *t, const nc_tensor *fallback) { return nc_cl_mem(t ? t : fallback); }

static nc_status kernel(nc_device *dev, nc_dtype dt, nc_cl_slot slot, const nc_cl_handle **k) {
  NC_TRY(nc_cl_check_real(dev, dt));
  return nc_cl_handle_get(dev, slot, dt, k);
}

/* A batch norm kernel (REAL16 slots): the storage dtypes have builds of their own. */
static nc_status bn_kernel(nc_device *dev, nc_dtype dt, nc_cl_slot slot, const nc_cl_handle **k) {
  if (nc_dtype_is_storage(dt)) return nc_cl_handle_get(dev, slot, dt, k);
  return kernel(dev, dt, slot, k);
}

/* The dtype a batch norm over dt computes in (its scratch, saved statistics and scalars). */
static nc_dtype bn_real(nc_dtype dt) { return nc_dtype_is_storage(dt) ? NC_FLOAT32 : dt; }

/* The storage builds' pf32 and dyf32 flags: whether t (a parameter, or dy) is float32 while x has
 * a storage dtype (the float32 and float64 builds ignore them). */
static cl_int f32_beside(const nc_tensor *t, const nc_tensor *x) {
  return t && nc_dtype_is_storage(x->dtype) && t->dtype == NC_FLOAT32;
}

/* The first of the parameters given (they share one dtype: ops/norm.c), or NULL. */
static const nc_tensor *first_param(const nc_tensor *a, const nc_tensor *b, const nc_tensor *c,
                                    const nc_tensor *d) {
  return a ? a : b ? b : c ? c : d;
}

static nc_status launch_groups(nc_device *dev, cl_kernel k, int nargs, const nc_cl_arg *args,
                               int64_t groups) {
  size_t ls = nc_cl_group_size(dev), global = (size_t)groups * ls;
  return nc_cl_launch_nd(dev, k, nargs, args, 1, &global, &ls);
}

/* The chunk plan of a batch norm over x [n, c, s]: each channel's cnt elements in `chunks` runs
 * of `len`, enough work-groups to fill the device, and at least four elements per item. It
 * depends on the shape and the device only, so results are deterministic. */
typedef struct {
  cl_uint c, s, cnt, chunks, len, total;
} bn_plan;

static bool bn_plan_of(nc_device *dev, const nc_tensor *x, bn_plan *p) {
  const int64_t numel = nc_tensor_numel(x), n = x->shape[0], c = x->shape[1];
  if (numel <= 0 || numel >= INT_MAX) return false;
  const int64_t s = numel / (n * c), cnt = n * s, ls = (int64_t)nc_cl_group_size(dev);
  const int64_t cus = nc_cl_compute_units(dev);
  const int64_t target = cus * 8 > 64 ? cus * 8 : 64, most = (cnt + 4 * ls - 1) / (4 * ls);
  int64_t chunks = (target + c - 1) / c;
  if (chunks > most) chunks = most;
  if (chunks < 1) chunks = 1;
  const int64_t len = (cnt + chunks - 1) / chunks;
  *p = (bn_plan){(cl_uint)c, (cl_uint)s, (cl_uint)cnt, (cl_uint)((cnt + len - 1) / len), (cl_uint)len,
                 (cl_uint)numel};
  return true;
}

/* An elementwise pass over the plan's elements, four at a time when s allows. */
static nc_status bn_elementwise(nc_device *dev, const nc_cl_handle *k, int nargs, nc_cl_arg *args,
                                const bn_plan *p) {
  cl_int vec = p->s % 4 == 0;
  cl_uint total = vec ? p->total / 4 : p->total;
  args[nargs - 2] = NC_CL_ARG(total), args[nargs - 1] = NC_CL_ARG(vec);
  const nc_cl_arg *a = args;
  return nc_cl_launch(dev, k->kernel, nargs, a, nc_cl_global_size(dev, total), 0);
}

static nc_status bn_forward(nc_device *dev, const bn_plan *p, const nc_tensor *x, const nc_tensor *weight,
                            const nc_tensor *bias, nc_tensor *running_mean, nc_tensor *running_var, bool training,
                            double momentum, double eps, nc_tensor *y, nc_tensor *save_mean,
                            nc_tensor *save_invstd) {
  const nc_dtype dt = x->dtype, rt = bn_real(dt);
  const nc_cl_handle *kst, *kfin, *kapp;
  NC_TRY(bn_kernel(dev, dt, NC_CL_K_BN_STATS, &kst));
  NC_TRY(bn_kernel(dev, dt, NC_CL_K_BN_FINISH, &kfin));
  NC_TRY(bn_kernel(dev, dt, NC_CL_K_BN_APPLY, &kapp));
  int64_t npart = training ? 3 * (int64_t)p->c * p->chunks : 1, ncoef = 3 * (int64_t)p->c;
  nc_tensor *part = NULL, *coef = NULL;
  nc_status st = nc_tensor_empty(dev, rt, 1, &npart, 0, &part);
  if (st == NC_OK) st = nc_tensor_empty(dev, rt, 1, &ncoef, 0, &coef);
  cl_mem xm = nc_cl_mem(x), pm = part ? nc_cl_mem(part) : NULL, cm = coef ? nc_cl_mem(coef) : NULL;
  if (st == NC_OK && training) {
    nc_cl_arg a[] = {NC_CL_ARG(xm),     NC_CL_ARG(p->c),   NC_CL_ARG(p->s), NC_CL_ARG(p->cnt),
                     NC_CL_ARG(p->chunks), NC_CL_ARG(p->len), NC_CL_ARG(pm)};
    size_t ls = nc_cl_group_size(dev), global = (size_t)p->c * p->chunks * ls;
    st = nc_cl_launch_nd(dev, kst->kernel, 7, a, 1, &global, &ls);
  }
  if (st == NC_OK) {
    cl_mem wm = mem_or(weight, x), bm = mem_or(bias, x), rmm = mem_or(running_mean, x),
           rvm = mem_or(running_var, x), smm = nc_cl_mem(save_mean), sim = nc_cl_mem(save_invstd);
    cl_int tr = training, has_w = weight != NULL, has_b = bias != NULL, has_r = running_mean != NULL,
           pf32 = f32_beside(first_param(weight, bias, running_mean, running_var), x);
    real_arg mo, ep;
    nc_cl_arg a[] = {NC_CL_ARG(pm),   NC_CL_ARG(p->chunks), NC_CL_ARG(p->c),  NC_CL_ARG(tr),
                     NC_CL_ARG(wm),   NC_CL_ARG(bm),        NC_CL_ARG(has_w), NC_CL_ARG(has_b),
                     NC_CL_ARG(rmm),  NC_CL_ARG(rvm),       NC_CL_ARG(has_r), real_of(rt, momentum, &mo),
                     real_of(rt, eps, &ep), NC_CL_ARG(smm), NC_CL_ARG(sim),   NC_CL_ARG(cm),
                     NC_CL_ARG(pf32)};
    st = nc_cl_launch(dev, kfin->kernel, 17, a, nc_cl_global_size(dev, p->c), 0);
  }
  if (st == NC_OK) {
    cl_mem ym = nc_cl_mem(y);
    nc_cl_arg a[7] = {NC_CL_ARG(xm), NC_CL_ARG(ym), NC_CL_ARG(cm), NC_CL_ARG(p->c), NC_CL_ARG(p->s)};
    st = bn_elementwise(dev, kapp, 7, a, p);
  }
  /* The in-order queue runs the kernels before any later user of the recycled buffers. */
  nc_tensor_release(part), nc_tensor_release(coef);
  return st;
}

static nc_status bn_backward(nc_device *dev, const bn_plan *p, const nc_tensor *dy, const nc_tensor *x,
                             const nc_tensor *weight, const nc_tensor *mean, const nc_tensor *invstd, bool training,
                             nc_tensor *dx, nc_tensor *dweight, nc_tensor *dbias) {
  const nc_dtype dt = x->dtype, rt = bn_real(dt);
  const nc_cl_handle *ksum, *kfin, *kapp;
  NC_TRY(bn_kernel(dev, dt, NC_CL_K_BN_BWD_SUMS, &ksum));
  NC_TRY(bn_kernel(dev, dt, NC_CL_K_BN_BWD_FINISH, &kfin));
  NC_TRY(bn_kernel(dev, dt, NC_CL_K_BN_BWD_APPLY, &kapp));
  int64_t npart = 2 * (int64_t)p->c * p->chunks, ncoef = 4 * (int64_t)p->c;
  nc_tensor *part = NULL, *coef = NULL;
  nc_status st = nc_tensor_empty(dev, rt, 1, &npart, 0, &part);
  if (st == NC_OK) st = nc_tensor_empty(dev, rt, 1, &ncoef, 0, &coef);
  cl_mem dym = nc_cl_mem(dy), xm = nc_cl_mem(x), mm = nc_cl_mem(mean), pm = part ? nc_cl_mem(part) : NULL,
         cm = coef ? nc_cl_mem(coef) : NULL;
  cl_int dyf32 = f32_beside(dy, x);
  if (st == NC_OK) {
    nc_cl_arg a[] = {NC_CL_ARG(dym),   NC_CL_ARG(xm),       NC_CL_ARG(mm),     NC_CL_ARG(p->c), NC_CL_ARG(p->s),
                     NC_CL_ARG(p->cnt), NC_CL_ARG(p->chunks), NC_CL_ARG(p->len), NC_CL_ARG(pm),  NC_CL_ARG(dyf32)};
    size_t ls = nc_cl_group_size(dev), global = (size_t)p->c * p->chunks * ls;
    st = nc_cl_launch_nd(dev, ksum->kernel, 10, a, 1, &global, &ls);
  }
  if (st == NC_OK) {
    cl_mem wm = mem_or(weight, x), im = nc_cl_mem(invstd), dwm = mem_or(dweight, x), dbm = mem_or(dbias, x);
    cl_int tr = training, has_w = weight != NULL, wdw = dweight != NULL, wdb = dbias != NULL,
           pf32 = f32_beside(weight, x);
    nc_cl_arg a[] = {NC_CL_ARG(pm),  NC_CL_ARG(p->chunks), NC_CL_ARG(p->c), NC_CL_ARG(p->cnt), NC_CL_ARG(tr),
                     NC_CL_ARG(wm),  NC_CL_ARG(has_w),     NC_CL_ARG(mm),   NC_CL_ARG(im),     NC_CL_ARG(dwm),
                     NC_CL_ARG(wdw), NC_CL_ARG(dbm),       NC_CL_ARG(wdb),  NC_CL_ARG(cm),     NC_CL_ARG(pf32)};
    st = nc_cl_launch(dev, kfin->kernel, 15, a, nc_cl_global_size(dev, p->c), 0);
  }
  if (st == NC_OK && dx) {
    cl_mem dxm = nc_cl_mem(dx);
    nc_cl_arg a[9] = {NC_CL_ARG(dym), NC_CL_ARG(xm),   NC_CL_ARG(dxm), NC_CL_ARG(cm),
                      NC_CL_ARG(p->c), NC_CL_ARG(p->s), NC_CL_ARG(dyf32)};
    st = bn_elementwise(dev, kapp, 9, a, p);
  }
  nc_tensor_release(part), nc_tensor_release(coef);
  return st;
}

nc_status nc_cl_batch_norm(const nc_tensor *x, const nc_tensor *weight, const nc_tensor *bias,
                           nc_tensor *running_mean, nc_tensor *running_var, bool training, double momentum,
                           double eps, nc_tensor *y, nc_tensor *save_mean, nc_tensor *save_invstd) {
  nc_device *dev = nc_tensor_device(x);
  bn_plan plan;
  if (bn_plan_of(dev, x, &plan))
    return bn_forward(dev, &plan, x, weight, bias, running_mean, running_var, training, momentum, eps, y, save_mean,
                      save_invstd);
  const nc_cl_handle *k;
  NC_TRY(bn_kernel(dev, x->dtype, NC_CL_K_BATCH_NORM_FWD, &k));
  cl_long n = x->shape[0], c = x->shape[1], s = nc_tensor_numel(x) / (n * c > 0 ? n * c : 1);
  cl_mem xm = nc_cl_mem(x), wm = mem_or(weight, x), bm = mem_or(bias, x), rmm = mem_or(running_mean, x),
         rvm = mem_or(running_var, x), ym = nc_cl_mem(y), smm = nc_cl_mem(save_mean),
         sim = nc_cl_mem(save_invstd);
  cl_int has_w = weight != NULL, has_b = bias != NULL, has_r = running_mean != NULL, tr = training,
         pf32 = f32_beside(first_param(weight, bias, running_mean, running_var), x);
  const nc_dtype rt = bn_real(x->dtype);
  real_arg mo, ep;
  nc_cl_arg args[] = {NC_CL_ARG(xm),
                      NC_CL_ARG(wm),
                      NC_CL_ARG(bm),
                      NC_CL_ARG(has_w),
                      NC_CL_ARG(has_b),
                      NC_CL_ARG(rmm),
                      NC_CL_ARG(rvm),
                      NC_CL_ARG(has_r),
                      NC_CL_ARG(tr),
                      real_of(rt, momentum, &mo),
                      real_of(rt, eps, &ep),
                      NC_CL_ARG(ym),
                      NC_CL_ARG(smm),
                      NC_CL_ARG(sim),
                      NC_CL_ARG(n),
                      NC_CL_ARG(c),
                      NC_CL_ARG(s),
                      NC_CL_ARG(pf32)};
  return launch_groups(dev, k->kernel, 18, args, c);
}

nc_status nc_cl_batch_norm_backward(const nc_tensor *dy, const nc_tensor *x, const nc_tensor *weight,
                                    const nc_tensor *mean, const nc_tensor *invstd, bool training,
                                    nc_tensor *dx, nc_tensor *dweight, nc_tensor *dbias) {
  nc_device *dev = nc_tensor_device(x);
  bn_plan plan;
  if (bn_plan_of(dev, x, &plan)) return bn_backward(dev, &plan, dy, x, weight, mean, invstd, training, dx, dweight, dbias);
  const nc_cl_handle *k;
  NC_TRY(bn_kernel(dev, x->dtype, NC_CL_K_BATCH_NORM_BWD, &k));
  cl_long n = x->shape[0], c = x->shape[1], s = nc_tensor_numel(x) / (n * c > 0 ? n * c : 1);
  cl_mem dym = nc_cl_mem(dy), xm = nc_cl_mem(x), wm = mem_or(weight, x), mm = nc_cl_mem(mean),
         im = nc_cl_mem(invstd), dxm = mem_or(dx, x), dwm = mem_or(dweight, x), dbm = mem_or(dbias, x);
  cl_int has_w = weight != NULL, tr = training, wdx = dx != NULL, wdw = dweight != NULL, wdb = dbias != NULL,
         pf32 = f32_beside(weight, x), dyf32 = f32_beside(dy, x);
  nc_cl_arg args[] = {NC_CL_ARG(dym), NC_CL_ARG(xm),  NC_CL_ARG(wm),  NC_CL_ARG(has_w),
                      NC_CL_ARG(mm),  NC_CL_ARG(im),  NC_CL_ARG(tr),  NC_CL_ARG(dxm),
                      NC_CL_ARG(wdx), NC_CL_ARG(dwm), NC_CL_ARG(wdw), NC_CL_ARG(dbm),
                      NC_CL_ARG(wdb), NC_CL_ARG(n),   NC_CL_ARG(c),   NC_CL_ARG(s),
                      NC_CL_ARG(pf32), NC_CL_ARG(dyf32)};
  return launch_groups(dev, k->kernel, 18, args, c);
}

static int64_t rows_of(const nc_tensor *rstd) { return nc_tensor_numel(rstd); }

nc_status nc_cl_row_norm(bool rms, const nc_tensor *x, const nc_tensor *weight, const nc_tensor *bias,
                         double eps, nc_tensor *y, nc_tensor *mean, nc_tensor *rstd) {
  nc_device *dev = nc_tensor_device(x);
  const nc_cl_handle *k;
  NC_TRY(kernel(dev, x->dtype, NC_CL_K_ROW_NORM_FWD, &k));
  int64_t r = rows_of(rstd);
  cl_long d = nc_tensor_numel(x) / (r ? r : 1);
  cl_int irms = rms, has_w = weight != NULL, has_b = bias != NULL;
  cl_mem xm = nc_cl_mem(x), wm = mem_or(weight, x), bm = mem_or(bias, x), ym = nc_cl_mem(y),
         mm = mem_or(mean, rstd), rm = nc_cl_mem(rstd);
  real_arg ep;
  nc_cl_arg args[] = {NC_CL_ARG(irms),
                      NC_CL_ARG(xm),
                      NC_CL_ARG(wm),
                      NC_CL_ARG(has_w),
                      NC_CL_ARG(bm),
                      NC_CL_ARG(has_b),
                      real_of(x->dtype, eps, &ep),
                      NC_CL_ARG(ym),
                      NC_CL_ARG(mm),
                      NC_CL_ARG(rm),
                      NC_CL_ARG(d)};
  return launch_groups(dev, k->kernel, 11, args, r);
}

/* dw and db of a row norm through row_norm_dw_part and row_norm_dw_sum (kernels/norm.cl): the
 * partial sums go to a scratch tensor of 2 x chunks x d. */
static nc_status dw_two_stage(nc_device *dev, nc_dtype dt, cl_int rms, cl_mem dym, cl_mem xm, cl_mem mm, cl_mem rm,
                              cl_uint r, cl_uint d, cl_uint chunks, cl_mem dwm, cl_int wdw, cl_mem dbm, cl_int wdb) {
  const nc_cl_handle *kp, *ks;
  NC_TRY(kernel(dev, dt, NC_CL_K_ROW_NORM_DW_PART, &kp));
  NC_TRY(kernel(dev, dt, NC_CL_K_ROW_NORM_DW_SUM, &ks));
  int64_t npart = 2 * (int64_t)chunks * d;
  nc_tensor *part = NULL;
  NC_TRY(nc_tensor_empty(dev, dt, 1, &npart, 0, &part));
  cl_mem pm = nc_cl_mem(part);
  const cl_uint len = (r + chunks - 1) / chunks;
  const size_t ls = nc_cl_group_size(dev), cols = ((size_t)d + ls - 1) / ls * ls;
  const size_t global[2] = {cols, chunks}, local[2] = {ls, 1};
  nc_cl_arg a[] = {NC_CL_ARG(rms), NC_CL_ARG(dym), NC_CL_ARG(xm), NC_CL_ARG(mm),  NC_CL_ARG(rm),
                   NC_CL_ARG(pm),  NC_CL_ARG(r),   NC_CL_ARG(d),  NC_CL_ARG(len), NC_CL_ARG(chunks)};
  nc_status st = nc_cl_launch_nd(dev, kp->kernel, 10, a, 2, global, local);
  if (st == NC_OK) {
    nc_cl_arg b[] = {NC_CL_ARG(pm), NC_CL_ARG(d), NC_CL_ARG(chunks), NC_CL_ARG(dwm), NC_CL_ARG(wdw), NC_CL_ARG(dbm),
                     NC_CL_ARG(wdb)};
    st = nc_cl_launch_nd(dev, ks->kernel, 7, b, 1, &cols, &ls);
  }
  nc_tensor_release(part); /* the in-order queue runs both kernels before any later user of its buffer */
  return st;
}

nc_status nc_cl_row_norm_backward(bool rms, const nc_tensor *dy, const nc_tensor *x, const nc_tensor *weight,
                                  const nc_tensor *mean, const nc_tensor *rstd, nc_tensor *dx,
                                  nc_tensor *dweight, nc_tensor *dbias) {
  nc_device *dev = nc_tensor_device(x);
  int64_t r = rows_of(rstd);
  cl_long d = nc_tensor_numel(x) / (r ? r : 1), rl = r;
  cl_int irms = rms, has_w = weight != NULL;
  cl_mem dym = nc_cl_mem(dy), xm = nc_cl_mem(x), wm = mem_or(weight, x), mm = mem_or(mean, rstd),
         rm = nc_cl_mem(rstd);
  const nc_cl_handle *k;
  if (dx) {
    NC_TRY(kernel(dev, x->dtype, NC_CL_K_ROW_NORM_BWD_DX, &k));
    cl_mem dxm = nc_cl_mem(dx);
    nc_cl_arg args[] = {NC_CL_ARG(irms), NC_CL_ARG(dym), NC_CL_ARG(xm),  NC_CL_ARG(wm), NC_CL_ARG(has_w),
                        NC_CL_ARG(mm),   NC_CL_ARG(rm),  NC_CL_ARG(dxm), NC_CL_ARG(d)};
    NC_TRY(launch_groups(dev, k->kernel, 9, args, r));
  }
  if (!dweight && !dbias) return NC_OK;
  cl_mem dwm = mem_or(dweight, x), dbm = mem_or(dbias, x);
  cl_int wdw = dweight != NULL, wdb = dbias != NULL;
  /* Chunks of at least DW_ROWS rows, at most DW_CHUNKS of them: the plan depends on the shape
   * only, so the sums' order, and the results, are the same on every device. */
  enum { DW_ROWS = 64, DW_CHUNKS = 64 };
  const int64_t chunks = r / DW_ROWS < DW_CHUNKS ? (r + DW_ROWS - 1) / DW_ROWS : DW_CHUNKS;
  if (chunks > 1 && r * d < INT_MAX && 2 * chunks * d < INT_MAX)
    return dw_two_stage(dev, x->dtype, irms, dym, xm, mm, rm, (cl_uint)r, (cl_uint)d, (cl_uint)chunks, dwm, wdw, dbm, wdb);
  NC_TRY(kernel(dev, x->dtype, NC_CL_K_ROW_NORM_BWD_DW, &k));
  nc_cl_arg args[] = {NC_CL_ARG(irms), NC_CL_ARG(dym), NC_CL_ARG(xm),  NC_CL_ARG(mm),
                      NC_CL_ARG(rm),   NC_CL_ARG(dwm), NC_CL_ARG(wdw), NC_CL_ARG(dbm),
                      NC_CL_ARG(wdb),  NC_CL_ARG(rl),  NC_CL_ARG(d)};
  return nc_cl_launch(dev, k->kernel, 11, args, nc_cl_global_size(dev, d), 0);
}

/* OpenCL cross entropy: kernels/loss.cl. */
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

static nc_status one_group(nc_device *dev, cl_kernel k, int nargs, const nc_cl_arg *args, int64_t groups) {
  size_t ls = nc_cl_group_size(dev), global = (size_t)groups * ls;
  return nc_cl_launch_nd(dev, k, nargs, args, 1, &global, &ls);
}

nc_status nc_cl_cross_entropy(const nc_tensor *logits, const nc_tensor *targets, int64_t ignore_index,
                              double label_smoothing, int reduction, nc_tensor *loss, nc_tensor *lse,
                              nc_index_verdict *bad) {
  nc_device *dev = nc_tensor_device(logits);
  nc_dtype dt = logits->dtype;
  NC_TRY(nc_cl_check_real(dev, dt));
  const nc_cl_handle *fwd, *red;
  NC_TRY(nc_cl_handle_get(dev, NC_CL_K_CE_FWD, dt, &fwd));
  NC_TRY(nc_cl_handle_get(dev, NC_CL_K_CE_REDUCE, dt, &red));
  int64_t npos = nc_tensor_numel(targets);
  cl_long c = logits->shape[1], s = npos / (logits->shape[0] > 0 ? logits->shape[0] : 1), ign = ignore_index,
          np = npos;
  nc_tensor *per = NULL, *flag = NULL;
  if (reduction != NC_REDUCTION_NONE) NC_TRY(nc_tensor_empty(dev, dt, 1, &npos, 0, &per));
  nc_status st = nc_cl_flag_new(dev, &flag);
  cl_mem xm = nc_cl_mem(logits), tm = nc_cl_mem(targets), lm = nc_cl_mem(per ? per : loss),
         sm = nc_cl_mem(lse);
  cl_mem fm = flag ? nc_cl_mem(flag) : NULL;
  real_arg eps;
  nc_cl_arg args[] = {NC_CL_ARG(xm), NC_CL_ARG(tm),  NC_CL_ARG(c),
                      NC_CL_ARG(s),  NC_CL_ARG(ign), real_of(dt, label_smoothing, &eps),
                      NC_CL_ARG(lm), NC_CL_ARG(sm),  NC_CL_ARG(fm)};
  if (st == NC_OK && npos > 0) st = one_group(dev, fwd->kernel, 9, args, npos);
  if (st == NC_OK && per) {
    cl_mem om = nc_cl_mem(loss);
    cl_int mean = reduction == NC_REDUCTION_MEAN;
    nc_cl_arg rargs[] = {NC_CL_ARG(lm),  NC_CL_ARG(tm),   NC_CL_ARG(np), NC_CL_ARG(c),
                         NC_CL_ARG(ign), NC_CL_ARG(mean), NC_CL_ARG(om)};
    st = one_group(dev, red->kernel, 7, rargs, 1);
  }
  if (st == NC_OK)
    nc_cl_flag_verdict(flag, bad);
  else
    nc_tensor_release(flag);
  nc_tensor_release(per);
  return st;
}

nc_status nc_cl_cross_entropy_backward(const nc_tensor *dloss, const nc_tensor *logits,
                                       const nc_tensor *targets, const nc_tensor *lse, int64_t ignore_index,
                                       double label_smoothing, int reduction, nc_tensor *dlogits) {
  nc_device *dev = nc_tensor_device(logits);
  nc_dtype dt = logits->dtype;
  NC_TRY(nc_cl_check_real(dev, dt));
  const nc_cl_handle *cnt, *bwd;
  NC_TRY(nc_cl_handle_get(dev, NC_CL_K_CE_COUNT, dt, &cnt));
  NC_TRY(nc_cl_handle_get(dev, NC_CL_K_CE_BWD, dt, &bwd));
  int64_t one = 1, npos = nc_tensor_numel(targets);
  cl_long n = logits->shape[0], c = logits->shape[1], s = npos / (n > 0 ? n : 1), ign = ignore_index,
          np = npos;
  nc_tensor *count;
  NC_TRY(nc_tensor_empty(dev, dt, 1, &one, 0, &count));
  cl_mem tm = nc_cl_mem(targets), cm = nc_cl_mem(count), gm = nc_cl_mem(dloss), xm = nc_cl_mem(logits),
         sm = nc_cl_mem(lse), dm = nc_cl_mem(dlogits);
  nc_cl_arg cargs[] = {NC_CL_ARG(tm), NC_CL_ARG(np), NC_CL_ARG(c), NC_CL_ARG(ign), NC_CL_ARG(cm)};
  nc_status st = one_group(dev, cnt->kernel, 5, cargs, 1);
  real_arg eps;
  cl_int red = reduction;
  nc_cl_arg args[] = {
      NC_CL_ARG(gm),  NC_CL_ARG(xm), NC_CL_ARG(tm), NC_CL_ARG(sm),  NC_CL_ARG(cm),
      NC_CL_ARG(n),   NC_CL_ARG(c),  NC_CL_ARG(s),  NC_CL_ARG(ign), real_of(dt, label_smoothing, &eps),
      NC_CL_ARG(red), NC_CL_ARG(dm)};
  cl_long total = n * c * s;
  if (st == NC_OK) st = nc_cl_launch(dev, bwd->kernel, 12, args, nc_cl_global_size(dev, total), 0);
  nc_tensor_release(count);
  return st;
}

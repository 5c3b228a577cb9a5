/* OpenCL fused optimizer updates and sum of squares on kernels/optim.cl. */
#include "core/check.h"
#include "cl_backend.h"

typedef union {
  cl_float f;
  cl_double d;
} real_arg;

/* v in the kernel's parameter type (that of the tensors). */
static nc_cl_arg real(nc_dtype dt, double v, real_arg *store) {
  if (dt == NC_FLOAT64) {
    store->d = v;
    return (nc_cl_arg){sizeof store->d, &store->d};
  }
  store->f = (cl_float)v;
  return (nc_cl_arg){sizeof store->f, &store->f};
}

typedef struct {
  cl_mem mem;
  cl_long off;
} buf_arg;

static buf_arg buf_of(const nc_tensor *t) { return (buf_arg){nc_cl_mem(t), t->offset}; }

/* An optional state's buffer; an absent one gets the parameter's, which the kernel never
 * touches (its flag is off). */
static buf_arg state_of(const nc_tensor *t, const nc_tensor *param) { return buf_of(t ? t : param); }

/* The rounded copy's arguments (buffer, offset, format: 1 bfloat16, 2 float16, 0 none, when the
 * param's buffer stands in). */
typedef struct {
  buf_arg b;
  cl_int fmt;
} round_arg;

static round_arg round_of(const nc_tensor *r, const nc_tensor *param) {
  return (round_arg){state_of(r, param), !r ? 0 : r->dtype == NC_BFLOAT16 ? 1 : 2};
}

static nc_status kernel(nc_device *dev, nc_cl_slot slot, nc_dtype dt, const nc_cl_handle **k) {
  NC_TRY(nc_cl_check_dtype(dev, dt));
  return nc_cl_handle_get(dev, slot, dt, k);
}

nc_status nc_cl_sgd_step(nc_tensor *param, const nc_tensor *grad, nc_tensor *buf,
                         const nc_sgd_kernel_args *a) {
  nc_device *dev = nc_tensor_device(param);
  const nc_dtype dt = param->dtype;
  const nc_cl_handle *k;
  NC_TRY(kernel(dev, NC_CL_K_SGD, dt, &k));
  buf_arg p = buf_of(param), g = buf_of(grad), b = state_of(buf, param);
  cl_long n = nc_tensor_numel(param);
  cl_int use_wd = a->use_weight_decay, mode = !a->use_momentum ? 0 : a->first ? 1 : 2, nest = a->nesterov;
  round_arg ro = round_of(a->rounded, param);
  real_arg r[4];
  nc_cl_arg args[] = {NC_CL_ARG(p.mem),
                      NC_CL_ARG(p.off),
                      NC_CL_ARG(g.mem),
                      NC_CL_ARG(g.off),
                      NC_CL_ARG(b.mem),
                      NC_CL_ARG(b.off),
                      NC_CL_ARG(n),
                      real(dt, a->neg_lr, &r[0]),
                      real(dt, a->weight_decay, &r[1]),
                      real(dt, a->momentum, &r[2]),
                      real(dt, a->one_minus_dampening, &r[3]),
                      NC_CL_ARG(use_wd),
                      NC_CL_ARG(mode),
                      NC_CL_ARG(nest),
                      NC_CL_ARG(ro.b.mem),
                      NC_CL_ARG(ro.b.off),
                      NC_CL_ARG(ro.fmt)};
  return nc_cl_launch(dev, k->kernel, (int)(sizeof args / sizeof args[0]), args, nc_cl_global_size(dev, n),
                      nc_cl_local_size(dev));
}

nc_status nc_cl_rmsprop_step(nc_tensor *param, const nc_tensor *grad, nc_tensor *square_avg,
                             nc_tensor *grad_avg, nc_tensor *buf, const nc_rmsprop_kernel_args *a) {
  nc_device *dev = nc_tensor_device(param);
  const nc_dtype dt = param->dtype;
  const nc_cl_handle *k;
  NC_TRY(kernel(dev, NC_CL_K_RMSPROP, dt, &k));
  buf_arg p = buf_of(param), g = buf_of(grad), sq = buf_of(square_avg), ga = state_of(grad_avg, param),
          b = state_of(buf, param);
  cl_long n = nc_tensor_numel(param);
  cl_int use_wd = a->use_weight_decay, centered = a->centered, use_mom = a->use_momentum;
  round_arg ro = round_of(a->rounded, param);
  real_arg r[6];
  nc_cl_arg args[] = {NC_CL_ARG(p.mem),
                      NC_CL_ARG(p.off),
                      NC_CL_ARG(g.mem),
                      NC_CL_ARG(g.off),
                      NC_CL_ARG(sq.mem),
                      NC_CL_ARG(sq.off),
                      NC_CL_ARG(ga.mem),
                      NC_CL_ARG(ga.off),
                      NC_CL_ARG(b.mem),
                      NC_CL_ARG(b.off),
                      NC_CL_ARG(n),
                      real(dt, a->neg_lr, &r[0]),
                      real(dt, a->weight_decay, &r[1]),
                      real(dt, a->alpha, &r[2]),
                      real(dt, a->one_minus_alpha, &r[3]),
                      real(dt, a->eps, &r[4]),
                      real(dt, a->momentum, &r[5]),
                      NC_CL_ARG(use_wd),
                      NC_CL_ARG(centered),
                      NC_CL_ARG(use_mom),
                      NC_CL_ARG(ro.b.mem),
                      NC_CL_ARG(ro.b.off),
                      NC_CL_ARG(ro.fmt)};
  return nc_cl_launch(dev, k->kernel, (int)(sizeof args / sizeof args[0]), args, nc_cl_global_size(dev, n),
                      nc_cl_local_size(dev));
}

nc_status nc_cl_adam_step(nc_tensor *param, const nc_tensor *grad, nc_tensor *exp_avg, nc_tensor *exp_avg_sq,
                          nc_tensor *max_exp_avg_sq, const nc_adam_kernel_args *a) {
  nc_device *dev = nc_tensor_device(param);
  const nc_dtype dt = param->dtype;
  const nc_cl_handle *k;
  NC_TRY(kernel(dev, NC_CL_K_ADAM, dt, &k));
  buf_arg p = buf_of(param), g = buf_of(grad), m1 = buf_of(exp_avg), m2 = buf_of(exp_avg_sq),
          mx = state_of(max_exp_avg_sq, param);
  cl_long n = nc_tensor_numel(param);
  cl_int decay = !a->use_weight_decay ? 0 : a->decoupled ? 2 : 1, ams = a->amsgrad;
  round_arg ro = round_of(a->rounded, param);
  real_arg r[8];
  nc_cl_arg args[] = {NC_CL_ARG(p.mem),
                      NC_CL_ARG(p.off),
                      NC_CL_ARG(g.mem),
                      NC_CL_ARG(g.off),
                      NC_CL_ARG(m1.mem),
                      NC_CL_ARG(m1.off),
                      NC_CL_ARG(m2.mem),
                      NC_CL_ARG(m2.off),
                      NC_CL_ARG(mx.mem),
                      NC_CL_ARG(mx.off),
                      NC_CL_ARG(n),
                      real(dt, a->neg_step_size, &r[0]),
                      real(dt, a->weight_decay, &r[1]),
                      real(dt, a->decay, &r[2]),
                      real(dt, a->one_minus_beta1, &r[3]),
                      real(dt, a->beta2, &r[4]),
                      real(dt, a->one_minus_beta2, &r[5]),
                      real(dt, a->eps, &r[6]),
                      real(dt, a->bias_correction2_sqrt, &r[7]),
                      NC_CL_ARG(decay),
                      NC_CL_ARG(ams),
                      NC_CL_ARG(ro.b.mem),
                      NC_CL_ARG(ro.b.off),
                      NC_CL_ARG(ro.fmt)};
  return nc_cl_launch(dev, k->kernel, (int)(sizeof args / sizeof args[0]), args, nc_cl_global_size(dev, n),
                      nc_cl_local_size(dev));
}

nc_status nc_cl_sum_squares(nc_tensor *parts, int64_t at, const nc_tensor *x) {
  nc_device *dev = nc_tensor_device(x);
  const nc_cl_handle *k;
  NC_TRY(kernel(dev, NC_CL_K_SUM_SQUARES, x->dtype, &k));
  const size_t ls = nc_cl_local_size(dev);
  cl_long n = nc_tensor_numel(x), pat = parts->offset + at;
  int64_t groups = (n + (int64_t)ls - 1) / (int64_t)ls;
  if (groups > NC_SUM_SQUARES_PARTS) groups = NC_SUM_SQUARES_PARTS;
  nc_cl_layout lx;
  const nc_tensor *ts[1] = {x};
  nc_cl_layouts(1, ts, &lx);
  cl_mem mp = nc_cl_mem(parts), mx = nc_cl_mem(x);
  nc_cl_arg args[] = {NC_CL_ARG(mp), NC_CL_ARG(pat), NC_CL_ARG(mx), NC_CL_ARG(lx), NC_CL_ARG(n)};
  return nc_cl_launch(dev, k->kernel, 5, args, (size_t)groups * ls, ls);
}

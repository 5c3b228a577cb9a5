/* OpenCL elementwise families on kernels/elementwise.cl. */
#include "cl_backend.h"

/* bool shares uint8's kernels where the arithmetic is the same (compare, unary predicates). */
static nc_dtype as_uint8(nc_dtype dt) { return dt == NC_BOOL ? NC_UINT8 : dt; }

static nc_status launch(nc_device *dev, cl_kernel k, int nargs, const nc_cl_arg *args, int64_t n) {
  return nc_cl_launch(dev, k, nargs, args, nc_cl_global_size(dev, n), nc_cl_local_size(dev));
}

/* compare_<T>, binary_<T>: out, a, b with a scalar in place of a missing tensor operand. */
static nc_status two_operand(const char *prefix, nc_dtype kdt, nc_op op, nc_tensor *out, const nc_operand *a,
                             const nc_operand *b) {
  nc_device *dev = nc_tensor_device(out);
  NC_TRY(nc_cl_check_dtype(dev, kdt));
  cl_kernel k;
  NC_TRY(nc_cl_typed_kernel(dev, "elementwise", prefix, kdt, &k));
  const nc_tensor *ts[3] = {out, a->t, b->t};
  nc_cl_layout l[3];
  nc_cl_layouts(3, ts, l);
  cl_mem mo = nc_cl_mem(out), ma = a->t ? nc_cl_mem(a->t) : mo, mb = b->t ? nc_cl_mem(b->t) : mo;
  nc_cl_scalar sa, sb;
  cl_int cop = (cl_int)op, mode = (a->t ? 0 : 1) | (b->t ? 0 : 2);
  cl_long n = nc_tensor_numel(out);
  nc_cl_arg args[] = {NC_CL_ARG(cop),  NC_CL_ARG(mo), NC_CL_ARG(l[0]), NC_CL_ARG(ma), NC_CL_ARG(l[1]), NC_CL_ARG(mb),
                      NC_CL_ARG(l[2]), nc_cl_scalar_arg(kdt, &a->s, &sa), nc_cl_scalar_arg(kdt, &b->s, &sb),
                      NC_CL_ARG(mode), NC_CL_ARG(n)};
  return launch(dev, k, 11, args, n);
}

nc_status nc_cl_unary(nc_op op, nc_tensor *out, const nc_tensor *x, const nc_scalar *p) {
  if (op == NC_OP_ISNAN || op == NC_OP_ISINF) {
    nc_operand a = nc_operand_tensor((nc_tensor *)x), b = nc_operand_scalar(nc_scalar_int(0));
    return two_operand("compare", as_uint8(x->dtype), op, out, &a, &b);
  }
  nc_device *dev = nc_tensor_device(out);
  NC_TRY(nc_cl_check_dtype(dev, x->dtype));
  cl_kernel k;
  NC_TRY(nc_cl_typed_kernel(dev, "elementwise", "unary", x->dtype, &k));
  const nc_tensor *ts[2] = {out, x};
  nc_cl_layout l[2];
  nc_cl_layouts(2, ts, l);
  cl_mem mo = nc_cl_mem(out), mx = nc_cl_mem(x);
  const nc_scalar zero = nc_scalar_int(0);
  nc_cl_scalar p0, p1;
  cl_int cop = (cl_int)op;
  cl_long n = nc_tensor_numel(out);
  nc_cl_arg args[] = {NC_CL_ARG(cop),
                      NC_CL_ARG(mo),
                      NC_CL_ARG(l[0]),
                      NC_CL_ARG(mx),
                      NC_CL_ARG(l[1]),
                      nc_cl_scalar_arg(x->dtype, p ? &p[0] : &zero, &p0),
                      nc_cl_scalar_arg(x->dtype, p ? &p[1] : &zero, &p1),
                      NC_CL_ARG(n)};
  return launch(dev, k, 8, args, n);
}

nc_status nc_cl_binary(nc_op op, nc_tensor *out, const nc_operand *a, const nc_operand *b) {
  nc_dtype dt = a->t ? a->t->dtype : b->t->dtype;
  if (nc_op_get(op)->result == NC_RES_BOOL) return two_operand("compare", as_uint8(dt), op, out, a, b);
  return two_operand("binary", dt, op, out, a, b);
}

nc_status nc_cl_where(nc_tensor *out, const nc_tensor *cond, const nc_operand *a, const nc_operand *b) {
  nc_device *dev = nc_tensor_device(out);
  NC_TRY(nc_cl_check_dtype(dev, out->dtype));
  cl_kernel k;
  NC_TRY(nc_cl_typed_kernel(dev, "elementwise", "where", out->dtype, &k));
  const nc_tensor *ts[4] = {out, cond, a->t, b->t};
  nc_cl_layout l[4];
  nc_cl_layouts(4, ts, l);
  cl_mem mo = nc_cl_mem(out), mc = nc_cl_mem(cond), ma = a->t ? nc_cl_mem(a->t) : mo, mb = b->t ? nc_cl_mem(b->t) : mo;
  nc_cl_scalar sa, sb;
  cl_int mode = (a->t ? 0 : 1) | (b->t ? 0 : 2);
  cl_long n = nc_tensor_numel(out);
  nc_cl_arg args[] = {NC_CL_ARG(mo),   NC_CL_ARG(l[0]), NC_CL_ARG(mc), NC_CL_ARG(l[1]),
                      NC_CL_ARG(ma),   NC_CL_ARG(l[2]), NC_CL_ARG(mb), NC_CL_ARG(l[3]),
                      nc_cl_scalar_arg(out->dtype, &a->s, &sa), nc_cl_scalar_arg(out->dtype, &b->s, &sb),
                      NC_CL_ARG(mode), NC_CL_ARG(n)};
  return launch(dev, k, 12, args, n);
}

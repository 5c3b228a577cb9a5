/* OpenCL elementwise families on kernels/elementwise.cl: contiguous operands go to the per-op
 * fast kernels (<op>_<dtype>), anything else to the general strided kernels. */
#include "core/check.h"
#include "cl_backend.h"

/* Fast kernels take FAST_PER_ITEM elements per work-item (NC_FAST_PER_ITEM in
 * kernels/elementwise.cl); larger tensors go in slices. */
#define FAST_SLICE ((int64_t)1 << 30)
#define FAST_PER_ITEM 4

/* bool shares uint8's kernels where the arithmetic is the same (compare, unary predicates). */
static nc_dtype as_uint8(nc_dtype dt) { return dt == NC_BOOL ? NC_UINT8 : dt; }

static nc_status general(nc_cl_slot slot, nc_dtype kdt, nc_op op, nc_tensor *out, const nc_operand *a,
                         const nc_operand *b) {
  nc_device *dev = nc_tensor_device(out);
  const nc_cl_handle *k;
  NC_TRY(nc_cl_handle_get(dev, slot, kdt, &k));
  const nc_tensor *ts[3] = {out, a->t, b->t};
  nc_cl_layout l[3];
  nc_cl_layouts(3, ts, l);
  cl_mem mo = nc_cl_mem(out), ma = a->t ? nc_cl_mem(a->t) : mo, mb = b->t ? nc_cl_mem(b->t) : mo;
  nc_cl_scalar sa, sb;
  cl_int cop = (cl_int)op, mode = (a->t ? 0 : 1) | (b->t ? 0 : 2);
  cl_long n = nc_tensor_numel(out);
  nc_cl_arg args[] = {NC_CL_ARG(cop),
                      NC_CL_ARG(mo),
                      NC_CL_ARG(l[0]),
                      NC_CL_ARG(ma),
                      NC_CL_ARG(l[1]),
                      NC_CL_ARG(mb),
                      NC_CL_ARG(l[2]),
                      nc_cl_scalar_arg(kdt, &a->s, &sa),
                      nc_cl_scalar_arg(kdt, &b->s, &sb),
                      NC_CL_ARG(mode),
                      NC_CL_ARG(n)};
  return nc_cl_launch(dev, k->kernel, 11, args, nc_cl_grid(dev, n), k->local);
}

static bool contiguous(const nc_tensor *t) { return !t || nc_tensor_is_contiguous(t); }

/* The fast kernel "<op>_<dtype>" over slices of at most FAST_SLICE elements. The tensors'
 * element offsets (a missing operand gets out's) lead the arguments built by fill. */
typedef struct {
  cl_mem mem[3];
  cl_long off[3];
  int nt; /* tensors: out, then inputs */
  nc_cl_arg extra[4];
  int nextra;
} fast_call;

static nc_status fast(nc_device *dev, nc_op op, nc_dtype dt, fast_call *c, int64_t n) {
  const nc_cl_handle *k;
  NC_TRY(nc_cl_handle_get(dev, (int)op, dt, &k));
  for (int64_t start = 0; start < n; start += FAST_SLICE) {
    cl_long m = n - start < FAST_SLICE ? n - start : FAST_SLICE, off[3];
    nc_cl_arg args[12];
    int na = 0;
    for (int i = 0; i < c->nt; i++) {
      off[i] = c->off[i] + start;
      args[na++] = NC_CL_ARG(c->mem[i]);
      args[na++] = NC_CL_ARG(off[i]);
    }
    for (int i = 0; i < c->nextra; i++) args[na++] = c->extra[i];
    args[na++] = NC_CL_ARG(m);
    NC_TRY(nc_cl_launch(dev, k->kernel, na, args, nc_cl_grid(dev, (m + FAST_PER_ITEM - 1) / FAST_PER_ITEM), k->local));
  }
  return NC_OK;
}

nc_status nc_cl_unary(nc_op op, nc_tensor *out, const nc_tensor *x, const nc_scalar *p) {
  nc_device *dev = nc_tensor_device(out);
  NC_TRY(nc_cl_check_dtype(dev, x->dtype));
  if (op == NC_OP_ISNAN || op == NC_OP_ISINF) {
    nc_operand a = nc_operand_tensor((nc_tensor *)x), b = nc_operand_scalar(nc_scalar_int(0));
    return general(NC_CL_K_COMPARE, as_uint8(x->dtype), op, out, &a, &b);
  }
  const nc_scalar zero = nc_scalar_int(0);
  nc_cl_scalar p0, p1;
  nc_cl_arg lo = nc_cl_scalar_arg(x->dtype, p ? &p[0] : &zero, &p0),
            hi = nc_cl_scalar_arg(x->dtype, p ? &p[1] : &zero, &p1);
  const cl_long n = nc_tensor_numel(out);
  if (contiguous(out) && contiguous(x)) {
    fast_call c = {.mem = {nc_cl_mem(out), nc_cl_mem(x)},
                   .off = {out->offset, x->offset},
                   .nt = 2,
                   .extra = {lo, hi},
                   .nextra = 2};
    return fast(dev, op, x->dtype, &c, n);
  }
  const nc_cl_handle *k;
  NC_TRY(nc_cl_handle_get(dev, NC_CL_K_UNARY, x->dtype, &k));
  const nc_tensor *ts[2] = {out, x};
  nc_cl_layout l[2];
  nc_cl_layouts(2, ts, l);
  cl_mem mo = nc_cl_mem(out), mx = nc_cl_mem(x);
  cl_int cop = (cl_int)op;
  nc_cl_arg args[] = {NC_CL_ARG(cop), NC_CL_ARG(mo), NC_CL_ARG(l[0]), NC_CL_ARG(mx), NC_CL_ARG(l[1]), lo, hi,
                      NC_CL_ARG(n)};
  return nc_cl_launch(dev, k->kernel, 8, args, nc_cl_grid(dev, n), k->local);
}

nc_status nc_cl_binary(nc_op op, nc_tensor *out, const nc_operand *a, const nc_operand *b) {
  nc_device *dev = nc_tensor_device(out);
  const nc_dtype dt = a->t ? a->t->dtype : b->t->dtype;
  NC_TRY(nc_cl_check_dtype(dev, dt));
  if (nc_op_get(op)->result == NC_RES_BOOL) return general(NC_CL_K_COMPARE, as_uint8(dt), op, out, a, b);
  if (!(contiguous(out) && contiguous(a->t) && contiguous(b->t))) return general(NC_CL_K_BINARY, dt, op, out, a, b);
  nc_cl_scalar sa, sb;
  cl_int mode = (a->t ? 0 : 1) | (b->t ? 0 : 2);
  cl_mem mo = nc_cl_mem(out);
  fast_call c = {
      .mem = {mo, a->t ? nc_cl_mem(a->t) : mo, b->t ? nc_cl_mem(b->t) : mo},
      .off = {out->offset, a->t ? a->t->offset : out->offset, b->t ? b->t->offset : out->offset},
      .nt = 3,
      .extra = {nc_cl_scalar_arg(dt, &a->s, &sa), nc_cl_scalar_arg(dt, &b->s, &sb), NC_CL_ARG(mode)},
      .nextra = 3};
  return fast(dev, op, dt, &c, nc_tensor_numel(out));
}

nc_status nc_cl_where(nc_tensor *out, const nc_tensor *cond, const nc_operand *a, const nc_operand *b) {
  nc_device *dev = nc_tensor_device(out);
  NC_TRY(nc_cl_check_dtype(dev, out->dtype));
  const nc_cl_handle *k;
  NC_TRY(nc_cl_handle_get(dev, NC_CL_K_WHERE, out->dtype, &k));
  const nc_tensor *ts[4] = {out, cond, a->t, b->t};
  nc_cl_layout l[4];
  nc_cl_layouts(4, ts, l);
  cl_mem mo = nc_cl_mem(out), mc = nc_cl_mem(cond), ma = a->t ? nc_cl_mem(a->t) : mo,
         mb = b->t ? nc_cl_mem(b->t) : mo;
  nc_cl_scalar sa, sb;
  cl_int mode = (a->t ? 0 : 1) | (b->t ? 0 : 2);
  cl_long n = nc_tensor_numel(out);
  nc_cl_arg args[] = {NC_CL_ARG(mo),
                      NC_CL_ARG(l[0]),
                      NC_CL_ARG(mc),
                      NC_CL_ARG(l[1]),
                      NC_CL_ARG(ma),
                      NC_CL_ARG(l[2]),
                      NC_CL_ARG(mb),
                      NC_CL_ARG(l[3]),
                      nc_cl_scalar_arg(out->dtype, &a->s, &sa),
                      nc_cl_scalar_arg(out->dtype, &b->s, &sb),
                      NC_CL_ARG(mode),
                      NC_CL_ARG(n)};
  return nc_cl_launch(dev, k->kernel, 12, args, nc_cl_grid(dev, n), k->local);
}

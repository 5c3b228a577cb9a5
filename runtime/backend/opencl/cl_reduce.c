/* OpenCL reductions, cumsum and softmax on kernels/reduce.cl. Rows shorter than ROWS_MAX go one
 * per work-item; longer rows get work-groups, and rows too few to fill the device are cut into
 * chunks whose partial states a second kernel merges. The plan depends only on the shape and
 * the device, so results are deterministic. Softmax on devices with warp shuffles takes
 * kernels/softmax_warp.cl where it fits. */
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "cl_backend.h"

#define ROWS_MAX 64

/* Work-groups that keep the device busy. */
static int64_t busy_groups(nc_device *dev) {
  int64_t cus = nc_cl_compute_units(dev);
  return cus * 8 > 64 ? cus * 8 : 64;
}

static void own_layout(const nc_tensor *t, nc_cl_layout *l) {
  const nc_tensor *ts[1] = {t};
  nc_cl_layouts(1, ts, l);
}

typedef union {
  cl_float f;
  cl_double d;
  cl_long l;
} real_arg;

/* p and correction in the kernel's accumulator type. */
static nc_cl_arg real(nc_dtype dt, double v, real_arg *store) {
  switch (dt) {
    case NC_FLOAT32:
      store->f = (cl_float)v;
      return (nc_cl_arg){sizeof store->f, &store->f};
    case NC_FLOAT64:
      store->d = v;
      return (nc_cl_arg){sizeof store->d, &store->d};
    default:
      store->l = 0;
      return (nc_cl_arg){sizeof store->l, &store->l};
  }
}

static nc_status kernel(nc_device *dev, nc_cl_slot slot, nc_dtype dt, const nc_cl_handle **k) {
  NC_TRY(nc_cl_check_dtype(dev, dt));
  return nc_cl_handle_get(dev, slot, dt, k);
}

nc_status nc_cl_reduce(nc_op op, nc_tensor *out, nc_tensor *idx, const nc_tensor *x, int nred,
                       const nc_reduce_args *args) {
  if (idx && op == NC_OP_MAX) op = NC_OP_ARGMAX;
  if (idx && op == NC_OP_MIN) op = NC_OP_ARGMIN;
  nc_device *dev = nc_tensor_device(out);
  const nc_dtype dt = x->dtype;
  cl_long outer = nc_tensor_numel(out), inner = 1;
  for (int d = x->ndim - nred; d < x->ndim; d++) inner *= x->shape[d];
  /* the chunk plan uses the device's group size, so it depends on the shape and device only */
  const size_t ls = nc_cl_local_size(dev);

  nc_cl_layout lo, li, lx;
  own_layout(out, &lo);
  own_layout(x, &lx);
  if (idx)
    own_layout(idx, &li);
  else
    li = lo;
  cl_mem mo = nc_cl_mem(out), mi = idx ? nc_cl_mem(idx) : mo, mx = nc_cl_mem(x);
  cl_int cop = (cl_int)op, has_idx = idx != NULL, blocked = !nc_cl_gpu_pattern(dev);
  real_arg p, corr;
  nc_cl_arg head[] = {
      NC_CL_ARG(cop), NC_CL_ARG(mo),      NC_CL_ARG(lo),         NC_CL_ARG(mi),
      NC_CL_ARG(li),  NC_CL_ARG(has_idx), real(dt, args->p, &p), real(dt, args->correction, &corr)};
  enum { NHEAD = sizeof head / sizeof head[0] };
  const nc_cl_handle *k;

  if (inner < ROWS_MAX) {
    NC_TRY(kernel(dev, NC_CL_K_REDUCE_ROWS, dt, &k));
    nc_cl_arg a[NHEAD + 4];
    memcpy(a, head, sizeof head);
    a[NHEAD] = NC_CL_ARG(mx), a[NHEAD + 1] = NC_CL_ARG(lx), a[NHEAD + 2] = NC_CL_ARG(outer),
    a[NHEAD + 3] = NC_CL_ARG(inner);
    return nc_cl_launch(dev, k->kernel, NHEAD + 4, a, nc_cl_grid(dev, outer), k->local);
  }

  const int64_t target = busy_groups(dev);
  cl_long chunks = 1;
  if (outer < target) {
    int64_t want = (target + outer - 1) / outer, most = (inner + (int64_t)ls * 4 - 1) / ((int64_t)ls * 4);
    chunks = want < most ? want : most;
    if (chunks < 1) chunks = 1;
  }
  cl_long chunk_len = (inner + chunks - 1) / chunks;
  chunks = (inner + chunk_len - 1) / chunk_len;
  nc_tensor *partial = NULL;
  if (chunks > 1) {
    int64_t bytes = outer * chunks * 32; /* at least the size of any rs_<C> state */
    NC_TRY(nc_tensor_empty(dev, NC_UINT8, 1, &bytes, 0, &partial));
  }
  cl_mem mp = partial ? nc_cl_mem(partial) : mo;
  const bool sum = op == NC_OP_SUM || op == NC_OP_MEAN;
  nc_status s = kernel(dev, sum ? NC_CL_K_REDUCE_SUM : NC_CL_K_REDUCE_GROUPS, dt, &k);
  if (s == NC_OK) {
    nc_cl_arg a[NHEAD + 8];
    memcpy(a, head, sizeof head);
    a[NHEAD] = NC_CL_ARG(mx), a[NHEAD + 1] = NC_CL_ARG(lx), a[NHEAD + 2] = NC_CL_ARG(outer);
    a[NHEAD + 3] = NC_CL_ARG(inner), a[NHEAD + 4] = NC_CL_ARG(chunks), a[NHEAD + 5] = NC_CL_ARG(chunk_len);
    a[NHEAD + 6] = NC_CL_ARG(mp);
    a[NHEAD + 7] = NC_CL_ARG(blocked);
    int64_t units = outer * chunks, groups = units < target * 8 ? units : target * 8;
    s = nc_cl_launch(dev, k->kernel, NHEAD + 8, a, (size_t)groups * k->local, k->local);
  }
  if (s == NC_OK && chunks > 1) s = kernel(dev, NC_CL_K_REDUCE_PARTIALS, dt, &k);
  if (s == NC_OK && chunks > 1) {
    nc_cl_arg a[NHEAD + 4];
    memcpy(a, head, sizeof head);
    a[NHEAD] = NC_CL_ARG(mp), a[NHEAD + 1] = NC_CL_ARG(outer), a[NHEAD + 2] = NC_CL_ARG(inner),
    a[NHEAD + 3] = NC_CL_ARG(chunks);
    int64_t groups = outer < target * 8 ? outer : target * 8;
    s = nc_cl_launch(dev, k->kernel, NHEAD + 4, a, (size_t)groups * k->local, k->local);
  }
  /* The in-order queue runs the kernels before any later user of the recycled buffer. */
  nc_tensor_release(partial);
  return s;
}

/* cumsum and softmax: rows of the last dim, one per work-item when short, else per group. */
static nc_status along_rows(nc_cl_slot rows_slot, nc_cl_slot groups_slot, nc_op op, nc_tensor *out,
                            const nc_tensor *x) {
  nc_device *dev = nc_tensor_device(out);
  cl_long inner = x->ndim ? x->shape[x->ndim - 1] : 1;
  cl_long outer = inner ? nc_tensor_numel(x) / inner : 0;
  const bool rows = inner < ROWS_MAX;
  const nc_cl_handle *k;
  NC_TRY(kernel(dev, rows ? rows_slot : groups_slot, x->dtype, &k));
  nc_cl_layout lo, lx;
  own_layout(out, &lo);
  own_layout(x, &lx);
  cl_mem mo = nc_cl_mem(out), mx = nc_cl_mem(x);
  cl_int cop = (cl_int)op;
  const size_t ls = k->local;
  cl_int blocked = !nc_cl_gpu_pattern(dev);
  /* softmax on GPUs: a row gets the power of two items nearest inner / 32 (at least 32, at most the
   * group), and a group takes ls / sub rows at once; CPU drivers keep a row per group. */
  cl_int sub = (cl_int)ls;
  if (op != NC_OP_CUMSUM && !blocked) {
    sub = 32;
    while ((size_t)sub < ls && (cl_long)sub * 32 < inner) sub *= 2;
    if ((size_t)sub > ls) sub = (cl_int)ls;
  }
  const int64_t per_group = (int64_t)ls / sub, row_groups = (outer + per_group - 1) / per_group;
  int64_t groups = row_groups < busy_groups(dev) * 8 ? row_groups : busy_groups(dev) * 8;
  size_t global = rows ? nc_cl_grid(dev, outer) : (size_t)(groups > 0 ? groups : 1) * ls;
  nc_cl_arg a[] = {NC_CL_ARG(cop),   NC_CL_ARG(mo),    NC_CL_ARG(lo),      NC_CL_ARG(mx), NC_CL_ARG(lx),
                   NC_CL_ARG(outer), NC_CL_ARG(inner), NC_CL_ARG(blocked), NC_CL_ARG(sub)};
  /* cumsum takes no op code; only softmax_groups takes the access pattern and the row width */
  const bool has_op = op != NC_OP_CUMSUM, has_pattern = has_op && !rows;
  return nc_cl_launch(dev, k->kernel, 6 + has_op + 2 * has_pattern, has_op ? a : a + 1, global, ls);
}

nc_status nc_cl_scan(nc_op op, nc_tensor *out, const nc_tensor *x) {
  return along_rows(NC_CL_K_CUMSUM_ROWS, NC_CL_K_CUMSUM_GROUPS, op, out, x);
}

bool nc_cl_shfl_emulated(void) {
  const char *e = getenv("NETCL_SHFL_EMULATE");
  return e && strcmp(e, "1") == 0;
}

/* The longest row of the warp kernels: 32 elements per work-item, as PyTorch's persistent
 * softmax. Longer rows take reduce.cl's, which splits a row over several warps. */
#define WARP_ROW_MAX 1024

_Static_assert(NC_CL_K_SOFTMAX_WARP_32 - NC_CL_K_SOFTMAX_WARP_1 == 5, "softmax_warp_<n>: n = 1, 2, 4 ... 32");
_Static_assert(NC_CL_K_SOFTMAX_WARP4_32 - NC_CL_K_SOFTMAX_WARP4_4 == 3, "softmax_warp4_<n>: n = 4, 8, 16, 32");

/* Softmax with one warp per row (kernels/softmax_warp.cl) when the device has warp shuffles and x
 * and out are contiguous float32 rows of at most WARP_ROW_MAX; *done false leaves the op to
 * reduce.cl's kernels (other layouts, dtypes and lengths, or a PTX build the driver refused). */
static nc_status softmax_warp(nc_op op, nc_tensor *out, const nc_tensor *x, bool *done) {
  *done = false;
  nc_device *dev = nc_tensor_device(out);
  nc_cl_device *cd = dev->impl;
  const int64_t len = x->ndim ? x->shape[x->ndim - 1] : 1;
  if (x->dtype != NC_FLOAT32 || len > WARP_ROW_MAX) return NC_OK;
  nc_cl_layout lo, lx;
  own_layout(out, &lo);
  own_layout(x, &lx);
  if (!lo.contiguous || !lx.contiguous) return NC_OK;
  /* n elements per work-item, the power of two with 32 n >= len; `width` work-items per row, 32
   * but for rows shorter than that, which take the power of two at or above their length. Rows
   * longer than 64 whose length and starts are multiples of 4 take the 16-byte kernels
   * (softmax_warp4_<n>, n >= 4). */
  const cl_int inner = (cl_int)len;
  const bool vec = inner > 64 && inner % 4 == 0 && lo.offset % 4 == 0 && lx.offset % 4 == 0;
  int slot = vec ? NC_CL_K_SOFTMAX_WARP4_4 : NC_CL_K_SOFTMAX_WARP_1;
  for (int n = vec ? 4 : 1; n * 32 < inner; n *= 2) slot++;
  cl_int width = 1;
  while (width < inner && width < 32) width *= 2;
  const char *opts = nc_cl_shfl_emulated() ? "" : "-DNC_SHFL_PTX=1";
  const nc_cl_handle *k;
  if (!nc_cl_handle_optional(dev, slot, NC_FLOAT32, opts, NULL, &cd->warp_shuffle, &k) || k->local < 32)
    return NC_OK;
  const cl_long outer = nc_tensor_numel(x) / inner;
  const int64_t per_group = (int64_t)k->local / width, row_groups = (outer + per_group - 1) / per_group,
                most = busy_groups(dev) * 8;
  const size_t groups = (size_t)(row_groups < most ? row_groups : most);
  cl_mem mo = nc_cl_mem(out), mx = nc_cl_mem(x);
  cl_int cop = (cl_int)op;
  nc_cl_arg a[] = {NC_CL_ARG(cop),       NC_CL_ARG(mo),    NC_CL_ARG(lo.offset), NC_CL_ARG(mx),
                   NC_CL_ARG(lx.offset), NC_CL_ARG(outer), NC_CL_ARG(inner),     NC_CL_ARG(width)};
  *done = true;
  return nc_cl_launch(dev, k->kernel, (int)(sizeof a / sizeof a[0]), a, groups * k->local, k->local);
}

nc_status nc_cl_softmax(nc_op op, nc_tensor *out, const nc_tensor *x) {
  bool done;
  NC_TRY(softmax_warp(op, out, x, &done));
  return done ? NC_OK : along_rows(NC_CL_K_SOFTMAX_ROWS, NC_CL_K_SOFTMAX_GROUPS, op, out, x);
}

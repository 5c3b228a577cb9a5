/* k-means steps defined by their op-table rows (netcl/table_ops.h): kmeans_assign and
 * kmeans_update. Shapes, dtypes and devices are checked here; the backends get contiguous
 * tensors. */
#include "backend/dispatch.h"
#include "core/check.h"
#include "netcl/creation.h"
#include "netcl/reduce.h"
#include "netcl/table_ops.h"
#include "ops/dense.h"

/* Points per OpenCL work-group of kmeans_assign (KM_TP in kernels/cluster.cl). */
#define NC_KMEANS_TILE 64
/* kmeans_update sums fixed chunks of at least this many points, at most NC_KMEANS_CHUNKS chunks. */
#define NC_KMEANS_MIN_CHUNK 1024
#define NC_KMEANS_CHUNKS 64

static nc_status check_points(const nc_tensor *x) {
  if (!nc_dtype_is_float(x->dtype))
    return nc_error(NC_ERR_DTYPE, "expected float32 or float64 points, got %s", nc_dtype_name(x->dtype));
  if (x->ndim != 2) return nc_error(NC_ERR_SHAPE, "the points must be a matrix [N, D], got %d dims", x->ndim);
  if (x->shape[1] < 1) return nc_error(NC_ERR_SHAPE, "the points have no dimensions (D = 0)");
  return NC_OK;
}

/* t has shape [rows] (cols == 0) or [rows, cols], dtype dt, and x's device. */
static nc_status check_like(const nc_tensor *t, const nc_tensor *x, nc_dtype dt, int64_t rows, int64_t cols,
                            const char *what) {
  if (t->dtype != dt)
    return nc_error(NC_ERR_DTYPE, "%s must be %s, got %s", what, nc_dtype_name(dt), nc_dtype_name(t->dtype));
  if (nc_tensor_device(t) != nc_tensor_device(x))
    return nc_error(NC_ERR_DEVICE, "%s is on another device than the points", what);
  const bool ok = cols == 0 ? t->ndim == 1 && t->shape[0] == rows
                            : t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols;
  if (!ok) {
    if (cols == 0) return nc_error(NC_ERR_SHAPE, "%s must have shape [%lld]", what, (long long)rows);
    return nc_error(NC_ERR_SHAPE, "%s must have shape [%lld, %lld]", what, (long long)rows, (long long)cols);
  }
  return NC_OK;
}

static void release_all(nc_tensor **t, int n) {
  for (int i = 0; i < n; i++) nc_tensor_release(t[i]);
}

nc_status nc_kmeans_assign(nc_tensor *x, nc_tensor *centroids, nc_tensor *labels, nc_tensor *bounds,
                           nc_tensor *moves, nc_tensor **dist, nc_tensor **out) {
  NC_TRY(check_points(x));
  const int64_t n = x->shape[0], d = x->shape[1];
  if (centroids->ndim != 2 || centroids->shape[1] != d)
    return nc_error(NC_ERR_SHAPE, "the centroids must have shape [K, %lld]", (long long)d);
  const int64_t k = centroids->shape[0];
  if (k < 1) return nc_error(NC_ERR_SHAPE, "needs at least one centroid");
  NC_TRY(check_like(centroids, x, x->dtype, k, d, "the centroids"));
  if (!labels != !bounds || !labels != !moves)
    return nc_error(NC_ERR_ARG, "labels, bounds and moves go together (all three for the bounds, or none)");
  if (labels) {
    NC_TRY(check_like(labels, x, NC_INT64, n, 0, "labels"));
    NC_TRY(check_like(bounds, x, x->dtype, n, 2, "bounds"));
    NC_TRY(check_like(moves, x, x->dtype, k, 2, "moves"));
  }
  nc_device *dev = nc_tensor_device(x);
  nc_tensor *in[5] = {x, centroids, labels, bounds, moves}, *dn[5] = {NULL}, *r[2] = {NULL, NULL};
  nc_status s = NC_OK;
  for (int i = 0; s == NC_OK && i < 5; i++) s = nc_dense_operand(in[i], &dn[i]);
  const int64_t dshape[2] = {n, 2};
  if (s == NC_OK) s = nc_tensor_empty(dev, NC_INT64, 1, &n, 0, &r[0]);
  if (s == NC_OK) s = nc_tensor_empty(dev, x->dtype, 2, dshape, 0, &r[1]);
  if (s == NC_OK && n > 0) {
    nc_kernel_call kc = {.op = NC_OP_KMEANS_ASSIGN,
                         .nt = 7,
                         .t = {dn[0], dn[1], dn[2], dn[3], dn[4], r[0], r[1]},
                         .ni = 3,
                         .i = {n, d, k},
                         .rows = (n + NC_KMEANS_TILE - 1) / NC_KMEANS_TILE};
    s = nc_bk_kernel(&kc);
  }
  release_all(dn, 5);
  if (s != NC_OK) {
    release_all(r, 2);
    return s;
  }
  *out = r[0];
  if (dist) *dist = r[1]; else nc_tensor_release(r[1]);
  return NC_OK;
}

nc_status nc_kmeans_update(nc_tensor *x, nc_tensor *labels, int64_t k, nc_tensor **counts, nc_tensor **out) {
  NC_TRY(check_points(x));
  const int64_t n = x->shape[0], d = x->shape[1];
  if (k < 1) return nc_error(NC_ERR_ARG, "k must be at least 1, got %lld", (long long)k);
  NC_TRY(check_like(labels, x, NC_INT64, n, 0, "labels"));
  int64_t chunks = (n + NC_KMEANS_MIN_CHUNK - 1) / NC_KMEANS_MIN_CHUNK;
  if (chunks > NC_KMEANS_CHUNKS) chunks = NC_KMEANS_CHUNKS;
  if (chunks < 1) chunks = 1;
  const int64_t chunk = n > 0 ? (n + chunks - 1) / chunks : 1;
  nc_device *dev = nc_tensor_device(x);
  const int64_t pshape[3] = {chunks, k, d};
  nc_tensor *dn[2] = {NULL, NULL}, *p[2] = {NULL, NULL}, *r[2] = {NULL, NULL};
  nc_status s = nc_dense_operand(x, &dn[0]);
  if (s == NC_OK) s = nc_dense_operand(labels, &dn[1]);
  if (s == NC_OK) s = nc_tensor_empty(dev, x->dtype, 3, pshape, 0, &p[0]);
  if (s == NC_OK) s = nc_tensor_empty(dev, NC_INT64, 2, pshape, 0, &p[1]);
  if (s == NC_OK) {
    nc_kernel_call kc = {.op = NC_OP_KMEANS_UPDATE,
                         .nt = 4,
                         .t = {dn[0], dn[1], p[0], p[1]},
                         .ni = 4,
                         .i = {n, d, k, chunk},
                         .rows = chunks};
    s = nc_bk_kernel(&kc);
  }
  const int dim0 = 0;
  if (s == NC_OK) s = nc_reduce(NC_OP_SUM, p[0], 1, &dim0, false, NULL, &r[0]);
  if (s == NC_OK) s = nc_reduce(NC_OP_SUM, p[1], 1, &dim0, false, NULL, &r[1]);
  release_all(dn, 2);
  release_all(p, 2);
  if (s != NC_OK) {
    release_all(r, 2);
    return s;
  }
  *out = r[0];
  if (counts) *counts = r[1]; else nc_tensor_release(r[1]);
  return NC_OK;
}

/* batch_norm, layer_norm and rms_norm: forward against the textbook formulas, backward against
 * float64 central differences of L = sum(dy * y), running statistics, OpenCL against the CPU
 * backend in float32, and errors. */
#include "check.h"
#include "linalg_ref.h"

static nc_device *cpu;

enum { BN, LN, RMS };
typedef struct {
  int kind;
  bool training;
  int ndim;
  int64_t shape[4];
  int nd; /* normalized dims (LN/RMS) */
} norm_case;

/* Runs the forward op on host values; returns y (and the stats) as tensors on dev. */
static nc_status forward(nc_device *dev, nc_dtype dt, const norm_case *k, const double *x, const double *w,
                         const double *b, const double *rm, const double *rv, nc_tensor **y, nc_tensor **s1,
                         nc_tensor **s2, double *new_rm, double *new_rv) {
  int64_t n = 1;
  for (int i = 0; i < k->ndim; i++) n *= k->shape[i];
  int64_t pshape[4], pnd = k->kind == BN ? 1 : k->nd;
  if (k->kind == BN)
    pshape[0] = k->shape[1];
  else
    for (int i = 0; i < k->nd; i++) pshape[i] = k->shape[k->ndim - k->nd + i];
  nc_tensor *tx = ref_tensor(dev, dt, k->ndim, k->shape, x), *tw = ref_tensor(dev, dt, (int)pnd, pshape, w);
  nc_tensor *tb = ref_tensor(dev, dt, (int)pnd, pshape, b);
  nc_status s;
  *s1 = *s2 = NULL;
  if (k->kind == BN) {
    nc_tensor *trm = ref_tensor(dev, dt, 1, pshape, rm), *trv = ref_tensor(dev, dt, 1, pshape, rv);
    s = nc_batch_norm(tx, tw, tb, trm, trv, k->training, 0.1, 1e-5, y, s1, s2);
    if (s == NC_OK && new_rm) {
      double *a = ref_values(trm), *c = ref_values(trv);
      memcpy(new_rm, a, sizeof(double) * (size_t)pshape[0]);
      memcpy(new_rv, c, sizeof(double) * (size_t)pshape[0]);
      free(a), free(c);
    }
    nc_tensor_release(trm), nc_tensor_release(trv);
  } else if (k->kind == LN) {
    s = nc_layer_norm(tx, k->nd, tw, tb, 1e-5, y, s1, s2);
  } else {
    s = nc_rms_norm(tx, k->nd, tw, 1e-5, y, s2);
  }
  nc_tensor_release(tx), nc_tensor_release(tw), nc_tensor_release(tb);
  return s;
}

static double loss(nc_device *dev, nc_dtype dt, const norm_case *k, const double *x, const double *w,
                   const double *b, const double *rm, const double *rv, const double *dy, int64_t n) {
  nc_tensor *y, *s1, *s2;
  if (forward(dev, dt, k, x, w, b, rm, rv, &y, &s1, &s2, NULL, NULL) != NC_OK) return NAN;
  double *v = ref_values(y), l = 0;
  for (int64_t i = 0; i < n; i++) l += dy[i] * v[i];
  free(v);
  nc_tensor_release(y), nc_tensor_release(s1), nc_tensor_release(s2);
  return l;
}

/* Central difference of loss along each coordinate of arr (one of x, w, b). */
static void numeric(nc_device *dev, const norm_case *k, double *x, double *w, double *b, const double *rm,
                    const double *rv, const double *dy, int64_t n, double *arr, int64_t len, double *grad) {
  const double h = 1e-6;
  for (int64_t i = 0; i < len; i++) {
    double keep = arr[i];
    arr[i] = keep + h;
    double lp = loss(dev, NC_FLOAT64, k, x, w, b, rm, rv, dy, n);
    arr[i] = keep - h;
    double lm = loss(dev, NC_FLOAT64, k, x, w, b, rm, rv, dy, n);
    arr[i] = keep;
    grad[i] = (lp - lm) / (2 * h);
  }
}

static void run_case(nc_device *dev, const norm_case *k, nc_dtype dt, bool gradcheck) {
  int64_t n = 1, pn = 1;
  for (int i = 0; i < k->ndim; i++) n *= k->shape[i];
  if (k->kind == BN)
    pn = k->shape[1];
  else
    for (int i = 0; i < k->nd; i++) pn *= k->shape[k->ndim - k->nd + i];
  double *x = ref_random(n), *w = ref_random(pn), *b = ref_random(pn), *dy = ref_random(n);
  double *rm = ref_random(pn), *rv = ref_random(pn);
  for (int64_t i = 0; i < pn; i++) rv[i] = 0.5 + fabs(rv[i]);
  for (int64_t i = 0; i < n; i++) x[i] = 3 * x[i] + 1; /* a mean and scale to remove */
  /* Reference forward: groups of elements normalized together. */
  double *want = malloc(sizeof(double) * (size_t)n), *wrm = malloc(sizeof(double) * (size_t)pn),
         *wrv = malloc(sizeof(double) * (size_t)pn);
  if (k->kind == BN) {
    int64_t N = k->shape[0], C = k->shape[1], S = n / (N * C);
    for (int64_t c = 0; c < C; c++) {
      double mu = 0, var = 0;
      for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < S; j++) mu += x[(i * C + c) * S + j];
      mu /= (double)(N * S);
      for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < S; j++) var += pow(x[(i * C + c) * S + j] - mu, 2);
      var /= (double)(N * S);
      wrm[c] = k->training ? 0.9 * rm[c] + 0.1 * mu : rm[c];
      wrv[c] = k->training ? 0.9 * rv[c] + 0.1 * var * (double)(N * S) / (double)(N * S - 1) : rv[c];
      if (!k->training) mu = rm[c], var = rv[c];
      for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < S; j++) {
          int64_t e = (i * C + c) * S + j;
          want[e] = (x[e] - mu) / sqrt(var + 1e-5) * w[c] + b[c];
        }
    }
  } else {
    for (int64_t r = 0; r < n / pn; r++) {
      double mu = 0, var = 0;
      if (k->kind == LN) {
        for (int64_t j = 0; j < pn; j++) mu += x[r * pn + j];
        mu /= (double)pn;
      }
      for (int64_t j = 0; j < pn; j++) var += pow(x[r * pn + j] - mu, 2);
      var /= (double)pn;
      for (int64_t j = 0; j < pn; j++)
        want[r * pn + j] = (x[r * pn + j] - mu) / sqrt(var + 1e-5) * w[j] + (k->kind == LN ? b[j] : 0);
    }
  }
  nc_tensor *y, *s1, *s2;
  double *grm = malloc(sizeof(double) * (size_t)pn), *grv = malloc(sizeof(double) * (size_t)pn);
  CHECK_OK(forward(dev, dt, k, x, w, b, rm, rv, &y, &s1, &s2, grm, grv));
  double tol = dt == NC_FLOAT64 ? 1e-10 : 2e-5;
  CHECK(ref_tensor_error(y, want, n) <= tol);
  if (k->kind == BN) {
    if (!(ref_error(grm, wrm, pn) <= tol && ref_error(grv, wrv, pn) <= tol))
      fprintf(stderr, "bn %s training=%d: %g %g\n", nc_device_info_of(dev)->spec, k->training,
              ref_error(grm, wrm, pn), ref_error(grv, wrv, pn));
    CHECK(ref_error(grm, wrm, pn) <= tol && ref_error(grv, wrv, pn) <= tol);
  }
  /* Backward. */
  int64_t pshape[4], pnd = k->kind == BN ? 1 : k->nd;
  if (k->kind == BN)
    pshape[0] = k->shape[1];
  else
    for (int i = 0; i < k->nd; i++) pshape[i] = k->shape[k->ndim - k->nd + i];
  nc_tensor *tdy = ref_tensor(dev, dt, k->ndim, k->shape, dy),
            *tx = ref_tensor(dev, dt, k->ndim, k->shape, x);
  nc_tensor *tw = ref_tensor(dev, dt, (int)pnd, pshape, w), *dx = NULL, *dw = NULL, *db = NULL;
  if (k->kind == BN)
    CHECK_OK(nc_batch_norm_backward(tdy, tx, tw, s1, s2, k->training, &dx, &dw, &db));
  else if (k->kind == LN)
    CHECK_OK(nc_layer_norm_backward(tdy, tx, k->nd, tw, s1, s2, &dx, &dw, &db));
  else
    CHECK_OK(nc_rms_norm_backward(tdy, tx, k->nd, tw, s2, &dx, &dw));
  if (gradcheck) {
    double *gx = malloc(sizeof(double) * (size_t)n), *gw = malloc(sizeof(double) * (size_t)pn),
           *gb = malloc(sizeof(double) * (size_t)pn);
    numeric(dev, k, x, w, b, rm, rv, dy, n, x, n, gx);
    numeric(dev, k, x, w, b, rm, rv, dy, n, w, pn, gw);
    numeric(dev, k, x, w, b, rm, rv, dy, n, b, pn, gb);
    CHECK(ref_tensor_error(dx, gx, n) < 1e-6);
    CHECK(ref_tensor_error(dw, gw, pn) < 1e-6);
    if (db) CHECK(ref_tensor_error(db, gb, pn) < 1e-6);
    free(gx), free(gw), free(gb);
  } else {
    /* Parity with the CPU backend. */
    nc_tensor *cy, *c1, *c2, *cdy = ref_tensor(cpu, dt, k->ndim, k->shape, dy),
                             *cx = ref_tensor(cpu, dt, k->ndim, k->shape, x);
    nc_tensor *cw = ref_tensor(cpu, dt, (int)pnd, pshape, w), *cdx = NULL, *cdw = NULL, *cdb = NULL;
    CHECK_OK(forward(cpu, dt, k, x, w, b, rm, rv, &cy, &c1, &c2, NULL, NULL));
    if (k->kind == BN)
      CHECK_OK(nc_batch_norm_backward(cdy, cx, cw, c1, c2, k->training, &cdx, &cdw, &cdb));
    else if (k->kind == LN)
      CHECK_OK(nc_layer_norm_backward(cdy, cx, k->nd, cw, c1, c2, &cdx, &cdw, &cdb));
    else
      CHECK_OK(nc_rms_norm_backward(cdy, cx, k->nd, cw, c2, &cdx, &cdw));
    double *v1 = ref_values(cdx), *v2 = ref_values(cdw), *v3 = cdb ? ref_values(cdb) : NULL;
    CHECK(ref_tensor_error(dx, v1, n) < 1e-5);
    CHECK(ref_tensor_error(dw, v2, pn) < 1e-5);
    if (v3) CHECK(ref_tensor_error(db, v3, pn) < 1e-5);
    free(v1), free(v2), free(v3);
    nc_tensor_release(cy), nc_tensor_release(c1), nc_tensor_release(c2), nc_tensor_release(cdy),
        nc_tensor_release(cx);
    nc_tensor_release(cw), nc_tensor_release(cdx), nc_tensor_release(cdw), nc_tensor_release(cdb);
  }
  nc_tensor_release(y), nc_tensor_release(s1), nc_tensor_release(s2), nc_tensor_release(tdy),
      nc_tensor_release(tx);
  nc_tensor_release(tw), nc_tensor_release(dx), nc_tensor_release(dw), nc_tensor_release(db);
  free(x), free(w), free(b), free(dy), free(rm), free(rv), free(want), free(wrm), free(wrv), free(grm),
      free(grv);
}

static const norm_case small[] = {
    {BN, true, 4, {2, 3, 2, 2}, 0}, {BN, false, 3, {3, 2, 3, 0}, 0}, {BN, true, 2, {5, 3, 0, 0}, 0},
    {LN, true, 3, {2, 3, 4, 0}, 1}, {LN, true, 3, {2, 3, 4, 0}, 2},  {RMS, true, 2, {3, 7, 0, 0}, 1},
};
static const norm_case large[] = {
    {BN, true, 4, {8, 16, 9, 11}, 0},    {BN, false, 4, {4, 5, 7, 3}, 0}, {LN, true, 3, {4, 33, 300, 0}, 1},
    {RMS, true, 2, {65, 1000, 0, 0}, 1}, {LN, true, 2, {3, 1, 0, 0}, 1},
};

static void test_errors(nc_device *dev) {
  int64_t s[2] = {1, 4}, s3[1] = {3};
  nc_tensor *x, *w, *y = NULL;
  CHECK_OK(nc_tensor_empty(dev, NC_FLOAT32, 2, s, 0, &x));
  CHECK_OK(nc_tensor_empty(dev, NC_FLOAT32, 1, s3, 0, &w));
  CHECK_ERR(nc_batch_norm(x, NULL, NULL, NULL, NULL, true, 0.1, 1e-5, &y, NULL, NULL), NC_ERR_SHAPE,
            "more than 1 value per channel");
  CHECK_ERR(nc_batch_norm(x, NULL, NULL, NULL, NULL, false, 0.1, 1e-5, &y, NULL, NULL), NC_ERR_ARG,
            "inference needs running_mean");
  CHECK_ERR(nc_layer_norm(x, 1, w, NULL, 1e-5, &y, NULL, NULL), NC_ERR_SHAPE, "weight must have shape [4]");
  CHECK_ERR(nc_rms_norm(x, 3, NULL, 1e-5, &y, NULL), NC_ERR_SHAPE, "cannot normalize over the last 3 dims");
  nc_tensor_release(x), nc_tensor_release(w);
}

int main(void) {
  CHECK_OK(nc_init());
  cpu = nc_device_get(0);
  nc_device *devs[2];
  int nd = ref_devices(devs);
  for (int d = 0; d < nd; d++) {
    if (nc_device_info_of(devs[d])->fp64)
      for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
        run_case(devs[d], &small[i], NC_FLOAT64, true);
    if (devs[d] != cpu)
      for (size_t i = 0; i < sizeof large / sizeof large[0]; i++)
        run_case(devs[d], &large[i], NC_FLOAT32, false);
    test_errors(devs[d]);
  }
  CHECK_DONE();
}

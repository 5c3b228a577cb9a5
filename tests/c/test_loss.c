/* embedding and cross_entropy: forward against direct formulas, backward against direct
 * scatter-adds and float64 central differences, OpenCL against the CPU backend, and the
 * errors a user can cause (out-of-range indices and targets, wrong target dtype). */
#include "check.h"
#include "linalg_ref.h"

/* An index error: at once on the CPU backend; on OpenCL the call succeeds (its kernels check on
 * the device) and the next sync point fails, naming the op. */
#define CHECK_LATER(dev, expr, result, op, needle)                                    \
  do {                                                                                \
    if (nc_device_info_of(dev)->kind == NC_DEVICE_OPENCL) {                           \
      CHECK_OK(expr);                                                                 \
      CHECK_ERR(nc_device_sync(dev), NC_ERR_INDEX, op needle);                        \
      CHECK_OK(nc_device_sync(dev));                                                  \
      nc_tensor_release(result), (result) = NULL;                                     \
    } else {                                                                          \
      CHECK_ERR(expr, NC_ERR_INDEX, needle);                                          \
    }                                                                                 \
  } while (0)

static nc_device *cpu;

static void test_embedding(nc_device *dev, nc_dtype idt, nc_dtype dt) {
  int64_t v = 7, d = 5, is[2] = {3, 4}, ws[2] = {v, d}, n = 12;
  double idx[12] = {0, 3, 6, 3, 3, 1, 2, 0, 5, 6, 4, 3}, *w = ref_random(v * d), *g = ref_random(n * d);
  nc_tensor *ti = ref_tensor(dev, idt, 2, is, idx), *tw = ref_tensor(dev, dt, 2, ws, w), *out = NULL,
            *dw = NULL;
  CHECK_OK(nc_embedding(tw, ti, &out));
  double *want = malloc(sizeof(double) * (size_t)(n * d)), *wdw = calloc((size_t)(v * d), sizeof(double));
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < d; j++) {
      want[i * d + j] = w[(int64_t)idx[i] * d + j];
      if ((int64_t)idx[i] != 3) wdw[(int64_t)idx[i] * d + j] += g[i * d + j];
    }
  CHECK(out && out->ndim == 3 && out->shape[2] == d && ref_tensor_error(out, want, n * d) < 1e-7);
  int64_t gs[3] = {3, 4, d};
  nc_tensor *tg = ref_tensor(dev, dt, 3, gs, g);
  CHECK_OK(nc_embedding_backward(tg, ti, v, 3, &dw));
  CHECK(ref_tensor_error(dw, wdw, v * d) < 1e-6);
  /* An index outside [0, V) is an error naming it. */
  idx[5] = 7;
  nc_tensor *tbad = ref_tensor(dev, idt, 2, is, idx), *o2 = NULL;
  CHECK_LATER(dev, nc_embedding(tw, tbad, &o2), o2, "embedding: ",
              "index 7 at position 6 is out of range for 7 embeddings");
  CHECK_ERR(nc_embedding(tw, tw, &o2), NC_ERR_DTYPE, "indices must be int64 or int32");
  nc_tensor_release(ti), nc_tensor_release(tw), nc_tensor_release(out), nc_tensor_release(dw),
      nc_tensor_release(tg);
  nc_tensor_release(tbad);
  free(w), free(g), free(want), free(wdw);
}

typedef struct {
  int ndim;
  int64_t shape[4]; /* logits */
  double smoothing;
  int reduction;
  int64_t ignore;
} ce_case;

/* Direct definition: loss_i = (1-e) * -log p_t + e * mean_c(-log p_c); mean over non-ignored. */
static double ce_reference(const ce_case *k, const double *x, const double *t, double *per) {
  int64_t n = k->shape[0], c = k->shape[1], s = 1;
  for (int i = 2; i < k->ndim; i++) s *= k->shape[i];
  double total = 0;
  int64_t cnt = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < s; j++) {
      int64_t tgt = (int64_t)t[i * s + j];
      double z = 0;
      for (int64_t q = 0; q < c; q++) z += exp(x[(i * c + q) * s + j]);
      double r = 0;
      if (tgt != k->ignore) {
        double mean_nll = 0;
        for (int64_t q = 0; q < c; q++) mean_nll += -(x[(i * c + q) * s + j] - log(z)) / (double)c;
        r = (1 - k->smoothing) * -(x[(i * c + tgt) * s + j] - log(z)) + k->smoothing * mean_nll;
        cnt++;
      }
      per[i * s + j] = r;
      total += r;
    }
  return k->reduction == NC_REDUCTION_MEAN ? total / (double)cnt : total;
}

static nc_tensor *ce_loss(nc_device *dev, nc_dtype dt, const ce_case *k, const double *x, const double *t,
                          nc_tensor **lse) {
  nc_cross_entropy_opts o = {
      .ignore_index = k->ignore, .label_smoothing = k->smoothing, .reduction = k->reduction};
  nc_tensor *tx = ref_tensor(dev, dt, k->ndim, k->shape, x), *tt, *l = NULL;
  int64_t ts[3] = {k->shape[0], k->shape[2], k->shape[3]};
  tt = ref_tensor(dev, NC_INT64, k->ndim - 1, ts, t);
  if (nc_cross_entropy(tx, tt, &o, &l, lse) != NC_OK) l = NULL;
  nc_tensor_release(tx), nc_tensor_release(tt);
  return l;
}

/* The closed form: g * (softmax - (1 - e) onehot(t) - e / C), 0 at ignored positions, with g
 * divided by the non-ignored count for "mean". */
static void ce_grad_reference(const ce_case *k, const double *x, const double *t, const double *g,
                              double *dx) {
  int64_t n = k->shape[0], c = k->shape[1], s = 1, cnt = 0;
  for (int i = 2; i < k->ndim; i++) s *= k->shape[i];
  for (int64_t p = 0; p < n * s; p++) cnt += (int64_t)t[p] != k->ignore;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < s; j++) {
      int64_t tgt = (int64_t)t[i * s + j];
      double z = 0, gv = k->reduction == NC_REDUCTION_NONE ? g[i * s + j] : g[0];
      if (k->reduction == NC_REDUCTION_MEAN) gv /= (double)cnt;
      for (int64_t q = 0; q < c; q++) z += exp(x[(i * c + q) * s + j]);
      for (int64_t q = 0; q < c; q++) {
        double p = exp(x[(i * c + q) * s + j]) / z;
        dx[(i * c + q) * s + j] =
            tgt == k->ignore ? 0 : gv * (p - (q == tgt) * (1 - k->smoothing) - k->smoothing / (double)c);
      }
    }
}

static void test_ce(nc_device *dev, nc_dtype dt, const ce_case *k, bool gradcheck) {
  int64_t n = k->shape[0], c = k->shape[1], s = 1;
  for (int i = 2; i < k->ndim; i++) s *= k->shape[i];
  int64_t nx = n * c * s, np = n * s;
  double *x = ref_random(nx), *t = malloc(sizeof(double) * (size_t)np),
         *per = malloc(sizeof(double) * (size_t)np);
  for (int64_t i = 0; i < nx; i++) x[i] *= 4;
  for (int64_t i = 0; i < np; i++) t[i] = (double)((i * 7 + 3) % c);
  if (np > 2) t[1] = (double)k->ignore;
  double want = ce_reference(k, x, t, per);
  nc_tensor *lse = NULL, *l = ce_loss(dev, dt, k, x, t, &lse);
  CHECK(l != NULL);
  if (!l) return;
  double tol = dt == NC_FLOAT64 ? 1e-12 : 1e-5;
  if (k->reduction == NC_REDUCTION_NONE)
    CHECK(ref_tensor_error(l, per, np) <= tol);
  else
    CHECK(ref_tensor_error(l, &want, 1) <= tol);
  /* Backward with a random upstream gradient. */
  double *g = ref_random(k->reduction == NC_REDUCTION_NONE ? np : 1);
  int64_t ts[3] = {k->shape[0], k->shape[2], k->shape[3]};
  nc_tensor *tg = k->reduction == NC_REDUCTION_NONE ? ref_tensor(dev, dt, k->ndim - 1, ts, g)
                                                    : ref_tensor(dev, dt, 0, NULL, g);
  nc_tensor *tx = ref_tensor(dev, dt, k->ndim, k->shape, x),
            *tt = ref_tensor(dev, NC_INT64, k->ndim - 1, ts, t), *dx = NULL;
  nc_cross_entropy_opts o = {
      .ignore_index = k->ignore, .label_smoothing = k->smoothing, .reduction = k->reduction};
  CHECK_OK(nc_cross_entropy_backward(tg, tx, tt, lse, &o, &dx));
  if (gradcheck) {
    /* d/dx of sum(g * loss) by central differences of the reference. */
    double *num = malloc(sizeof(double) * (size_t)nx), h = 1e-6;
    for (int64_t i = 0; i < nx; i++) {
      double keep = x[i], lp, lm;
      x[i] = keep + h;
      lp = ce_reference(k, x, t, per);
      if (k->reduction == NC_REDUCTION_NONE) {
        lp = 0;
        for (int64_t p = 0; p < np; p++) lp += g[p] * per[p];
      } else
        lp *= g[0];
      x[i] = keep - h;
      lm = ce_reference(k, x, t, per);
      if (k->reduction == NC_REDUCTION_NONE) {
        lm = 0;
        for (int64_t p = 0; p < np; p++) lm += g[p] * per[p];
      } else
        lm *= g[0];
      x[i] = keep;
      num[i] = (lp - lm) / (2 * h);
    }
    CHECK(ref_tensor_error(dx, num, nx) < 1e-6);
    free(num);
  } else if (dev == cpu) {
    double *want_dx = malloc(sizeof(double) * (size_t)nx);
    ce_grad_reference(k, x, t, g, want_dx);
    CHECK(ref_tensor_error(dx, want_dx, nx) < 1e-5);
    free(want_dx);
  } else {
    nc_tensor *clse = NULL, *cl = ce_loss(cpu, dt, k, x, t, &clse), *cdx = NULL;
    nc_tensor *cg = k->reduction == NC_REDUCTION_NONE ? ref_tensor(cpu, dt, k->ndim - 1, ts, g)
                                                      : ref_tensor(cpu, dt, 0, NULL, g);
    nc_tensor *cx = ref_tensor(cpu, dt, k->ndim, k->shape, x),
              *ct = ref_tensor(cpu, NC_INT64, k->ndim - 1, ts, t);
    CHECK_OK(nc_cross_entropy_backward(cg, cx, ct, clse, &o, &cdx));
    double *v = ref_values(cdx);
    CHECK(v && ref_tensor_error(dx, v, nx) < 1e-5);
    free(v);
    nc_tensor_release(clse), nc_tensor_release(cl), nc_tensor_release(cdx), nc_tensor_release(cg),
        nc_tensor_release(cx);
    nc_tensor_release(ct);
  }
  nc_tensor_release(l), nc_tensor_release(lse), nc_tensor_release(tg), nc_tensor_release(tx),
      nc_tensor_release(tt);
  nc_tensor_release(dx);
  free(x), free(t), free(per), free(g);
}

static const ce_case small[] = {
    {2, {5, 4, 1, 1}, 0.0, NC_REDUCTION_MEAN, -100},
    {2, {4, 3, 1, 1}, 0.1, NC_REDUCTION_SUM, 2},
    {4, {2, 3, 2, 2}, 0.2, NC_REDUCTION_NONE, -1},
    {3, {3, 5, 2, 1}, 0.05, NC_REDUCTION_MEAN, 0},
};
static const ce_case large[] = {
    {2, {64, 1000, 1, 1}, 0.1, NC_REDUCTION_MEAN, -100},
    {2, {7, 3, 1, 1}, 0.0, NC_REDUCTION_NONE, -100},
    {4, {4, 10, 9, 8}, 0.0, NC_REDUCTION_SUM, 1},
    {2, {300, 17, 1, 1}, 0.3, NC_REDUCTION_MEAN, 5},
};

static void test_ce_errors(nc_device *dev) {
  int64_t ls[2] = {3, 4}, ts[1] = {3};
  double t[3] = {0, 4, 1}, z[12] = {0};
  nc_tensor *x = ref_tensor(dev, NC_FLOAT32, 2, ls, z), *tf = ref_tensor(dev, NC_FLOAT32, 1, ts, t);
  nc_tensor *ti = ref_tensor(dev, NC_INT32, 1, ts, t), *tl = ref_tensor(dev, NC_INT64, 1, ts, t), *l = NULL;
  CHECK_ERR(nc_cross_entropy(x, tf, NULL, &l, NULL), NC_ERR_DTYPE,
            "targets must be int64 class indices, got float32");
  CHECK_ERR(nc_cross_entropy(x, ti, NULL, &l, NULL), NC_ERR_DTYPE,
            "targets must be int64 class indices, got int32");
  CHECK_LATER(dev, nc_cross_entropy(x, tl, NULL, &l, NULL), l, "cross_entropy: ",
              "target 4 at position 2 is not a class in [0, 4)");
  /* The check waits for the next sync point: a read to the host reports it too, once. */
  if (nc_device_info_of(dev)->kind == NC_DEVICE_OPENCL) {
    CHECK_OK(nc_cross_entropy(x, tl, NULL, &l, NULL));
    float v = 0;
    CHECK_ERR(nc_read_values(l, &v, sizeof v), NC_ERR_INDEX, "target 4 at position 2");
    CHECK_OK(nc_read_values(l, &v, sizeof v));
    nc_tensor_release(l), l = NULL;
  }
  CHECK_ERR(nc_cross_entropy(x, x, NULL, &l, NULL), NC_ERR_DTYPE, "targets must be int64");
  int64_t ts2[1] = {2};
  nc_tensor *t2 = ref_tensor(dev, NC_INT64, 1, ts2, t);
  CHECK_ERR(nc_cross_entropy(x, t2, NULL, &l, NULL), NC_ERR_SHAPE, "targets must have the logits' shape");
  nc_tensor_release(x), nc_tensor_release(tf), nc_tensor_release(ti), nc_tensor_release(tl),
      nc_tensor_release(t2);
}

int main(void) {
  CHECK_OK(nc_init());
  cpu = nc_device_get(0);
  nc_device *devs[2];
  int nd = ref_devices(devs);
  for (int d = 0; d < nd; d++) {
    test_embedding(devs[d], NC_INT64, NC_FLOAT32);
    test_embedding(devs[d], NC_INT32, NC_FLOAT32);
    if (nc_device_info_of(devs[d])->fp64) {
      test_embedding(devs[d], NC_INT64, NC_FLOAT64);
      for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
        test_ce(devs[d], NC_FLOAT64, &small[i], true);
    }
    for (size_t i = 0; i < sizeof large / sizeof large[0]; i++)
      test_ce(devs[d], NC_FLOAT32, &large[i], false);
    test_ce_errors(devs[d]);
  }
  CHECK_DONE();
}

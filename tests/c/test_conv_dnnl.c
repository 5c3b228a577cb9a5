/* The CPU backend's oneDNN convolutions (runtime/backend/cpu/cpu_dnnl.c) against its im2col +
 * GEMM path (NETCL_DNNL=0) for float32: forward with and without bias, input gradient and weight
 * gradient, over ResNet18's shapes and odd ones (odd sizes, stride 2 with a negative right
 * padding, asymmetric padding, groups, depthwise, dilation, 1x1, batch 1). Also: oneDNN's
 * parallel regions run on netcl's pool (no thread is started for them), and convolutions from
 * two host threads at once give the results of one. tests/CMakeLists.txt checks with
 * DNNL_VERBOSE that the oneDNN path is the one taken. Skipped (77) in builds without oneDNN. */
#include <dirent.h>
#include <pthread.h>
#include "check.h"
#include "linalg_ref.h"
#include "netcl/threads.h"

typedef struct {
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, g;
} conv_case;

static const conv_case cases[] = {
    {4, 64, 32, 32, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1},   /* ResNet18-cifar layer1 */
    {2, 64, 32, 32, 128, 3, 3, 2, 2, 1, 1, 1, 1, 1},  /* layer2's first conv */
    {2, 64, 32, 32, 128, 1, 1, 2, 2, 0, 0, 1, 1, 1},  /* its downsample */
    {2, 256, 4, 4, 512, 3, 3, 2, 2, 1, 1, 1, 1, 1},   /* layer4 */
    {2, 3, 32, 32, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1},    /* the cifar stem */
    {3, 3, 9, 11, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1},      /* odd sizes */
    {2, 7, 13, 17, 13, 5, 5, 2, 2, 2, 2, 1, 1, 1},    /* 5x5, stride 2 */
    {2, 4, 8, 8, 6, 3, 3, 2, 2, 0, 0, 1, 1, 1},       /* right padding -1 */
    {2, 5, 11, 9, 7, 5, 1, 1, 1, 2, 0, 1, 1, 1},      /* asymmetric kernel and padding */
    {2, 16, 10, 10, 16, 3, 3, 1, 1, 1, 1, 1, 1, 16},  /* depthwise */
    {2, 12, 9, 9, 18, 3, 3, 2, 2, 1, 1, 1, 1, 3},     /* groups 3, stride 2 */
    {2, 6, 12, 12, 6, 3, 3, 1, 1, 2, 2, 2, 2, 1},     /* dilation 2 */
    {2, 8, 10, 9, 8, 3, 3, 1, 2, 1, 1, 2, 1, 2},      /* dilation and stride in one dim, groups */
    {1, 16, 7, 7, 32, 1, 1, 1, 1, 0, 0, 1, 1, 1},     /* 1x1, batch 1 */
    {1, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1},    /* the small CNN's first conv */
};

typedef struct {
  nc_tensor *y, *yb, *dx, *dw;
} outputs;

static void run(const conv_case *k, nc_tensor *x, nc_tensor *w, nc_tensor *b, nc_tensor *dy, outputs *o) {
  int64_t xs[4] = {k->n, k->c, k->h, k->w}, ws[4] = {k->o, k->c / k->g, k->kh, k->kw};
  nc_conv2d_desc p = {
      .stride = {k->sh, k->sw}, .padding = {k->ph, k->pw}, .dilation = {k->dh, k->dw}, .groups = k->g};
  o->y = o->yb = o->dx = o->dw = NULL;
  CHECK_OK(nc_conv2d(x, w, NULL, &p, &o->y));
  CHECK_OK(nc_conv2d(x, w, b, &p, &o->yb));
  CHECK_OK(nc_conv2d_backward_input(dy, w, xs, &p, &o->dx));
  CHECK_OK(nc_conv2d_backward_weight(dy, x, ws, &p, &o->dw));
}

static double diff(nc_tensor *got, nc_tensor *want) {
  double *w = ref_values(want);
  double e = ref_tensor_error(got, w, nc_tensor_numel(want));
  free(w);
  return e;
}

static void release(outputs *o) {
  nc_tensor_release(o->y), nc_tensor_release(o->yb), nc_tensor_release(o->dx), nc_tensor_release(o->dw);
}

static void compare_paths(nc_device *cpu, const conv_case *k) {
  int64_t oh = (k->h + 2 * k->ph - k->dh * (k->kh - 1) - 1) / k->sh + 1;
  int64_t ow = (k->w + 2 * k->pw - k->dw * (k->kw - 1) - 1) / k->sw + 1;
  int64_t xs[4] = {k->n, k->c, k->h, k->w}, ws[4] = {k->o, k->c / k->g, k->kh, k->kw},
          ys[4] = {k->n, k->o, oh, ow};
  double *x = ref_random(xs[0] * xs[1] * xs[2] * xs[3]), *w = ref_random(ws[0] * ws[1] * ws[2] * ws[3]),
         *b = ref_random(k->o), *dy = ref_random(ys[0] * ys[1] * ys[2] * ys[3]);
  nc_tensor *tx = ref_tensor(cpu, NC_FLOAT32, 4, xs, x), *tw = ref_tensor(cpu, NC_FLOAT32, 4, ws, w),
            *tb = ref_tensor(cpu, NC_FLOAT32, 1, &k->o, b), *tdy = ref_tensor(cpu, NC_FLOAT32, 4, ys, dy);
  outputs dn, fb;
  run(k, tx, tw, tb, tdy, &dn);
  setenv("NETCL_DNNL", "0", 1);
  run(k, tx, tw, tb, tdy, &fb);
  unsetenv("NETCL_DNNL");
  const double tol = 2e-5;
  double e[4] = {diff(dn.y, fb.y), diff(dn.yb, fb.yb), diff(dn.dx, fb.dx), diff(dn.dw, fb.dw)};
  for (int i = 0; i < 4; i++) {
    if (!(e[i] <= tol))
      fprintf(stderr, "case n=%lld c=%lld %lldx%lld o=%lld k=%lldx%lld s=%lld,%lld p=%lld,%lld d=%lld,%lld g=%lld: "
              "%s differs by %g\n", (long long)k->n, (long long)k->c, (long long)k->h, (long long)k->w,
              (long long)k->o, (long long)k->kh, (long long)k->kw, (long long)k->sh, (long long)k->sw,
              (long long)k->ph, (long long)k->pw, (long long)k->dh, (long long)k->dw, (long long)k->g,
              (const char *[]){"y", "y with bias", "dx", "dw"}[i], e[i]);
    CHECK(e[i] <= tol);
  }
  release(&dn), release(&fb);
  nc_tensor_release(tx), nc_tensor_release(tw), nc_tensor_release(tb), nc_tensor_release(tdy);
  free(x), free(w), free(b), free(dy);
}

static int count_threads(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* Two host threads run the same convolutions at once: each call holds the pool for its whole
 * primitive, so both get the single-threaded results. */
typedef struct {
  nc_tensor *x, *w, *dy, *y, *dw;
  const conv_case *k;
} job;

static void *job_main(void *arg) {
  job *j = arg;
  nc_conv2d_desc p = {.stride = {1, 1}, .padding = {1, 1}, .dilation = {1, 1}, .groups = 1};
  int64_t ws[4] = {j->k->o, j->k->c, 3, 3};
  for (int r = 0; r < 3; r++) {
    nc_tensor_release(j->y), nc_tensor_release(j->dw);
    j->y = j->dw = NULL;
    if (nc_conv2d(j->x, j->w, NULL, &p, &j->y) != NC_OK) break;
    if (nc_conv2d_backward_weight(j->dy, j->x, ws, &p, &j->dw) != NC_OK) break;
  }
  return NULL;
}

static void test_concurrent(nc_device *cpu) {
  const conv_case *k = &cases[0];
  int64_t xs[4] = {k->n, k->c, k->h, k->w}, ws[4] = {k->o, k->c, 3, 3}, ys[4] = {k->n, k->o, k->h, k->w};
  double *x = ref_random(xs[0] * xs[1] * xs[2] * xs[3]), *w = ref_random(ws[0] * ws[1] * ws[2] * ws[3]),
         *dy = ref_random(ys[0] * ys[1] * ys[2] * ys[3]);
  job jobs[3];
  for (int i = 0; i < 3; i++)
    jobs[i] = (job){ref_tensor(cpu, NC_FLOAT32, 4, xs, x), ref_tensor(cpu, NC_FLOAT32, 4, ws, w),
                    ref_tensor(cpu, NC_FLOAT32, 4, ys, dy), NULL, NULL, k};
  job_main(&jobs[0]); /* alone */
  pthread_t th[2];
  for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, job_main, &jobs[i + 1]) == 0);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  for (int i = 1; i < 3; i++) {
    CHECK(jobs[i].y && jobs[i].dw);
    CHECK(diff(jobs[i].y, jobs[0].y) <= 1e-6);
    CHECK(diff(jobs[i].dw, jobs[0].dw) <= 1e-6);
  }
  for (int i = 0; i < 3; i++) {
    nc_tensor_release(jobs[i].x), nc_tensor_release(jobs[i].w), nc_tensor_release(jobs[i].dy);
    nc_tensor_release(jobs[i].y), nc_tensor_release(jobs[i].dw);
  }
  free(x), free(w), free(dy);
}

int main(void) {
#ifndef NC_HAVE_DNNL
  fprintf(stderr, "this build has no oneDNN; skipped\n");
  return 77;
#endif
  CHECK_OK(nc_init());
  nc_device *cpu = nc_device_get(0);
  /* netcl's pool started (a parallel fill), then the first oneDNN primitives: with libgomp's
   * runtime they would start threads of its own. */
  CHECK_OK(nc_set_num_threads(2));
  int64_t big = 1 << 20;
  nc_tensor *warm = NULL;
  CHECK_OK(nc_tensor_empty(cpu, NC_FLOAT32, 1, &big, 0, &warm));
  CHECK_OK(nc_fill(warm, 1.0));
  int before = count_threads();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) compare_paths(cpu, &cases[i]);
  int after = count_threads();
  if (after != before) fprintf(stderr, "threads: %d before the oneDNN convolutions, %d after\n", before, after);
  CHECK(before > 0 && after == before);
  nc_tensor_release(warm);
  test_concurrent(cpu);
  CHECK_DONE();
}

/* SGEMM throughput of netcl against a reference in the same run, one JSON object per line:
 * the CPU backend against OpenBLAS called directly, OpenCL devices against CLBlast on the same
 * device (when the build found CLBlast; it is a benchmark reference only).
 *   bench_gemm [--sizes 256,512,1024,2048] [--device cpu|opencl|all] [--seconds S]
 * Timings take the median of repeated runs, alternating netcl and the reference. */
#define CL_TARGET_OPENCL_VERSION 120
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "netcl/netcl.h"
#ifdef NC_HAVE_BLAS
#include <cblas.h>
#endif
#ifdef NC_HAVE_CLBLAST
#include <CL/cl.h>
#include <clblast_c.h>
#endif

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef int (*run_fn)(void *ud); /* one product, finished on return; nonzero = failure */

/* Median seconds per run of f and g, interleaved, over about `seconds` of total time. */
static int time_pair(run_fn f, void *fu, run_fn g, void *gu, double seconds, double *tf, double *tg) {
  enum { MAXR = 64 };
  double sf[MAXR], sg[MAXR];
  int r = 0;
  if (f(fu) || (g && g(gu))) return 1; /* warm-up: builds, caches, thread pools */
  double start = now();
  while (r < MAXR && (r < 3 || now() - start < seconds)) {
    double t0 = now();
    if (f(fu)) return 1;
    double t1 = now();
    if (g && g(gu)) return 1;
    double t2 = now();
    sf[r] = t1 - t0, sg[r] = t2 - t1;
    r++;
  }
  qsort(sf, (size_t)r, sizeof(double), cmp_double);
  qsort(sg, (size_t)r, sizeof(double), cmp_double);
  *tf = sf[r / 2];
  *tg = g ? sg[r / 2] : 0;
  return 0;
}

typedef struct {
  nc_tensor *a, *b, *c;
  nc_device *dev;
} netcl_run;

static int run_netcl(void *ud) {
  netcl_run *r = ud;
  if (nc_gemm(r->a, r->b, r->c, 1.0, 0.0) != NC_OK || nc_device_sync(r->dev) != NC_OK) {
    fprintf(stderr, "netcl gemm failed: %s\n", nc_last_error());
    return 1;
  }
  return 0;
}

#ifdef NC_HAVE_BLAS
typedef struct {
  int n;
  float *a, *b, *c;
} blas_run;

static int run_blas(void *ud) {
  blas_run *r = ud;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r->n, r->n, r->n, 1.0f, r->a, r->n, r->b, r->n, 0.0f,
              r->c, r->n);
  return 0;
}
#endif

#ifdef NC_HAVE_CLBLAST
typedef struct {
  size_t n;
  cl_command_queue q;
  cl_mem a, b, c;
} clblast_run;

static int run_clblast(void *ud) {
  clblast_run *r = ud;
  cl_event ev = NULL;
  CLBlastStatusCode s =
      CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, r->n, r->n, r->n, 1.0f,
                   r->a, 0, r->n, r->b, 0, r->n, 0.0f, r->c, 0, r->n, &r->q, &ev);
  if (s != CLBlastSuccess) {
    fprintf(stderr, "CLBlastSgemm failed: %d\n", (int)s);
    return 1;
  }
  clWaitForEvents(1, &ev);
  clReleaseEvent(ev);
  return 0;
}

/* The cl_device_id whose name and platform position match netcl's device spec opencl:P:D. */
static cl_device_id find_cl_device(const nc_device_info *info, cl_context *ctx, cl_command_queue *q) {
  int p, d;
  if (sscanf(info->spec, "opencl:%d:%d", &p, &d) != 2) return NULL;
  cl_platform_id plats[16];
  cl_uint np = 0;
  if (clGetPlatformIDs(16, plats, &np) != CL_SUCCESS || (cl_uint)p >= np) return NULL;
  cl_device_id devs[16];
  cl_uint nd = 0;
  if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 16, devs, &nd) != CL_SUCCESS || (cl_uint)d >= nd)
    return NULL;
  cl_int err;
  *ctx = clCreateContext(NULL, 1, &devs[d], NULL, NULL, &err);
  if (err != CL_SUCCESS) return NULL;
  *q = clCreateCommandQueue(*ctx, devs[d], 0, &err);
  return err == CL_SUCCESS ? devs[d] : NULL;
}
#endif

static void bench_device(nc_device *dev, const int *sizes, int nsizes, double seconds) {
  const nc_device_info *info = nc_device_info_of(dev);
  bool cpu = info->kind == NC_DEVICE_CPU;
#ifdef NC_HAVE_CLBLAST
  cl_context ctx = NULL;
  cl_command_queue q = NULL;
  if (!cpu && !find_cl_device(info, &ctx, &q)) fprintf(stderr, "CLBlast: cannot open %s\n", info->spec);
#endif
  for (int si = 0; si < nsizes; si++) {
    int n = sizes[si];
    int64_t shape[2] = {n, n};
    size_t bytes = sizeof(float) * (size_t)n * (size_t)n;
    float *ha = malloc(bytes), *hb = malloc(bytes), *hc = malloc(bytes);
    srand(7);
    for (size_t i = 0; i < (size_t)n * (size_t)n; i++) {
      ha[i] = (float)rand() / (float)RAND_MAX - 0.5f;
      hb[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    }
    netcl_run nr = {.dev = dev};
    if (nc_tensor_empty(dev, NC_FLOAT32, 2, shape, 0, &nr.a) != NC_OK ||
        nc_tensor_empty(dev, NC_FLOAT32, 2, shape, 0, &nr.b) != NC_OK ||
        nc_tensor_empty(dev, NC_FLOAT32, 2, shape, 0, &nr.c) != NC_OK ||
        nc_tensor_write_host(nr.a, ha, bytes) || nc_tensor_write_host(nr.b, hb, bytes)) {
      fprintf(stderr, "setup failed: %s\n", nc_last_error());
      exit(1);
    }
    run_fn ref = NULL;
    void *ref_ud = NULL;
    const char *ref_name = "none";
#ifdef NC_HAVE_BLAS
    blas_run br = {n, ha, hb, hc};
    if (cpu) ref = run_blas, ref_ud = &br, ref_name = "openblas";
#endif
#ifdef NC_HAVE_CLBLAST
    clblast_run cr = {(size_t)n, q, NULL, NULL, NULL};
    if (!cpu && q) {
      cl_int e1, e2, e3;
      cr.a = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, ha, &e1);
      cr.b = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, hb, &e2);
      cr.c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &e3);
      if (e1 == CL_SUCCESS && e2 == CL_SUCCESS && e3 == CL_SUCCESS)
        ref = run_clblast, ref_ud = &cr, ref_name = "clblast";
    }
#endif
    double t_nc, t_ref;
    if (time_pair(run_netcl, &nr, ref, ref_ud, seconds, &t_nc, &t_ref) == 0) {
      double flops = 2.0 * n * (double)n * n;
      double g_nc = flops / t_nc * 1e-9, g_ref = ref ? flops / t_ref * 1e-9 : 0;
      printf(
          "{\"bench\":\"sgemm\",\"device\":\"%s\",\"device_name\":\"%s\",\"n\":%d,\"netcl_gflops\":%.2f,"
          "\"reference\":\"%s\",\"reference_gflops\":%.2f,\"ratio\":%.3f}\n",
          info->spec, info->name, n, g_nc, ref_name, g_ref, ref ? g_nc / g_ref : 0.0);
      fflush(stdout);
    }
#ifdef NC_HAVE_CLBLAST
    if (cr.a) clReleaseMemObject(cr.a);
    if (cr.b) clReleaseMemObject(cr.b);
    if (cr.c) clReleaseMemObject(cr.c);
#endif
    nc_tensor_release(nr.a), nc_tensor_release(nr.b), nc_tensor_release(nr.c);
    free(ha), free(hb), free(hc);
  }
#ifdef NC_HAVE_CLBLAST
  if (q) clReleaseCommandQueue(q);
  if (ctx) clReleaseContext(ctx);
#endif
}

int main(int argc, char **argv) {
  int sizes[16] = {256, 512, 1024, 2048}, nsizes = 4;
  const char *which = "all";
  double seconds = 2.0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
      nsizes = 0;
      for (char *p = strtok(argv[++i], ","); p && nsizes < 16; p = strtok(NULL, ","))
        sizes[nsizes++] = atoi(p);
    } else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
      which = argv[++i];
    } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = atof(argv[++i]);
    } else {
      fprintf(stderr, "usage: %s [--sizes 256,512,...] [--device cpu|opencl|all] [--seconds S]\n", argv[0]);
      return 2;
    }
  }
  if (nc_init() != NC_OK) {
    fprintf(stderr, "%s\n", nc_last_error());
    return 1;
  }
  for (int d = 0; d < nc_device_count(); d++) {
    nc_device *dev = nc_device_get(d);
    bool cpu = nc_device_info_of(dev)->kind == NC_DEVICE_CPU;
    if (!strcmp(which, "all") || (cpu && !strcmp(which, "cpu")) || (!cpu && !strcmp(which, "opencl")))
      bench_device(dev, sizes, nsizes, seconds);
  }
  return 0;
}

/* Builds one of netcl's OpenCL programs from a checkout's kernels/ with several option sets and
 * times one kernel of each build on the first NVIDIA GPU (or the device of the platform whose
 * name contains NETCL_PROBE_PLATFORM): the tool behind docs/performance.md's kernel-variant
 * figures. It runs where there is an OpenCL loader and no netcl build (the GPU machine).
 *
 *   gcc -O2 tests/bench/kernel_probe.c -lOpenCL -lm -o kernel_probe
 *   ./kernel_probe gemm kernels OUTDIR "" "-DSOME_MACRO=1" "+maxnreg=128" ...
 *   ./kernel_probe softmax kernels OUTDIR ""
 *
 * gemm: gemm_fast_l_rr (NETCL_PROBE_KERNEL another gemm_fast_*, gemm_mma_*, gemm_tf32_* or gemm_bf16_* kernel; its
 * file and mma.cl make the program) on row-major 4096^3
 * (NETCL_PROBE_N another size): GFLOP/s (median of 15) and the largest error of 256 sampled
 * results against a float64 dot product, relative to the sum of the products' magnitudes.
 * softmax: softmax_warp_32 (or NETCL_PROBE_KERNEL, e.g. softmax_warp4_32) over 65536 rows of
 * 1024, work-groups of 256 (NETCL_PROBE_LOCAL): GB/s counting one read and one write, and the
 * largest relative error of 8 rows against float64.
 *
 * Each option set is one build. "+maxnreg=N" and "+minctas=N" in it are not compiler options:
 * they put the PTX directive .maxnreg N or .minnctapersm N on the timed kernel's entry and
 * rebuild from that PTX, as runtime/backend/opencl/cl_ptx.c does. Each build's log
 * (-cl-nv-verbose on NVIDIA: ptxas's registers, spills and shared memory per kernel) goes to
 * OUTDIR/<mode>_<i>.log and its binary (PTX on NVIDIA) to OUTDIR/<mode>_<i>.ptx. */
#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                          \
  do {                                                                 \
    cl_int e_ = (x);                                                   \
    if (e_ != CL_SUCCESS) {                                            \
      fprintf(stderr, "%s:%d %s: %d\n", __FILE__, __LINE__, #x, e_); \
      exit(1);                                                         \
    }                                                                  \
  } while (0)

static char *slurp(const char *dir, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (fread(s, 1, (size_t)n, f) != (size_t)n) exit(1);
  s[n] = 0;
  fclose(f);
  return s;
}

static double elapsed(cl_event ev) {
  cl_ulong t0, t1;
  CK(clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL));
  CK(clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL));
  return (t1 - t0) * 1e-9;
}

/* Median of n launches' device times. */
static double time_kernel(cl_command_queue q, cl_kernel k, int dims, const size_t *global, const size_t *local,
                          int n) {
  double t[64];
  for (int i = 0; i < 3; i++) CK(clEnqueueNDRangeKernel(q, k, dims, NULL, global, local, 0, NULL, NULL));
  for (int i = 0; i < n; i++) {
    cl_event ev;
    CK(clEnqueueNDRangeKernel(q, k, dims, NULL, global, local, 0, NULL, &ev));
    CK(clWaitForEvents(1, &ev));
    t[i] = elapsed(ev);
    clReleaseEvent(ev);
  }
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (t[j] < t[i]) {
        double x = t[i];
        t[i] = t[j];
        t[j] = x;
      }
  return t[n / 2];
}

static float frand(unsigned *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

#define ARG(k, i, v) CK(clSetKernelArg(k, i, sizeof(v), &(v)))

static void run_gemm(cl_context ctx, cl_command_queue q, cl_program prog, const char *name) {
  const char *env = getenv("NETCL_PROBE_N");
  const long n = env ? atol(env) : 4096;
  cl_int err;
  float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n), *c = malloc(sizeof(float) * n * n);
  unsigned s = 7;
  for (long i = 0; i < n * n; i++) a[i] = frand(&s), b[i] = frand(&s);
  /* gemm_bf16_*: bfloat16 operands and result (the values truncated to bfloat16, kept in a and b
   * for the reference) */
  const int bf = strncmp(name, "gemm_bf16_", 10) == 0;
  uint16_t *ha = malloc(sizeof(uint16_t) * n * n), *hb = malloc(sizeof(uint16_t) * n * n);
  for (long i = 0; bf && i < n * n; i++) {
    uint32_t u;
    memcpy(&u, &a[i], 4), ha[i] = (uint16_t)(u >> 16), u &= 0xffff0000u, memcpy(&a[i], &u, 4);
    memcpy(&u, &b[i], 4), hb[i] = (uint16_t)(u >> 16), u &= 0xffff0000u, memcpy(&b[i], &u, 4);
  }
  cl_mem A = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof(float) * n * n, a, &err);
  CK(err);
  if (bf) CK(clEnqueueWriteBuffer(q, A, CL_TRUE, 0, sizeof(uint16_t) * n * n, ha, 0, NULL, NULL));
  cl_mem B = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof(float) * n * n, b, &err);
  if (bf) CK(clEnqueueWriteBuffer(q, B, CL_TRUE, 0, sizeof(uint16_t) * n * n, hb, 0, NULL, NULL));
  CK(err);
  cl_mem C = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof(float) * n * n, NULL, &err);
  CK(err);
  cl_kernel k = clCreateKernel(prog, name, &err);
  CK(err);
  cl_long M = n, N = n, K = n, zero = 0, one = 1, ld = n, sb = 0;
  cl_int has_bias = 0;
  cl_float alpha = 1, beta = 0;
  int i = 0;
  ARG(k, i++, M); ARG(k, i++, N); ARG(k, i++, K);
  ARG(k, i++, A); ARG(k, i++, zero); ARG(k, i++, sb); ARG(k, i++, ld); ARG(k, i++, one);
  ARG(k, i++, B); ARG(k, i++, zero); ARG(k, i++, sb); ARG(k, i++, ld); ARG(k, i++, one);
  ARG(k, i++, C); ARG(k, i++, zero); ARG(k, i++, sb); ARG(k, i++, ld); ARG(k, i++, one);
  ARG(k, i++, C); ARG(k, i++, zero); ARG(k, i++, zero); ARG(k, i++, zero); ARG(k, i++, has_bias);
  ARG(k, i++, alpha); ARG(k, i++, beta);
  /* the tile by the letter after "gemm_fast_": l 128 x 128, m 128 x 64, s 64 x 64; gemm_mma_*
   * 128 x 128 with groups of 128 (NETCL_PROBE_LOCAL: another size, for a build with another
   * -DTC_WARPS_N) */
  const char tl = strncmp(name, "gemm_fast_", 10) == 0 ? name[10] : 'l';
  const char *bnenv = getenv("NETCL_PROBE_BN"); /* another tile width (a gemm_bf16 -DHB_BN build) */
  const long bm = tl == 's' ? 64 : 128, bn = bnenv ? atol(bnenv) : tl == 'l' ? 128 : 64;
  const char *lenv = getenv("NETCL_PROBE_LOCAL");
  const size_t items = lenv ? (size_t)atol(lenv)
                      : strncmp(name, "gemm_mma_", 9) == 0 || strncmp(name, "gemm_tf32_", 10) == 0 || bf ? 128 : 256;
  size_t global[3] = {(size_t)((n + bn - 1) / bn) * items, (size_t)((n + bm - 1) / bm), 1}, local[3] = {items, 1, 1};
  double t = time_kernel(q, k, 3, global, local, 15);
  CK(clEnqueueReadBuffer(q, C, CL_TRUE, 0, sizeof(float) * n * n, c, 0, NULL, NULL));
  if (bf) /* the bfloat16 results, widened (from the end: c holds them in its first half) */
    for (long i = n * n - 1; i >= 0; i--) {
      uint16_t h;
      memcpy(&h, (char *)c + 2 * i, 2);
      const uint32_t u = (uint32_t)h << 16;
      memcpy(&c[i], &u, 4);
    }
  double worst = 0;
  for (int e = 0; e < 256; e++) {
    long r = (e * 7919L) % n, col = (e * 104729L) % n;
    double ref = 0, mag = 0;
    for (long kk = 0; kk < n; kk++) ref += (double)a[r * n + kk] * b[kk * n + col], mag += fabs((double)a[r * n + kk] * b[kk * n + col]);
    double rel = fabs(c[r * n + col] - ref) / (mag > 0 ? mag : 1);
    if (rel > worst) worst = rel;
    if (rel > 1e-3 && getenv("NETCL_PROBE_DIAG"))
      printf("    bad (%ld, %ld) [%%128: %ld, %ld]: %g, want %g\n", r, col, r % 128, col % 128, c[r * n + col], ref);
  }
  printf("  %s n=%ld: %.3f ms, %.0f GFLOP/s, max rel err %.2e\n", name, n, t * 1e3, 2.0 * n * n * n / t * 1e-9, worst);
  clReleaseKernel(k);
  clReleaseMemObject(A), clReleaseMemObject(B), clReleaseMemObject(C);
  free(a), free(b), free(c), free(ha), free(hb);
}

static void run_softmax(cl_context ctx, cl_command_queue q, cl_program prog, const char *name) {
  const long rows = 65536, inner = 1024, total = rows * inner;
  cl_int err;
  float *x = malloc(sizeof(float) * total), *y = malloc(sizeof(float) * total);
  unsigned s = 11;
  for (long i = 0; i < total; i++) x[i] = 4 * frand(&s);
  cl_mem X = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof(float) * total, x, &err);
  CK(err);
  cl_mem Y = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof(float) * total, NULL, &err);
  CK(err);
  cl_kernel k = clCreateKernel(prog, name, &err);
  CK(err);
  const char *lenv = getenv("NETCL_PROBE_LOCAL");
  size_t local = lenv ? (size_t)atol(lenv) : 256, per = local / 32;
  cl_int op = -1, in = (cl_int)inner, width = 32;
  cl_long zero = 0, outer = rows;
  int i = 0;
  ARG(k, i++, op); ARG(k, i++, Y); ARG(k, i++, zero); ARG(k, i++, X); ARG(k, i++, zero);
  ARG(k, i++, outer); ARG(k, i++, in); ARG(k, i++, width);
  size_t global = (size_t)((rows + per - 1) / per) * local;
  double t = time_kernel(q, k, 1, &global, &local, 31);
  CK(clEnqueueReadBuffer(q, Y, CL_TRUE, 0, sizeof(float) * total, y, 0, NULL, NULL));
  double worst = 0;
  for (int e = 0; e < 8; e++) {
    long r = (e * 7919L) % rows;
    double m = -INFINITY, sum = 0;
    for (long j = 0; j < inner; j++) m = fmax(m, x[r * inner + j]);
    for (long j = 0; j < inner; j++) sum += exp((double)x[r * inner + j] - m);
    for (long j = 0; j < inner; j++) {
      double ref = exp((double)x[r * inner + j] - m) / sum, d = fabs(y[r * inner + j] - ref) / ref;
      if (d > worst) worst = d;
    }
  }
  printf("  %s rows %ld x %ld, local %zu: %.4f ms, %.0f GB/s, max rel err %.2e\n", name, rows, inner, local, t * 1e3,
         2.0 * total * 4 / t * 1e-9, worst);
  clReleaseKernel(k);
  clReleaseMemObject(X), clReleaseMemObject(Y);
  free(x), free(y);
}

/* The PTX text with `directive` added to the entry of kernel `name` (after its parameter list,
 * before its body): how "+maxnreg=N" / "+minctas=N" options bound ptxas's register use. */
static char *patch_ptx(const char *ptx, size_t len, const char *name, const char *directive, size_t *outlen) {
  char pat[256];
  snprintf(pat, sizeof pat, ".entry %s(", name);
  const char *e = strstr(ptx, pat);
  if (!e) return NULL;
  const char *body = strchr(e, '{');
  if (!body) return NULL;
  size_t pre = (size_t)(body - ptx), dl = strlen(directive);
  char *out = malloc(len + dl + 2);
  memcpy(out, ptx, pre);
  memcpy(out + pre, directive, dl);
  out[pre + dl] = '\n';
  memcpy(out + pre + dl + 1, body, len - pre);
  *outlen = len + dl + 1;
  return out;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s gemm|softmax KERNELS_DIR OUTDIR [OPTIONS ...]\n", argv[0]);
    return 2;
  }
  const int gemm = strcmp(argv[1], "gemm") == 0;
  const char *want = getenv("NETCL_PROBE_PLATFORM") ? getenv("NETCL_PROBE_PLATFORM") : "NVIDIA";
  cl_uint np;
  CK(clGetPlatformIDs(0, NULL, &np));
  cl_platform_id plats[8];
  CK(clGetPlatformIDs(np, plats, NULL));
  cl_device_id dev = NULL;
  for (cl_uint p = 0; p < np && !dev; p++) {
    char name[256];
    clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof name, name, NULL);
    if (strstr(name, want)) clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 1, &dev, NULL);
  }
  if (!dev) {
    fprintf(stderr, "no device on a platform named like '%s'\n", want);
    return 1;
  }
  const int nv = strcmp(want, "NVIDIA") == 0;
  cl_int err;
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  CK(err);
  cl_command_queue q = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
  CK(err);
  const char *prelude = "enum nc_op { NC_OP_PROBE_, NC_OP_LOG_SOFTMAX };\n";
  const char *kname = getenv("NETCL_PROBE_KERNEL") ? getenv("NETCL_PROBE_KERNEL") : gemm ? "gemm_fast_l_rr" : "softmax_warp_32";
  const int mma = strncmp(kname, "gemm_mma_", 9) == 0, bf = strncmp(kname, "gemm_bf16_", 10) == 0,
            tf = strncmp(kname, "gemm_tf32_", 10) == 0;
  char *srcs[5] = {(char *)prelude, slurp(argv[2], "common.cl"), slurp(argv[2], gemm ? "mma.cl" : "softmax_warp.cl"),
                   gemm && !mma && !bf && !tf ? slurp(argv[2], "gemm_fast.cl") : "",
                   mma ? slurp(argv[2], "gemm_mma.cl") : bf ? slurp(argv[2], "gemm_bf16.cl") : tf ? slurp(argv[2], "gemm_tf32.cl") : ""};
  for (int v = 4; v <= argc; v++) {
    const char *extra = v < argc ? argv[v] : NULL;
    if (!extra && argc > 4) break; /* no options given: one build with none */
    char opts[1024], directive[64] = "", clean[1024] = "";
    /* "+maxnreg=N" and "+minctas=N" in an option set: PTX directives, not compiler options */
    for (const char *p = extra ? extra : ""; *p;) {
      size_t n = strcspn(p, " ");
      int val;
      if (sscanf(p, "+maxnreg=%d", &val) == 1) snprintf(directive, sizeof directive, ".maxnreg %d", val);
      else if (sscanf(p, "+minctas=%d", &val) == 1) snprintf(directive, sizeof directive, ".minnctapersm %d", val);
      else if (n) strncat(clean, p, n), strcat(clean, " ");
      p += n;
      while (*p == ' ') p++;
    }
    snprintf(opts, sizeof opts, "-cl-std=CL1.2 %s%s%s", nv ? "-cl-nv-verbose " : "", gemm || !nv ? "" : "-DNC_SHFL_PTX=1 ",
             clean);
    cl_program prog = clCreateProgramWithSource(ctx, 5, (const char **)srcs, NULL, &err);
    CK(err);
    err = clBuildProgram(prog, 1, &dev, opts, NULL, NULL);
    size_t loglen = 0;
    clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &loglen);
    char *log = malloc(loglen + 1);
    clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, loglen, log, NULL);
    log[loglen] = 0;
    printf("== [%d] %s%s\n", v - 3, opts, directive);
    /* the log lines about the timed kernel: ptxas's function header and the two after it */
    for (char *line = strstr(log, kname); line; line = strstr(line + 1, kname)) {
      char *end = line;
      for (int l = 0; l < 3 && end && *end; l++) end = strchr(end + 1, '\n');
      if (!end) end = line + strlen(line);
      printf("%.*s\n", (int)(end - line), line);
      break;
    }
    if (err != CL_SUCCESS) {
      printf("build failed (%d):\n%s\n", err, log);
      free(log);
      continue;
    }
    size_t binlen;
    CK(clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof binlen, &binlen, NULL));
    unsigned char *bin = malloc(binlen);
    CK(clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL));
    char path[1024];
    snprintf(path, sizeof path, "%s/%s_%d.ptx", argv[3], argv[1], v - 3);
    FILE *f = fopen(path, "wb");
    if (f) fwrite(bin, 1, binlen, f), fclose(f);
    snprintf(path, sizeof path, "%s/%s_%d.log", argv[3], argv[1], v - 3);
    if ((f = fopen(path, "wb"))) fputs(log, f), fclose(f);
    if (*directive && err == CL_SUCCESS) {
      /* rebuild from the patched PTX (NVIDIA's program binaries are PTX text) */
      size_t plen;
      char *ptx = patch_ptx((const char *)bin, binlen, kname, directive, &plen);
      if (!ptx) {
        printf("no entry %s in the binary\n", kname);
        free(bin), free(log);
        continue;
      }
      cl_int bst;
      const unsigned char *pb = (const unsigned char *)ptx;
      cl_program p2 = clCreateProgramWithBinary(ctx, 1, &dev, &plen, &pb, &bst, &err);
      CK(err);
      err = clBuildProgram(p2, 1, &dev, nv ? "-cl-nv-verbose" : "", NULL, NULL);
      size_t l2 = 0;
      clGetProgramBuildInfo(p2, dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &l2);
      char *log2 = malloc(l2 + 1);
      clGetProgramBuildInfo(p2, dev, CL_PROGRAM_BUILD_LOG, l2, log2, NULL);
      log2[l2] = 0;
      char *line = strstr(log2, kname);
      printf("  patched build (%d): %.300s\n", err, line ? line : log2);
      free(log2);
      free(ptx);
      if (err != CL_SUCCESS) {
        free(bin), free(log);
        continue;
      }
      clReleaseProgram(prog);
      prog = p2;
    }
    free(bin);
    free(log);
    if (gemm) run_gemm(ctx, q, prog, kname);
    else run_softmax(ctx, q, prog, kname);
    clReleaseProgram(prog);
  }
  return 0;
}

/* Peak mma.sync throughput through NVIDIA's OpenCL driver: register-only loops, no memory. */
#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *SRC =
"#define CH NCHAIN\n"
"__kernel void peak(__global float *out, uint seed, int iters) {\n"
"  uint a0 = seed + get_local_id(0), a1 = a0 * 3u, a2 = a0 * 5u, a3 = a0 * 7u, b0 = a0 * 11u, b1 = a0 * 13u;\n"
"  float c[CH][4];\n"
"  for (int k = 0; k < CH; k++) for (int e = 0; e < 4; e++) c[k][e] = 0.f;\n"
"  for (int it = 0; it < iters; it++) {\n"
"    #pragma unroll\n"
"    for (int k = 0; k < CH; k++) {\n"
"#ifdef BF16\n"
"      __asm__ volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"\n"
"#else\n"
"      __asm__ volatile(\"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"\n"
"#endif\n"
"        : \"+f\"(c[k][0]), \"+f\"(c[k][1]), \"+f\"(c[k][2]), \"+f\"(c[k][3]) : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"r\"(b0), \"r\"(b1));\n"
"    }\n"
"  }\n"
"  float s = 0.f;\n"
"  for (int k = 0; k < CH; k++) for (int e = 0; e < 4; e++) s += c[k][e];\n"
"  out[get_global_id(0)] = s;\n"
"}\n";

#define CK(x) do { cl_int e_ = (x); if (e_ != CL_SUCCESS) { fprintf(stderr, "%s: %d\n", #x, e_); exit(1); } } while (0)

int main(int argc, char **argv) {
  cl_uint np; CK(clGetPlatformIDs(0, NULL, &np));
  cl_platform_id plats[8]; CK(clGetPlatformIDs(np, plats, NULL));
  cl_device_id dev = NULL;
  for (cl_uint p = 0; p < np && !dev; p++) {
    char name[256]; clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof name, name, NULL);
    if (strstr(name, "NVIDIA")) clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_GPU, 1, &dev, NULL);
  }
  if (!dev) { fprintf(stderr, "no NVIDIA device\n"); return 1; }
  cl_uint cus; clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cus, &cus, NULL);
  cl_int err;
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err); CK(err);
  cl_command_queue q = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err); CK(err);
  const char *types[2] = {"tf32", "bf16"};
  int chains[3] = {4, 8, 16};
  int locals[3] = {128, 256, 512};
  for (int t = 0; t < 2; t++)
    for (int ci = 0; ci < 3; ci++) {
      char opts[128];
      snprintf(opts, sizeof opts, "-DNCHAIN=%d %s", chains[ci], t ? "-DBF16" : "");
      cl_program prog = clCreateProgramWithSource(ctx, 1, &SRC, NULL, &err); CK(err);
      err = clBuildProgram(prog, 1, &dev, opts, NULL, NULL);
      if (err != CL_SUCCESS) {
        char log[8192]; clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
        fprintf(stderr, "build %s: %s\n", opts, log); return 1;
      }
      cl_kernel k = clCreateKernel(prog, "peak", &err); CK(err);
      for (int li = 0; li < 3; li++)
        for (int per = 1; per <= 4; per *= 2) {
          size_t local = (size_t)locals[li], global = (size_t)cus * per * (2048 / local) * local / 2;
          int iters = 2048;
          cl_mem out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, global * 4, NULL, &err); CK(err);
          cl_uint seed = 1;
          CK(clSetKernelArg(k, 0, sizeof out, &out)); CK(clSetKernelArg(k, 1, sizeof seed, &seed));
          CK(clSetKernelArg(k, 2, sizeof iters, &iters));
          double best = 1e30;
          for (int r = 0; r < 5; r++) {
            cl_event ev;
            CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, &ev));
            CK(clWaitForEvents(1, &ev));
            cl_ulong t0, t1;
            clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
            clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
            clReleaseEvent(ev);
            if ((t1 - t0) * 1e-9 < best) best = (t1 - t0) * 1e-9;
          }
          double warps = global / 32.0, flops = warps * iters * chains[ci] * (t ? 4096.0 : 2048.0);
          printf("%s chains %2d local %3zu warps/SM %5.1f: %.1f TFLOP/s (%.3f ms)\n", types[t], chains[ci], local,
                 warps / cus, flops / best * 1e-12, best * 1e3);
          clReleaseMemObject(out);
        }
      clReleaseKernel(k);
      clReleaseProgram(prog);
    }
  return 0;
}

/* The OpenCL entry points, loaded from libOpenCL at run time (dlopen), so libnetcl starts and
 * runs on the CPU backend on machines with no OpenCL loader or driver at all. */
#ifndef NETCL_CL_API_H
#define NETCL_CL_API_H

#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <stdbool.h>

#define NC_CL_FUNCS(X)                                                                              \
  X(clGetPlatformIDs) X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetDeviceInfo) X(clCreateContext)  \
  X(clReleaseContext) X(clCreateCommandQueue) X(clReleaseCommandQueue) X(clCreateBuffer)            \
  X(clReleaseMemObject) X(clEnqueueWriteBuffer) X(clEnqueueReadBuffer) X(clEnqueueCopyBuffer)       \
  X(clEnqueueMapBuffer) X(clEnqueueUnmapMemObject) X(clCreateProgramWithSource)                     \
  X(clCreateProgramWithBinary) X(clBuildProgram) X(clGetProgramInfo) X(clGetProgramBuildInfo)       \
  X(clReleaseProgram) X(clCreateKernel) X(clReleaseKernel) X(clSetKernelArg)                        \
  X(clEnqueueNDRangeKernel) X(clFinish) X(clFlush) X(clGetEventInfo) X(clReleaseEvent)              \
  X(clWaitForEvents) X(clGetKernelWorkGroupInfo) X(clEnqueueFillBuffer)                             \
  X(clEnqueueMarkerWithWaitList) X(clRetainEvent) X(clRetainContext)                              \
  X(clEnqueueBarrierWithWaitList) X(clGetEventProfilingInfo) X(clGetKernelInfo)

typedef struct {
#define X(f) __typeof__(f) *f;
  NC_CL_FUNCS(X)
#undef X
} nc_cl_api;

extern nc_cl_api nc_cl;

/* Loads libOpenCL (NETCL_OPENCL_LIB overrides the name). False, with a reason in
 * nc_last_error(), when it is absent or incomplete. */
bool nc_cl_load(void);

/* "CL_OUT_OF_RESOURCES" etc. */
const char *nc_cl_strerror(cl_int err);

#endif

#include "cl_api.h"
#include <dlfcn.h>
#include <stdlib.h>
#include "netcl/status.h"

nc_cl_api nc_cl;

bool nc_cl_load(void) {
  const char *names[] = {getenv("NETCL_OPENCL_LIB"), "libOpenCL.so.1", "libOpenCL.so"};
  void *lib = NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++)
    if (names[i] && *names[i]) lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    nc_error(NC_ERR_DEVICE, "libOpenCL not found");
    return false;
  }
#define X(f)                                                                    \
  if (!(*(void **)&nc_cl.f = dlsym(lib, #f))) {                                 \
    nc_error(NC_ERR_DEVICE, "libOpenCL lacks %s (OpenCL 1.2 is required)", #f); \
    return false;                                                               \
  }
  NC_CL_FUNCS(X)
#undef X
  return true;
}

const char *nc_cl_strerror(cl_int err) {
  switch (err) {
#define E(c) case c: return #c;
    E(CL_SUCCESS) E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE) E(CL_COMPILER_NOT_AVAILABLE)
    E(CL_MEM_OBJECT_ALLOCATION_FAILURE) E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
    E(CL_BUILD_PROGRAM_FAILURE) E(CL_INVALID_VALUE) E(CL_INVALID_DEVICE) E(CL_INVALID_CONTEXT)
    E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_MEM_OBJECT) E(CL_INVALID_BINARY) E(CL_INVALID_BUILD_OPTIONS)
    E(CL_INVALID_PROGRAM) E(CL_INVALID_PROGRAM_EXECUTABLE) E(CL_INVALID_KERNEL_NAME) E(CL_INVALID_KERNEL)
    E(CL_INVALID_ARG_INDEX) E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE) E(CL_INVALID_KERNEL_ARGS)
    E(CL_INVALID_WORK_DIMENSION) E(CL_INVALID_WORK_GROUP_SIZE) E(CL_INVALID_WORK_ITEM_SIZE)
    E(CL_INVALID_GLOBAL_OFFSET) E(CL_INVALID_EVENT) E(CL_INVALID_OPERATION) E(CL_INVALID_BUFFER_SIZE)
    E(CL_INVALID_GLOBAL_WORK_SIZE) E(CL_MISALIGNED_SUB_BUFFER_OFFSET) E(CL_INVALID_PLATFORM)
    E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
#undef E
    default: return "CL_ERROR_UNKNOWN";
  }
}

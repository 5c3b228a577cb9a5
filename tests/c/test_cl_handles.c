/* OpenCL kernel handles (runtime/backend/opencl/cl_backend.h) on the first OpenCL device: every
 * slot of the backend's list names a kernel that its program has for some dtype, every fast
 * elementwise op has its float32 kernel, and a handle is resolved once: later look-ups return
 * the same handle without touching the program cache. Skips (77) without OpenCL. */
#include <stdlib.h>
#include "check.h"
#ifdef NC_HAVE_OPENCL
#include "backend/opencl/cl_backend.h"
#endif

#ifndef NC_HAVE_OPENCL
int main(void) {
  printf("built without OpenCL: skipped\n");
  return 77;
}
#else
static const char *slot_names[] = {
#define NAME_(id, program, name, naming) #id,
    NC_CL_KERNELS(NAME_)
#undef NAME_
};

/* Resolves (slot, dt) twice; true when the kernel exists (the second look-up must then give
 * the same handle). */
static bool resolves(nc_device *dev, int slot, nc_dtype dt) {
  const nc_cl_handle *h = NULL, *again = NULL;
  if (nc_cl_handle_get(dev, slot, dt, &h) != NC_OK) return false;
  CHECK(h && h->kernel && h->local >= 1);
  CHECK(nc_cl_handle_peek(dev, slot, dt) == h);
  CHECK_OK(nc_cl_handle_get(dev, slot, dt, &again));
  CHECK(again == h);
  return true;
}

int main(void) {
  CHECK_OK(nc_init());
  nc_device *dev;
  if (nc_device_find("opencl", &dev) != NC_OK) {
    printf("no OpenCL device: skipped\n");
    return 77;
  }
  const bool fp64 = nc_device_info_of(dev)->fp64;
  for (int slot = NC_OP_COUNT; slot < NC_CL_K_GEMM; slot++) { /* the GEMM engine's: test_gemm_tune */
    int found = 0;
    for (int dt = 0; dt < NC_DTYPE_COUNT; dt++)
      if (dt != NC_FLOAT64 || fp64) found += resolves(dev, slot, (nc_dtype)dt);
    if (!found) fprintf(stderr, "slot %s: no kernel for any dtype\n", slot_names[slot - NC_OP_COUNT]);
    CHECK(found > 0);
  }
  /* The fast kernels of the elementwise ops (comparisons and predicates have none). */
  for (int op = 0; op < NC_OP_COUNT; op++) {
    const nc_op_info *o = nc_op_get((nc_op)op);
    if ((o->family != NC_FAMILY_UNARY && o->family != NC_FAMILY_BINARY) || o->result == NC_RES_BOOL ||
        !(o->dtypes & NC_DT_F32))
      continue;
    bool ok = resolves(dev, op, NC_FLOAT32);
    if (!ok) fprintf(stderr, "op %s: no fast float32 kernel: %s\n", o->name, nc_last_error());
    CHECK(ok);
  }
  /* Resolved handles need the program cache no more. */
  nc_memory_stats before, after;
  CHECK_OK(nc_memory_stats_get(dev, &before));
  const nc_cl_handle *h;
  CHECK_OK(nc_cl_handle_get(dev, NC_OP_ADD, NC_FLOAT32, &h));
  CHECK_OK(nc_cl_handle_get(dev, NC_CL_K_COPY_FROM_INT32, NC_FLOAT32, &h));
  CHECK_OK(nc_memory_stats_get(dev, &after));
  CHECK(after.programs_built == before.programs_built && after.programs_loaded == before.programs_loaded);
  /* A TILED slot needs its variant (nc_cl_gemm_kernel gives it). */
  CHECK_ERR(nc_cl_handle_get(dev, NC_CL_K_GEMM, NC_FLOAT32, &h), NC_ERR_ARG, "needs a variant's build options");
  /* The warp softmax's kernels, in their build without options (shuffles through local memory),
   * which every device takes. */
  for (int slot = NC_CL_K_SOFTMAX_WARP_1; slot <= NC_CL_K_SOFTMAX_WARP_32; slot++) {
    bool ok = nc_cl_resolve(dev, slot, NC_FLOAT32, "", NULL, &h) == NC_OK;
    if (!ok) fprintf(stderr, "slot %s: %s\n", slot_names[slot - NC_OP_COUNT], nc_last_error());
    CHECK(ok);
  }
  CHECK_DONE();
}
#endif

/* The GEMM autotuner on the first OpenCL device, as a tiny search (2 candidates, 128^3) in a
 * private cache directory: it picks a candidate, writes its choice to disk atomically, a fresh
 * lookup reads it back, and GEMMs with the choice stay correct; the GEMM kernel handle, resolved
 * for the default variant before tuning, follows the choice. Skips (77) without OpenCL. */
#include <stdlib.h>
#include <unistd.h>
#include "check.h"
#include "linalg_ref.h"
#ifdef NC_HAVE_OPENCL
#include "backend/opencl/cl_linalg.h"
#endif

#ifndef NC_HAVE_OPENCL
int main(void) {
  printf("built without OpenCL: skipped\n");
  return 77;
}
#else
int main(void) {
  char dir[] = "/tmp/netcl-tune-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  setenv("NETCL_CACHE_DIR", dir, 1);
  CHECK_OK(nc_init());
  nc_device *dev;
  if (nc_device_find("opencl", &dev) != NC_OK) {
    printf("no OpenCL device: skipped\n");
    return 77;
  }
  /* A product before tuning resolves the GEMM handle for the default variant (float64: float32
   * products with contiguous rows or columns go to the large-tile kernel, gemm_fast.cl). */
  int64_t s[2] = {70, 70};
  double *a = ref_random(70 * 70), *want = calloc(70 * 70, sizeof(double));
  for (int i = 0; i < 70; i++)
    for (int k = 0; k < 70; k++)
      for (int j = 0; j < 70; j++) want[i * 70 + j] += a[i * 70 + k] * a[k * 70 + j];
  nc_tensor *t = ref_tensor(dev, NC_FLOAT64, 2, s, a), *c = NULL;
  CHECK_OK(nc_mm(t, t, &c));
  CHECK(ref_tensor_error(c, want, 70 * 70) < 1e-5);
  nc_tensor_release(c);
  c = NULL;
  nc_gemm_config first;
  CHECK_OK(nc_cl_gemm_config(dev, NC_FLOAT64, &first));
  const nc_cl_handle *h = nc_cl_handle_peek(dev, NC_CL_K_GEMM, NC_FLOAT64);
  CHECK(h && h->tiles[0] == first.mwg && h->tiles[1] == first.nwg && h->tiles[5] == first.vw);

  nc_gemm_config best;
  double gflops = 0;
  CHECK_OK(nc_cl_gemm_tune(dev, 2, 128, &best, &gflops));
  CHECK(gflops > 0);
  bool is_candidate = false;
  for (int i = 0; i < 2; i++) is_candidate |= memcmp(&best, &nc_gemm_candidates[i], sizeof best) == 0;
  CHECK(is_candidate);
  /* The choice is on disk: one .tune file beside the program binaries, no temporary left. */
  char cmd[256];
  snprintf(cmd, sizeof cmd,
           "test $(ls %s | grep -c '\\.tune$') -eq 1 && test $(ls %s | grep -vc -e '\\.tune$' -e "
           "'\\.clbin$') -eq 0",
           dir, dir);
  CHECK(system(cmd) == 0);
  nc_gemm_config again;
  CHECK_OK(nc_cl_gemm_config(dev, NC_FLOAT32, &again));
  CHECK(memcmp(&again, &best, sizeof best) == 0);
  /* A float32 product that the large-tile kernel does not take (A read every other column, so
   * neither of its strides is 1) goes through nc_cl_gemm's tuned variant, with a handle built
   * for it (the tuner leaves the handle of the last candidate it timed, which may not be best). */
  int64_t s2[2] = {70, 140};
  double *a2 = ref_random(70 * 140), *want2 = calloc(70 * 70, sizeof(double));
  for (int i = 0; i < 70; i++)
    for (int k = 0; k < 70; k++)
      for (int j = 0; j < 70; j++) want2[i * 70 + j] += a2[i * 140 + 2 * k] * a[k * 70 + j];
  nc_tensor *a32 = ref_tensor(dev, NC_FLOAT32, 2, s2, a2), *b32 = ref_tensor(dev, NC_FLOAT32, 2, s, a), *c32 = NULL;
  CHECK_OK(nc_tensor_empty(dev, NC_FLOAT32, 2, s, 0, &c32));
  nc_gemm_desc d = {.a = a32, .b = b32, .c = c32, .batch = 1, .m = 70, .n = 70, .k = 70,
                    .a_sm = 140, .a_sk = 2, .b_sk = 70, .b_sn = 1, .c_sm = 70, .c_sn = 1, .alpha = 1, .beta = 0};
  CHECK(!nc_cl_gemm_fast_fits(&d));
  CHECK_OK(nc_cl_gemm(&d));
  CHECK(ref_tensor_error(c32, want2, 70 * 70) < 1e-3);
  nc_tensor_release(a32), nc_tensor_release(b32), nc_tensor_release(c32);
  free(a2), free(want2);
  h = nc_cl_handle_peek(dev, NC_CL_K_GEMM, NC_FLOAT32);
  const int tiles[6] = {best.mwg, best.nwg, best.kwg, best.tm, best.tnv, best.vw};
  CHECK(h && memcmp(h->tiles, tiles, sizeof tiles) == 0);
  nc_tensor_release(t);
  free(a), free(want);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  CHECK_DONE();
}
#endif

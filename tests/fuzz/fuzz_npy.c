/* libFuzzer target: nc_npy_parse on arbitrary bytes. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  nc_tensor *t = NULL;
  fuzz_reset();
  nc_status s = nc_npy_parse(data, size, fuzz_cpu(), &t);
  fuzz_check_failure(s);
  if (s == NC_OK) {
    fuzz_touch(t);
    nc_tensor_release(t);
  }
  return 0;
}

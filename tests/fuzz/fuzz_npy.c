/* libFuzzer target: nc_npy_parse on arbitrary bytes. */
#include "fuzz_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nc_tensor *t = NULL;
  fuzz_reset();
  nc_status s = nc_npy_parse(data, size, fuzz_cpu(), &t);
  fuzz_check_status(s);
  if (s == NC_OK) {
    fuzz_touch(t);
    nc_tensor_release(t);
  }
  return 0;
}

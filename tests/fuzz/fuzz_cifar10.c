/* libFuzzer target: nc_cifar10_parse on arbitrary bytes. */
#include "fuzz_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nc_tensor *x = NULL, *y = NULL;
  fuzz_reset();
  nc_status s = nc_cifar10_parse(data, size, fuzz_cpu(), &x, &y);
  fuzz_check_status(s);
  if (s == NC_OK) {
    fuzz_require(x->shape[0] == y->shape[0] && (size_t)x->shape[0] * NC_CIFAR10_RECORD == size, "one record per 3073 bytes");
    fuzz_touch(x);
    fuzz_touch(y);
    nc_tensor_release(x);
    nc_tensor_release(y);
  }
  return 0;
}

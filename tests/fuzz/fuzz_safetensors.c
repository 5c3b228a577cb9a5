/* libFuzzer target: nc_safetensors_parse on arbitrary bytes must return a loaded file or a
 * status with a message, never crash, leak or read out of bounds. */
#include "fuzz_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nc_safetensors *f = NULL;
  fuzz_reset();
  nc_status s = nc_safetensors_parse(data, size, fuzz_cpu(), &f);
  fuzz_check_status(s);
  if (s == NC_OK) {
    for (size_t i = 0; i < nc_safetensors_count(f); i++) {
      fuzz_require(nc_safetensors_name(f, i) != NULL, "every tensor has a name");
      fuzz_touch(nc_safetensors_tensor(f, i));
    }
    for (size_t i = 0; i < nc_safetensors_metadata_count(f); i++)
      fuzz_require(nc_safetensors_metadata_key(f, i) && nc_safetensors_metadata_value(f, i),
                   "metadata entries are whole");
    nc_safetensors_free(f);
  }
  return 0;
}

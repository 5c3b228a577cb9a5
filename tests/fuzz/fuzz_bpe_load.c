/* Fuzz target: netcl's own tokenizer file format (nc_bpe_load_buffer). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_accepted = 0;
  nc_bpe *tok;
  if (nc_bpe_load_buffer(data, size, &tok) != NC_OK) {
    fuzz_require(nc_last_error()[0] != 0, "an error message");
    return 0;
  }
  fuzz_accepted = 1;
  fuzz_check_tokenizer(tok, data, size);
  nc_bpe_free(tok);
  return 0;
}

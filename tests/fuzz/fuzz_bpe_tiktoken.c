/* Fuzz target: tiktoken rank files (nc_bpe_from_tiktoken_buffer), with one special token. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_accepted = 0;
  static const nc_bpe_special specials[] = {{"<|endoftext|>", 300}};
  nc_bpe *tok;
  if (nc_bpe_from_tiktoken_buffer(data, size, "cl100k", specials, 1, &tok) != NC_OK) return 0;
  fuzz_accepted = 1;
  fuzz_check_tokenizer(tok, data, size);
  nc_bpe_free(tok);
  return 0;
}

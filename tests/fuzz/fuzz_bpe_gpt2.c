/* Fuzz target: GPT-2's encoder.json + vocab.bpe (nc_bpe_from_gpt2_buffers). The input holds
 * both files, separated by the first NUL byte (JSON text has none). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_accepted = 0;
  const uint8_t *sep = memchr(data, 0, size);
  size_t enc_len = sep ? (size_t)(sep - data) : size;
  const uint8_t *vocab = sep ? sep + 1 : data + size;
  size_t vocab_len = size - (size_t)(vocab - data);
  nc_bpe *tok;
  if (nc_bpe_from_gpt2_buffers(data, enc_len, vocab, vocab_len, &tok) != NC_OK) return 0;
  fuzz_accepted = 1;
  fuzz_check_tokenizer(tok, data, size);
  nc_bpe_free(tok);
  return 0;
}

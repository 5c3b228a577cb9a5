/* Fuzz target: encoding arbitrary bytes with a trained tokenizer, in every special-token mode;
 * the first byte picks the mode, the rest is the text. Whatever encodes must decode back. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static nc_bpe *tokenizer(void) {
  static nc_bpe *tok;
  if (tok) return tok;
  static const char *const specials[] = {"<|s|>", "<|s|>x", "<|e|>"};
  static const char corpus[] =
      "the cat sat on the mat; 12345 678 the end. aaaa bbbb abab \xc3\xa9t\xc3\xa9 "
      "\xe4\xb8\xad\xe6\x96\x87 <|s|> don't stop\n\n  the  THE The";
  nc_bpe_trainer *tr;
  fuzz_require(nc_bpe_trainer_new("cl100k", (const char *const *)specials, 3, &tr) == NC_OK, "trainer");
  fuzz_require(nc_bpe_trainer_feed(tr, corpus, sizeof corpus - 1) == NC_OK, "feed");
  fuzz_require(nc_bpe_trainer_train(tr, 320, 1, &tok) == NC_OK, "train");
  nc_bpe_trainer_free(tr);
  return tok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_accepted = 0;
  if (size == 0) return 0;
  nc_bpe *tok = tokenizer();
  static const char *const allowed[] = {"<|s|>", "<|nope|>"};
  nc_bpe_encode_opts opts = {.allow_all = data[0] & 1,
                             .allowed = allowed,
                             .n_allowed = (data[0] >> 1) & 3,
                             .lenient = (data[0] >> 3) & 1};
  if (opts.n_allowed > 2) opts.n_allowed = 2;
  uint32_t *ids;
  size_t n;
  if (nc_bpe_encode(tok, (const char *)data + 1, size - 1, &opts, &ids, &n) != NC_OK) {
    fuzz_require(!opts.lenient, "lenient encoding never fails");
    return 0;
  }
  char *back;
  size_t len;
  fuzz_require(nc_bpe_decode(tok, ids, n, &back, &len) == NC_OK, "decode");
  fuzz_require(len == size - 1 && (len == 0 || memcmp(back, data + 1, len) == 0), "round trip");
  free(back);
  free(ids);
  fuzz_accepted = 1;
  return 0;
}

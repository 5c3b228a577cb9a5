/* Shared by the fuzz targets: what every tokenizer that loads must satisfy. A violated
 * property aborts, which is what libFuzzer (and the replay driver) report. */
#ifndef NETCL_FUZZ_COMMON_H
#define NETCL_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "netcl/netcl.h"

/* Whether the last input was accepted (loaded, or encoded): the replay driver checks it
 * against the corpus file names (ok_* must be accepted, bad_* rejected). */
int fuzz_accepted;

static inline void fuzz_require(int cond, const char *what) {
  if (!cond) {
    fprintf(stderr, "fuzz property violated: %s (%s)\n", what, nc_last_error());
    abort();
  }
}

/* A loaded tokenizer encodes any bytes (here: the input itself) and decodes them back, and its
 * own file format reproduces it exactly. */
static inline void fuzz_check_tokenizer(nc_bpe *tok, const uint8_t *data, size_t size) {
  nc_bpe_encode_opts opts = {.allow_all = 1};
  uint32_t *ids;
  size_t n;
  fuzz_require(nc_bpe_encode(tok, (const char *)data, size, &opts, &ids, &n) == NC_OK, "encode");
  char *back;
  size_t len;
  fuzz_require(nc_bpe_decode(tok, ids, n, &back, &len) == NC_OK, "decode");
  fuzz_require(len == size && (size == 0 || memcmp(back, data, size) == 0), "round trip");
  free(back);
  free(ids);
  char *file, *again;
  size_t file_len, again_len;
  fuzz_require(nc_bpe_serialize(tok, &file, &file_len) == NC_OK, "serialize");
  nc_bpe *copy;
  fuzz_require(nc_bpe_load_buffer(file, file_len, &copy) == NC_OK, "reload");
  fuzz_require(nc_bpe_serialize(copy, &again, &again_len) == NC_OK, "serialize the reloaded copy");
  fuzz_require(again_len == file_len && memcmp(again, file, file_len) == 0, "save/load is exact");
  free(file);
  free(again);
  nc_bpe_free(copy);
}

#endif

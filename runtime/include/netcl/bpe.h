/* Byte-level BPE tokenizer: encoding, decoding, training, and its file formats.
 *
 * Model. Every token is a byte string. The 256 single bytes are always tokens, so any byte
 * string (invalid UTF-8 included) encodes and decodes back to itself. Ordinary tokens carry a
 * merge rank: encoding a pre-split chunk starts from single bytes and repeatedly joins the
 * adjacent pair whose concatenation is the token of lowest rank (leftmost pair on ties), as
 * tiktoken does. Special tokens are matched in the text before pre-splitting and are never
 * produced by merging. Ids are 0-based and may have gaps (tiktoken's cl100k has one); the
 * vocabulary size is the largest id plus one. docs/text.md has the details.
 *
 * Thread safety: a tokenizer keeps a cache of encoded chunks and scratch buffers, so one
 * tokenizer must not be used by two threads at once. Separate tokenizers are independent. */
#ifndef NETCL_BPE_H
#define NETCL_BPE_H

#include <stddef.h>
#include <stdint.h>
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nc_bpe nc_bpe;
typedef struct nc_bpe_trainer nc_bpe_trainer;

/* Ids above this are refused by every loader (keeps a corrupt file from asking for a huge
 * id table). */
#define NC_BPE_MAX_ID ((1u << 24) - 1)

/* The PCRE2 source of a built-in pre-split pattern ("gpt2", "cl100k"), or NULL. */
const char *nc_bpe_builtin_pattern(const char *name);

/* A special token given to a loader: its text (non-empty, no NUL byte) and id. */
typedef struct {
  const char *text;
  uint32_t id;
} nc_bpe_special;

/* ---- loading and saving ---------------------------------------------------------------------
 * Each loader gives the caller a new tokenizer (free it with nc_bpe_free) or fails with
 * NC_ERR_IO (file), NC_ERR_FORMAT (content; the message names the line) or NC_ERR_ARG (a bad
 * pattern or special token). `pattern` is a built-in name or a PCRE2 pattern; NULL means
 * "cl100k". */

/* netcl's own format (docs/text.md): tokens, ranks, specials and the pattern. */
nc_status nc_bpe_load(const char *path, nc_bpe **out);
nc_status nc_bpe_load_buffer(const void *data, size_t len, nc_bpe **out);
/* Writes atomically (temporary file, fsync, rename). */
nc_status nc_bpe_save(const nc_bpe *tok, const char *path);
/* The file's bytes in a malloc'd buffer (NUL-terminated; len excludes the NUL). */
nc_status nc_bpe_serialize(const nc_bpe *tok, char **data, size_t *len);

/* tiktoken rank files: one "<base64 token> <rank>" per line; the rank is the id. */
nc_status nc_bpe_from_tiktoken(const char *path, const char *pattern, const nc_bpe_special *specials,
                               size_t n_specials, nc_bpe **out);
nc_status nc_bpe_from_tiktoken_buffer(const void *data, size_t len, const char *pattern,
                                      const nc_bpe_special *specials, size_t n_specials, nc_bpe **out);

/* GPT-2's encoder.json (token -> id, tokens written with GPT-2's byte-to-unicode alphabet) and
 * vocab.bpe (merges in priority order). Entries of encoder.json that no merge produces, such
 * as <|endoftext|>, become special tokens. The pattern is "gpt2". */
nc_status nc_bpe_from_gpt2(const char *encoder_json_path, const char *vocab_bpe_path, nc_bpe **out);
nc_status nc_bpe_from_gpt2_buffers(const void *encoder_json, size_t encoder_len, const void *vocab_bpe,
                                   size_t vocab_len, nc_bpe **out);

void nc_bpe_free(nc_bpe *tok);

/* ---- encoding and decoding --------------------------------------------------------------- */

typedef struct {
  /* Which special tokens are matched in the text: all of them (allow_all != 0), or the ones
   * named in allowed[0..n_allowed). A zeroed struct allows none. */
  int allow_all;
  const char *const *allowed;
  size_t n_allowed;
  /* Strict (0, the default): naming a special token the tokenizer does not have is an
   * NC_ERR_ARG, and so is text that contains a special token that is not allowed (as
   * tiktoken's disallowed_special="all"). Lenient (1): unknown names are ignored and the text
   * of a disallowed special token is encoded as ordinary bytes. */
  int lenient;
} nc_bpe_encode_opts;

/* Encodes text[0..len) (any bytes). opts may be NULL (no special tokens, strict). On success
 * *ids is a malloc'd array of *n_ids ids (free() it; NULL when *n_ids is 0). */
nc_status nc_bpe_encode(nc_bpe *tok, const char *text, size_t len, const nc_bpe_encode_opts *opts,
                        uint32_t **ids, size_t *n_ids);

/* Concatenates the tokens' bytes into a malloc'd, NUL-terminated buffer (*len excludes the
 * NUL). An id that is not in the vocabulary is an NC_ERR_INDEX. */
nc_status nc_bpe_decode(const nc_bpe *tok, const uint32_t *ids, size_t n_ids, char **out, size_t *len);

/* ---- queries --------------------------------------------------------------------------- */

/* Largest id plus one. */
size_t nc_bpe_vocab_size(const nc_bpe *tok);
/* Number of ordinary (mergeable) tokens and of special tokens. */
size_t nc_bpe_ordinary_count(const nc_bpe *tok);
size_t nc_bpe_special_count(const nc_bpe *tok);
/* The i-th special token (0 <= i < nc_bpe_special_count), in id order. */
nc_bpe_special nc_bpe_special_at(const nc_bpe *tok, size_t i);
/* The id of the token with these bytes (special tokens included): 1 and *id, or 0. */
int nc_bpe_token_to_id(const nc_bpe *tok, const char *bytes, size_t len, uint32_t *id);
/* The bytes of token `id` (not NUL-terminated), or NULL when no token has that id. */
const char *nc_bpe_id_to_token(const nc_bpe *tok, uint32_t id, size_t *len);
/* 1 when id is a special token. */
int nc_bpe_is_special(const nc_bpe *tok, uint32_t id);
/* The PCRE2 pre-split pattern source. */
const char *nc_bpe_pattern(const nc_bpe *tok);

/* ---- training --------------------------------------------------------------------------- */

/* A trainer pre-splits and counts the text it is fed, then learns merges. Occurrences of the
 * special tokens in the text are cut out before pre-splitting, so no merge crosses them. */
nc_status nc_bpe_trainer_new(const char *pattern, const char *const *specials, size_t n_specials,
                             nc_bpe_trainer **out);
nc_status nc_bpe_trainer_feed(nc_bpe_trainer *tr, const char *text, size_t len);
/* Feeds a whole file as one text. */
nc_status nc_bpe_trainer_feed_file(nc_bpe_trainer *tr, const char *path);
/* Learns merges until the vocabulary has vocab_size tokens (256 bytes + merges + specials) or
 * no pair occurs at least min_frequency (>= 1) times. Byte b gets id b, the k-th merge id
 * 256 + k, and the special tokens the ids after the last merge, in the order given. Ties
 * between pairs of equal count go to the pair with the lower left id, then the lower right id.
 * The trainer may be trained again (its counts are kept). */
nc_status nc_bpe_trainer_train(nc_bpe_trainer *tr, size_t vocab_size, uint64_t min_frequency, nc_bpe **out);
void nc_bpe_trainer_free(nc_bpe_trainer *tr);

#ifdef __cplusplus
}
#endif

#endif

/* The tokenizer's representation, shared by the files of runtime/text (not public). */
#ifndef NETCL_TEXT_BPE_IMPL_H
#define NETCL_TEXT_BPE_IMPL_H

#include <stdint.h>
#include "core/check.h"
#include "netcl/bpe.h"
#include "text/bytes_map.h"
#include "text/presplit.h"

enum { NC_TOK_NONE = 0, NC_TOK_ORDINARY = 1, NC_TOK_SPECIAL = 2 };

typedef struct {
  size_t off; /* into nc_bpe.bytes */
  uint32_t len;
  uint32_t kind; /* NC_TOK_* */
} nc_bpe_entry;

/* A growable id array. */
typedef struct {
  uint32_t *v;
  size_t n, cap;
} nc_idvec;

nc_status nc_idvec_reserve(nc_idvec *v, size_t extra);
static inline nc_status nc_idvec_push(nc_idvec *v, uint32_t id) {
  if (v->n == v->cap) NC_TRY(nc_idvec_reserve(v, 1));
  v->v[v->n++] = id;
  return NC_OK;
}

/* Working memory of the merge loop, reused across chunks. */
typedef struct {
  uint32_t *next; /* start of the piece after the piece starting here */
  uint32_t *ids;  /* id of the piece starting here */
  uint32_t *prev;
  uint8_t *alive; /* a piece starts here */
  void *heap;
  size_t cap;      /* chunk bytes the arrays hold */
  size_t heap_cap; /* heap entries */
} nc_merge_scratch;

struct nc_bpe {
  nc_presplit *split;
  nc_bpe_entry *entries; /* by id; n_entries = largest id + 1 */
  size_t n_entries, entries_cap;
  char *bytes; /* token bytes, back to back */
  size_t bytes_len, bytes_cap;
  nc_bytes_map ranks;    /* ordinary token bytes -> rank << 32 | id */
  nc_bytes_map specials; /* special token bytes -> id */
  size_t n_ordinary, n_specials;
  uint32_t byte_ids[256];
  /* Set by nc_bpe_finish: the special tokens in id order, as the scanner wants them (the texts
   * are NUL-terminated copies owned here). */
  uint32_t *special_ids;
  const char **special_texts;
  size_t *special_lens;
  /* Encoder state: the chunk cache (bytes -> offset << 8 | count into cache_ids). */
  nc_bytes_map cache;
  nc_idvec cache_ids;
  nc_merge_scratch scratch;
};

/* ---- building (loaders and the trainer) ---- */
nc_status nc_bpe_new(const char *pattern, nc_bpe **out);
/* Errors are NC_ERR_FORMAT with a message the caller prefixes with its location. */
nc_status nc_bpe_add_ordinary(nc_bpe *tok, const char *bytes, size_t len, uint32_t rank, uint32_t id);
nc_status nc_bpe_add_special(nc_bpe *tok, const char *text, size_t len, uint32_t id);
/* Checks the whole (all 256 bytes present, specials distinct from ordinary tokens) and
 * prepares encoding. */
nc_status nc_bpe_finish(nc_bpe *tok);

static inline const char *nc_bpe_entry_bytes(const nc_bpe *tok, uint32_t id) {
  return tok->bytes + tok->entries[id].off;
}

/* Rank of the ordinary token with these bytes: 1 and *rank (and *id), or 0. */
static inline int nc_bpe_rank(const nc_bpe *tok, const char *p, size_t n, uint32_t *rank, uint32_t *id) {
  uint64_t v;
  if (!nc_bytes_map_get(&tok->ranks, p, n, &v)) return 0;
  *rank = (uint32_t)(v >> 32);
  *id = (uint32_t)v;
  return 1;
}

/* Encodes one pre-split chunk by merging (no cache), appending ids to out. */
nc_status nc_bpe_merge_chunk(nc_bpe *tok, const char *chunk, size_t len, nc_idvec *out);
void nc_merge_scratch_free(nc_merge_scratch *s);

/* Writes a printable, quoted, possibly shortened form of bytes into out (for messages). */
const char *nc_bpe_escape(const char *p, size_t n, char *out, size_t cap);

#endif

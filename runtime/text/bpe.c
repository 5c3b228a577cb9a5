/* The tokenizer object: building it up, checking it, queries and decoding. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "text/bpe_impl.h"

const char *nc_bpe_escape(const char *p, size_t n, char *out, size_t cap) {
  static const char hex[] = "0123456789abcdef";
  size_t o = 0;
  if (cap < 8) {
    if (cap) out[0] = 0;
    return out;
  }
  out[o++] = '\'';
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)p[i];
    if (o + 8 >= cap) {
      memcpy(out + o, "...", 3);
      o += 3;
      break;
    }
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out[o++] = (char)c;
    } else {
      out[o++] = '\\';
      out[o++] = 'x';
      out[o++] = hex[c >> 4];
      out[o++] = hex[c & 15];
    }
  }
  out[o++] = '\'';
  out[o] = 0;
  return out;
}

nc_status nc_bpe_new(const char *pattern, nc_bpe **out) {
  *out = NULL;
  nc_bpe *tok = calloc(1, sizeof *tok);
  if (!tok) return nc_error(NC_ERR_OOM, "out of memory creating a tokenizer");
  nc_status s = nc_presplit_new(pattern ? pattern : "cl100k", &tok->split);
  if (s != NC_OK) {
    free(tok);
    return s;
  }
  *out = tok;
  return NC_OK;
}

void nc_bpe_free(nc_bpe *tok) {
  if (!tok) return;
  nc_presplit_free(tok->split);
  free(tok->entries);
  free(tok->bytes);
  nc_bytes_map_free(&tok->ranks);
  nc_bytes_map_free(&tok->specials);
  free(tok->special_ids);
  for (size_t i = 0; tok->special_texts && i < tok->n_specials; i++) free((char *)tok->special_texts[i]);
  free(tok->special_texts);
  free(tok->special_lens);
  nc_bytes_map_free(&tok->cache);
  free(tok->cache_ids.v);
  nc_merge_scratch_free(&tok->scratch);
  free(tok);
}

/* Makes room for id and stores the token's bytes; the caller sets the kind. */
static nc_status add_entry(nc_bpe *tok, const char *p, size_t len, uint32_t id) {
  char esc[64];
  if (len == 0) return nc_error(NC_ERR_FORMAT, "empty token (id %u)", id);
  if (len > UINT32_MAX) return nc_error(NC_ERR_FORMAT, "token of %zu bytes is too long", len);
  if (id > NC_BPE_MAX_ID)
    return nc_error(NC_ERR_FORMAT, "id %u is too large (at most %u)", id, NC_BPE_MAX_ID);
  if (id >= tok->entries_cap) {
    size_t ncap = tok->entries_cap ? tok->entries_cap : 512;
    while (ncap <= id) ncap *= 2;
    /* calloc rather than realloc + memset: a large table from fresh zero pages costs memory
     * only where ids are used, so a file with one huge id does not fill hundreds of MB. */
    nc_bpe_entry *ne = calloc(ncap, sizeof *ne);
    if (!ne) return nc_error(NC_ERR_OOM, "out of memory for %zu token entries", ncap);
    if (tok->entries_cap) memcpy(ne, tok->entries, tok->entries_cap * sizeof *ne);
    free(tok->entries);
    tok->entries = ne;
    tok->entries_cap = ncap;
  }
  if (tok->entries[id].kind != NC_TOK_NONE)
    return nc_error(NC_ERR_FORMAT, "id %u is used twice (%s and %s)", id,
                    nc_bpe_escape(nc_bpe_entry_bytes(tok, id), tok->entries[id].len, esc, 32),
                    nc_bpe_escape(p, len, esc + 32, 32));
  if (tok->bytes_len + len > tok->bytes_cap) {
    size_t ncap = tok->bytes_cap ? tok->bytes_cap : 4096;
    while (ncap < tok->bytes_len + len) ncap *= 2;
    char *nb = realloc(tok->bytes, ncap);
    if (!nb) return nc_error(NC_ERR_OOM, "out of memory for token bytes");
    tok->bytes = nb;
    tok->bytes_cap = ncap;
  }
  memcpy(tok->bytes + tok->bytes_len, p, len);
  tok->entries[id].off = tok->bytes_len;
  tok->entries[id].len = (uint32_t)len;
  tok->bytes_len += len;
  if (id >= tok->n_entries) tok->n_entries = (size_t)id + 1;
  return NC_OK;
}

nc_status nc_bpe_add_ordinary(nc_bpe *tok, const char *p, size_t len, uint32_t rank, uint32_t id) {
  char esc[48];
  uint64_t v;
  if (nc_bytes_map_get(&tok->ranks, p, len, &v))
    return nc_error(NC_ERR_FORMAT, "token %s appears twice (ids %u and %u)",
                    nc_bpe_escape(p, len, esc, sizeof esc), (uint32_t)v, id);
  NC_TRY(add_entry(tok, p, len, id));
  uint64_t *slot = nc_bytes_map_slot(&tok->ranks, p, len, NULL);
  if (!slot) return nc_error(NC_ERR_OOM, "out of memory for the rank table");
  *slot = (uint64_t)rank << 32 | id;
  tok->entries[id].kind = NC_TOK_ORDINARY;
  if (len == 1) tok->byte_ids[(unsigned char)p[0]] = id;
  tok->n_ordinary++;
  return NC_OK;
}

nc_status nc_bpe_add_special(nc_bpe *tok, const char *text, size_t len, uint32_t id) {
  char esc[48];
  uint64_t v;
  if (len && memchr(text, 0, len))
    return nc_error(NC_ERR_FORMAT, "special token %s contains a NUL byte",
                    nc_bpe_escape(text, len, esc, sizeof esc));
  if (nc_bytes_map_get(&tok->specials, text, len, &v))
    return nc_error(NC_ERR_FORMAT, "special token %s appears twice (ids %u and %u)",
                    nc_bpe_escape(text, len, esc, sizeof esc), (uint32_t)v, id);
  NC_TRY(add_entry(tok, text, len, id));
  uint64_t *slot = nc_bytes_map_slot(&tok->specials, text, len, NULL);
  if (!slot) return nc_error(NC_ERR_OOM, "out of memory for special tokens");
  *slot = id;
  tok->entries[id].kind = NC_TOK_SPECIAL;
  tok->n_specials++;
  return NC_OK;
}

nc_status nc_bpe_finish(nc_bpe *tok) {
  char esc[48];
  for (int b = 0; b < 256; b++) {
    char c = (char)b;
    uint32_t rank, id;
    if (!nc_bpe_rank(tok, &c, 1, &rank, &id))
      return nc_error(NC_ERR_FORMAT,
                      "the single-byte token 0x%02x is missing; byte-level BPE needs all 256 bytes", b);
  }
  NC_ASSERT(!tok->special_ids); /* finished once */
  if (tok->n_specials) {
    tok->special_ids = malloc(tok->n_specials * sizeof *tok->special_ids);
    tok->special_texts = calloc(tok->n_specials, sizeof *tok->special_texts);
    tok->special_lens = malloc(tok->n_specials * sizeof *tok->special_lens);
    if (!tok->special_ids || !tok->special_texts || !tok->special_lens)
      return nc_error(NC_ERR_OOM, "out of memory for special tokens");
  }
  size_t k = 0;
  for (size_t id = 0; id < tok->n_entries; id++) {
    if (tok->entries[id].kind != NC_TOK_SPECIAL) continue;
    const char *p = nc_bpe_entry_bytes(tok, (uint32_t)id);
    size_t n = tok->entries[id].len;
    uint64_t v;
    if (nc_bytes_map_get(&tok->ranks, p, n, &v))
      return nc_error(NC_ERR_FORMAT, "special token %s (id %zu) has the bytes of ordinary token %u",
                      nc_bpe_escape(p, n, esc, sizeof esc), id, (uint32_t)v);
    /* NUL-terminated copies: nc_bpe_special_at hands them out as C strings. */
    char *text = malloc(n + 1);
    if (!text) return nc_error(NC_ERR_OOM, "out of memory for special tokens");
    memcpy(text, p, n);
    text[n] = 0;
    tok->special_ids[k] = (uint32_t)id;
    tok->special_texts[k] = text;
    tok->special_lens[k] = n;
    k++;
  }
  return NC_OK;
}

/* ---- queries ---------------------------------------------------------------------------- */

size_t nc_bpe_vocab_size(const nc_bpe *tok) { return tok->n_entries; }
size_t nc_bpe_ordinary_count(const nc_bpe *tok) { return tok->n_ordinary; }
size_t nc_bpe_special_count(const nc_bpe *tok) { return tok->n_specials; }
const char *nc_bpe_pattern(const nc_bpe *tok) { return nc_presplit_source(tok->split); }

nc_bpe_special nc_bpe_special_at(const nc_bpe *tok, size_t i) {
  nc_bpe_special sp = {NULL, 0};
  if (i < tok->n_specials) {
    sp.text = tok->special_texts[i];
    sp.id = tok->special_ids[i];
  }
  return sp;
}

int nc_bpe_token_to_id(const nc_bpe *tok, const char *bytes, size_t len, uint32_t *id) {
  uint64_t v;
  if (nc_bytes_map_get(&tok->ranks, bytes, len, &v) || nc_bytes_map_get(&tok->specials, bytes, len, &v)) {
    *id = (uint32_t)v;
    return 1;
  }
  return 0;
}

const char *nc_bpe_id_to_token(const nc_bpe *tok, uint32_t id, size_t *len) {
  if (id >= tok->n_entries || tok->entries[id].kind == NC_TOK_NONE) return NULL;
  *len = tok->entries[id].len;
  return nc_bpe_entry_bytes(tok, id);
}

int nc_bpe_is_special(const nc_bpe *tok, uint32_t id) {
  return id < tok->n_entries && tok->entries[id].kind == NC_TOK_SPECIAL;
}

nc_status nc_bpe_decode(const nc_bpe *tok, const uint32_t *ids, size_t n_ids, char **out, size_t *len) {
  *out = NULL;
  *len = 0;
  size_t total = 0;
  for (size_t i = 0; i < n_ids; i++) {
    uint32_t id = ids[i];
    if (id >= tok->n_entries || tok->entries[id].kind == NC_TOK_NONE)
      return nc_error(NC_ERR_INDEX, "id %u (position %zu) is not in the vocabulary (size %zu)", id, i + 1,
                      tok->n_entries);
    total += tok->entries[id].len;
  }
  char *buf = malloc(total + 1);
  if (!buf) return nc_error(NC_ERR_OOM, "out of memory decoding %zu bytes", total);
  size_t o = 0;
  for (size_t i = 0; i < n_ids; i++) {
    const nc_bpe_entry *e = &tok->entries[ids[i]];
    memcpy(buf + o, tok->bytes + e->off, e->len);
    o += e->len;
  }
  buf[o] = 0;
  *out = buf;
  *len = total;
  return NC_OK;
}

/* tiktoken rank files ("cl100k_base.tiktoken"): each line is "<base64 token> <rank>"; the rank
 * is both the merge priority and the id. Blank lines are skipped, as tiktoken's loader does.
 * Special tokens are not in the file: the caller names them. */
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "text/base64.h"
#include "text/bpe_impl.h"
#include "text/lines.h"
#include "text/text_file.h"

static nc_status parse(const char *data, size_t len, nc_bpe *tok) {
  nc_lines r;
  nc_lines_init(&r, data, len);
  unsigned char *buf = NULL;
  size_t buf_cap = 0;
  const char *s;
  size_t n;
  nc_status st = NC_OK;
  size_t tokens = 0;
  while (st == NC_OK && nc_lines_next(&r, &s, &n)) {
    if (n == 0) continue;
    const char *sp = memchr(s, ' ', n);
    uint32_t rank;
    if (!sp) {
      st = nc_error(NC_ERR_FORMAT, "line %zu: expected '<base64 token> <rank>'", r.line);
      break;
    }
    size_t bl = (size_t)(sp - s);
    if (!nc_parse_u32(sp + 1, n - bl - 1, &rank)) {
      st = nc_error(NC_ERR_FORMAT, "line %zu: the rank is not a decimal number below 2^32", r.line);
      break;
    }
    if (bl / 4 * 3 + 1 > buf_cap) {
      unsigned char *nb = realloc(buf, bl / 4 * 3 + 1);
      if (!nb) {
        st = nc_error(NC_ERR_OOM, "out of memory reading a tiktoken file");
        break;
      }
      buf = nb;
      buf_cap = bl / 4 * 3 + 1;
    }
    long tl = nc_base64_decode(s, bl, buf);
    if (tl <= 0) {
      st = nc_error(NC_ERR_FORMAT, "line %zu: the token is not valid base64", r.line);
      break;
    }
    if (rank < tok->n_entries && tok->entries[rank].kind != NC_TOK_NONE) {
      st = nc_error(NC_ERR_FORMAT, "line %zu: duplicate rank %u", r.line, rank);
      break;
    }
    st = nc_bpe_add_ordinary(tok, (const char *)buf, (size_t)tl, rank, rank);
    if (st != NC_OK) st = nc_error_prefix(st, "line %zu", r.line);
    tokens++;
  }
  free(buf);
  if (st == NC_OK && tokens == 0) st = nc_error(NC_ERR_FORMAT, "no tokens (an empty tiktoken file)");
  return st;
}

nc_status nc_bpe_from_tiktoken_buffer(const void *data, size_t len, const char *pattern,
                                      const nc_bpe_special *specials, size_t n_specials, nc_bpe **out) {
  *out = NULL;
  nc_bpe *tok;
  NC_TRY(nc_bpe_new(pattern, &tok));
  nc_status s = parse(data, len, tok);
  for (size_t i = 0; s == NC_OK && i < n_specials; i++) {
    const char *t = specials[i].text;
    if (!t || !*t) {
      s = nc_error(NC_ERR_ARG, "special token %zu has no text", i + 1);
      break;
    }
    if (specials[i].id < tok->n_entries && tok->entries[specials[i].id].kind == NC_TOK_ORDINARY) {
      char esc[64];
      s = nc_error(NC_ERR_ARG, "special token %s: id %u is already the rank of an ordinary token",
                   nc_bpe_escape(t, strlen(t), esc, sizeof esc), specials[i].id);
      break;
    }
    s = nc_bpe_add_special(tok, t, strlen(t), specials[i].id);
    if (s != NC_OK) s = nc_error_prefix(s == NC_ERR_FORMAT ? NC_ERR_ARG : s, "special tokens");
  }
  if (s == NC_OK) s = nc_bpe_finish(tok);
  if (s != NC_OK) {
    nc_bpe_free(tok);
    return s;
  }
  *out = tok;
  return NC_OK;
}

nc_status nc_bpe_from_tiktoken(const char *path, const char *pattern, const nc_bpe_special *specials,
                               size_t n_specials, nc_bpe **out) {
  char *data;
  size_t len;
  *out = NULL;
  NC_TRY(nc_text_read_file(path, &data, &len));
  nc_status s = nc_bpe_from_tiktoken_buffer(data, len, pattern, specials, n_specials, out);
  free(data);
  if (s != NC_OK) return nc_error_prefix(s, "%s", path);
  return NC_OK;
}

/* netcl's own tokenizer file (docs/text.md, "File format"): a versioned text file.
 *
 *   netcl-bpe 1
 *   pattern <base64 of the pre-split pattern>
 *   ordinary <N>
 *   <base64 token> <id>        N lines, in merge-rank order (the first line has rank 0)
 *   special <M>
 *   <base64 token> <id>        M lines
 *   end
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "text/base64.h"
#include "text/bpe_impl.h"
#include "text/lines.h"
#include "text/text_file.h"

#define MAGIC "netcl-bpe"
#define VERSION 1u

/* ---- writing ------------------------------------------------------------------------------ */

typedef struct {
  char *p;
  size_t n, cap;
} strbuf;

static int sb_reserve(strbuf *b, size_t extra) {
  if (b->n + extra + 1 <= b->cap) return 1;
  size_t ncap = b->cap ? b->cap : 1 << 16;
  while (ncap < b->n + extra + 1) ncap *= 2;
  char *np = realloc(b->p, ncap);
  if (!np) return 0;
  b->p = np;
  b->cap = ncap;
  return 1;
}

static int sb_printf_u32(strbuf *b, const char *prefix, uint32_t v) {
  if (!sb_reserve(b, strlen(prefix) + 16)) return 0;
  b->n += (size_t)snprintf(b->p + b->n, b->cap - b->n, "%s%u\n", prefix, v);
  return 1;
}

static int sb_token_line(strbuf *b, const char *bytes, size_t len, uint32_t id) {
  if (!sb_reserve(b, nc_base64_encoded_len(len) + 16)) return 0;
  nc_base64_encode((const unsigned char *)bytes, len, b->p + b->n);
  b->n += nc_base64_encoded_len(len);
  b->n += (size_t)snprintf(b->p + b->n, b->cap - b->n, " %u\n", id);
  return 1;
}

typedef struct {
  uint32_t rank, id;
} rank_id;

static int by_rank(const void *a, const void *b) {
  const rank_id *x = a, *y = b;
  return x->rank < y->rank ? -1 : x->rank > y->rank ? 1 : (x->id > y->id) - (x->id < y->id);
}

nc_status nc_bpe_serialize(const nc_bpe *tok, char **data, size_t *len) {
  *data = NULL;
  *len = 0;
  rank_id *order = malloc((tok->n_ordinary ? tok->n_ordinary : 1) * sizeof *order);
  strbuf b = {0};
  if (!order) return nc_error(NC_ERR_OOM, "out of memory saving a tokenizer");
  size_t k = 0;
  for (size_t id = 0; id < tok->n_entries; id++) {
    if (tok->entries[id].kind != NC_TOK_ORDINARY) continue;
    uint32_t rank = 0, same;
    nc_bpe_rank(tok, nc_bpe_entry_bytes(tok, (uint32_t)id), tok->entries[id].len, &rank, &same);
    order[k].rank = rank;
    order[k].id = (uint32_t)id;
    k++;
  }
  qsort(order, k, sizeof *order, by_rank);
  const char *pat = nc_bpe_pattern(tok);
  size_t plen = strlen(pat);
  int ok = sb_reserve(&b, 64 + nc_base64_encoded_len(plen));
  if (ok) {
    b.n += (size_t)snprintf(b.p, b.cap, MAGIC " %u\npattern ", VERSION);
    nc_base64_encode((const unsigned char *)pat, plen, b.p + b.n);
    b.n += nc_base64_encoded_len(plen);
    b.p[b.n++] = '\n';
  }
  ok = ok && sb_printf_u32(&b, "ordinary ", (uint32_t)k);
  for (size_t i = 0; ok && i < k; i++)
    ok = sb_token_line(&b, nc_bpe_entry_bytes(tok, order[i].id), tok->entries[order[i].id].len, order[i].id);
  ok = ok && sb_printf_u32(&b, "special ", (uint32_t)tok->n_specials);
  for (size_t i = 0; ok && i < tok->n_specials; i++)
    ok = sb_token_line(&b, tok->special_texts[i], tok->special_lens[i], tok->special_ids[i]);
  ok = ok && sb_reserve(&b, 4);
  free(order);
  if (!ok) {
    free(b.p);
    return nc_error(NC_ERR_OOM, "out of memory saving a tokenizer");
  }
  memcpy(b.p + b.n, "end\n", 5);
  b.n += 4;
  *data = b.p;
  *len = b.n;
  return NC_OK;
}

nc_status nc_bpe_save(const nc_bpe *tok, const char *path) {
  char *data;
  size_t len;
  NC_TRY(nc_bpe_serialize(tok, &data, &len));
  nc_status s = nc_text_write_atomic(path, data, len);
  free(data);
  return s;
}

/* ---- reading ------------------------------------------------------------------------------ */

typedef struct {
  nc_lines r;
  unsigned char *buf; /* decoded base64 */
  size_t buf_cap;
} reader;

static nc_status fail(reader *rd, const char *what) {
  return nc_error(NC_ERR_FORMAT, "line %zu: %s", rd->r.line, what);
}

/* The writer ends every line with "\n": a line before 'end' that reaches the end of the data
 * without one is what is left of a file cut short (its id or token may be cut too, and would
 * otherwise be read as another valid but wrong line). */
static nc_status next_line(reader *rd, const char **s, size_t *n, const char *expected) {
  if (!nc_lines_next(&rd->r, s, n))
    return nc_error(NC_ERR_FORMAT, "truncated after line %zu (expected %s)", rd->r.line, expected);
  if (rd->r.p == rd->r.end && rd->r.end[-1] != '\n' && strcmp(expected, "'end'") != 0)
    return nc_error(NC_ERR_FORMAT, "truncated: line %zu stops without its newline, so the file was cut short (expected %s)",
                    rd->r.line, expected);
  return NC_OK;
}

/* "<keyword> <count>" */
static nc_status header(reader *rd, const char *kw, uint32_t *count) {
  const char *s = NULL;
  size_t n = 0, kl = strlen(kw);
  NC_TRY(next_line(rd, &s, &n, kw));
  if (n <= kl + 1 || memcmp(s, kw, kl) != 0 || s[kl] != ' ' || !nc_parse_u32(s + kl + 1, n - kl - 1, count))
    return nc_error(NC_ERR_FORMAT, "line %zu: expected '%s <count>'", rd->r.line, kw);
  if (*count > NC_BPE_MAX_ID + 1u)
    return nc_error(NC_ERR_FORMAT, "line %zu: %u %s tokens is more than the %u ids allowed", rd->r.line,
                    *count, kw, NC_BPE_MAX_ID + 1u);
  return NC_OK;
}

/* Decodes base64 s[0..n) into rd->buf; returns the length or -1. */
static long decode(reader *rd, const char *s, size_t n) {
  size_t need = n / 4 * 3 + 1;
  if (need > rd->buf_cap) {
    unsigned char *nb = realloc(rd->buf, need);
    if (!nb) return -2;
    rd->buf = nb;
    rd->buf_cap = need;
  }
  return nc_base64_decode(s, n, rd->buf);
}

/* "<base64> <id>" */
static nc_status token_line(reader *rd, const char *what, long *len, uint32_t *id) {
  const char *s = NULL;
  size_t n = 0;
  NC_TRY(next_line(rd, &s, &n, what));
  const char *sp = memchr(s, ' ', n);
  if (!sp) return fail(rd, "expected '<base64 token> <id>'");
  size_t bl = (size_t)(sp - s);
  if (!nc_parse_u32(sp + 1, n - bl - 1, id)) return fail(rd, "the id is not a decimal number below 2^32");
  *len = decode(rd, s, bl);
  if (*len == -2) return nc_error(NC_ERR_OOM, "out of memory reading a tokenizer");
  if (*len < 0) return fail(rd, "the token is not valid base64");
  if (*len == 0) return fail(rd, "empty token");
  return NC_OK;
}

static nc_status parse(reader *rd, nc_bpe **out) {
  const char *s = NULL;
  size_t n = 0;
  if (!nc_lines_next(&rd->r, &s, &n) || n < sizeof MAGIC || memcmp(s, MAGIC " ", sizeof MAGIC) != 0)
    return nc_error(NC_ERR_FORMAT, "not a netcl-bpe tokenizer file (it does not start with '" MAGIC " ')");
  uint32_t version;
  if (!nc_parse_u32(s + sizeof MAGIC, n - sizeof MAGIC, &version)) return fail(rd, "bad version number");
  if (version != VERSION)
    return nc_error(NC_ERR_FORMAT, "format version %u is not supported (this build reads version %u)",
                    version, VERSION);
  NC_TRY(next_line(rd, &s, &n, "pattern"));
  if (n < 9 || memcmp(s, "pattern ", 8) != 0) return fail(rd, "expected 'pattern <base64>'");
  long plen = decode(rd, s + 8, n - 8);
  if (plen == -2) return nc_error(NC_ERR_OOM, "out of memory reading a tokenizer");
  if (plen <= 0) return fail(rd, "the pattern is not valid base64");
  if (memchr(rd->buf, 0, (size_t)plen)) return fail(rd, "the pattern contains a NUL byte");
  rd->buf[plen] = 0;
  nc_status st = nc_bpe_new((const char *)rd->buf, out);
  /* In a file, a pattern that does not compile is a corrupt file. */
  if (st != NC_OK) return nc_error_prefix(st == NC_ERR_ARG ? NC_ERR_FORMAT : st, "line %zu", rd->r.line);
  nc_bpe *tok = *out;
  uint32_t count;
  NC_TRY(header(rd, "ordinary", &count));
  for (uint32_t rank = 0; rank < count; rank++) {
    long len;
    uint32_t id;
    NC_TRY(token_line(rd, "an ordinary token", &len, &id));
    st = nc_bpe_add_ordinary(tok, (const char *)rd->buf, (size_t)len, rank, id);
    if (st != NC_OK) return nc_error_prefix(st, "line %zu", rd->r.line);
  }
  NC_TRY(header(rd, "special", &count));
  for (uint32_t i = 0; i < count; i++) {
    long len;
    uint32_t id;
    NC_TRY(token_line(rd, "a special token", &len, &id));
    st = nc_bpe_add_special(tok, (const char *)rd->buf, (size_t)len, id);
    if (st != NC_OK) return nc_error_prefix(st, "line %zu", rd->r.line);
  }
  NC_TRY(next_line(rd, &s, &n, "'end'"));
  if (n != 3 || memcmp(s, "end", 3) != 0) return fail(rd, "expected 'end'");
  while (nc_lines_next(&rd->r, &s, &n))
    if (n) return fail(rd, "data after 'end'");
  return nc_bpe_finish(tok);
}

nc_status nc_bpe_load_buffer(const void *data, size_t len, nc_bpe **out) {
  *out = NULL;
  reader rd = {0};
  nc_lines_init(&rd.r, data, len);
  nc_bpe *tok = NULL;
  nc_status s = parse(&rd, &tok);
  free(rd.buf);
  if (s != NC_OK) {
    nc_bpe_free(tok);
    return s;
  }
  *out = tok;
  return NC_OK;
}

nc_status nc_bpe_load(const char *path, nc_bpe **out) {
  char *data;
  size_t len;
  *out = NULL;
  NC_TRY(nc_text_read_file(path, &data, &len));
  nc_status s = nc_bpe_load_buffer(data, len, out);
  free(data);
  if (s != NC_OK) return nc_error_prefix(s, "%s", path);
  return NC_OK;
}

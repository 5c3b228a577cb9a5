/* GPT-2's tokenizer files. encoder.json maps tokens to ids and vocab.bpe lists the merges in
 * priority order; both spell bytes with GPT-2's byte-to-unicode alphabet, in which the 188
 * printable Latin-1 bytes stand for themselves and the other 68 bytes are U+0100..U+0143 in
 * byte order (so that no token contains a space or a control character).
 *
 * Ranks follow tiktoken's conversion: merge k has rank 256 + k. A merge whose result already
 * exists (a second way to spell the same bytes) keeps the first rank. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "text/bpe_impl.h"
#include "text/lines.h"
#include "text/text_file.h"

static int printable_latin1(unsigned b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/* Code point -> byte (-1 when outside the alphabet). */
typedef struct {
  int16_t extra[68]; /* byte of U+0100 + i */
} byte_decoder;

static void decoder_init(byte_decoder *d) {
  int n = 0;
  for (unsigned b = 0; b < 256; b++)
    if (!printable_latin1(b)) d->extra[n++] = (int16_t)b;
}

static int decode_cp(const byte_decoder *d, uint32_t cp) {
  if (cp < 256) return printable_latin1(cp) ? (int)cp : -1;
  if (cp < 256 + 68) return d->extra[cp - 256];
  return -1;
}

/* Decodes one UTF-8 code point from s[0..n); returns its length (0 when malformed). */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
  if (n == 0) return 0;
  if (s[0] < 0x80) {
    *cp = s[0];
    return 1;
  }
  size_t len = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 0;
  if (len == 0 || len > n || s[0] > 0xF4) return 0;
  uint32_t c = s[0] & (0x7F >> len);
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    c = c << 6 | (s[i] & 0x3F);
  }
  static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < min_cp[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0; /* overlong, surrogate */
  *cp = c;
  return len;
}

/* Maps a GPT-2-alphabet string to bytes in out (room for n bytes). Returns the byte count, or
 * -1 when a character is outside the alphabet (or the UTF-8 is malformed). */
static long to_bytes(const byte_decoder *d, const char *s, size_t n, char *out) {
  long o = 0;
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    size_t l = utf8_next((const unsigned char *)s + i, n - i, &cp);
    int b = l ? decode_cp(d, cp) : -1;
    if (b < 0) return -1;
    out[o++] = (char)b;
    i += l;
  }
  return o;
}

typedef struct {
  const char *key; /* borrowed from the JSON document */
  size_t key_len;
  char *bytes; /* decoded, or NULL when outside the alphabet */
  long n_bytes;
  uint32_t id;
  int used; /* a byte or a merge result */
} enc_entry;

typedef struct {
  json_t *doc;
  enc_entry *e;
  size_t n;
  nc_bytes_map by_bytes; /* decoded bytes -> index into e */
  byte_decoder dec;
} encoder;

static void encoder_free(encoder *enc) {
  for (size_t i = 0; i < enc->n; i++) free(enc->e[i].bytes);
  free(enc->e);
  nc_bytes_map_free(&enc->by_bytes);
  json_decref(enc->doc);
}

static nc_status encoder_load(encoder *enc, const char *data, size_t len) {
  json_error_t jerr;
  enc->doc = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!enc->doc)
    return nc_error(NC_ERR_FORMAT, "encoder.json line %d column %d: %s", jerr.line, jerr.column, jerr.text);
  if (!json_is_object(enc->doc))
    return nc_error(NC_ERR_FORMAT, "encoder.json: expected an object of token -> id");
  size_t n = json_object_size(enc->doc);
  enc->e = calloc(n ? n : 1, sizeof *enc->e);
  if (!enc->e) return nc_error(NC_ERR_OOM, "out of memory reading encoder.json");
  const char *key;
  json_t *val;
  char esc[64];
  json_object_foreach(enc->doc, key, val) {
    enc_entry *e = &enc->e[enc->n++];
    e->key = key;
    e->key_len = strlen(key);
    if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) > NC_BPE_MAX_ID)
      return nc_error(NC_ERR_FORMAT, "encoder.json: the id of %s is not an integer in 0..%u",
                      nc_bpe_escape(key, e->key_len, esc, sizeof esc), NC_BPE_MAX_ID);
    e->id = (uint32_t)json_integer_value(val);
    if (!e->key_len) return nc_error(NC_ERR_FORMAT, "encoder.json: empty token (id %u)", e->id);
    e->bytes = malloc(e->key_len);
    if (!e->bytes) return nc_error(NC_ERR_OOM, "out of memory reading encoder.json");
    e->n_bytes = to_bytes(&enc->dec, key, e->key_len, e->bytes);
    if (e->n_bytes < 0) {
      free(e->bytes);
      e->bytes = NULL;
      continue;
    }
    /* The alphabet is a bijection, so two keys cannot decode to the same bytes. */
    uint64_t *slot = nc_bytes_map_slot(&enc->by_bytes, e->bytes, (size_t)e->n_bytes, NULL);
    if (!slot) return nc_error(NC_ERR_OOM, "out of memory reading encoder.json");
    *slot = enc->n - 1;
  }
  return NC_OK;
}

static enc_entry *encoder_find(encoder *enc, const char *bytes, size_t n) {
  uint64_t i;
  return nc_bytes_map_get(&enc->by_bytes, bytes, n, &i) ? &enc->e[i] : NULL;
}

static nc_status add_bytes(encoder *enc, nc_bpe *tok) {
  for (unsigned b = 0; b < 256; b++) {
    char c = (char)b;
    enc_entry *e = encoder_find(enc, &c, 1);
    if (!e)
      return nc_error(NC_ERR_FORMAT,
                      "encoder.json lacks the single-byte token 0x%02x; byte-level BPE needs all 256", b);
    e->used = 1;
    nc_status s = nc_bpe_add_ordinary(tok, &c, 1, b, e->id);
    if (s != NC_OK) return nc_error_prefix(s, "encoder.json");
  }
  return NC_OK;
}

static nc_status add_merges(encoder *enc, nc_bpe *tok, const char *data, size_t len) {
  nc_lines r;
  nc_lines_init(&r, data, len);
  const char *s;
  size_t n;
  uint32_t rank = 256;
  char *buf = NULL;
  size_t buf_cap = 0;
  char esc[64];
  nc_status st = NC_OK;
  while (st == NC_OK && nc_lines_next(&r, &s, &n)) {
    if (n == 0 || (r.line == 1 && n >= 8 && !memcmp(s, "#version", 8))) continue;
    const char *sp = memchr(s, ' ', n);
    if (!sp || sp == s || sp == s + n - 1 || memchr(sp + 1, ' ', n - (size_t)(sp - s) - 1)) {
      st = nc_error(NC_ERR_FORMAT, "vocab.bpe line %zu: expected two tokens separated by one space", r.line);
      break;
    }
    if (n > buf_cap) {
      char *nb = realloc(buf, n);
      if (!nb) {
        st = nc_error(NC_ERR_OOM, "out of memory reading vocab.bpe");
        break;
      }
      buf = nb;
      buf_cap = n;
    }
    size_t ll = (size_t)(sp - s);
    long lb = to_bytes(&enc->dec, s, ll, buf);
    long rb = lb < 0 ? -1 : to_bytes(&enc->dec, sp + 1, n - ll - 1, buf + lb);
    if (lb < 0 || rb < 0) {
      st = nc_error(NC_ERR_FORMAT, "vocab.bpe line %zu: a character outside GPT-2's byte alphabet", r.line);
      break;
    }
    uint32_t rk, id;
    if (!nc_bpe_rank(tok, buf, (size_t)lb, &rk, &id) || !nc_bpe_rank(tok, buf + lb, (size_t)rb, &rk, &id)) {
      int left_bad = !nc_bpe_rank(tok, buf, (size_t)lb, &rk, &id);
      st = nc_error(NC_ERR_FORMAT,
                    "vocab.bpe line %zu: %s is neither a byte nor the result of an earlier merge", r.line,
                    left_bad ? nc_bpe_escape(s, ll, esc, sizeof esc)
                             : nc_bpe_escape(sp + 1, n - ll - 1, esc, sizeof esc));
      break;
    }
    size_t total = (size_t)(lb + rb);
    if (nc_bpe_rank(tok, buf, total, &rk, &id)) {
      rank++;
      continue;
    }
    enc_entry *e = encoder_find(enc, buf, total);
    if (!e) {
      st = nc_error(NC_ERR_FORMAT, "vocab.bpe line %zu: the merge result of '%.*s' is not in encoder.json",
                    r.line, (int)n, s);
      break;
    }
    e->used = 1;
    st = nc_bpe_add_ordinary(tok, buf, total, rank++, e->id);
    if (st != NC_OK) st = nc_error_prefix(st, "vocab.bpe line %zu", r.line);
  }
  free(buf);
  return st;
}

static nc_status add_specials(encoder *enc, nc_bpe *tok) {
  for (size_t i = 0; i < enc->n; i++) {
    enc_entry *e = &enc->e[i];
    if (e->used) continue;
    nc_status s = e->bytes ? nc_bpe_add_special(tok, e->bytes, (size_t)e->n_bytes, e->id)
                           : nc_bpe_add_special(tok, e->key, e->key_len, e->id);
    if (s != NC_OK) return nc_error_prefix(s, "encoder.json");
  }
  return NC_OK;
}

nc_status nc_bpe_from_gpt2_buffers(const void *encoder_json, size_t encoder_len, const void *vocab_bpe,
                                   size_t vocab_len, nc_bpe **out) {
  *out = NULL;
  encoder enc = {0};
  decoder_init(&enc.dec);
  nc_bpe *tok = NULL;
  nc_status s = nc_bpe_new("gpt2", &tok);
  if (s == NC_OK) s = encoder_load(&enc, encoder_json, encoder_len);
  if (s == NC_OK) s = add_bytes(&enc, tok);
  if (s == NC_OK) s = add_merges(&enc, tok, vocab_bpe, vocab_len);
  if (s == NC_OK) s = add_specials(&enc, tok);
  if (s == NC_OK) s = nc_bpe_finish(tok);
  encoder_free(&enc);
  if (s != NC_OK) {
    nc_bpe_free(tok);
    return s;
  }
  *out = tok;
  return NC_OK;
}

nc_status nc_bpe_from_gpt2(const char *encoder_json_path, const char *vocab_bpe_path, nc_bpe **out) {
  char *enc = NULL, *voc = NULL;
  size_t enc_len, voc_len;
  *out = NULL;
  NC_TRY(nc_text_read_file(encoder_json_path, &enc, &enc_len));
  nc_status s = nc_text_read_file(vocab_bpe_path, &voc, &voc_len);
  if (s == NC_OK) s = nc_bpe_from_gpt2_buffers(enc, enc_len, voc, voc_len, out);
  free(enc);
  free(voc);
  return s;
}

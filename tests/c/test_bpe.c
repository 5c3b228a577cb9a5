/* Byte-level BPE: pre-splitting, the merge loop against a reference, round trips on random
 * bytes, training worked out by hand, the three file formats (built here) and their errors. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "netcl/netcl.h"
#include "check.h"
#include "text/base64.h"
#include "text/presplit.h"

/* ---- helpers -------------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 11);
}

typedef struct {
  char *p;
  size_t n, cap;
} buf;

static void bput(buf *b, const void *p, size_t n) {
  if (b->n + n + 1 > b->cap) {
    b->cap = (b->n + n + 1) * 2;
    b->p = realloc(b->p, b->cap);
  }
  memcpy(b->p + b->n, p, n);
  b->n += n;
  b->p[b->n] = 0;
}

static void bprintf(buf *b, const char *fmt, ...) {
  char tmp[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  bput(b, tmp, (size_t)n);
}

static void b64_line(buf *b, const char *tok, size_t n, unsigned id) {
  char enc[512];
  nc_base64_encode((const unsigned char *)tok, n, enc);
  bput(b, enc, nc_base64_encoded_len(n));
  bprintf(b, " %u\n", id);
}

/* A tiktoken file: the 256 bytes at ranks 0..255 (byte order), then `extra` at 256, 257, ... */
static buf tiktoken_file(const char *const *extra, size_t n_extra) {
  buf b = {0};
  for (int i = 0; i < 256; i++) {
    char c = (char)i;
    b64_line(&b, &c, 1, (unsigned)i);
  }
  for (size_t i = 0; i < n_extra; i++) b64_line(&b, extra[i], strlen(extra[i]), (unsigned)(256 + i));
  return b;
}

static nc_bpe *tiktoken_tok(const char *const *extra, size_t n_extra, const char *pattern,
                            const nc_bpe_special *sp, size_t n_sp) {
  buf b = tiktoken_file(extra, n_extra);
  nc_bpe *tok = NULL;
  CHECK_OK(nc_bpe_from_tiktoken_buffer(b.p, b.n, pattern, sp, n_sp, &tok));
  free(b.p);
  return tok;
}

/* Encodes and compares with the expected ids (terminated by -1). */
static void expect_ids(nc_bpe *tok, const char *text, size_t len, const nc_bpe_encode_opts *o,
                       const int *want, int line) {
  uint32_t *ids = NULL;
  size_t n = 0;
  nc_status s = nc_bpe_encode(tok, text, len, o, &ids, &n);
  size_t wn = 0;
  while (want[wn] >= 0) wn++;
  int same = s == NC_OK && n == wn;
  for (size_t i = 0; same && i < n; i++) same = ids[i] == (uint32_t)want[i];
  if (!same) {
    fprintf(stderr, "test_bpe.c:%d: encoding \"%.*s\": got", line, (int)len, text);
    if (s != NC_OK) fprintf(stderr, " error %s", nc_last_error());
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %u", ids[i]);
    fprintf(stderr, ", want");
    for (size_t i = 0; i < wn; i++) fprintf(stderr, " %d", want[i]);
    fprintf(stderr, "\n");
    check_failures++;
  }
  free(ids);
}
#define EXPECT_IDS(tok, text, opts, ...) \
  expect_ids(tok, text, strlen(text), opts, (const int[]){__VA_ARGS__, -1}, __LINE__)

static int round_trips(nc_bpe *tok, const char *text, size_t len, const nc_bpe_encode_opts *o) {
  uint32_t *ids;
  size_t n;
  char *back;
  size_t blen;
  if (nc_bpe_encode(tok, text, len, o, &ids, &n) != NC_OK) {
    fprintf(stderr, "encode failed: %s\n", nc_last_error());
    return 0;
  }
  int ok = nc_bpe_decode(tok, ids, n, &back, &blen) == NC_OK && blen == len && memcmp(back, text, len) == 0;
  free(ids);
  if (ok) free(back);
  return ok;
}

/* Random text: bytes of every kind, with runs of letters, digits, spaces, multi-byte UTF-8 and
 * broken UTF-8, so both the pattern and the invalid-byte paths are hit. */
static size_t random_text(char *out, size_t max) {
  static const char *const pieces[] = {
      "the",  " the", "ab",   "aaa",          " ",     "  ",       "\n",           "\r\n",
      "123",  "4567", "'s",   "'ll",          "!!",    "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80",
      "\xff", "\xc3", "\x80", "\xed\xa0\x80", "<|s|>", "<|e|>",    "\t",           "é"};
  size_t n = 0, target = rnd() % max;
  while (n < target) {
    if (rnd() % 3 == 0) {
      out[n++] = (char)(rnd() & 0xff);
    } else {
      const char *p = pieces[rnd() % (sizeof pieces / sizeof *pieces)];
      size_t l = strlen(p);
      if (n + l > max) break;
      memcpy(out + n, p, l);
      n += l;
    }
  }
  return n;
}

/* ---- base64 -------------------------------------------------------------------------------- */

static void test_base64(void) {
  static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
  static const char *const coded[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
  for (int i = 0; i < 7; i++) {
    char enc[16] = {0};
    unsigned char dec[16];
    nc_base64_encode((const unsigned char *)plain[i], strlen(plain[i]), enc);
    CHECK(!strcmp(enc, coded[i]));
    long n = nc_base64_decode(coded[i], strlen(coded[i]), dec);
    CHECK(n == (long)strlen(plain[i]) && !memcmp(dec, plain[i], (size_t)n));
  }
  unsigned char dec[16];
  CHECK(nc_base64_decode("Zg=", 3, dec) == -1);      /* length not a multiple of 4 */
  CHECK(nc_base64_decode("Zh==", 4, dec) == -1);     /* nonzero padding bits */
  CHECK(nc_base64_decode("Z===", 4, dec) == -1);     /* too much padding */
  CHECK(nc_base64_decode("Zg==Zg==", 8, dec) == -1); /* padding inside */
  CHECK(nc_base64_decode("Zm9*", 4, dec) == -1);     /* bad character */
}

/* ---- pre-splitting ------------------------------------------------------------------------- */

typedef struct {
  char chunks[32][32];
  int n;
} chunk_list;

static nc_status collect(void *ud, const char *p, size_t n) {
  chunk_list *c = ud;
  if (c->n < 32 && n < 32) {
    memcpy(c->chunks[c->n], p, n);
    c->chunks[c->n][n] = 0;
  }
  c->n++;
  return NC_OK;
}

static void expect_split(const char *pattern, const char *text, size_t len, const char *const *want,
                         int line) {
  nc_presplit *ps;
  chunk_list got = {0};
  if (nc_presplit_new(pattern, &ps) != NC_OK) {
    fprintf(stderr, "test_bpe.c:%d: %s\n", line, nc_last_error());
    check_failures++;
    return;
  }
  CHECK_OK(nc_presplit_run(ps, text, len, collect, &got));
  int n = 0;
  while (want[n]) n++;
  int same = got.n == n;
  for (int i = 0; same && i < n; i++) same = !strcmp(got.chunks[i], want[i]);
  if (!same) {
    fprintf(stderr, "test_bpe.c:%d: split of \"%s\" with %s:", line, text, pattern);
    for (int i = 0; i < got.n && i < 32; i++) fprintf(stderr, " [%s]", got.chunks[i]);
    fprintf(stderr, "\n");
    check_failures++;
  }
  nc_presplit_free(ps);
}
#define EXPECT_SPLIT(pat, text, ...) \
  expect_split(pat, text, strlen(text), (const char *const[]){__VA_ARGS__, NULL}, __LINE__)

static void test_presplit(void) {
  EXPECT_SPLIT("gpt2", "Hello world's 123  foo!!\n", "Hello", " world", "'s", " 123", " ", " foo", "!!",
               "\n");
  EXPECT_SPLIT("gpt2", "don't  stop", "don", "'t", " ", " stop");
  EXPECT_SPLIT("gpt2", "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87", "caf\xc3\xa9", " \xe4\xb8\xad\xe6\x96\x87");
  EXPECT_SPLIT("cl100k", "1234567 HELLO'LL\n\nworld", "123", "456", "7", " HELLO", "'LL", "\n\n", "world");
  EXPECT_SPLIT("cl100k", "x  \n  y", "x", "  \n", " ", " y");
  /* Invalid UTF-8 never matches; the bytes between matches become chunks of their own. */
  EXPECT_SPLIT("gpt2",
               "ab\xff\xfe"
               "cd \x80",
               "ab", "\xff\xfe", "cd", " ", "\x80");
  /* A pattern that leaves text out still yields every byte. */
  EXPECT_SPLIT("[0-9]+", "ab12cd", "ab", "12", "cd");
  /* Empty matches produce no chunks and do not stall. */
  EXPECT_SPLIT("x*", "axxb", "a", "xx", "b");
  nc_presplit *ps;
  CHECK_ERR(nc_presplit_new("(unclosed", &ps), NC_ERR_ARG, "does not compile");
  CHECK_ERR(nc_presplit_new("", &ps), NC_ERR_ARG, "empty");
  CHECK(nc_bpe_builtin_pattern("gpt2") && nc_bpe_builtin_pattern("cl100k") &&
        !nc_bpe_builtin_pattern("o200k"));
}

/* ---- the merge loop against tiktoken's linear scan ------------------------------------------- */

/* tiktoken's byte_pair_merge: scan for the lowest-ranked adjacent pair, leftmost on ties. Ranks
 * are ids for a tiktoken-style vocabulary. */
static size_t reference_chunk(const nc_bpe *tok, const char *p, size_t n, uint32_t *out) {
  uint32_t id;
  if (nc_bpe_token_to_id(tok, p, n, &id)) {
    out[0] = id;
    return 1;
  }
  size_t starts[512], m = n;
  for (size_t i = 0; i <= n; i++) starts[i] = i;
  for (;;) {
    size_t best = SIZE_MAX;
    uint32_t best_rank = UINT32_MAX;
    for (size_t i = 0; i + 2 <= m; i++) {
      uint32_t r;
      if (nc_bpe_token_to_id(tok, p + starts[i], starts[i + 2] - starts[i], &r) && r < best_rank) {
        best_rank = r;
        best = i;
      }
    }
    if (best == SIZE_MAX) break;
    memmove(&starts[best + 1], &starts[best + 2], (m - best - 1) * sizeof *starts);
    m--;
  }
  for (size_t i = 0; i < m; i++) nc_bpe_token_to_id(tok, p + starts[i], starts[i + 1] - starts[i], &out[i]);
  return m;
}

typedef struct {
  const nc_bpe *tok;
  uint32_t *ids;
  size_t n;
} ref_ctx;

static nc_status ref_chunk(void *ud, const char *p, size_t n) {
  ref_ctx *c = ud;
  c->n += reference_chunk(c->tok, p, n, c->ids + c->n);
  return NC_OK;
}

static void test_merge_matches_reference(void) {
  /* A vocabulary with overlapping tokens so that rank order and ties matter. */
  static const char *const extra[] = {"aa", "ab",  "ba",  "aaa",  "abab",     "bab",
                                      "th", "the", " t",  " the", "aab",      "baa",
                                      "bb", "abb", "bba", "aba",  "\xc3\xa9", "\xff\xff"};
  nc_bpe *tok = tiktoken_tok(extra, sizeof extra / sizeof *extra, "gpt2", NULL, 0);
  /* Long single chunks too: a pattern that takes whole letter runs. */
  nc_bpe *whole = tiktoken_tok(extra, sizeof extra / sizeof *extra, "[ab]+|[^ab]+", NULL, 0);
  nc_presplit *ps_gpt2, *ps_whole;
  CHECK_OK(nc_presplit_new("gpt2", &ps_gpt2));
  CHECK_OK(nc_presplit_new("[ab]+|[^ab]+", &ps_whole));
  if (!tok || !whole) return;
  char text[400];
  uint32_t ref[400] = {0};
  int mismatches = 0;
  for (int iter = 0; iter < 3000; iter++) {
    size_t n = 0, target = rnd() % 300;
    while (n < target) { /* mostly a's and b's, some other bytes */
      uint32_t r = rnd() % 16;
      text[n++] = r < 7 ? 'a' : r < 13 ? 'b' : r == 13 ? ' ' : (char)(rnd() & 0xff);
    }
    for (int which = 0; which < 2; which++) {
      nc_bpe *t = which ? whole : tok;
      ref_ctx c = {t, ref, 0};
      CHECK_OK(nc_presplit_run(which ? ps_whole : ps_gpt2, text, n, ref_chunk, &c));
      uint32_t *ids;
      size_t m;
      CHECK_OK(nc_bpe_encode(t, text, n, NULL, &ids, &m));
      if (m != c.n || (m && memcmp(ids, ref, m * sizeof *ids))) mismatches++;
      free(ids);
    }
  }
  CHECK(mismatches == 0);
  nc_presplit_free(ps_gpt2);
  nc_presplit_free(ps_whole);
  nc_bpe_free(tok);
  nc_bpe_free(whole);
}

/* ---- tiktoken files ------------------------------------------------------------------------ */

static void test_tiktoken(void) {
  /* ranks: bytes 0..255 are themselves; "bc" 256, "ab" 257, "bcd" 258, "aa" 259, " x" 260 */
  static const char *const extra[] = {"bc", "ab", "bcd", "aa", " x"};
  static const nc_bpe_special sp[] = {{"<|end|>", 300}, {"<|start|>", 301}};
  nc_bpe *tok = tiktoken_tok(extra, 5, "gpt2", sp, 2);
  if (!tok) return;
  CHECK(nc_bpe_vocab_size(tok) == 302);
  CHECK(nc_bpe_ordinary_count(tok) == 261 && nc_bpe_special_count(tok) == 2);
  /* "abcd": pairs ab(257) bc(256) cd(-) -> bc first; then a|bc|d: "abc"(-) "bcd"(258) -> a bcd */
  EXPECT_IDS(tok, "abcd", NULL, 'a', 258);
  /* "abx": only ab(257) */
  EXPECT_IDS(tok, "abx", NULL, 257, 'x');
  /* "aaa": aa at 0 and at 1 tie at rank 259; the leftmost wins */
  EXPECT_IDS(tok, "aaa", NULL, 259, 'a');
  /* a chunk that is a token encodes to it directly */
  EXPECT_IDS(tok, "bcd", NULL, 258);
  /* gpt2 pre-split: " x" is one chunk, then " " + "\n" whitespace */
  EXPECT_IDS(tok, "ab x \n", NULL, 257, 260, ' ', '\n');
  nc_bpe_encode_opts all = {.allow_all = 1};
  EXPECT_IDS(tok, "ab<|end|>bc<|start|>", &all, 257, 300, 256, 301);
  size_t len;
  const char *t = nc_bpe_id_to_token(tok, 258, &len);
  CHECK(t && len == 3 && !memcmp(t, "bcd", 3));
  CHECK(!nc_bpe_id_to_token(tok, 290, &len)); /* a gap */
  uint32_t id;
  CHECK(nc_bpe_token_to_id(tok, "<|start|>", 9, &id) && id == 301);
  CHECK(nc_bpe_is_special(tok, 300) && !nc_bpe_is_special(tok, 258));
  nc_bpe_special s0 = nc_bpe_special_at(tok, 0), s1 = nc_bpe_special_at(tok, 1);
  CHECK(s0.id == 300 && !strcmp(s0.text, "<|end|>") && s1.id == 301 && !strcmp(s1.text, "<|start|>"));
  CHECK(nc_bpe_special_at(tok, 2).text == NULL);
  nc_bpe_free(tok);

  /* bad files */
  nc_bpe *bad;
  const char *dup_rank = "YQ== 0\nYg== 0\n";
  CHECK_ERR(nc_bpe_from_tiktoken_buffer(dup_rank, strlen(dup_rank), "gpt2", NULL, 0, &bad), NC_ERR_FORMAT,
            "line 2: duplicate rank 0");
  buf b = tiktoken_file(NULL, 0);
  bprintf(&b, "YQ== 999\n");
  CHECK_ERR(nc_bpe_from_tiktoken_buffer(b.p, b.n, "gpt2", NULL, 0, &bad), NC_ERR_FORMAT,
            "line 257: token 'a' appears twice");
  free(b.p);
  b = tiktoken_file(NULL, 0);
  bprintf(&b, "YW*= 256\n");
  CHECK_ERR(nc_bpe_from_tiktoken_buffer(b.p, b.n, "gpt2", NULL, 0, &bad), NC_ERR_FORMAT,
            "line 257: the token is not valid base64");
  free(b.p);
  b = tiktoken_file(NULL, 0);
  bprintf(&b, "YWI=256\n");
  CHECK_ERR(nc_bpe_from_tiktoken_buffer(b.p, b.n, "gpt2", NULL, 0, &bad), NC_ERR_FORMAT,
            "line 257: expected");
  free(b.p);
  b = tiktoken_file(NULL, 0);
  bprintf(&b, "YWI= -3\n");
  CHECK_ERR(nc_bpe_from_tiktoken_buffer(b.p, b.n, "gpt2", NULL, 0, &bad), NC_ERR_FORMAT,
            "line 257: the rank is not");
  free(b.p);
  b = tiktoken_file(NULL, 0);
  /* truncated: the last byte token is cut off mid-line */
  CHECK_ERR(nc_bpe_from_tiktoken_buffer(b.p, b.n - 6, "gpt2", NULL, 0, &bad), NC_ERR_FORMAT, "line 256");
  /* a vocabulary without all 256 bytes (cut at a line end) */
  size_t half = b.n / 2;
  while (b.p[half - 1] != '\n') half--;
  CHECK_ERR(nc_bpe_from_tiktoken_buffer(b.p, half, "gpt2", NULL, 0, &bad), NC_ERR_FORMAT,
            "single-byte token");
  CHECK_ERR(nc_bpe_from_tiktoken_buffer("", 0, "gpt2", NULL, 0, &bad), NC_ERR_FORMAT, "no tokens");
  static const nc_bpe_special clash[] = {{"<|x|>", 65}};
  CHECK_ERR(nc_bpe_from_tiktoken_buffer(b.p, b.n, "gpt2", clash, 1, &bad), NC_ERR_ARG, "already the rank");
  static const nc_bpe_special twice[] = {{"<|x|>", 300}, {"<|x|>", 301}};
  CHECK_ERR(nc_bpe_from_tiktoken_buffer(b.p, b.n, "gpt2", twice, 2, &bad), NC_ERR_ARG, "appears twice");
  CHECK_ERR(nc_bpe_from_tiktoken_buffer(b.p, b.n, "(bad", NULL, 0, &bad), NC_ERR_ARG, "does not compile");
  free(b.p);
  CHECK_ERR(nc_bpe_from_tiktoken("/nonexistent/x.tiktoken", NULL, NULL, 0, &bad), NC_ERR_IO, "cannot open");
}

/* ---- special tokens ------------------------------------------------------------------------ */

static void test_specials(void) {
  static const nc_bpe_special sp[] = {{"<|s|>", 256}, {"<|e|>", 257}, {"<|e|>x", 258}};
  nc_bpe *tok = tiktoken_tok(NULL, 0, "gpt2", sp, 3);
  if (!tok) return;
  const char *text = "a<|s|>b<|e|>x";
  /* strict by default: special text that is not allowed is an error */
  uint32_t *ids;
  size_t n;
  CHECK_ERR(nc_bpe_encode(tok, text, strlen(text), NULL, &ids, &n), NC_ERR_ARG,
            "special token '<|s|>' at byte 1, which is not allowed");
  /* allowing one: the other still fails in strict mode */
  const char *only_s[] = {"<|s|>"};
  nc_bpe_encode_opts o = {.allowed = only_s, .n_allowed = 1};
  CHECK_ERR(nc_bpe_encode(tok, text, strlen(text), &o, &ids, &n), NC_ERR_ARG, "'<|e|>x' at byte 7");
  /* lenient: the disallowed one is plain bytes */
  o.lenient = 1;
  EXPECT_IDS(tok, text, &o, 'a', 256, 'b', '<', '|', 'e', '|', '>', 'x');
  /* all: the longest special wins where two start at the same byte */
  nc_bpe_encode_opts all = {.allow_all = 1};
  EXPECT_IDS(tok, text, &all, 'a', 256, 'b', 258);
  EXPECT_IDS(tok, "<|e|><|e|>", &all, 257, 257);
  /* unknown names: an error in strict mode, ignored in lenient mode */
  const char *unknown[] = {"<|nope|>"};
  nc_bpe_encode_opts u = {.allowed = unknown, .n_allowed = 1};
  CHECK_ERR(nc_bpe_encode(tok, "a", 1, &u, &ids, &n), NC_ERR_ARG, "unknown special token '<|nope|>'");
  u.lenient = 1;
  EXPECT_IDS(tok, "a<|nope|>", &u, 'a', '<', '|', 'n', 'o', 'p', 'e', '|', '>');
  /* without special tokens in the text, strict mode costs nothing */
  EXPECT_IDS(tok, "ab", NULL, 'a', 'b');
  nc_bpe_free(tok);
  /* a tokenizer without special tokens still checks the names in strict mode */
  tok = tiktoken_tok(NULL, 0, "gpt2", NULL, 0);
  u.lenient = 0;
  CHECK_ERR(nc_bpe_encode(tok, "a", 1, &u, &ids, &n), NC_ERR_ARG,
            "unknown special token '<|nope|>' (the tokenizer has 0");
  u.lenient = 1;
  EXPECT_IDS(tok, "a", &u, 'a');
  nc_bpe_free(tok);
}

/* ---- round trips on random bytes ----------------------------------------------------------- */

static void test_round_trip(void) {
  nc_bpe_trainer *tr;
  const char *specials[] = {"<|s|>", "<|e|>"};
  CHECK_OK(nc_bpe_trainer_new("cl100k", specials, 2, &tr));
  char text[2048];
  for (int i = 0; i < 200; i++) {
    size_t n = random_text(text, sizeof text);
    CHECK_OK(nc_bpe_trainer_feed(tr, text, n));
  }
  nc_bpe *trained = NULL;
  CHECK_OK(nc_bpe_trainer_train(tr, 600, 1, &trained));
  nc_bpe_trainer_free(tr);
  static const char *const extra[] = {"th", "the", " the", "\xff\xff", "\xc3\xa9"};
  static const nc_bpe_special sp[] = {{"<|s|>", 1000}};
  nc_bpe *tik = tiktoken_tok(extra, 5, "gpt2", sp, 1);
  nc_bpe *custom = tiktoken_tok(extra, 5, "\\p{L}+|\\d", NULL, 0);
  nc_bpe *toks[] = {trained, tik, custom};
  nc_bpe_encode_opts modes[] = {{.allow_all = 1}, {.lenient = 1}};
  int bad = 0;
  for (int t = 0; t < 3; t++) {
    if (!toks[t]) continue;
    for (int i = 0; i < 1000; i++) {
      size_t n = random_text(text, i < 500 ? 64 : sizeof text);
      if (!round_trips(toks[t], text, n, &modes[i & 1])) bad++;
    }
    /* every single byte, and every pair of bytes */
    for (int a = 0; a < 256; a++)
      for (int b = 0; b < 256; b += (a < 128 ? 1 : 17)) {
        char two[2] = {(char)a, (char)b};
        if (!round_trips(toks[t], two, 2, NULL)) bad++;
      }
  }
  CHECK(bad == 0);
  /* the trained vocabulary does merge: random text of this kind compresses */
  if (trained) {
    size_t n = random_text(text, sizeof text);
    uint32_t *ids;
    size_t m;
    CHECK_OK(nc_bpe_encode(trained, text, n, &modes[0], &ids, &m));
    CHECK(n < 100 || m < n);
    free(ids);
    CHECK(nc_bpe_vocab_size(trained) == 600);
  }
  for (int t = 0; t < 3; t++) nc_bpe_free(toks[t]);
}

/* ---- training, worked out by hand ------------------------------------------------------------ */

static void expect_token(nc_bpe *tok, uint32_t id, const char *bytes, int line) {
  size_t len;
  const char *t = nc_bpe_id_to_token(tok, id, &len);
  if (!t || len != strlen(bytes) || memcmp(t, bytes, len)) {
    fprintf(stderr, "test_bpe.c:%d: token %u is '%.*s', expected '%s'\n", line, id, t ? (int)len : 6,
            t ? t : "(none)", bytes);
    check_failures++;
  }
}
#define EXPECT_TOKEN(tok, id, bytes) expect_token(tok, id, bytes, __LINE__)

static void test_training(void) {
  /* Corpus: "aaabdaaabac" (one chunk under gpt2's pattern) and "ab ab" (chunks "ab", " ab").
   * Byte ids: ' ' 32, a 97, b 98, c 99, d 100.
   *
   * Initial pair counts:
   *   "aaabdaaabac": aa 4 (two per "aaa"), ab 2, bd 1, da 1, ba 1, ac 1
   *   "ab": ab 1          " ab": " a" 1, ab 1
   *   totals: aa 4, ab 4, bd 1, da 1, ba 1, ac 1, " a" 1
   * Merge 1: aa and ab tie at 4; lower left id: (97,97) < (97,98) -> "aa" = 256.
   *   "aaabdaaabac" -> [aa a b d aa a b a c] (left to right: the first two a's merge)
   *   pairs now: (aa,a) 2, ab 2 (+1 "ab", +1 " ab") = 4, bd 1, (d,aa) 1, ba 1, ac 1, " a" 1
   * Merge 2: ab 4 -> "ab" = 257.
   *   -> [aa ab d aa ab a c], "ab" -> [ab], " ab" -> [' ' ab]
   *   pairs: (aa,ab) 2, (ab,d) 1, (d,aa) 1, (ab,a) 1, (a,c) 1, (' ',ab) 1
   * Merge 3: (aa,ab) 2 -> "aaab" = 258.
   *   -> [aaab d aaab a c]; pairs: (aaab,d) 1, (d,aaab) 1, (aaab,a) 1, (a,c) 1, (' ',ab) 1
   * Merge 4: all counts are 1; lowest left id is ' ' (32) -> " ab" = 259.
   * Merge 5: then a (97): (a,c) -> "ac" = 260.
   * Merge 6: then d (100): (d,aaab) -> "daaab" = 261.
   * Specials take the ids after the merges: "<|x|>" = 262. vocab_size 263 = 256 + 6 + 1. */
  const char *specials[] = {"<|x|>"};
  nc_bpe_trainer *tr;
  CHECK_OK(nc_bpe_trainer_new("gpt2", specials, 1, &tr));
  /* The special token's text is cut out before counting, so "a<|x|>a" adds no pair. */
  CHECK_OK(nc_bpe_trainer_feed(tr, "aaabdaaabac", 11));
  CHECK_OK(nc_bpe_trainer_feed(tr, "ab ab<|x|>", 10));
  nc_bpe *tok = NULL;
  CHECK_OK(nc_bpe_trainer_train(tr, 263, 1, &tok));
  if (tok) {
    CHECK(nc_bpe_vocab_size(tok) == 263);
    EXPECT_TOKEN(tok, 256, "aa");
    EXPECT_TOKEN(tok, 257, "ab");
    EXPECT_TOKEN(tok, 258, "aaab");
    EXPECT_TOKEN(tok, 259, " ab");
    EXPECT_TOKEN(tok, 260, "ac");
    EXPECT_TOKEN(tok, 261, "daaab");
    EXPECT_TOKEN(tok, 262, "<|x|>");
    CHECK(nc_bpe_is_special(tok, 262));
    /* Encoding the corpus replays the merges: aaab d aaab ac -> whole chunk? "aaabdaaabac" is
     * not a token, so: [aaab][daaab][ac] by rank (daaab 261 vs aaab+d... see below). Pieces
     * after "aaab" merges: aaab d aaab a c; pairs: "aaabd"(-), "daaab" 261, "aaaba"(-), "ac" 260
     * -> ac (260) first, then daaab (261): [aaab daaab ac]. */
    EXPECT_IDS(tok, "aaabdaaabac", NULL, 258, 261, 260);
    nc_bpe_encode_opts all = {.allow_all = 1};
    EXPECT_IDS(tok, "ab ab<|x|>", &all, 257, 259, 262);
    nc_bpe_free(tok);
  }
  /* Stopping early: a target above what the corpus supports ends when no pair is left, and
   * min_frequency 2 stops before the pairs seen once. */
  CHECK_OK(nc_bpe_trainer_train(tr, 1000, 2, &tok));
  if (tok) {
    CHECK(nc_bpe_vocab_size(tok) == 256 + 3 + 1); /* aa, ab, aaab; then all counts are 1 */
    EXPECT_TOKEN(tok, 259, "<|x|>");
    nc_bpe_free(tok);
  }
  CHECK_ERR(nc_bpe_trainer_train(tr, 256, 1, &tok), NC_ERR_ARG, "below the 256 byte tokens plus 1 special");
  nc_bpe_trainer_free(tr);

  /* Repeated symbols: "aaaa" x3 -> pairs aa 9; merge "aa" -> [aa aa]; then (aa,aa) 3 -> "aaaa". */
  CHECK_OK(nc_bpe_trainer_new("gpt2", NULL, 0, &tr));
  CHECK_OK(nc_bpe_trainer_feed(tr, "aaaa aaaa aaaa", 14));
  CHECK_OK(nc_bpe_trainer_train(tr, 259, 1, &tok));
  if (tok) {
    /* chunks "aaaa" x1, " aaaa" x2: aa 3 + 6 = 9, " a" 2 -> "aa"; then each word is
     * [(' ') aa aa]: (aa,aa) 1 + 2 = 3, (' ',aa) 2 -> "aaaa"; then (' ',aaaa) 2 -> " aaaa" */
    EXPECT_TOKEN(tok, 256, "aa");
    EXPECT_TOKEN(tok, 257, "aaaa");
    EXPECT_TOKEN(tok, 258, " aaaa");
    nc_bpe_free(tok);
  }
  nc_bpe_trainer_free(tr);

  const char *twice[] = {"<|x|>", "<|x|>"};
  CHECK_ERR(nc_bpe_trainer_new("gpt2", twice, 2, &tr), NC_ERR_ARG, "given twice");
  CHECK_ERR(nc_bpe_trainer_new("(", NULL, 0, &tr), NC_ERR_ARG, "does not compile");
  CHECK_OK(nc_bpe_trainer_new(NULL, NULL, 0, &tr));
  CHECK_ERR(nc_bpe_trainer_feed_file(tr, "/nonexistent/corpus.txt"), NC_ERR_IO, "cannot open");
  nc_bpe_trainer_free(tr);
}

/* ---- training against a from-scratch reference ------------------------------------------- */

/* The textbook algorithm: recount every pair of every word before each merge. The trainer must
 * pick the same merges with its incremental counts. */
typedef struct {
  uint32_t sym[64];
  uint32_t len;
  uint64_t count;
} ref_word;

typedef struct {
  ref_word *w;
  size_t n, cap;
} ref_words;

static nc_status ref_add_chunk(void *ud, const char *p, size_t n) {
  ref_words *ws = ud;
  if (n > 64) return NC_OK; /* the corpus below has no such chunk; CHECKed by the caller */
  for (size_t i = 0; i < ws->n; i++)
    if (ws->w[i].len == n) {
      size_t k = 0;
      while (k < n && ws->w[i].sym[k] == (unsigned char)p[k]) k++;
      if (k == n) {
        ws->w[i].count++;
        return NC_OK;
      }
    }
  if (ws->n == ws->cap) ws->w = realloc(ws->w, (ws->cap = ws->cap ? ws->cap * 2 : 256) * sizeof *ws->w);
  ref_word *w = &ws->w[ws->n++];
  w->len = (uint32_t)n;
  w->count = 1;
  for (size_t k = 0; k < n; k++) w->sym[k] = (unsigned char)p[k];
  return NC_OK;
}

typedef struct {
  uint32_t l, r;
  uint64_t count;
} ref_pair;

static int ref_pair_cmp(const void *a, const void *b) {
  const ref_pair *x = a, *y = b;
  if (x->l != y->l) return x->l < y->l ? -1 : 1;
  return (x->r > y->r) - (x->r < y->r);
}

static void test_training_matches_reference(void) {
  /* A corpus with many ties and repeated symbols: short words over a small alphabet. */
  buf corpus = {0};
  for (int i = 0; i < 3000; i++) {
    char word[12];
    int n = 1 + (int)(rnd() % 7);
    for (int k = 0; k < n; k++) word[k] = "aabbcde"[rnd() % 7];
    bput(&corpus, i % 3 ? " " : "\n", 1);
    bput(&corpus, word, (size_t)n);
  }
  size_t target = 256 + 120;
  nc_bpe_trainer *tr;
  nc_bpe *tok = NULL;
  CHECK_OK(nc_bpe_trainer_new("gpt2", NULL, 0, &tr));
  CHECK_OK(nc_bpe_trainer_feed(tr, corpus.p, corpus.n));
  CHECK_OK(nc_bpe_trainer_train(tr, target, 1, &tok));
  nc_bpe_trainer_free(tr);
  ref_words ws = {0};
  nc_presplit *ps;
  CHECK_OK(nc_presplit_new("gpt2", &ps));
  CHECK_OK(nc_presplit_run(ps, corpus.p, corpus.n, ref_add_chunk, &ws));
  nc_presplit_free(ps);
  /* token bytes by id */
  static char tok_bytes[512][64];
  static size_t tok_len[512];
  size_t n_tok = 256;
  for (int b = 0; b < 256; b++) {
    tok_bytes[b][0] = (char)b;
    tok_len[b] = 1;
  }
  ref_pair *pairs = malloc(corpus.n * sizeof *pairs);
  int mismatches = 0;
  while (n_tok < target) {
    size_t np = 0;
    for (size_t i = 0; i < ws.n; i++)
      for (uint32_t k = 0; k + 1 < ws.w[i].len; k++)
        pairs[np++] = (ref_pair){ws.w[i].sym[k], ws.w[i].sym[k + 1], ws.w[i].count};
    if (!np) break;
    qsort(pairs, np, sizeof *pairs, ref_pair_cmp);
    ref_pair best = {0, 0, 0};
    for (size_t i = 0; i < np;) { /* sums per pair, in (left, right) order: the first maximum wins */
      ref_pair sum = pairs[i];
      sum.count = 0;
      size_t j = i;
      for (; j < np && pairs[j].l == pairs[i].l && pairs[j].r == pairs[i].r; j++) sum.count += pairs[j].count;
      if (sum.count > best.count) best = sum;
      i = j;
    }
    char joined[64];
    size_t jl = tok_len[best.l] + tok_len[best.r];
    if (jl > 64) break;
    memcpy(joined, tok_bytes[best.l], tok_len[best.l]);
    memcpy(joined + tok_len[best.l], tok_bytes[best.r], tok_len[best.r]);
    uint32_t id = (uint32_t)n_tok;
    for (size_t t = 256; t < n_tok; t++)
      if (tok_len[t] == jl && !memcmp(tok_bytes[t], joined, jl)) id = (uint32_t)t;
    if (id == n_tok) {
      memcpy(tok_bytes[n_tok], joined, jl);
      tok_len[n_tok++] = jl;
    }
    for (size_t i = 0; i < ws.n; i++) { /* merge left to right in every word */
      ref_word *w = &ws.w[i];
      uint32_t o = 0;
      for (uint32_t k = 0; k < w->len;) {
        if (k + 1 < w->len && w->sym[k] == best.l && w->sym[k + 1] == best.r) {
          w->sym[o++] = id;
          k += 2;
        } else {
          w->sym[o++] = w->sym[k++];
        }
      }
      w->len = o;
    }
  }
  CHECK(tok && nc_bpe_vocab_size(tok) == n_tok);
  for (size_t t = 256; tok && t < n_tok; t++) {
    size_t len;
    const char *b = nc_bpe_id_to_token(tok, (uint32_t)t, &len);
    if (!b || len != tok_len[t] || memcmp(b, tok_bytes[t], len)) mismatches++;
  }
  CHECK(mismatches == 0);
  free(pairs);
  free(ws.w);
  free(corpus.p);
  nc_bpe_free(tok);
}

/* ---- netcl's own format --------------------------------------------------------------------- */

static void test_own_format(void) {
  static const char *const extra[] = {"bc", "ab", "bcd"};
  static const nc_bpe_special sp[] = {{"<|end|>", 400}};
  nc_bpe *tok = tiktoken_tok(extra, 3, "gpt2", sp, 1);
  if (!tok) return;
  char *data;
  size_t len;
  CHECK_OK(nc_bpe_serialize(tok, &data, &len));
  CHECK(!strncmp(data, "netcl-bpe 1\npattern ", 20));
  nc_bpe *back = NULL;
  CHECK_OK(nc_bpe_load_buffer(data, len, &back));
  if (back) {
    char *again;
    size_t again_len;
    CHECK_OK(nc_bpe_serialize(back, &again, &again_len));
    CHECK(again_len == len && !memcmp(again, data, len));
    free(again);
    CHECK(!strcmp(nc_bpe_pattern(back), nc_bpe_builtin_pattern("gpt2")));
    nc_bpe_encode_opts all = {.allow_all = 1};
    EXPECT_IDS(back, "abcd<|end|>", &all, 'a', 258, 400);
    nc_bpe_free(back);
  }
  /* through a file */
  char path[] = "/tmp/netcl_bpe_XXXXXX";
  int fd = mkstemp(path);
  close(fd);
  CHECK_OK(nc_bpe_save(tok, path));
  CHECK_OK(nc_bpe_load(path, &back));
  nc_bpe_free(back);

  /* Corruption: every truncation fails cleanly (the 'end' line guards the tail). */
  int truncations_ok = 1;
  for (size_t cut = 0; cut < len - 1; cut += (cut < 200 || len - cut < 200 ? 1 : 97)) {
    if (nc_bpe_load_buffer(data, cut, &back) != NC_ERR_FORMAT) truncations_ok = 0;
  }
  CHECK(truncations_ok);
  CHECK_ERR(nc_bpe_load_buffer(data, len - 4, &back), NC_ERR_FORMAT, "truncated");
  /* "end" without its newline is accepted (an editor may drop it) */
  CHECK_OK(nc_bpe_load_buffer(data, len - 1, &back));
  nc_bpe_free(back);

  buf b = {0};
  bput(&b, data, len);
  memcpy(b.p, "netcl-bpf", 9);
  CHECK_ERR(nc_bpe_load_buffer(b.p, b.n, &back), NC_ERR_FORMAT, "not a netcl-bpe tokenizer file");
  memcpy(b.p, "netcl-bpe 2", 11);
  CHECK_ERR(nc_bpe_load_buffer(b.p, b.n, &back), NC_ERR_FORMAT, "version 2 is not supported");
  b.n = 0;
  bput(&b, data, len);
  bprintf(&b, "junk\n");
  CHECK_ERR(nc_bpe_load_buffer(b.p, b.n, &back), NC_ERR_FORMAT, "data after 'end'");

  /* hand-made files */
  buf f = {0};
#define HEAD "netcl-bpe 1\npattern Z3B0Mg==\n" /* base64("gpt2") is a name, resolved on load */
  bprintf(&f, HEAD "ordinary 2\nYQ== 0\nYQ== 1\nspecial 0\nend\n");
  CHECK_ERR(nc_bpe_load_buffer(f.p, f.n, &back), NC_ERR_FORMAT, "line 5: token 'a' appears twice");
  f.n = 0;
  bprintf(&f, HEAD "ordinary 2\nYQ== 0\nYg== 0\nspecial 0\nend\n");
  CHECK_ERR(nc_bpe_load_buffer(f.p, f.n, &back), NC_ERR_FORMAT, "line 5: id 0 is used twice");
  f.n = 0;
  bprintf(&f, HEAD "ordinary 1\nYQ== 0\nspecial 0\nend\n");
  CHECK_ERR(nc_bpe_load_buffer(f.p, f.n, &back), NC_ERR_FORMAT, "single-byte token 0x00 is missing");
  f.n = 0;
  bprintf(&f, HEAD "ordinary 99999999999\n");
  CHECK_ERR(nc_bpe_load_buffer(f.p, f.n, &back), NC_ERR_FORMAT, "line 3: expected 'ordinary <count>'");
  f.n = 0;
  bprintf(&f, HEAD "ordinary 16777217\n");
  CHECK_ERR(nc_bpe_load_buffer(f.p, f.n, &back), NC_ERR_FORMAT, "more than the 16777216 ids");
  f.n = 0;
  bprintf(&f, HEAD "ordinary 1\nYQ== 16777216\n");
  CHECK_ERR(nc_bpe_load_buffer(f.p, f.n, &back), NC_ERR_FORMAT, "line 4: id 16777216 is too large");
  f.n = 0;
  bprintf(&f, "netcl-bpe 1\npattern KA==\nordinary 0\n"); /* "(" */
  CHECK_ERR(nc_bpe_load_buffer(f.p, f.n, &back), NC_ERR_FORMAT, "line 2: pre-split pattern does not compile");
  f.n = 0;
  bprintf(&f, HEAD "ordinary 1\nYQ==\n");
  CHECK_ERR(nc_bpe_load_buffer(f.p, f.n, &back), NC_ERR_FORMAT, "line 4: expected '<base64 token> <id>'");
  f.n = 0;
  bprintf(&f, HEAD "ordinary 1\n= 0\n");
  CHECK_ERR(nc_bpe_load_buffer(f.p, f.n, &back), NC_ERR_FORMAT, "line 4: the token is not valid base64");
  /* a special token that spells an ordinary token */
  b.n = 0;
  bput(&b, data, len);
  char *sp_line = strstr(b.p, "special 1\n");
  CHECK(sp_line != NULL);
  if (sp_line) {
    b.n = (size_t)(sp_line - b.p);
    bprintf(&b, "special 1\nYWI= 400\nend\n"); /* "ab" */
    CHECK_ERR(nc_bpe_load_buffer(b.p, b.n, &back), NC_ERR_FORMAT, "has the bytes of ordinary token 257");
  }
  CHECK_ERR(nc_bpe_load("/nonexistent/tok.bpe", &back), NC_ERR_IO, "cannot open");
  CHECK_ERR(nc_bpe_save(tok, "/nonexistent/dir/tok.bpe"), NC_ERR_IO, "temporary file");
  unlink(path);
  free(b.p);
  free(f.p);
  free(data);
  nc_bpe_free(tok);
}

/* ---- GPT-2 files ---------------------------------------------------------------------------- */

/* GPT-2's byte-to-unicode: printable Latin-1 stands for itself, the other 68 bytes are
 * U+0100.. in byte order. Written out here independently of the loader. */
static void gpt2_char(unsigned b, buf *out) {
  unsigned cp;
  int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
  if (printable) {
    cp = b;
  } else {
    unsigned k = 0;
    for (unsigned x = 0; x < b; x++)
      if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174))) k++;
    cp = 256 + k;
  }
  char u[2];
  if (cp < 0x80) {
    u[0] = (char)cp;
    bput(out, u, 1);
  } else {
    u[0] = (char)(0xC0 | cp >> 6);
    u[1] = (char)(0x80 | (cp & 63));
    bput(out, u, 2);
  }
}

static void gpt2_word(const char *bytes, buf *out) {
  for (const unsigned char *p = (const unsigned char *)bytes; *p; p++) gpt2_char(*p, out);
}

/* GPT-2's id order for bytes: the printable ones first, then the rest. */
static unsigned gpt2_byte_id(unsigned b) {
  unsigned id = 0;
  for (int pass = 0; pass < 2; pass++)
    for (unsigned x = 0; x < 256; x++) {
      int printable = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174);
      if (printable == (pass == 0)) {
        if (x == b) return id;
        id++;
      }
    }
  return 0;
}

static void build_gpt2(buf *enc, buf *voc, const char *const (*merges)[2], size_t n_merges, int with_eot) {
  bput(enc, "{", 1);
  for (unsigned b = 0; b < 256; b++) {
    bput(enc, "\"", 1);
    if (b == '"' || b == '\\') bput(enc, "\\", 1);
    gpt2_char(b, enc);
    bprintf(enc, "\": %u, ", gpt2_byte_id(b));
  }
  bprintf(voc, "#version: 0.2\n");
  for (size_t i = 0; i < n_merges; i++) {
    char joined[64];
    snprintf(joined, sizeof joined, "%s%s", merges[i][0], merges[i][1]);
    bput(enc, "\"", 1);
    gpt2_word(joined, enc);
    bprintf(enc, "\": %zu, ", 256 + i);
    gpt2_word(merges[i][0], voc);
    bput(voc, " ", 1);
    gpt2_word(merges[i][1], voc);
    bput(voc, "\n", 1);
  }
  if (with_eot) bprintf(enc, "\"<|endoftext|>\": %zu, ", 256 + n_merges);
  enc->n -= 2; /* the last ", " */
  bput(enc, "}", 1);
}

static void test_gpt2(void) {
  /* Merges as training would make them: ids 256.. in order, <|endoftext|> 262. */
  static const char *const merges[][2] = {{" ", "t"}, {"h", "e"},   {" t", "he"},
                                          {"l", "l"}, {"he", "ll"}, {" ", "w"}};
  buf enc = {0}, voc = {0};
  build_gpt2(&enc, &voc, merges, 6, 1);
  nc_bpe *tok = NULL;
  CHECK_OK(nc_bpe_from_gpt2_buffers(enc.p, enc.n, voc.p, voc.n, &tok));
  if (tok) {
    CHECK(nc_bpe_vocab_size(tok) == 263);
    CHECK(nc_bpe_special_count(tok) == 1);
    /* GPT-2's own ids: "!" 0, "a" 64, " " 220 */
    EXPECT_IDS(tok, "!a", NULL, 0, 64);
    EXPECT_IDS(tok, " ", NULL, 220);
    /* " the": " t"(256) first, then "he"(257), then " the"(258) -> whole chunk is a token */
    EXPECT_IDS(tok, " the", NULL, 258);
    /* "hello": pairs he(257) el(-) ll(259) lo(-): he first -> [he l l o]; then ll ->
     * [he ll o]; then "hell"(260) -> [hell o]. Bytes: GPT-2 id = byte - 33 for 'a'..'z'. */
    EXPECT_IDS(tok, "hello", NULL, 260, 'o' - 33);
    /* "jello": only ll merges; "ell" is no token -> [j e ll o] */
    EXPECT_IDS(tok, "jello", NULL, 'j' - 33, 'e' - 33, 259, 'o' - 33);
    /* " wt": " w"(261) is the only pair */
    EXPECT_IDS(tok, " wt", NULL, 261, 't' - 33);
    nc_bpe_encode_opts all = {.allow_all = 1};
    EXPECT_IDS(tok, "hi<|endoftext|>", &all, 'h' - 33, 'i' - 33, 262);
    size_t len;
    const char *t = nc_bpe_id_to_token(tok, 256, &len);
    CHECK(t && len == 2 && !memcmp(t, " t", 2)); /* stored as bytes, not as "Ġt" */
    nc_bpe_free(tok);
  }
  nc_bpe *bad;
  /* a merge whose result is not in encoder.json */
  buf v2 = {0};
  bput(&v2, voc.p, voc.n);
  bprintf(&v2, "x y\n");
  CHECK_ERR(nc_bpe_from_gpt2_buffers(enc.p, enc.n, v2.p, v2.n, &bad), NC_ERR_FORMAT,
            "vocab.bpe line 8: the merge result of 'x y' is not in encoder.json");
  /* a merge of something that is not a token */
  v2.n = 0;
  bprintf(&v2, "#version: 0.2\nxy z\n");
  CHECK_ERR(nc_bpe_from_gpt2_buffers(enc.p, enc.n, v2.p, v2.n, &bad), NC_ERR_FORMAT,
            "vocab.bpe line 2: 'xy' is neither a byte nor the result of an earlier merge");
  v2.n = 0;
  bprintf(&v2, "a  b\n");
  CHECK_ERR(nc_bpe_from_gpt2_buffers(enc.p, enc.n, v2.p, v2.n, &bad), NC_ERR_FORMAT,
            "vocab.bpe line 1: expected two");
  v2.n = 0;
  bprintf(&v2, "a \xe2\x82\xac\n"); /* the euro sign is not in the byte alphabet */
  CHECK_ERR(nc_bpe_from_gpt2_buffers(enc.p, enc.n, v2.p, v2.n, &bad), NC_ERR_FORMAT,
            "outside GPT-2's byte alphabet");
  /* encoder.json problems */
  const char *not_obj = "[1, 2]";
  CHECK_ERR(nc_bpe_from_gpt2_buffers(not_obj, strlen(not_obj), voc.p, voc.n, &bad), NC_ERR_FORMAT,
            "expected an object");
  CHECK_ERR(nc_bpe_from_gpt2_buffers(enc.p, enc.n / 2, voc.p, voc.n, &bad), NC_ERR_FORMAT,
            "encoder.json line 1");
  const char *dup_key = "{\"a\": 1, \"a\": 2}";
  CHECK_ERR(nc_bpe_from_gpt2_buffers(dup_key, strlen(dup_key), voc.p, voc.n, &bad), NC_ERR_FORMAT,
            "duplicate");
  const char *bad_id = "{\"a\": -1}";
  CHECK_ERR(nc_bpe_from_gpt2_buffers(bad_id, strlen(bad_id), voc.p, voc.n, &bad), NC_ERR_FORMAT,
            "not an integer in");
  const char *few = "{\"a\": 1}";
  CHECK_ERR(nc_bpe_from_gpt2_buffers(few, strlen(few), voc.p, voc.n, &bad), NC_ERR_FORMAT,
            "lacks the single-byte token 0x00");
  /* two tokens with one id */
  buf e2 = {0};
  bput(&e2, enc.p, enc.n - 1);
  bprintf(&e2, ", \"<|pad|>\": 262}");
  CHECK_ERR(nc_bpe_from_gpt2_buffers(e2.p, e2.n, voc.p, voc.n, &bad), NC_ERR_FORMAT, "id 262 is used twice");
  CHECK_ERR(nc_bpe_from_gpt2("/nonexistent/encoder.json", "/nonexistent/vocab.bpe", &bad), NC_ERR_IO,
            "cannot open");
  free(enc.p);
  free(voc.p);
  free(v2.p);
  free(e2.p);
}

/* ---- a longer text: the cache and the merge loop agree ------------------------------------- */

static void test_cache_consistency(void) {
  static const char *const extra[] = {"th", "the", " the", "he", " t", "ab", "abab"};
  nc_bpe *a = tiktoken_tok(extra, 7, "gpt2", NULL, 0);
  nc_bpe *b = tiktoken_tok(extra, 7, "gpt2", NULL, 0);
  if (!a || !b) return;
  /* One long text, so that chunks repeat (cache hits) and the cache fills up and is emptied. */
  size_t cap = 1 << 21, n = 0;
  char *text = malloc(cap);
  while (n + 40 < cap) {
    if (rnd() % 4) {
      n += (size_t)snprintf(text + n, cap - n, " the%u", rnd() % 100000);
    } else {
      size_t l = random_text(text + n, 32);
      n += l;
    }
  }
  uint32_t *ids1, *ids2;
  size_t n1, n2;
  CHECK_OK(nc_bpe_encode(a, text, n, NULL, &ids1, &n1));
  CHECK_OK(nc_bpe_encode(a, text, n, NULL, &ids2, &n2)); /* warm cache */
  CHECK(n1 == n2 && !memcmp(ids1, ids2, n1 * sizeof *ids1));
  free(ids2);
  /* chunk by chunk on a fresh tokenizer (different cache history) gives the same ids */
  size_t m = 0;
  int same = 1;
  for (size_t off = 0; off < n && same;) {
    size_t l = 1 + rnd() % 5000;
    if (off + l > n) l = n - off;
    /* cut only before a space that follows a letter-digit run, where gpt2 chunks end anyway */
    while (off + l < n && !(off + l + 1 < n && text[off + l] == ' ' && text[off + l + 1] == 't' &&
                            text[off + l - 1] >= '0' && text[off + l - 1] <= '9'))
      l++;
    CHECK_OK(nc_bpe_encode(b, text + off, l, NULL, &ids2, &n2));
    same = m + n2 <= n1 && (n2 == 0 || !memcmp(ids1 + m, ids2, n2 * sizeof *ids2));
    m += n2;
    free(ids2);
    off += l;
  }
  CHECK(same && m == n1);
  free(ids1);
  free(text);
  nc_bpe_free(a);
  nc_bpe_free(b);
}

static void test_decode_errors(void) {
  nc_bpe *tok = tiktoken_tok(NULL, 0, "gpt2", NULL, 0);
  if (!tok) return;
  uint32_t ids[] = {104, 105, 9999};
  char *out;
  size_t len;
  CHECK_ERR(nc_bpe_decode(tok, ids, 3, &out, &len), NC_ERR_INDEX,
            "id 9999 (position 3) is not in the vocabulary");
  CHECK_OK(nc_bpe_decode(tok, ids, 2, &out, &len));
  CHECK(len == 2 && !strcmp(out, "hi"));
  free(out);
  CHECK_OK(nc_bpe_decode(tok, NULL, 0, &out, &len));
  CHECK(len == 0 && out && !*out);
  free(out);
  uint32_t *e;
  size_t n;
  CHECK_OK(nc_bpe_encode(tok, "", 0, NULL, &e, &n));
  CHECK(n == 0 && e == NULL);
  nc_bpe_free(tok);
}

int main(void) {
  test_base64();
  test_presplit();
  test_merge_matches_reference();
  test_tiktoken();
  test_specials();
  test_round_trip();
  test_training();
  test_training_matches_reference();
  test_own_format();
  test_gpt2();
  test_cache_consistency();
  test_decode_errors();
  CHECK_DONE();
}

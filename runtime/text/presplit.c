#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "netcl/bpe.h"
#include "text/presplit.h"

/* GPT-2 (and r50k/p50k) and cl100k pre-split patterns, as published with GPT-2's encoder.py and
 * tiktoken. */
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char CL100K_PATTERN[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const char *nc_bpe_builtin_pattern(const char *name) {
  if (!name) return NULL;
  if (!strcmp(name, "gpt2")) return GPT2_PATTERN;
  if (!strcmp(name, "cl100k")) return CL100K_PATTERN;
  return NULL;
}

struct nc_presplit {
  char *source;
  pcre2_code *code;
  pcre2_match_data *md;
  pcre2_match_context *mctx;
  pcre2_jit_stack *jit_stack;
  int jit; /* compiled by the JIT */
};

void nc_presplit_free(nc_presplit *ps) {
  if (!ps) return;
  pcre2_match_data_free(ps->md);
  pcre2_match_context_free(ps->mctx);
  pcre2_jit_stack_free(ps->jit_stack);
  pcre2_code_free(ps->code);
  free(ps->source);
  free(ps);
}

const char *nc_presplit_source(const nc_presplit *ps) { return ps->source; }

nc_status nc_presplit_new(const char *pattern, nc_presplit **out) {
  *out = NULL;
  if (!pattern) return nc_error(NC_ERR_ARG, "the pre-split pattern is missing");
  const char *src = nc_bpe_builtin_pattern(pattern);
  if (!src) src = pattern;
  if (!*src) return nc_error(NC_ERR_ARG, "the pre-split pattern is empty");
  nc_presplit *ps = calloc(1, sizeof *ps);
  if (!ps || !(ps->source = strdup(src))) {
    free(ps);
    return nc_error(NC_ERR_OOM, "out of memory compiling the pre-split pattern");
  }
  int err;
  PCRE2_SIZE erroff;
  /* MATCH_INVALID_UTF lets arbitrary bytes be matched (invalid sequences simply never match);
   * \C is locked out because it could end a chunk inside a character. */
  ps->code = pcre2_compile((PCRE2_SPTR)src, PCRE2_ZERO_TERMINATED,
                           PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_NEVER_BACKSLASH_C, &err,
                           &erroff, NULL);
  if (!ps->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    nc_presplit_free(ps);
    return nc_error(NC_ERR_ARG, "pre-split pattern does not compile at offset %zu: %s", (size_t)erroff,
                    (const char *)msg);
  }
  /* JIT is only a speed-up: where this PCRE2 build or CPU lacks it, the interpreter matches
   * the same chunks. */
  if (pcre2_jit_compile(ps->code, PCRE2_JIT_COMPLETE) == 0) {
    ps->jit = 1;
    ps->jit_stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
    ps->mctx = pcre2_match_context_create(NULL);
    if (ps->jit_stack && ps->mctx) pcre2_jit_stack_assign(ps->mctx, NULL, ps->jit_stack);
  }
  ps->md = pcre2_match_data_create_from_pattern(ps->code, NULL);
  if (!ps->md) {
    nc_presplit_free(ps);
    return nc_error(NC_ERR_OOM, "out of memory compiling the pre-split pattern");
  }
  *out = ps;
  return NC_OK;
}

/* Offset of the character after the one at p (an invalid byte counts as one character). */
static size_t next_char(const unsigned char *s, size_t len, size_t p) {
  size_t q = p + 1;
  while (q < len && (s[q] & 0xC0) == 0x80 && q - p < 4) q++;
  return q;
}

nc_status nc_presplit_run(nc_presplit *ps, const char *text, size_t len, nc_chunk_fn fn, void *ud) {
  const unsigned char *s = (const unsigned char *)text;
  size_t cur = 0;   /* first byte not yet handed out */
  size_t start = 0; /* where the next match attempt begins */
  uint32_t opts = 0;
  while (start <= len) {
    /* pcre2_jit_match skips pcre2_match's per-call checks, a large share of the cost when a
     * match is a few bytes long. The JIT cannot anchor at match time, so the retry after an
     * empty match goes through pcre2_match, which then interprets. */
    int rc = ps->jit && !opts ? pcre2_jit_match(ps->code, s, len, start, 0, ps->md, ps->mctx)
                              : pcre2_match(ps->code, s, len, start, opts, ps->md, ps->mctx);
    if (rc == PCRE2_ERROR_NOMATCH) {
      if (opts) { /* the anchored non-empty retry after an empty match failed: step on */
        opts = 0;
        if (start >= len) break;
        start = next_char(s, len, start);
        continue;
      }
      break;
    }
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      return nc_error(NC_ERR_ARG, "pre-splitting failed at byte %zu: %s", start, (const char *)msg);
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(ps->md);
    size_t ms = ov[0], me = ov[1];
    if (me <= ms) {
      /* An empty match: try a non-empty one at the same place before moving on, as PCRE2's
       * own demo program does. */
      start = ms;
      opts = PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED;
      continue;
    }
    opts = 0;
    if (ms > cur) NC_TRY(fn(ud, text + cur, ms - cur));
    NC_TRY(fn(ud, text + ms, me - ms));
    cur = start = me;
  }
  if (cur < len) NC_TRY(fn(ud, text + cur, len - cur));
  return NC_OK;
}

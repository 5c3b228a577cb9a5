/* Encoding: special tokens first, then pre-splitting, then per chunk the whole-chunk lookup,
 * the cache of chunks already encoded, and finally the merge loop. */
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "text/bpe_impl.h"
#include "text/special_scan.h"

/* Chunks up to this many bytes are cached (their id counts then fit the 8 bits the cache
 * entry keeps); longer ones are rare and would crowd the cache out. */
#define CACHE_MAX_CHUNK 255
/* The cache is emptied when it reaches this many entries: a bound on memory that costs only
 * a refill, and for natural text the frequent chunks come back first. */
#define CACHE_MAX_ENTRIES (1u << 16)

static void cache_put(nc_bpe *tok, const char *p, size_t n, const uint32_t *ids, size_t count) {
  if (tok->cache.count >= CACHE_MAX_ENTRIES) {
    nc_bytes_map_clear(&tok->cache);
    tok->cache_ids.n = 0;
  }
  /* A failed insertion only loses the cache entry, never the encoding. */
  if (nc_idvec_reserve(&tok->cache_ids, count) != NC_OK) return;
  uint64_t *slot = nc_bytes_map_slot(&tok->cache, p, n, NULL);
  if (!slot) return;
  *slot = (uint64_t)tok->cache_ids.n << 8 | count;
  memcpy(tok->cache_ids.v + tok->cache_ids.n, ids, count * sizeof *ids);
  tok->cache_ids.n += count;
}

typedef struct {
  nc_bpe *tok;
  nc_idvec *out;
} chunk_ctx;

static nc_status encode_chunk(void *ud, const char *p, size_t n) {
  chunk_ctx *c = ud;
  nc_bpe *tok = c->tok;
  uint32_t rank, id;
  /* A chunk that is itself a token encodes to it, as tiktoken does. */
  if (nc_bpe_rank(tok, p, n, &rank, &id)) return nc_idvec_push(c->out, id);
  uint64_t v;
  if (n <= CACHE_MAX_CHUNK && nc_bytes_map_get(&tok->cache, p, n, &v)) {
    size_t count = v & 0xff;
    NC_TRY(nc_idvec_reserve(c->out, count));
    memcpy(c->out->v + c->out->n, tok->cache_ids.v + (v >> 8), count * sizeof(uint32_t));
    c->out->n += count;
    return NC_OK;
  }
  size_t before = c->out->n;
  NC_TRY(nc_bpe_merge_chunk(tok, p, n, c->out));
  if (n <= CACHE_MAX_CHUNK) cache_put(tok, p, n, c->out->v + before, c->out->n - before);
  return NC_OK;
}

static long special_index(const nc_bpe *tok, uint32_t id) {
  size_t lo = 0, hi = tok->n_specials;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (tok->special_ids[mid] < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < tok->n_specials && tok->special_ids[lo] == id ? (long)lo : -1;
}

/* Which specials are allowed (allowed[k] for the k-th special in id order; allowed may be NULL
 * when the tokenizer has none, to check the names only). */
static nc_status resolve_allowed(const nc_bpe *tok, const nc_bpe_encode_opts *o, unsigned char *allowed) {
  char esc[64];
  if (allowed) memset(allowed, o->allow_all ? 1 : 0, tok->n_specials);
  if (o->allow_all) return NC_OK;
  for (size_t i = 0; i < o->n_allowed; i++) {
    const char *name = o->allowed[i];
    if (!name) return nc_error(NC_ERR_ARG, "allowed special token %zu is NULL", i + 1);
    uint64_t id;
    if (nc_bytes_map_get(&tok->specials, name, strlen(name), &id)) {
      allowed[special_index(tok, (uint32_t)id)] = 1;
    } else if (!o->lenient) {
      return nc_error(NC_ERR_ARG, "unknown special token %s (the tokenizer has %zu special tokens)",
                      nc_bpe_escape(name, strlen(name), esc, sizeof esc), tok->n_specials);
    }
  }
  return NC_OK;
}

static nc_status encode_all(nc_bpe *tok, const char *text, size_t len, const nc_bpe_encode_opts *o,
                            nc_idvec *out) {
  chunk_ctx ctx = {tok, out};
  if (!tok->n_specials) {
    NC_TRY(resolve_allowed(tok, o, NULL));
    return nc_presplit_run(tok->split, text, len, encode_chunk, &ctx);
  }
  size_t ns = tok->n_specials;
  unsigned char *allowed = malloc(ns);
  const char **texts = malloc(ns * sizeof *texts);
  size_t *lens = malloc(ns * sizeof *lens);
  uint32_t *ids = malloc(ns * sizeof *ids);
  unsigned char *is_allowed = malloc(ns);
  nc_special_scan sc = {0};
  nc_status s = NC_OK;
  if (!allowed || !texts || !lens || !ids || !is_allowed) {
    s = nc_error(NC_ERR_OOM, "out of memory encoding");
    goto done;
  }
  if ((s = resolve_allowed(tok, o, allowed)) != NC_OK) goto done;
  /* Strict mode scans for every special token so that a disallowed one is reported; lenient
   * mode looks only for the allowed ones and leaves the rest to ordinary encoding. */
  size_t n = 0;
  for (size_t k = 0; k < ns; k++) {
    if (!allowed[k] && o->lenient) continue;
    texts[n] = tok->special_texts[k];
    lens[n] = tok->special_lens[k];
    ids[n] = tok->special_ids[k];
    is_allowed[n] = allowed[k];
    n++;
  }
  if ((s = nc_special_scan_init(&sc, n, texts, lens)) != NC_OK) goto done;
  size_t pos = 0;
  for (;;) {
    size_t at;
    long k = nc_special_scan_next(&sc, text, len, pos, &at);
    size_t seg_end = k < 0 ? len : at;
    if (seg_end > pos &&
        (s = nc_presplit_run(tok->split, text + pos, seg_end - pos, encode_chunk, &ctx)) != NC_OK)
      goto done;
    if (k < 0) break;
    if (!is_allowed[k]) {
      char esc[64];
      s = nc_error(NC_ERR_ARG,
                   "the text contains the special token %s at byte %zu, which is not allowed (allow it, or "
                   "turn strict mode off to encode it as ordinary text)",
                   nc_bpe_escape(texts[k], lens[k], esc, sizeof esc), at);
      goto done;
    }
    if ((s = nc_idvec_push(out, ids[k])) != NC_OK) goto done;
    pos = at + lens[k];
  }
done:
  nc_special_scan_free(&sc);
  free(allowed);
  free(texts);
  free(lens);
  free(ids);
  free(is_allowed);
  return s;
}

nc_status nc_bpe_encode(nc_bpe *tok, const char *text, size_t len, const nc_bpe_encode_opts *opts,
                        uint32_t **ids, size_t *n_ids) {
  static const nc_bpe_encode_opts defaults = {0};
  *ids = NULL;
  *n_ids = 0;
  if (!text && len) return nc_error(NC_ERR_ARG, "text is NULL");
  nc_idvec out = {0};
  /* Natural text averages a few bytes per token; reserving len / 4 saves most regrowth. */
  nc_status s = nc_idvec_reserve(&out, len / 4 + 1);
  if (s == NC_OK) s = encode_all(tok, text ? text : "", len, opts ? opts : &defaults, &out);
  if (s != NC_OK || out.n == 0) {
    free(out.v);
    return s;
  }
  *ids = out.v;
  *n_ids = out.n;
  return NC_OK;
}

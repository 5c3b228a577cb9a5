/* BPE training. Feeding pre-splits text and counts distinct chunks; training turns each chunk
 * into a "word" of byte symbols weighted by its count, counts every adjacent symbol pair once,
 * and then repeatedly merges the best pair. After a merge only the words that contain the pair
 * are touched (each pair keeps the list of words it occurs in), and the counts of the pairs in
 * them are adjusted by difference, never recounted. A max-heap with lazy deletion picks the
 * best pair: entries whose count has changed are re-queued when they surface.
 *
 * Best pair: highest count; ties go to the lower left id, then the lower right id. */
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "text/bpe_impl.h"
#include "text/special_scan.h"
#include "text/text_file.h"

struct nc_bpe_trainer {
  nc_presplit *split;
  char **specials;
  size_t *special_lens;
  size_t n_specials;
  nc_bytes_map counts; /* chunk -> occurrences */
};

void nc_bpe_trainer_free(nc_bpe_trainer *tr) {
  if (!tr) return;
  nc_presplit_free(tr->split);
  for (size_t i = 0; i < tr->n_specials; i++) free(tr->specials[i]);
  free(tr->specials);
  free(tr->special_lens);
  nc_bytes_map_free(&tr->counts);
  free(tr);
}

nc_status nc_bpe_trainer_new(const char *pattern, const char *const *specials, size_t n_specials,
                             nc_bpe_trainer **out) {
  *out = NULL;
  nc_bpe_trainer *tr = calloc(1, sizeof *tr);
  if (!tr) return nc_error(NC_ERR_OOM, "out of memory creating a trainer");
  nc_status s = nc_presplit_new(pattern ? pattern : "cl100k", &tr->split);
  if (s == NC_OK && n_specials) {
    tr->specials = calloc(n_specials, sizeof *tr->specials);
    tr->special_lens = calloc(n_specials, sizeof *tr->special_lens);
    if (!tr->specials || !tr->special_lens) s = nc_error(NC_ERR_OOM, "out of memory creating a trainer");
  }
  for (size_t i = 0; s == NC_OK && i < n_specials; i++) {
    char esc[64];
    if (!specials[i] || !*specials[i]) {
      s = nc_error(NC_ERR_ARG, "special token %zu is empty", i + 1);
      break;
    }
    for (size_t j = 0; j < i; j++)
      if (!strcmp(specials[i], specials[j]))
        s = nc_error(NC_ERR_ARG, "special token %s is given twice",
                     nc_bpe_escape(specials[i], strlen(specials[i]), esc, sizeof esc));
    if (s != NC_OK) break;
    if (!(tr->specials[i] = strdup(specials[i])))
      s = nc_error(NC_ERR_OOM, "out of memory creating a trainer");
    tr->special_lens[i] = strlen(specials[i]);
    tr->n_specials++;
  }
  if (s != NC_OK) {
    nc_bpe_trainer_free(tr);
    return s;
  }
  *out = tr;
  return NC_OK;
}

static nc_status count_chunk(void *ud, const char *p, size_t n) {
  nc_bpe_trainer *tr = ud;
  uint64_t *slot = nc_bytes_map_slot(&tr->counts, p, n, NULL);
  if (!slot) return nc_error(NC_ERR_OOM, "out of memory counting chunks");
  ++*slot;
  return NC_OK;
}

nc_status nc_bpe_trainer_feed(nc_bpe_trainer *tr, const char *text, size_t len) {
  if (!text && len) return nc_error(NC_ERR_ARG, "text is NULL");
  if (!tr->n_specials) return nc_presplit_run(tr->split, text, len, count_chunk, tr);
  nc_special_scan sc;
  NC_TRY(nc_special_scan_init(&sc, tr->n_specials, (const char *const *)tr->specials, tr->special_lens));
  nc_status s = NC_OK;
  size_t pos = 0;
  for (;;) {
    size_t at;
    long k = nc_special_scan_next(&sc, text, len, pos, &at);
    size_t end = k < 0 ? len : at;
    if (end > pos && (s = nc_presplit_run(tr->split, text + pos, end - pos, count_chunk, tr)) != NC_OK) break;
    if (k < 0) break;
    pos = at + tr->special_lens[k];
  }
  nc_special_scan_free(&sc);
  return s;
}

nc_status nc_bpe_trainer_feed_file(nc_bpe_trainer *tr, const char *path) {
  char *data;
  size_t len;
  NC_TRY(nc_text_read_file(path, &data, &len));
  nc_status s = nc_bpe_trainer_feed(tr, data, len);
  free(data);
  return s;
}

/* ---- training state --------------------------------------------------------------------- */

typedef struct {
  size_t off; /* into sym pool */
  uint32_t len;
  uint32_t stamp; /* last merge that visited the word */
  uint64_t count;
} word;

typedef struct {
  uint32_t left, right;
  int64_t count;
  int64_t before; /* count when the current merge first touched it */
  uint32_t stamp;
  uint32_t n_words, cap_words;
  uint32_t *words; /* words the pair occurs (or occurred) in */
} pair;

typedef struct {
  int64_t count;
  uint32_t left, right, pair;
} cand;

typedef struct {
  uint32_t *sym;
  word *words;
  size_t n_words;
  pair *pairs;
  size_t n_pairs, cap_pairs;
  uint64_t *map_keys; /* pair map: (left << 32 | right) + 1, 0 = empty */
  uint32_t *map_vals;
  size_t map_cap;
  cand *heap;
  size_t n_heap, cap_heap;
  uint32_t *touched;
  size_t n_touched, cap_touched;
  uint32_t stamp;
  /* The vocabulary being built: token bytes by id. */
  char *tok_bytes;
  size_t tok_len, tok_cap;
  size_t *tok_off;
  uint32_t *tok_n;
  size_t n_tokens, cap_tokens;
  nc_bytes_map tok_ids; /* bytes -> id, to spot a merge that spells an existing token */
} state;

static void state_free(state *st) {
  free(st->sym);
  free(st->words);
  for (size_t i = 0; i < st->n_pairs; i++) free(st->pairs[i].words);
  free(st->pairs);
  free(st->map_keys);
  free(st->map_vals);
  free(st->heap);
  free(st->touched);
  free(st->tok_bytes);
  free(st->tok_off);
  free(st->tok_n);
  nc_bytes_map_free(&st->tok_ids);
}

static nc_status oom(void) { return nc_error(NC_ERR_OOM, "out of memory training a tokenizer"); }

/* Makes room for `need` elements in an array of capacity *cap (doubling), updating *cap only on
 * success. Returns the (possibly moved) array, or NULL when out of memory. */
static void *grow(void *p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return p;
  size_t ncap = *cap ? *cap : 64;
  while (ncap < need) ncap *= 2;
  void *np = realloc(p, ncap * elem);
  if (np) *cap = ncap;
  return np;
}

/* GROW(arr, cap, need): grows an array variable in place through grow(); 0 when out of memory
 * (arr and cap then unchanged). The new pointer is stored with memcpy rather than through a
 * void ** cast, which would break strict aliasing. */
#define GROW(arr, cap, need) grow_into((void *)&(arr), grow((arr), &(cap), (need), sizeof *(arr)))
static int grow_into(void *slot, void *np) {
  if (!np) return 0;
  memcpy(slot, &np, sizeof np);
  return 1;
}

/* splitmix64's finaliser: pair keys are structured (small ids), so they need mixing. */
static size_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return (size_t)x;
}

static int map_grow(state *st) {
  size_t ncap = st->map_cap ? st->map_cap * 2 : 1024;
  uint64_t *nk = calloc(ncap, sizeof *nk);
  uint32_t *nv = malloc(ncap * sizeof *nv);
  if (!nk || !nv) {
    free(nk);
    free(nv);
    return 0;
  }
  for (size_t i = 0; i < st->map_cap; i++) {
    if (!st->map_keys[i]) continue;
    size_t j = mix(st->map_keys[i]) & (ncap - 1);
    while (nk[j]) j = (j + 1) & (ncap - 1);
    nk[j] = st->map_keys[i];
    nv[j] = st->map_vals[i];
  }
  free(st->map_keys);
  free(st->map_vals);
  st->map_keys = nk;
  st->map_vals = nv;
  st->map_cap = ncap;
  return 1;
}

/* Index of pair (l, r), created with count 0 when new; -1 when out of memory. */
static long pair_of(state *st, uint32_t l, uint32_t r) {
  if ((st->n_pairs + 1) * 2 > st->map_cap && !map_grow(st)) return -1;
  uint64_t key = ((uint64_t)l << 32 | r) + 1;
  size_t i = mix(key) & (st->map_cap - 1);
  while (st->map_keys[i]) {
    if (st->map_keys[i] == key) return st->map_vals[i];
    i = (i + 1) & (st->map_cap - 1);
  }
  if (st->n_pairs >= UINT32_MAX || !GROW(st->pairs, st->cap_pairs, st->n_pairs + 1)) return -1;
  pair *p = &st->pairs[st->n_pairs];
  memset(p, 0, sizeof *p);
  p->left = l;
  p->right = r;
  st->map_keys[i] = key;
  st->map_vals[i] = (uint32_t)st->n_pairs;
  return (long)st->n_pairs++;
}

static int better(const cand *a, const cand *b) {
  if (a->count != b->count) return a->count > b->count;
  if (a->left != b->left) return a->left < b->left;
  return a->right < b->right;
}

static int heap_push(state *st, uint32_t pi) {
  if (!GROW(st->heap, st->cap_heap, st->n_heap + 1)) return 0;
  const pair *p = &st->pairs[pi];
  cand c = {p->count, p->left, p->right, pi};
  size_t i = st->n_heap++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!better(&c, &st->heap[parent])) break;
    st->heap[i] = st->heap[parent];
    i = parent;
  }
  st->heap[i] = c;
  return 1;
}

static cand heap_pop(state *st) {
  cand top = st->heap[0], last = st->heap[--st->n_heap];
  size_t i = 0, n = st->n_heap;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && better(&st->heap[c + 1], &st->heap[c])) c++;
    if (!better(&st->heap[c], &last)) break;
    st->heap[i] = st->heap[c];
    i = c;
  }
  if (n) st->heap[i] = last;
  return top;
}

/* Adds delta to pair (l, r) on behalf of word w. new_id is the symbol the current merge
 * created: a pair containing it is new to the word, so the word joins the pair's list. Every
 * other pair of the word was there before and has the word listed already. */
static nc_status pair_add(state *st, uint32_t l, uint32_t r, int64_t delta, uint32_t w, uint32_t new_id) {
  long pi = pair_of(st, l, r);
  if (pi < 0) return oom();
  pair *p = &st->pairs[pi];
  if (p->stamp != st->stamp) {
    p->stamp = st->stamp;
    p->before = p->count;
    if (!GROW(st->touched, st->cap_touched, st->n_touched + 1)) return oom();
    st->touched[st->n_touched++] = (uint32_t)pi;
  }
  p->count += delta;
  if (delta > 0 && (l == new_id || r == new_id) && (p->n_words == 0 || p->words[p->n_words - 1] != w)) {
    if (p->n_words == p->cap_words) {
      uint32_t ncap = p->cap_words ? p->cap_words * 2 : 4;
      uint32_t *nw = realloc(p->words, ncap * sizeof *nw);
      if (!nw) return oom();
      p->words = nw;
      p->cap_words = ncap;
    }
    p->words[p->n_words++] = w;
  }
  return NC_OK;
}

static nc_status add_token(state *st, const char *p, size_t n, uint32_t *id) {
  size_t cap_n = st->cap_tokens;
  if (!GROW(st->tok_bytes, st->tok_cap, st->tok_len + n) ||
      !GROW(st->tok_off, st->cap_tokens, st->n_tokens + 1) || !GROW(st->tok_n, cap_n, st->n_tokens + 1))
    return oom();
  uint64_t *slot = nc_bytes_map_slot(&st->tok_ids, p, n, NULL);
  if (!slot) return oom();
  memmove(st->tok_bytes + st->tok_len, p, n);
  st->tok_off[st->n_tokens] = st->tok_len;
  st->tok_n[st->n_tokens] = (uint32_t)n;
  st->tok_len += n;
  *slot = st->n_tokens;
  *id = (uint32_t)st->n_tokens++;
  return NC_OK;
}

static nc_status build_words(nc_bpe_trainer *tr, state *st) {
  size_t n_sym = 0, n_words = 0;
  const nc_bytes_map *m = &tr->counts;
  for (size_t i = 0; i < m->cap; i++)
    if (m->slots[i].used && m->slots[i].key_len >= 2) {
      n_sym += m->slots[i].key_len;
      n_words++;
    }
  if (n_words >= UINT32_MAX)
    return nc_error(NC_ERR_ARG, "too many distinct chunks (%zu) to train on", n_words);
  st->sym = malloc((n_sym ? n_sym : 1) * sizeof *st->sym);
  st->words = calloc(n_words ? n_words : 1, sizeof *st->words);
  if (!st->sym || !st->words) return oom();
  size_t off = 0;
  for (size_t i = 0; i < m->cap; i++) {
    const nc_bytes_slot *s = &m->slots[i];
    if (!s->used || s->key_len < 2) continue;
    const unsigned char *k = (const unsigned char *)nc_bytes_map_key(m, s);
    word *w = &st->words[st->n_words];
    w->off = off;
    w->len = s->key_len;
    w->count = s->value;
    for (uint32_t j = 0; j < s->key_len; j++) st->sym[off + j] = k[j];
    off += s->key_len;
    st->n_words++;
  }
  /* Initial pair counts: every word lists itself under each of its pairs. */
  st->stamp = 1;
  for (size_t wi = 0; wi < st->n_words; wi++) {
    word *w = &st->words[wi];
    const uint32_t *s = st->sym + w->off;
    for (uint32_t j = 0; j + 1 < w->len; j++) {
      long pi = pair_of(st, s[j], s[j + 1]);
      if (pi < 0) return oom();
      pair *p = &st->pairs[pi];
      p->count += (int64_t)w->count;
      if (p->n_words == 0 || p->words[p->n_words - 1] != wi) {
        if (p->n_words == p->cap_words) {
          uint32_t ncap = p->cap_words ? p->cap_words * 2 : 4;
          uint32_t *nw = realloc(p->words, ncap * sizeof *nw);
          if (!nw) return oom();
          p->words = nw;
          p->cap_words = ncap;
        }
        p->words[p->n_words++] = (uint32_t)wi;
      }
    }
  }
  for (size_t pi = 0; pi < st->n_pairs; pi++)
    if (!heap_push(st, (uint32_t)pi)) return oom();
  return NC_OK;
}

/* Merges (a, b) into id in one word, adjusting pair counts by difference. */
static nc_status merge_word(state *st, uint32_t wi, uint32_t a, uint32_t b, uint32_t id) {
  word *w = &st->words[wi];
  uint32_t *s = st->sym + w->off;
  uint32_t n = w->len, j = 0;
  int found = 0;
  for (uint32_t i = 0; i + 1 < n && !found; i++) found = s[i] == a && s[i + 1] == b;
  if (!found) return NC_OK; /* the word's entry in the pair's list is stale */
  int64_t c = (int64_t)w->count;
  for (uint32_t i = 0; i + 1 < n; i++) NC_TRY(pair_add(st, s[i], s[i + 1], -c, wi, id));
  for (uint32_t i = 0; i < n;) {
    if (i + 1 < n && s[i] == a && s[i + 1] == b) {
      s[j++] = id;
      i += 2;
    } else {
      s[j++] = s[i++];
    }
  }
  w->len = j;
  for (uint32_t i = 0; i + 1 < j; i++) NC_TRY(pair_add(st, s[i], s[i + 1], c, wi, id));
  return NC_OK;
}

static nc_status learn(nc_bpe_trainer *tr, state *st, size_t n_merges_max, uint64_t min_frequency) {
  for (uint32_t b = 0; b < 256; b++) {
    char c = (char)b;
    uint32_t id;
    NC_TRY(add_token(st, &c, 1, &id));
  }
  NC_TRY(build_words(tr, st));
  size_t merges = 0;
  char *joined = NULL;
  size_t joined_cap = 0;
  nc_status s = NC_OK;
  while (merges < n_merges_max && st->n_heap) {
    cand c = heap_pop(st);
    pair *p = &st->pairs[c.pair];
    if (p->count != c.count) { /* stale: requeue with the current count */
      if (p->count > 0 && !heap_push(st, c.pair)) {
        s = oom();
        break;
      }
      continue;
    }
    if (c.count <= 0 || (uint64_t)c.count < min_frequency) break;
    uint32_t a = p->left, b = p->right;
    size_t la = st->tok_n[a], lb = st->tok_n[b];
    if (!GROW(joined, joined_cap, la + lb)) {
      s = oom();
      break;
    }
    memcpy(joined, st->tok_bytes + st->tok_off[a], la);
    memcpy(joined + la, st->tok_bytes + st->tok_off[b], lb);
    uint64_t existing;
    uint32_t id = 0;
    /* Two merges can spell the same bytes; the later one then yields the earlier token, so
     * every token has one id and the rank order stays the merge order. */
    if (nc_bytes_map_get(&st->tok_ids, joined, la + lb, &existing)) {
      id = (uint32_t)existing;
    } else {
      if ((s = add_token(st, joined, la + lb, &id)) != NC_OK) break;
      merges++;
    }
    st->stamp++;
    st->n_touched = 0;
    uint32_t pi = c.pair;
    /* The pair's own word list does not grow during its merge (the new symbol is longer than
     * either half, so no pair containing it is this pair). */
    uint32_t *wl = st->pairs[pi].words, nw = st->pairs[pi].n_words;
    for (uint32_t k = 0; k < nw && s == NC_OK; k++) {
      uint32_t wi = wl[k];
      if (st->words[wi].stamp == st->stamp) continue;
      st->words[wi].stamp = st->stamp;
      s = merge_word(st, wi, a, b, id);
    }
    if (s != NC_OK) break;
    /* The list is spent: after the merge no word holds the pair. */
    free(st->pairs[pi].words);
    st->pairs[pi].words = NULL;
    st->pairs[pi].n_words = st->pairs[pi].cap_words = 0;
    for (size_t t = 0; t < st->n_touched; t++) {
      const pair *q = &st->pairs[st->touched[t]];
      if (q->count > q->before && !heap_push(st, st->touched[t])) {
        s = oom();
        break;
      }
    }
    if (s != NC_OK) break;
  }
  free(joined);
  return s;
}

nc_status nc_bpe_trainer_train(nc_bpe_trainer *tr, size_t vocab_size, uint64_t min_frequency, nc_bpe **out) {
  *out = NULL;
  if (vocab_size < 256 + tr->n_specials)
    return nc_error(NC_ERR_ARG, "vocab_size %zu is below the 256 byte tokens plus %zu special tokens",
                    vocab_size, tr->n_specials);
  if (vocab_size > (size_t)NC_BPE_MAX_ID + 1)
    return nc_error(NC_ERR_ARG, "vocab_size %zu is above the %u ids allowed", vocab_size, NC_BPE_MAX_ID + 1);
  if (min_frequency < 1) min_frequency = 1;
  state st = {0};
  nc_bpe *tok = NULL;
  nc_status s = learn(tr, &st, vocab_size - 256 - tr->n_specials, min_frequency);
  if (s == NC_OK) s = nc_bpe_new(nc_presplit_source(tr->split), &tok);
  for (size_t id = 0; s == NC_OK && id < st.n_tokens; id++)
    s = nc_bpe_add_ordinary(tok, st.tok_bytes + st.tok_off[id], st.tok_n[id], (uint32_t)id, (uint32_t)id);
  for (size_t i = 0; s == NC_OK && i < tr->n_specials; i++)
    s = nc_bpe_add_special(tok, tr->specials[i], tr->special_lens[i], (uint32_t)(st.n_tokens + i));
  if (s == NC_OK) s = nc_bpe_finish(tok);
  state_free(&st);
  if (s != NC_OK) {
    nc_bpe_free(tok);
    return s;
  }
  *out = tok;
  return NC_OK;
}

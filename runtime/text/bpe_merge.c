/* The merge loop for one pre-split chunk, in O(n log n): pieces form a linked list over the
 * chunk's bytes, and a binary heap holds every adjacent pair that is a token, keyed by (rank,
 * position). Popping gives the pair tiktoken's linear scan would pick (lowest rank, leftmost
 * on ties); entries made stale by an earlier merge are recognised by their end offset and
 * dropped, so no entry is ever updated in place. */
#include <stdlib.h>
#include "core/check.h"
#include "text/bpe_impl.h"

typedef struct {
  uint32_t rank, pos, end, id;
} pair_entry;

static int less(const pair_entry *a, const pair_entry *b) {
  return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(pair_entry *h, size_t *n, pair_entry e) {
  size_t i = (*n)++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!less(&e, &h[parent])) break;
    h[i] = h[parent];
    i = parent;
  }
  h[i] = e;
}

static pair_entry heap_pop(pair_entry *h, size_t *n) {
  pair_entry top = h[0], last = h[--*n];
  size_t i = 0, m = *n;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= m) break;
    if (c + 1 < m && less(&h[c + 1], &h[c])) c++;
    if (!less(&h[c], &last)) break;
    h[i] = h[c];
    i = c;
  }
  if (m) h[i] = last;
  return top;
}

void nc_merge_scratch_free(nc_merge_scratch *s) {
  free(s->next);
  free(s->prev);
  free(s->ids);
  free(s->alive);
  free(s->heap);
  s->next = s->prev = s->ids = NULL;
  s->alive = NULL;
  s->heap = NULL;
  s->cap = s->heap_cap = 0;
}

static nc_status reserve(nc_merge_scratch *s, size_t len) {
  if (len > s->cap) {
    size_t ncap = s->cap ? s->cap : 256;
    while (ncap < len) ncap *= 2;
    uint32_t *nx = realloc(s->next, ncap * sizeof *nx);
    if (nx) s->next = nx;
    uint32_t *pv = realloc(s->prev, ncap * sizeof *pv);
    if (pv) s->prev = pv;
    uint32_t *id = realloc(s->ids, ncap * sizeof *id);
    if (id) s->ids = id;
    uint8_t *al = realloc(s->alive, ncap);
    if (al) s->alive = al;
    if (!nx || !pv || !id || !al)
      return nc_error(NC_ERR_OOM, "out of memory encoding a chunk of %zu bytes", len);
    s->cap = ncap;
  }
  /* Each merge adds at most two entries to the n - 1 initial ones. */
  size_t need = 3 * len;
  if (need > s->heap_cap) {
    pair_entry *h = realloc(s->heap, need * sizeof *h);
    if (!h) return nc_error(NC_ERR_OOM, "out of memory encoding a chunk of %zu bytes", len);
    s->heap = h;
    s->heap_cap = need;
  }
  return NC_OK;
}

nc_status nc_bpe_merge_chunk(nc_bpe *tok, const char *chunk, size_t len, nc_idvec *out) {
  if (len == 0) return NC_OK;
  if (len == 1) return nc_idvec_push(out, tok->byte_ids[(unsigned char)chunk[0]]);
  if (len >= UINT32_MAX / 4) return nc_error(NC_ERR_ARG, "a pre-split chunk of %zu bytes is too long", len);
  nc_merge_scratch *s = &tok->scratch;
  NC_TRY(reserve(s, len));
  uint32_t *next = s->next, *prev = s->prev, *ids = s->ids;
  uint8_t *alive = s->alive;
  pair_entry *heap = s->heap;
  size_t nh = 0;
  for (uint32_t i = 0; i < len; i++) {
    next[i] = i + 1;
    prev[i] = i ? i - 1 : UINT32_MAX;
    ids[i] = tok->byte_ids[(unsigned char)chunk[i]];
    alive[i] = 1;
  }
  for (uint32_t i = 0; i + 1 < len; i++) {
    pair_entry e = {0, i, i + 2, 0};
    if (nc_bpe_rank(tok, chunk + i, 2, &e.rank, &e.id)) heap_push(heap, &nh, e);
  }
  while (nh) {
    pair_entry e = heap_pop(heap, &nh);
    if (!alive[e.pos]) continue;
    uint32_t j = next[e.pos];
    if (j >= len || next[j] != e.end) continue;
    alive[j] = 0;
    next[e.pos] = e.end;
    ids[e.pos] = e.id;
    if (e.end < len) prev[e.end] = e.pos;
    if (e.end < len) {
      pair_entry r = {0, e.pos, next[e.end], 0};
      if (nc_bpe_rank(tok, chunk + r.pos, r.end - r.pos, &r.rank, &r.id)) heap_push(heap, &nh, r);
    }
    if (e.pos > 0) {
      pair_entry l = {0, prev[e.pos], e.end, 0};
      if (nc_bpe_rank(tok, chunk + l.pos, l.end - l.pos, &l.rank, &l.id)) heap_push(heap, &nh, l);
    }
  }
  NC_TRY(nc_idvec_reserve(out, len));
  for (uint32_t i = 0; i < len; i = next[i]) out->v[out->n++] = ids[i];
  return NC_OK;
}

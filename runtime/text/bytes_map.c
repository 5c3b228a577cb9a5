#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include "text/bytes_map.h"

void nc_bytes_map_init(nc_bytes_map *m) { memset(m, 0, sizeof *m); }

void nc_bytes_map_free(nc_bytes_map *m) {
  free(m->slots);
  free(m->keys);
  memset(m, 0, sizeof *m);
}

void nc_bytes_map_clear(nc_bytes_map *m) {
  if (m->slots) memset(m->slots, 0, m->cap * sizeof *m->slots);
  m->count = 0;
  m->keys_len = 0;
}

static size_t find(const nc_bytes_map *m, uint64_t h, const void *key, size_t len) {
  size_t mask = m->cap - 1;
  for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
    const nc_bytes_slot *s = &m->slots[i];
    if (!s->used) return i;
    if (s->hash == h && s->key_len == len && memcmp(m->keys + s->key_off, key, len) == 0) return i;
  }
}

int nc_bytes_map_get(const nc_bytes_map *m, const void *key, size_t len, uint64_t *value) {
  if (!m->count) return 0;
  const nc_bytes_slot *s = &m->slots[find(m, XXH3_64bits(key, len), key, len)];
  if (!s->used) return 0;
  *value = s->value;
  return 1;
}

static int grow(nc_bytes_map *m) {
  size_t ncap = m->cap ? m->cap * 2 : 64;
  nc_bytes_slot *ns = calloc(ncap, sizeof *ns);
  if (!ns) return 0;
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->slots[i].used) continue;
    size_t j = (size_t)m->slots[i].hash & (ncap - 1);
    while (ns[j].used) j = (j + 1) & (ncap - 1);
    ns[j] = m->slots[i];
  }
  free(m->slots);
  m->slots = ns;
  m->cap = ncap;
  return 1;
}

uint64_t *nc_bytes_map_slot(nc_bytes_map *m, const void *key, size_t len, int *created) {
  if (len > UINT32_MAX) return NULL;
  /* Load factor at most 1/2 keeps linear probing short for the hot lookups of the encoder. */
  if ((m->count + 1) * 2 > m->cap && !grow(m)) return NULL;
  uint64_t h = XXH3_64bits(key, len);
  nc_bytes_slot *s = &m->slots[find(m, h, key, len)];
  if (s->used) {
    if (created) *created = 0;
    return &s->value;
  }
  if (m->keys_len + len > m->keys_cap) {
    size_t ncap = m->keys_cap ? m->keys_cap : 256;
    while (ncap < m->keys_len + len) ncap *= 2;
    char *nk = realloc(m->keys, ncap);
    if (!nk) return NULL;
    m->keys = nk;
    m->keys_cap = ncap;
  }
  if (len) memcpy(m->keys + m->keys_len, key, len);
  s->hash = h;
  s->value = 0;
  s->key_off = m->keys_len;
  s->key_len = (uint32_t)len;
  s->used = 1;
  m->keys_len += len;
  m->count++;
  if (created) *created = 1;
  return &s->value;
}

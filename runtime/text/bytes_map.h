/* A hash map from byte strings to 64-bit values (open addressing, xxHash). The map owns copies
 * of its keys. Used for token ranks, the encoder's chunk cache and the trainer's chunk counts. */
#ifndef NETCL_TEXT_BYTES_MAP_H
#define NETCL_TEXT_BYTES_MAP_H

#include <stddef.h>
#include <stdint.h>
#include "netcl/status.h"

typedef struct {
  uint64_t hash;
  uint64_t value;
  size_t key_off; /* into keys */
  uint32_t key_len;
  uint32_t used;
} nc_bytes_slot;

typedef struct {
  nc_bytes_slot *slots;
  size_t cap; /* power of two, or 0 */
  size_t count;
  char *keys; /* key bytes, back to back */
  size_t keys_len, keys_cap;
} nc_bytes_map;

void nc_bytes_map_init(nc_bytes_map *m);
void nc_bytes_map_free(nc_bytes_map *m);
/* Forgets every entry but keeps the memory. */
void nc_bytes_map_clear(nc_bytes_map *m);

/* 1 and *value when key is present, else 0. */
int nc_bytes_map_get(const nc_bytes_map *m, const void *key, size_t len, uint64_t *value);

/* The value slot of key, inserting it (value 0, *created = 1) when absent. NULL only when out
 * of memory. The pointer is valid until the next insertion. */
uint64_t *nc_bytes_map_slot(nc_bytes_map *m, const void *key, size_t len, int *created);

/* Iteration: slots with used != 0; their key bytes are at nc_bytes_map_key(m, slot). */
static inline const char *nc_bytes_map_key(const nc_bytes_map *m, const nc_bytes_slot *s) {
  return m->keys + s->key_off;
}

#endif

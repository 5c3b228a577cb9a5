#include <stdlib.h>
#include <string.h>
#include "text/special_scan.h"

nc_status nc_special_scan_init(nc_special_scan *sc, size_t n, const char *const *texts, const size_t *lens) {
  sc->n = n;
  sc->texts = texts;
  sc->lens = lens;
  sc->next = NULL;
  if (!n) return NC_OK;
  sc->next = malloc(n * sizeof *sc->next);
  if (!sc->next) return nc_error(NC_ERR_OOM, "out of memory scanning for special tokens");
  for (size_t k = 0; k < n; k++) sc->next[k] = NC_SCAN_UNKNOWN;
  return NC_OK;
}

void nc_special_scan_free(nc_special_scan *sc) {
  free(sc->next);
  sc->next = NULL;
}

long nc_special_scan_next(nc_special_scan *sc, const char *text, size_t len, size_t pos, size_t *at) {
  long best = -1;
  size_t best_at = NC_SCAN_NONE;
  for (size_t k = 0; k < sc->n; k++) {
    size_t nx = sc->next[k];
    if (nx == NC_SCAN_UNKNOWN || (nx != NC_SCAN_NONE && nx < pos)) {
      const char *hit = pos <= len ? memmem(text + pos, len - pos, sc->texts[k], sc->lens[k]) : NULL;
      nx = sc->next[k] = hit ? (size_t)(hit - text) : NC_SCAN_NONE;
    }
    if (nx == NC_SCAN_NONE) continue;
    if (nx < best_at || (nx == best_at && sc->lens[k] > sc->lens[best])) {
      best = (long)k;
      best_at = nx;
    }
  }
  if (best >= 0) *at = best_at;
  return best;
}

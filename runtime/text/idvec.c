/* The growable token-id array (bpe_impl.h) that the tokenizer, its merge loop and its cache
 * share. */
#include <stdlib.h>
#include "text/bpe_impl.h"

nc_status nc_idvec_reserve(nc_idvec *v, size_t extra) {
  if (v->n + extra <= v->cap) return NC_OK;
  size_t ncap = v->cap ? v->cap : 64;
  while (ncap < v->n + extra) ncap *= 2;
  uint32_t *nv = realloc(v->v, ncap * sizeof *nv);
  if (!nv) return nc_error(NC_ERR_OOM, "out of memory for %zu token ids", ncap);
  v->v = nv;
  v->cap = ncap;
  return NC_OK;
}

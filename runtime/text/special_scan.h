/* Finding special tokens in text: the leftmost occurrence of any of a set of strings, the
 * longest one when several start at the same byte. Each string's next occurrence is cached and
 * searched again only once the scan has passed it, so a whole text costs about one memmem
 * pass per string. */
#ifndef NETCL_TEXT_SPECIAL_SCAN_H
#define NETCL_TEXT_SPECIAL_SCAN_H

#include <stddef.h>
#include "netcl/status.h"

typedef struct {
  size_t n;
  const char *const *texts; /* borrowed */
  const size_t *lens;       /* borrowed; each > 0 */
  size_t *next;             /* cached next occurrence; NC_SCAN_NONE or NC_SCAN_UNKNOWN */
} nc_special_scan;

#define NC_SCAN_NONE ((size_t)-1)
#define NC_SCAN_UNKNOWN ((size_t)-2)

/* Prepares a scan over one text; the arrays must outlive it. */
nc_status nc_special_scan_init(nc_special_scan *sc, size_t n, const char *const *texts, const size_t *lens);
void nc_special_scan_free(nc_special_scan *sc);

/* Index of the string found first at or after pos (positions never go backwards between
 * calls), with its position in *at; -1 when none is left. */
long nc_special_scan_next(nc_special_scan *sc, const char *text, size_t len, size_t pos, size_t *at);

#endif

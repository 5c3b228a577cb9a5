/* Line-by-line reading of an in-memory file, for the tokenizer file parsers. */
#ifndef NETCL_TEXT_LINES_H
#define NETCL_TEXT_LINES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
  const char *p, *end;
  size_t line; /* 1-based number of the line last returned */
} nc_lines;

static inline void nc_lines_init(nc_lines *r, const void *data, size_t len) {
  r->p = data;
  r->end = r->p + len;
  r->line = 0;
}

/* The next line without its "\n" or "\r\n": 1, or 0 at the end of the data. */
static inline int nc_lines_next(nc_lines *r, const char **s, size_t *n) {
  if (r->p >= r->end) return 0;
  const char *nl = memchr(r->p, '\n', (size_t)(r->end - r->p));
  const char *e = nl ? nl : r->end;
  *s = r->p;
  *n = (size_t)(e - r->p);
  if (*n && (*s)[*n - 1] == '\r') (*n)--;
  r->p = nl ? nl + 1 : r->end;
  r->line++;
  return 1;
}

/* A decimal number of at most 10 digits that fits in 32 bits, and nothing else: 1, or 0. */
static inline int nc_parse_u32(const char *s, size_t n, uint32_t *v) {
  if (n == 0 || n > 10) return 0;
  uint64_t x = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return 0;
    x = x * 10 + (uint64_t)(s[i] - '0');
  }
  if (x > UINT32_MAX) return 0;
  *v = (uint32_t)x;
  return 1;
}

#endif

/* Pre-splitting: cuts text into chunks with a PCRE2 pattern (UTF-8, Unicode properties) before
 * BPE. The chunks always cover the text exactly: bytes the pattern does not match (invalid
 * UTF-8, which PCRE2 never matches, or whatever a custom pattern leaves out) become chunks of
 * their own, so pre-splitting never loses a byte. */
#ifndef NETCL_TEXT_PRESPLIT_H
#define NETCL_TEXT_PRESPLIT_H

#include <stddef.h>
#include "netcl/status.h"

typedef struct nc_presplit nc_presplit;

/* Compiles a built-in pattern name ("gpt2", "cl100k") or a PCRE2 pattern. A pattern that does
 * not compile is an NC_ERR_ARG naming the offset and PCRE2's reason. */
nc_status nc_presplit_new(const char *pattern, nc_presplit **out);
void nc_presplit_free(nc_presplit *ps);

/* The pattern's PCRE2 source (the built-in's source when a name was given). */
const char *nc_presplit_source(const nc_presplit *ps);

/* Calls fn for each chunk of text[0..len), in order; stops at the first status fn returns
 * that is not NC_OK and returns it. Not reentrant: a pre-splitter holds its match data. */
typedef nc_status (*nc_chunk_fn)(void *ud, const char *chunk, size_t len);
nc_status nc_presplit_run(nc_presplit *ps, const char *text, size_t len, nc_chunk_fn fn, void *ud);

#endif

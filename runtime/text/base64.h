/* Standard base64 (RFC 4648, with padding), as tiktoken rank files and netcl-bpe files use. */
#ifndef NETCL_TEXT_BASE64_H
#define NETCL_TEXT_BASE64_H

#include <stddef.h>

/* Bytes needed to encode n bytes (without a NUL). */
static inline size_t nc_base64_encoded_len(size_t n) { return (n + 2) / 3 * 4; }

/* Writes nc_base64_encoded_len(n) characters to out (no NUL). */
void nc_base64_encode(const unsigned char *in, size_t n, char *out);

/* Decodes s[0..n) into out (room for n / 4 * 3 bytes); returns the decoded length, or -1 when
 * s is not canonical padded base64 (wrong length, a bad character, misplaced '=', or nonzero
 * bits in the padding). */
long nc_base64_decode(const char *s, size_t n, unsigned char *out);

#endif

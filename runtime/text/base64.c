#include "text/base64.h"

static const char ALPHABET[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void nc_base64_encode(const unsigned char *in, size_t n, char *out) {
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];
    *out++ = ALPHABET[v >> 18];
    *out++ = ALPHABET[(v >> 12) & 63];
    *out++ = ALPHABET[(v >> 6) & 63];
    *out++ = ALPHABET[v & 63];
  }
  if (n - i == 1) {
    unsigned v = (unsigned)in[i] << 16;
    *out++ = ALPHABET[v >> 18];
    *out++ = ALPHABET[(v >> 12) & 63];
    *out++ = '=';
    *out++ = '=';
  } else if (n - i == 2) {
    unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8;
    *out++ = ALPHABET[v >> 18];
    *out++ = ALPHABET[(v >> 12) & 63];
    *out++ = ALPHABET[(v >> 6) & 63];
    *out++ = '=';
  }
}

static int value_of(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

long nc_base64_decode(const char *s, size_t n, unsigned char *out) {
  if (n % 4) return -1;
  long o = 0;
  for (size_t i = 0; i < n; i += 4) {
    int last = i + 4 == n;
    int pad = 0;
    if (last && s[i + 3] == '=') pad = s[i + 2] == '=' ? 2 : 1;
    int v[4] = {0, 0, 0, 0};
    for (int k = 0; k < 4 - pad; k++)
      if ((v[k] = value_of(s[i + k])) < 0) return -1;
    if (pad == 2) {
      if (v[1] & 15) return -1;
      out[o++] = (unsigned char)(v[0] << 2 | v[1] >> 4);
    } else if (pad == 1) {
      if (v[2] & 3) return -1;
      out[o++] = (unsigned char)(v[0] << 2 | v[1] >> 4);
      out[o++] = (unsigned char)((v[1] & 15) << 4 | v[2] >> 2);
    } else {
      out[o++] = (unsigned char)(v[0] << 2 | v[1] >> 4);
      out[o++] = (unsigned char)((v[1] & 15) << 4 | v[2] >> 2);
      out[o++] = (unsigned char)((v[2] & 3) << 6 | v[3]);
    }
  }
  return o;
}

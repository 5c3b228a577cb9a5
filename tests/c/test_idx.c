/* idx: every element type, plain and gzip (one and several members), files by path, and
 * malformed input (bad magic, unknown types, wrong dims, truncated and corrupt data). */
#include <stdint.h>
#include <stdlib.h>
#include <zlib.h>
#include "check.h"
#include "netcl/netcl.h"

static nc_device *cpu;
static char dir[] = "/tmp/netcl-idx-XXXXXX";

/* An idx file: magic (0, 0, type, ndim), big-endian dims, then the given data bytes. */
static unsigned char *idx_of(unsigned char type, int ndim, const uint32_t *dims, const void *data,
                             size_t dlen, size_t *len) {
  *len = 4 + 4 * (size_t)ndim + dlen;
  unsigned char *b = malloc(*len);
  b[0] = b[1] = 0;
  b[2] = type;
  b[3] = (unsigned char)ndim;
  for (int i = 0; i < ndim; i++)
    for (int k = 0; k < 4; k++) b[4 + 4 * i + k] = (unsigned char)(dims[i] >> (24 - 8 * k));
  if (dlen) memcpy(b + 4 + 4 * ndim, data, dlen);
  return b;
}

static unsigned char *gzip_of(const unsigned char *in, size_t n, size_t *len) {
  z_stream z;
  memset(&z, 0, sizeof z);
  deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  size_t cap = deflateBound(&z, n) + 64;
  unsigned char *out = malloc(cap);
  z.next_in = (Bytef *)in;
  z.avail_in = (uInt)n;
  z.next_out = out;
  z.avail_out = (uInt)cap;
  int r = deflate(&z, Z_FINISH);
  CHECK(r == Z_STREAM_END);
  *len = cap - z.avail_out;
  deflateEnd(&z);
  return out;
}

static void test_types(void) {
  uint32_t dims[2] = {2, 3};
  const unsigned char u8[6] = {0, 1, 2, 128, 254, 255};
  const unsigned char i8[6] = {0, 1, 0x7f, 0x80, 0xfe, 0xff};
  const unsigned char i16[12] = {0, 1, 0x7f, 0xff, 0x80, 0, 0xff, 0xfe, 0xff, 0xff, 0x01, 0x00};
  const unsigned char i32[24] = {0,    0,    0,    1,    0xff, 0xff, 0xff, 0xff, 0x80, 0, 0, 0,
                                 0x7f, 0xff, 0xff, 0xff, 0,    1,    0,    0,    0,    0, 0, 0};
  const float fv[6] = {1, -2, 0, 0.25f, INFINITY, 42};
  const double dv[6] = {1, -0.5, 42, 0, -100, 0.1};
  unsigned char f32[24], f64[48];
  for (int i = 0; i < 6; i++) {
    uint32_t u;
    uint64_t w;
    memcpy(&u, &fv[i], 4);
    memcpy(&w, &dv[i], 8);
    for (int k = 0; k < 4; k++) f32[4 * i + k] = (unsigned char)(u >> (24 - 8 * k));
    for (int k = 0; k < 8; k++) f64[8 * i + k] = (unsigned char)(w >> (56 - 8 * k));
  }
  const struct {
    unsigned char code;
    const void *data;
    size_t n;
    nc_dtype dtype;
    double want[6];
  } cases[] = {
      {0x08, u8, 6, NC_UINT8, {0, 1, 2, 128, 254, 255}},
      {0x09, i8, 6, NC_INT32, {0, 1, 127, -128, -2, -1}},
      {0x0B, i16, 12, NC_INT32, {1, 32767, -32768, -2, -1, 256}},
      {0x0C, i32, 24, NC_INT32, {1, -1, -2147483648.0, 2147483647, 65536, 0}},
      {0x0D, f32, 24, NC_FLOAT32, {1, -2, 0, 0.25, INFINITY, 42}},
      {0x0E, f64, 48, NC_FLOAT64, {1, -0.5, 42, 0, -100, 0.1}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    size_t len, glen;
    unsigned char *b = idx_of(cases[c].code, 2, dims, cases[c].data, cases[c].n, &len);
    unsigned char *g = gzip_of(b, len, &glen);
    for (int gz = 0; gz < 2; gz++) {
      nc_tensor *t = NULL, *d = NULL;
      CHECK_OK(nc_idx_parse(gz ? g : b, gz ? glen : len, cpu, &t));
      if (!t) continue;
      CHECK(t->dtype == cases[c].dtype && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3);
      CHECK_OK(nc_to(t, cpu, NC_FLOAT64, &d));
      double v[6];
      CHECK_OK(nc_read_values(d, v, sizeof v));
      for (int i = 0; i < 6; i++) {
        if (v[i] != cases[c].want[i]) fprintf(stderr, "type 0x%02x element %d: %g\n", cases[c].code, i, v[i]);
        CHECK(v[i] == cases[c].want[i]);
      }
      nc_tensor_release(d);
      nc_tensor_release(t);
    }
    free(g);
    free(b);
  }
}

static void write_file(const char *path, const void *b, size_t n) {
  FILE *f = fopen(path, "wb");
  fwrite(b, 1, n, f);
  fclose(f);
}

static void test_files_and_members(void) {
  uint32_t dims[1] = {1000};
  unsigned char data[1000];
  for (int i = 0; i < 1000; i++) data[i] = (unsigned char)(i * 7);
  size_t len, glen;
  unsigned char *b = idx_of(0x08, 1, dims, data, 1000, &len);
  unsigned char *g = gzip_of(b, len, &glen);
  char path[256];
  snprintf(path, sizeof path, "%s/labels-idx1-ubyte.gz", dir);
  write_file(path, g, glen);
  nc_tensor *t = NULL;
  CHECK_OK(nc_idx_load(path, cpu, &t));
  unsigned char got[1000];
  if (t) CHECK_OK(nc_read_values(t, got, 1000));
  CHECK(t && t->shape[0] == 1000 && !memcmp(got, data, 1000));
  nc_tensor_release(t);
  /* gzip is found by its magic, not the name; a plain file named .gz loads too */
  snprintf(path, sizeof path, "%s/plain-idx1-ubyte.gz", dir);
  write_file(path, b, len);
  CHECK_OK(nc_idx_load(path, cpu, &t));
  nc_tensor_release(t);
  /* two gzip members (as `cat a.gz b.gz`) read as one stream */
  size_t g1, g2;
  unsigned char *m1 = gzip_of(b, 500, &g1), *m2 = gzip_of(b + 500, len - 500, &g2);
  unsigned char *both = malloc(g1 + g2);
  memcpy(both, m1, g1);
  memcpy(both + g1, m2, g2);
  CHECK_OK(nc_idx_parse(both, g1 + g2, cpu, &t));
  if (t) CHECK_OK(nc_read_values(t, got, 1000));
  CHECK(t && !memcmp(got, data, 1000));
  nc_tensor_release(t);
  /* garbage after the gzip stream, a truncated stream, and a corrupt one */
  memcpy(both + g1, "junk", 4);
  CHECK_ERR(nc_idx_parse(both, g1 + 4, cpu, &t), NC_ERR_FORMAT, "4 bytes of garbage after the gzip stream");
  CHECK_ERR(nc_idx_parse(g, glen / 2, cpu, &t), NC_ERR_FORMAT,
            "data are truncated: dims [1000] of ubyte need 1000 bytes");
  /* every data byte present but the 8-byte trailer (CRC-32, length) cut, wholly or in part:
   * the CRC cannot be checked, so it is an error, not a silent load */
  for (size_t cut = 1; cut <= 8; cut += 7)
    CHECK_ERR(nc_idx_parse(g, glen - cut, cpu, &t), NC_ERR_FORMAT, "truncated gzip stream: it ends before its trailer");
  /* a wrong CRC in an intact trailer */
  memcpy(both, g, glen);
  both[glen - 8] ^= 1;
  CHECK_ERR(nc_idx_parse(both, glen, cpu, &t), NC_ERR_FORMAT, "corrupt gzip data: incorrect data check");
  memcpy(both, g, glen);
  for (size_t i = 12; i < glen - 8; i++) both[i] ^= 0x5a;
  CHECK_ERR(nc_idx_parse(both, glen, cpu, &t), NC_ERR_FORMAT, "corrupt gzip data");
  snprintf(path, sizeof path, "%s/missing-idx3-ubyte", dir);
  CHECK_ERR(nc_idx_load(path, cpu, &t), NC_ERR_IO, "missing-idx3-ubyte: cannot open");
  free(both);
  free(m1);
  free(m2);
  free(g);
  free(b);
}

static void test_bad_files(void) {
  nc_tensor *t;
  uint32_t dims[3] = {2, 2, 2};
  unsigned char data[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  size_t len, glen;
  unsigned char *b = idx_of(0x08, 3, dims, data, 8, &len);
  CHECK_OK(nc_idx_parse(b, len, cpu, &t));
  nc_tensor_release(t);
  CHECK_ERR(nc_idx_parse(b, 2, cpu, &t), NC_ERR_FORMAT,
            "file is 2 bytes, too short for the 4-byte idx magic");
  CHECK_ERR(nc_idx_parse("\x1f\x00\x08\x01", 4, cpu, &t), NC_ERR_FORMAT,
            "not an idx file (bad magic 1f 00 08 01");
  CHECK_ERR(nc_idx_parse("\x00\x00\x07\x01\x00\x00\x00\x01x", 9, cpu, &t), NC_ERR_FORMAT,
            "unknown element type 0x07");
  CHECK_ERR(nc_idx_parse("\x00\x00\x08\x00", 4, cpu, &t), NC_ERR_FORMAT, "declares 0 dims");
  CHECK_ERR(nc_idx_parse("\x00\x00\x08\x09", 4, cpu, &t), NC_ERR_UNSUPPORTED,
            "declares 9 dims; netcl supports at most 8");
  CHECK_ERR(nc_idx_parse(b, 10, cpu, &t), NC_ERR_FORMAT,
            "file ends inside the header: 3 dims need 12 bytes, 6 are left");
  CHECK_ERR(nc_idx_parse(b, len - 1, cpu, &t), NC_ERR_FORMAT,
            "data are truncated: dims [2, 2, 2] of ubyte need 8 bytes, the file holds 7");
  free(b);
  /* dims that describe less data than the file holds */
  b = idx_of(0x08, 3, dims, data, 9, &len);
  CHECK_ERR(nc_idx_parse(b, len, cpu, &t), NC_ERR_FORMAT,
            "wrong dims: the file holds more data than dims [2, 2, 2]");
  unsigned char *g = gzip_of(b, len, &glen);
  CHECK_ERR(nc_idx_parse(g, glen, cpu, &t), NC_ERR_FORMAT, "wrong dims");
  free(g);
  free(b);
  /* dims far beyond what the (compressed) input could hold fail before allocating */
  uint32_t huge[2] = {4000000000u, 1000000000u};
  b = idx_of(0x0E, 2, huge, data, 8, &len);
  CHECK_ERR(nc_idx_parse(b, len, cpu, &t), NC_ERR_FORMAT,
            "data are truncated: dims [4000000000, 1000000000] of double need more than");
  g = gzip_of(b, len, &glen);
  CHECK_ERR(nc_idx_parse(g, glen, cpu, &t), NC_ERR_FORMAT, "the file holds at most");
  free(g);
  free(b);
  uint32_t big[2] = {60000, 784};
  b = idx_of(0x08, 2, big, data, 8, &len);
  g = gzip_of(b, len, &glen);
  CHECK_ERR(nc_idx_parse(g, glen, cpu, &t), NC_ERR_FORMAT, "need 47040000 bytes, the file holds at most");
  free(g);
  free(b);
}

int main(void) {
  CHECK_OK(nc_init());
  CHECK_OK(nc_device_find("cpu", &cpu));
  if (!mkdtemp(dir)) return 1;
  test_types();
  test_files_and_members();
  test_bad_files();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  CHECK_DONE();
}

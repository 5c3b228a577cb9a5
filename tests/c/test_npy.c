/* npy: the header numpy expects, round trips of every dtype, Fortran order, and malformed files. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "check.h"
#include "netcl/netcl.h"

static nc_device *cpu;
static char dir[] = "/tmp/netcl-npy-XXXXXX";

static unsigned char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc(*len + 1);
  if (fread(b, 1, *len, f) != *len) *len = 0;
  fclose(f);
  return b;
}

/* A version 1.0 file with the given header text (padded as numpy pads) and data. */
static unsigned char *npy_of(const char *dict, const void *data, size_t dlen, size_t *len) {
  size_t h = strlen(dict), total = (10 + h + 1 + 63) / 64 * 64;
  *len = total + dlen;
  unsigned char *b = malloc(*len);
  memcpy(b, "\x93NUMPY\x01\x00", 8);
  b[8] = (unsigned char)((total - 10) & 0xff);
  b[9] = (unsigned char)((total - 10) >> 8);
  memset(b + 10, ' ', total - 10);
  memcpy(b + 10, dict, h);
  b[total - 1] = '\n';
  if (dlen) memcpy(b + total, data, dlen);
  return b;
}

static nc_status parse_npy(const char *dict, const void *data, size_t dlen, nc_tensor **out) {
  size_t len;
  unsigned char *b = npy_of(dict, data, dlen, &len);
  nc_tensor *t = NULL;
  nc_status s = nc_npy_parse(b, len, cpu, &t);
  free(b);
  if (out)
    *out = t;
  else
    nc_tensor_release(t);
  return s;
}

static void test_header_bytes(void) {
  int64_t shape[2] = {2, 3};
  nc_tensor *t;
  CHECK_OK(nc_tensor_empty(cpu, NC_FLOAT32, 2, shape, 0, &t));
  CHECK_OK(nc_arange_fill(t, 0, 1));
  char path[256];
  snprintf(path, sizeof path, "%s/a.npy", dir);
  CHECK_OK(nc_npy_save(path, t));
  size_t len;
  unsigned char *b = read_file(path, &len);
  const char *want = "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  CHECK(b && len == 128 + 24 && !memcmp(b, want, strlen(want)));
  CHECK(b && b[127] == '\n' && b[126] == ' ');
  float v[6] = {0, 1, 2, 3, 4, 5};
  CHECK(b && !memcmp(b + 128, v, 24));
  free(b);
  nc_tensor_release(t);
  /* numpy's spelling of 1-d and 0-d shapes */
  int64_t three = 3;
  CHECK_OK(nc_tensor_empty(cpu, NC_UINT8, 1, &three, 0, &t));
  CHECK_OK(nc_fill(t, 9));
  CHECK_OK(nc_npy_save(path, t));
  b = read_file(path, &len);
  CHECK(b && strstr((char *)b + 10, "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }"));
  free(b);
  nc_tensor_release(t);
  CHECK_OK(nc_tensor_empty(cpu, NC_INT64, 0, NULL, 0, &t));
  CHECK_OK(nc_fill(t, -5));
  CHECK_OK(nc_npy_save(path, t));
  b = read_file(path, &len);
  CHECK(b && len == 128 + 8 &&
        strstr((char *)b + 10, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }"));
  free(b);
  nc_tensor_release(t);
}

static void test_round_trip(void) {
  const nc_dtype dts[] = {NC_FLOAT32, NC_FLOAT64, NC_INT32, NC_INT64, NC_UINT8, NC_BOOL};
  int64_t shape[3] = {2, 3, 4}, zero[2] = {0, 5};
  char path[256];
  snprintf(path, sizeof path, "%s/r.npy", dir);
  for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
    nc_tensor *t, *v, *r = NULL;
    CHECK_OK(nc_tensor_empty(cpu, dts[i], 3, shape, 0, &t));
    CHECK_OK(nc_arange_fill(t, dts[i] == NC_BOOL ? 0 : -3, dts[i] == NC_BOOL ? 0 : 1));
    CHECK_OK(nc_tensor_transpose(t, 0, 2, &v)); /* a strided view is written in logical order */
    CHECK_OK(nc_npy_save(path, v));
    CHECK_OK(nc_npy_load(path, cpu, &r));
    CHECK(r && r->dtype == dts[i] && r->ndim == 3 && r->shape[0] == 4 && r->shape[2] == 2);
    size_t n = nc_tensor_nbytes(v);
    char *x = malloc(n), *y = malloc(n);
    CHECK_OK(nc_read_values(v, x, n));
    if (r) CHECK_OK(nc_read_values(r, y, n));
    CHECK(r && !memcmp(x, y, n));
    free(x);
    free(y);
    nc_tensor_release(r);
    nc_tensor_release(v);
    nc_tensor_release(t);
  }
  nc_tensor *e, *r = NULL;
  CHECK_OK(nc_tensor_empty(cpu, NC_FLOAT64, 2, zero, 0, &e));
  CHECK_OK(nc_npy_save(path, e));
  CHECK_OK(nc_npy_load(path, cpu, &r));
  CHECK(r && r->ndim == 2 && r->shape[0] == 0 && r->shape[1] == 5);
  nc_tensor_release(r);
  nc_tensor_release(e);
}

static void test_variants(void) {
  /* Fortran order: column-major bytes of [[0, 1, 2], [3, 4, 5]] */
  const float col[6] = {0, 3, 1, 4, 2, 5};
  nc_tensor *t = NULL;
  CHECK_OK(parse_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", col, 24, &t));
  float v[6];
  if (t) CHECK_OK(nc_read_values(t, v, 24));
  CHECK(t && t->shape[0] == 2 && t->shape[1] == 3 && nc_tensor_is_contiguous(t));
  for (int i = 0; t && i < 6; i++) CHECK(v[i] == (float)i);
  nc_tensor_release(t);
  /* keys in any order, double quotes, no trailing comma, '=' and '|' byte orders, Python 2 longs */
  const int32_t iv[2] = {7, -8};
  CHECK_OK(parse_npy("{\"shape\": (2L,), \"fortran_order\": False, \"descr\": \"=i4\"}", iv, 8, NULL));
  CHECK_OK(parse_npy("{'descr':'>u1','fortran_order':False,'shape':(0,)}", NULL, 0, NULL));
  /* format 2.0: a 4-byte header length */
  size_t len;
  unsigned char *b = npy_of("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", iv, 8, &len);
  unsigned char *b2 = malloc(len + 2);
  memcpy(b2, "\x93NUMPY\x02\x00", 8);
  size_t h = (size_t)b[8] | (size_t)b[9] << 8;
  b2[8] = (unsigned char)(h & 0xff);
  b2[9] = (unsigned char)(h >> 8);
  b2[10] = b2[11] = 0;
  memcpy(b2 + 12, b + 10, len - 10);
  CHECK_OK(nc_npy_parse(b2, len + 2, cpu, &t));
  int32_t got[2] = {0, 0};
  if (t) CHECK_OK(nc_read_values(t, got, 8));
  CHECK(got[0] == 7 && got[1] == -8);
  nc_tensor_release(t);
  free(b2);
  free(b);
}

static void test_bad_files(void) {
  const float d[6] = {0};
  nc_tensor *t;
  CHECK_ERR(nc_npy_parse("\x93NUMPY\x01", 7, cpu, &t), NC_ERR_FORMAT, "file is 7 bytes, too short");
  CHECK_ERR(nc_npy_parse("PK\x03\x04 not numpy at all", 22, cpu, &t), NC_ERR_FORMAT,
            "not an npy file (bad magic)");
  CHECK_ERR(nc_npy_parse("\x93NUMPY\x09\x00\x10\x00{}", 12, cpu, &t), NC_ERR_UNSUPPORTED, "version 9.0");
  CHECK_ERR(nc_npy_parse("\x93NUMPY\x01\x00\xff\x00{'descr'", 18, cpu, &t), NC_ERR_FORMAT,
            "header length 255 is past the end of the file (18 bytes)");
  /* truncated and over-long data */
  CHECK_ERR(parse_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", d, 20, NULL),
            NC_ERR_FORMAT, "the shape needs 24 bytes of data, the file holds 20 (truncated?)");
  CHECK_ERR(parse_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }", d, 24, NULL),
            NC_ERR_FORMAT,
            "the shape needs 12 bytes of data, the file holds 24 (extra bytes after the data)");
  CHECK_ERR(
      parse_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (1152921504606846976, 4), }", d, 24, NULL),
      NC_ERR_FORMAT, "the shape needs more than");
  CHECK_ERR(
      parse_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", d, 24, NULL),
      NC_ERR_FORMAT, "shape has more than 2^63 elements");
  /* zero elements, but strides past 2^63 (found by fuzz_npy) */
  CHECK_ERR(parse_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296), }", d,
                      0, NULL),
            NC_ERR_FORMAT, "shape has more than 2^63 elements");
  /* dtypes */
  CHECK_ERR(parse_npy("{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }", d, 4, NULL),
            NC_ERR_UNSUPPORTED, "dtype '<u2' is not supported");
  CHECK_ERR(parse_npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", d, 8, NULL),
            NC_ERR_UNSUPPORTED, "big-endian");
  CHECK_ERR(parse_npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", d, 8, NULL),
            NC_ERR_UNSUPPORTED, "structured dtypes");
  CHECK_ERR(parse_npy("{'descr': 'f4', 'fortran_order': False, 'shape': (2,), }", d, 8, NULL), NC_ERR_FORMAT,
            "descr 'f4' is not a numpy type string");
  const unsigned char bools[2] = {0, 3};
  CHECK_ERR(parse_npy("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", bools, 2, NULL),
            NC_ERR_FORMAT, "bool element 1 holds 3");
  /* malformed headers */
  CHECK_ERR(parse_npy("{'descr': '<f4', 'shape': (2,), }", d, 8, NULL), NC_ERR_FORMAT,
            "lacks 'fortran_order'");
  CHECK_ERR(parse_npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", d, 8, NULL),
            NC_ERR_FORMAT, "key 'descr' appears twice");
  CHECK_ERR(parse_npy("{'descr': '<f4', 'fortran_order': false, 'shape': (2,)}", d, 8, NULL), NC_ERR_FORMAT,
            "expected True or False");
  CHECK_ERR(parse_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1)}", d, 8, NULL),
            NC_ERR_FORMAT, "expected a non-negative integer in the shape");
  CHECK_ERR(parse_npy("{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", d, 8, NULL), NC_ERR_FORMAT,
            "expected a shape tuple");
  CHECK_ERR(parse_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,2)}", d, 8, NULL),
            NC_ERR_UNSUPPORTED, "more than 8 dims");
  CHECK_ERR(parse_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", d, 8, NULL),
            NC_ERR_FORMAT, "unexpected key 'x'");
  CHECK_ERR(parse_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk", d, 8, NULL),
            NC_ERR_FORMAT, "expected only padding after the dict");
  CHECK_ERR(parse_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", d, 8, NULL), NC_ERR_FORMAT,
            "expected ',' or '}'");
  CHECK_ERR(parse_npy("{'descr': '<f4\\x', 'fortran_order': False}", d, 8, NULL), NC_ERR_FORMAT,
            "without escapes");
  char path[256];
  snprintf(path, sizeof path, "%s/absent.npy", dir);
  CHECK_ERR(nc_npy_load(path, cpu, &t), NC_ERR_IO, "absent.npy: cannot open");
  snprintf(path, sizeof path, "%s/bad.npy", dir);
  FILE *f = fopen(path, "wb");
  fwrite("\x93NUMPX\x01\x00\x00\x00", 1, 10, f);
  fclose(f);
  CHECK_ERR(nc_npy_load(path, cpu, &t), NC_ERR_FORMAT, "bad.npy: not an npy file (bad magic)");
}

int main(void) {
  CHECK_OK(nc_init());
  CHECK_OK(nc_device_find("cpu", &cpu));
  if (!mkdtemp(dir)) return 1;
  test_header_bytes();
  test_round_trip();
  test_variants();
  test_bad_files();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  CHECK_DONE();
}

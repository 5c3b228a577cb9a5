/* safetensors: the exact bytes written, round trips of every dtype and layout, atomic saves,
 * and one test per kind of malformed file. */
#include <dirent.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "check.h"
#include "netcl/netcl.h"

static nc_device *cpu;
static char dir[] = "/tmp/netcl-st-XXXXXX";

static nc_tensor *make(nc_dtype dt, int ndim, const int64_t *shape, double start) {
  nc_tensor *t;
  CHECK_OK(nc_tensor_empty(cpu, dt, ndim, shape, 0, &t));
  CHECK_OK(nc_arange_fill(t, start, 1));
  return t;
}

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

static int count_entries(const char *d) {
  DIR *dp = opendir(d);
  int n = 0;
  for (struct dirent *e; dp && (e = readdir(dp));) n += e->d_name[0] != '.';
  if (dp) closedir(dp);
  return n;
}

/* A file: 8-byte length, the header as given (no padding added), then data. */
static unsigned char *file_of(const char *header, const void *data, size_t dlen, size_t *len) {
  size_t h = strlen(header);
  *len = 8 + h + dlen;
  unsigned char *b = malloc(*len);
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
  memcpy(b + 8, header, h);
  if (dlen) memcpy(b + 8 + h, data, dlen);
  return b;
}

static nc_status parse_str(const char *header, const void *data, size_t dlen) {
  size_t len;
  unsigned char *b = file_of(header, data, dlen, &len);
  nc_safetensors *f = NULL;
  nc_status s = nc_safetensors_parse(b, len, cpu, &f);
  nc_safetensors_free(f);
  free(b);
  return s;
}

static void test_exact_bytes(void) {
  /* One F32 tensor "a" = [0, 1]: a 54-byte header, padded with two spaces to 56. */
  int64_t two = 2;
  nc_tensor *a = make(NC_FLOAT32, 1, &two, 0);
  char path[256];
  snprintf(path, sizeof path, "%s/one.safetensors", dir);
  nc_named_tensor nt = {"a", a};
  CHECK_OK(nc_safetensors_save(path, &nt, 1, NULL, 0));
  size_t len;
  unsigned char *b = read_file(path, &len);
  const char *hdr = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  CHECK(b && len == 8 + 56 + 8);
  CHECK(b && b[0] == 56 && !b[1] && !b[7] && strlen(hdr) == 54 && !memcmp(b + 8, hdr, 54) &&
        !memcmp(b + 62, "  ", 2));
  float v[2] = {0, 1};
  CHECK(b && !memcmp(b + 64, v, 8));
  free(b);
  /* Metadata and padding: the header is padded with spaces to a multiple of 8. */
  nc_metadata_entry m = {"format", "pt"};
  CHECK_OK(nc_safetensors_save(path, &nt, 1, &m, 1));
  b = read_file(path, &len);
  uint64_t h = 0;
  for (int i = 7; b && i >= 0; i--) h = h << 8 | b[i];
  const char *hdr2 =
      "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  CHECK(h % 8 == 0 && h >= strlen(hdr2) && h < strlen(hdr2) + 8 && len == 8 + h + 8);
  CHECK(b && !memcmp(b + 8, hdr2, strlen(hdr2)));
  for (size_t i = 8 + strlen(hdr2); b && i < 8 + h; i++) CHECK(b[i] == ' ');
  free(b);
  nc_tensor_release(a);
}

static void test_round_trip(void) {
  int64_t s23[2] = {2, 3}, s0[1] = {0}, s4[1] = {4}, s322[3] = {3, 2, 2};
  nc_tensor *f32 = make(NC_FLOAT32, 2, s23, -1.5), *f64 = make(NC_FLOAT64, 1, s4, 0.25),
            *i32 = make(NC_INT32, 1, s4, -2), *i64 = make(NC_INT64, 0, NULL, 1LL << 40),
            *u8 = make(NC_UINT8, 1, s4, 250), *b = make(NC_BOOL, 1, s4, 0),
            *empty = make(NC_FLOAT32, 1, s0, 0), *base = make(NC_FLOAT32, 3, s322, 0), *view;
  CHECK_OK(nc_fill(b, 0));
  nc_tensor *b1;
  CHECK_OK(nc_tensor_narrow(b, 0, 1, 2, &b1));
  CHECK_OK(nc_fill(b1, 1));
  nc_tensor_release(b1);
  CHECK_OK(nc_tensor_transpose(base, 0, 2, &view)); /* strided: written in logical order */
  nc_named_tensor ts[] = {{"w.f32", f32}, {"f64", f64}, {"i32", i32},     {"scalar", i64},
                          {"u8", u8},     {"mask", b},  {"empty", empty}, {"layer.0.t", view}};
  nc_metadata_entry meta[] = {{"format", "pt"}, {"note", "ünïcode ✓"}};
  char path[256];
  snprintf(path, sizeof path, "%s/all.netcl", dir);
  CHECK_OK(nc_safetensors_save(path, ts, 8, meta, 2));
  nc_safetensors *f = NULL;
  CHECK_OK(nc_safetensors_load(path, cpu, &f));
  CHECK(f && nc_safetensors_count(f) == 8 && nc_safetensors_metadata_count(f) == 2);
  for (size_t i = 0; f && i < 8; i++) {
    const char *name = nc_safetensors_name(f, i);
    nc_tensor *t = nc_safetensors_tensor(f, i), *want = NULL;
    for (size_t k = 0; k < 8; k++)
      if (!strcmp(ts[k].name, name)) want = ts[k].tensor;
    CHECK(want != NULL);
    if (!want) continue;
    CHECK(t->dtype == want->dtype && t->ndim == want->ndim && nc_tensor_is_contiguous(t));
    for (int d = 0; d < t->ndim; d++) CHECK(t->shape[d] == want->shape[d]);
    size_t n = nc_tensor_nbytes(t);
    char *x = malloc(n + 1), *y = malloc(n + 1);
    CHECK_OK(nc_read_values(t, x, n));
    CHECK_OK(nc_read_values(want, y, n));
    CHECK(!memcmp(x, y, n));
    free(x);
    free(y);
  }
  for (size_t i = 0; f && i < 2; i++) {
    const char *k = nc_safetensors_metadata_key(f, i), *v = nc_safetensors_metadata_value(f, i);
    CHECK((!strcmp(k, "format") && !strcmp(v, "pt")) || (!strcmp(k, "note") && !strcmp(v, "ünïcode ✓")));
  }
  /* Data are laid out largest element first, so every tensor is aligned to its size. */
  size_t len;
  unsigned char *raw = read_file(path, &len);
  uint64_t h = 0;
  for (int i = 7; i >= 0; i--) h = h << 8 | raw[i];
  CHECK((8 + h) % 8 == 0);
  raw[8 + h] = 0; /* terminates the header for strstr */
  const char *p64 = strstr((char *)raw + 8, "\"f64\""), *p8 = strstr((char *)raw + 8, "\"u8\"");
  CHECK(p64 && p8 && p64 < p8);
  free(raw);
  nc_safetensors_free(f);
  nc_tensor *all[] = {f32, f64, i32, i64, u8, b, empty, base, view};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) nc_tensor_release(all[i]);
}

static void test_atomic(void) {
  char path[256], missing[256];
  snprintf(path, sizeof path, "%s/atomic.safetensors", dir);
  snprintf(missing, sizeof missing, "%s/no/such/dir/x.safetensors", dir);
  int64_t two = 2;
  nc_tensor *a = make(NC_FLOAT32, 1, &two, 7);
  nc_named_tensor nt = {"a", a};
  int before = count_entries(dir);
  CHECK_OK(nc_safetensors_save(path, &nt, 1, NULL, 0));
  CHECK(count_entries(dir) == before + 1); /* no temporary file left behind */
  CHECK(access(path, R_OK) == 0);
  /* Permissions as for any new file (mkstemp's 0600 would hide checkpoints from others). */
  mode_t mask = umask(022);
  umask(mask);
  struct stat st;
  CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == (0666 & ~mask));
  CHECK_ERR(nc_safetensors_save(missing, &nt, 1, NULL, 0), NC_ERR_IO, "no/such/dir/x.safetensors");
  /* A failed save leaves the old file as it was. */
  size_t len0, len1;
  unsigned char *old = read_file(path, &len0);
  nc_named_tensor bad[] = {{"a", a}, {"a", a}};
  CHECK_ERR(nc_safetensors_save(path, bad, 2, NULL, 0), NC_ERR_ARG, "'a' appears twice");
  nc_named_tensor reserved = {"__metadata__", a};
  CHECK_ERR(nc_safetensors_save(path, &reserved, 1, NULL, 0), NC_ERR_ARG, "reserved");
  nc_named_tensor bad_utf8 = {"\xff\xfe", a};
  CHECK_ERR(nc_safetensors_save(path, &bad_utf8, 1, NULL, 0), NC_ERR_ARG, "UTF-8");
  nc_metadata_entry dup[] = {{"k", "1"}, {"k", "2"}};
  CHECK_ERR(nc_safetensors_save(path, &nt, 1, dup, 2), NC_ERR_ARG, "metadata key 'k' appears twice");
  unsigned char *now = read_file(path, &len1);
  CHECK(len0 == len1 && !memcmp(old, now, len0));
  CHECK(count_entries(dir) == before + 1);
  free(old);
  free(now);
  /* An empty checkpoint is a valid file. */
  CHECK_OK(nc_safetensors_save(path, NULL, 0, NULL, 0));
  nc_safetensors *f = NULL;
  CHECK_OK(nc_safetensors_load(path, cpu, &f));
  CHECK(f && nc_safetensors_count(f) == 0);
  nc_safetensors_free(f);
  nc_tensor_release(a);
}

static void test_bad_files(void) {
  const float d2[2] = {1, 2};
  const char *ok = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  CHECK_OK(parse_str(ok, d2, 8));
  nc_safetensors *f = NULL;
  /* truncated before the length, and a truncated data section */
  CHECK_ERR(nc_safetensors_parse("\x10\0\0", 3, cpu, &f), NC_ERR_FORMAT, "file is 3 bytes, too short");
  CHECK_ERR(parse_str(ok, d2, 5), NC_ERR_FORMAT,
            "data_offsets [0, 8] are out of range: the data section holds 5 bytes (is the file truncated?)");
  /* header length past the end of the file */
  unsigned char big[20] = {0x9f, 0x86, 0x01, 0, 0, 0, 0, 0, '{', '}'};
  CHECK_ERR(nc_safetensors_parse(big, sizeof big, cpu, &f), NC_ERR_FORMAT,
            "header length 99999 is past the end of the file (20 bytes)");
  unsigned char huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  CHECK_ERR(nc_safetensors_parse(huge, sizeof huge, cpu, &f), NC_ERR_FORMAT, "is past the end of the file");
  /* not JSON, or not an object */
  CHECK_ERR(parse_str("{\"a\": [1, 2", NULL, 0), NC_ERR_FORMAT, "header is not valid JSON");
  CHECK_ERR(parse_str("PK\x03\x04 zip?", NULL, 0), NC_ERR_FORMAT, "header is not valid JSON");
  CHECK_ERR(parse_str("", NULL, 0), NC_ERR_FORMAT, "header is not valid JSON");
  CHECK_ERR(parse_str("[1, 2]", NULL, 0), NC_ERR_FORMAT, "header is an array, expected a JSON object");
  CHECK_ERR(parse_str("{\"a\":1,\"a\":2}", NULL, 0), NC_ERR_FORMAT, "duplicate object key");
  /* unknown dtypes, and known ones netcl has no type for */
  CHECK_ERR(parse_str("{\"a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", d2, 8),
            NC_ERR_FORMAT, "tensor 'a': unknown dtype 'F33'");
  CHECK_ERR(parse_str("{\"a\":{\"dtype\":\"I16\",\"shape\":[4],\"data_offsets\":[0,8]}}", d2, 8),
            NC_ERR_UNSUPPORTED, "dtype I16 has no netcl element type");
  CHECK_ERR(parse_str("{\"a\":{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,8]}}", d2, 8), NC_ERR_FORMAT,
            "'dtype' is missing or not a string");
  /* shape against byte count */
  CHECK_ERR(parse_str("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", d2, 8),
            NC_ERR_FORMAT, "tensor 'a': shape [3] of F32 needs 12 bytes but data_offsets [0, 8] hold 8");
  CHECK_ERR(parse_str("{\"a\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,8]}}",
                      d2, 8),
            NC_ERR_FORMAT, "tensor 'a'");
  CHECK_ERR(parse_str("{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,8]}}", d2, 8),
            NC_ERR_FORMAT, "shape entry 1 is not a non-negative integer");
  CHECK_ERR(
      parse_str("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,8],\"data_offsets\":[0,8]}}", d2, 8),
      NC_ERR_UNSUPPORTED, "9 dims");
  /* offsets out of range, reversed, malformed, overlapping, with holes or unindexed bytes */
  CHECK_ERR(parse_str("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", d2, 8),
            NC_ERR_FORMAT, "data_offsets [4, 12] are out of range");
  CHECK_ERR(parse_str("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", d2, 8),
            NC_ERR_FORMAT, "data_offsets [8, 0] are out of range (need 0 <= begin <= end)");
  CHECK_ERR(parse_str("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", d2, 8), NC_ERR_FORMAT,
            "'data_offsets' must be an array [begin, end]");
  CHECK_ERR(parse_str("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                      d2, 8),
            NC_ERR_FORMAT, "tensors 'a' (bytes 0..8) and 'b' (bytes 4..8) overlap");
  CHECK_ERR(parse_str("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", d2, 8),
            NC_ERR_FORMAT, "bytes 0..4 of the data section belong to no tensor");
  CHECK_ERR(parse_str("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", d2, 8),
            NC_ERR_FORMAT, "the data section holds 8 bytes but the tensors end at byte 4");
  /* entries and metadata of the wrong kind, and invalid booleans */
  CHECK_ERR(parse_str("{\"a\":[1]}", NULL, 0), NC_ERR_FORMAT, "tensor 'a': expected an object");
  CHECK_ERR(parse_str("{\"__metadata__\":{\"epoch\":3}}", NULL, 0), NC_ERR_FORMAT,
            "__metadata__ must map strings to strings: 'epoch' holds an integer");
  CHECK_ERR(parse_str("{\"__metadata__\":[]}", NULL, 0), NC_ERR_FORMAT, "__metadata__ must be an object");
  const unsigned char bools[2] = {1, 2};
  CHECK_ERR(parse_str("{\"m\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[0,2]}}", bools, 2),
            NC_ERR_FORMAT, "tensor 'm': BOOL element 1 holds 2");
  /* zero-sized tensors may share an offset; metadata alone is a valid file */
  CHECK_OK(
      parse_str("{\"z\":{\"dtype\":\"I64\",\"shape\":[0,3],\"data_offsets\":[0,0]},"
                "\"y\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}",
                NULL, 0));
  CHECK_OK(parse_str("{\"__metadata__\":{}}   ", NULL, 0));
  /* file-level errors name the path */
  char path[256];
  snprintf(path, sizeof path, "%s/bad.safetensors", dir);
  FILE *fp = fopen(path, "wb");
  fwrite(big, 1, sizeof big, fp);
  fclose(fp);
  CHECK_ERR(nc_safetensors_load(path, cpu, &f), NC_ERR_FORMAT,
            "bad.safetensors: header length 99999 is past");
  CHECK_ERR(nc_safetensors_load(dir, cpu, &f), NC_ERR_IO, "is a directory");
  snprintf(path, sizeof path, "%s/absent.safetensors", dir);
  CHECK_ERR(nc_safetensors_load(path, cpu, &f), NC_ERR_IO, "absent.safetensors: cannot open");
}

/* Pipes and other unmappable files are read to their end instead. */
static void test_pipe(void) {
  int fds[2];
  CHECK(pipe(fds) == 0);
  const float d2[2] = {3, 4};
  size_t len;
  unsigned char *b = file_of("{\"p\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d2, 8, &len);
  CHECK(write(fds[1], b, len) == (ssize_t)len);
  close(fds[1]);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fds[0]);
  nc_safetensors *f = NULL;
  CHECK_OK(nc_safetensors_load(path, cpu, &f));
  float v[2] = {0, 0};
  if (f) CHECK_OK(nc_read_values(nc_safetensors_tensor(f, 0), v, 8));
  CHECK(v[0] == 3 && v[1] == 4);
  nc_safetensors_free(f);
  close(fds[0]);
  free(b);
}

int main(void) {
  CHECK_OK(nc_init());
  CHECK_OK(nc_device_find("cpu", &cpu));
  if (!mkdtemp(dir)) return 1;
  test_exact_bytes();
  test_round_trip();
  test_atomic();
  test_bad_files();
  test_pipe();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  CHECK_DONE();
}

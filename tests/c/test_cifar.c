/* CIFAR-10 binary batches: the record layout (label byte, then the red, green and blue planes),
 * several files read as one dataset, and corrupt files (empty, cut short, extra bytes, a label
 * above 9, a missing file), each an error naming the problem and the file. */
#include <stdint.h>
#include <stdlib.h>
#include "check.h"
#include "netcl/netcl.h"

static nc_device *cpu;
static char dir[] = "/tmp/netcl-cifar-XXXXXX";

/* Record r: label labels[r], pixel i of the record = (r * 31 + i) % 251. */
static unsigned char *records(const unsigned char *labels, int n, int first, size_t *len) {
  *len = (size_t)n * NC_CIFAR10_RECORD;
  unsigned char *b = malloc(*len);
  for (int r = 0; r < n; r++) {
    b[(size_t)r * NC_CIFAR10_RECORD] = labels[r];
    for (int i = 0; i < 3072; i++) b[(size_t)r * NC_CIFAR10_RECORD + 1 + i] = (unsigned char)(((first + r) * 31 + i) % 251);
  }
  return b;
}

static void write_file(const char *path, const void *b, size_t n) {
  FILE *f = fopen(path, "wb");
  fwrite(b, 1, n, f);
  fclose(f);
}

static void test_layout_and_files(void) {
  const unsigned char la[3] = {6, 9, 0}, lb[2] = {1, 2};
  size_t na, nb;
  unsigned char *a = records(la, 3, 0, &na), *b = records(lb, 2, 3, &nb);
  nc_tensor *x = NULL, *y = NULL;
  CHECK_OK(nc_cifar10_parse(a, na, cpu, &x, &y));
  CHECK(x && x->dtype == NC_UINT8 && x->ndim == 4 && x->shape[0] == 3 && x->shape[1] == 3 && x->shape[2] == 32 &&
        x->shape[3] == 32);
  CHECK(y && y->dtype == NC_INT64 && y->ndim == 1 && y->shape[0] == 3);
  nc_tensor_release(x);
  nc_tensor_release(y);
  char pa[256], pb[256];
  snprintf(pa, sizeof pa, "%s/data_batch_1.bin", dir);
  snprintf(pb, sizeof pb, "%s/data_batch_2.bin", dir);
  write_file(pa, a, na);
  write_file(pb, b, nb);
  const char *paths[2] = {pa, pb};
  CHECK_OK(nc_cifar10_load(paths, 2, cpu, &x, &y));
  if (x && y) {
    CHECK(x->shape[0] == 5 && y->shape[0] == 5);
    int64_t labels[5];
    unsigned char *px = malloc(5 * 3072);
    CHECK_OK(nc_read_values(y, labels, sizeof labels));
    CHECK_OK(nc_read_values(x, px, 5 * 3072));
    CHECK(labels[0] == 6 && labels[1] == 9 && labels[2] == 0 && labels[3] == 1 && labels[4] == 2);
    /* x[4][2][31][0]: record 5, blue plane, last row, first column = pixel 2048 + 31 * 32 */
    CHECK(px[4 * 3072 + 2048 + 31 * 32] == (unsigned char)((4 * 31 + 2048 + 31 * 32) % 251));
    CHECK(px[1 * 3072 + 1024 + 5] == (unsigned char)((31 + 1024 + 5) % 251));
    free(px);
  }
  nc_tensor_release(x);
  nc_tensor_release(y);
  free(a);
  free(b);
}

static void test_bad_files(void) {
  const unsigned char l[2] = {3, 4}, bad[2] = {3, 10};
  size_t n;
  unsigned char *b = records(l, 2, 0, &n);
  nc_tensor *x, *y;
  CHECK_ERR(nc_cifar10_parse(b, 0, cpu, &x, &y), NC_ERR_FORMAT, "empty file");
  CHECK_ERR(nc_cifar10_parse(b, n - 1, cpu, &x, &y), NC_ERR_FORMAT,
            "6145 bytes are not a whole number of CIFAR-10 records (3073 bytes");
  CHECK_ERR(nc_cifar10_parse(b, 100, cpu, &x, &y), NC_ERR_FORMAT, "truncated?");
  unsigned char *c = records(bad, 2, 0, &n);
  CHECK_ERR(nc_cifar10_parse(c, n, cpu, &x, &y), NC_ERR_FORMAT, "record 2 has label 10; CIFAR-10 labels are 0..9");
  char p[256], q[256];
  snprintf(p, sizeof p, "%s/test_batch.bin", dir);
  unsigned char *longer = calloc(n + 7, 1);
  memcpy(longer, b, n);
  write_file(p, longer, n + 7);
  free(longer);
  const char *one[1] = {p};
  CHECK_ERR(nc_cifar10_load(one, 1, cpu, &x, &y), NC_ERR_FORMAT, "test_batch.bin: 6153 bytes are not a whole number");
  snprintf(q, sizeof q, "%s/missing.bin", dir);
  const char *two[2] = {p, q};
  write_file(p, b, n);
  CHECK_ERR(nc_cifar10_load(two, 2, cpu, &x, &y), NC_ERR_IO, "missing.bin");
  CHECK_ERR(nc_cifar10_load(two, 0, cpu, &x, &y), NC_ERR_ARG, "no CIFAR-10 files");
  free(b);
  free(c);
}

int main(void) {
  CHECK_OK(nc_init());
  CHECK_OK(nc_device_find("cpu", &cpu));
  if (!mkdtemp(dir)) return 1;
  test_layout_and_files();
  test_bad_files();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  CHECK_DONE();
}

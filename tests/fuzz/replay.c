/* Runs a fuzz target's entry point over files and folders of inputs (a corpus), so the
 * inputs are checked under any compiler; with -DNETCL_SANITIZE=ON, under ASan and UBSan. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
extern int nc_fuzz_last_status;

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return 1;
  }
  size_t cap = 4096, n = 0;
  unsigned char *buf = malloc(cap);
  for (size_t r; buf && (r = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += r;
    if (n == cap) buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  if (!buf) return 1;
  /* An exact-size copy, so reading one byte past the input is caught by ASan. */
  unsigned char *exact = malloc(n ? n : 1);
  memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  /* Seeds named for their expected outcome; inputs libFuzzer adds only must not crash. */
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  if (!strncmp(base, "ok-", 3) && nc_fuzz_last_status != 0) {
    fprintf(stderr, "%s: expected to load, failed with status %d\n", path, nc_fuzz_last_status);
    return 1;
  }
  if (!strncmp(base, "bad-", 4) && nc_fuzz_last_status == 0) {
    fprintf(stderr, "%s: expected an error, loaded\n", path);
    return 1;
  }
  return 0;
}

static int compare(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
  int failed = 0, count = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      perror(argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      failed |= run_file(argv[i]);
      count++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
      if (e->d_name[0] == '.') continue;
      names = realloc(names, (n + 1) * sizeof *names);
      names[n] = malloc(strlen(argv[i]) + strlen(e->d_name) + 2);
      sprintf(names[n++], "%s/%s", argv[i], e->d_name);
    }
    if (d) closedir(d);
    qsort(names, n, sizeof *names, compare);
    for (size_t k = 0; k < n; k++) {
      failed |= run_file(names[k]);
      count++;
      free(names[k]);
    }
    free(names);
  }
  printf("replayed %d inputs\n", count);
  return failed || count == 0;
}

/* Runs a fuzz target's LLVMFuzzerTestOneInput over the files of corpus directories (or single
 * files), so the bad-input corpus is exercised by ctest with any compiler, no libFuzzer. A file
 * named ok_* must be accepted by the target and bad_* rejected (other names: no expectation). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern int fuzz_accepted;

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return 1;
  }
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      uint8_t *nb = realloc(buf, cap *= 2);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  fclose(f);
  if (!buf) {
    fprintf(stderr, "replay: out of memory reading %s\n", path);
    return 1;
  }
  /* An exact-size copy, so that ASan catches reads past the input's end. */
  uint8_t *exact = malloc(n ? n : 1);
  if (!exact) {
    free(buf);
    fprintf(stderr, "replay: out of memory reading %s\n", path);
    return 1;
  }
  memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  int want = !strncmp(base, "ok_", 3) ? 1 : !strncmp(base, "bad_", 4) ? 0 : -1;
  if (want >= 0 && want != fuzz_accepted) {
    fprintf(stderr, "replay: %s was %s, expected it %s\n", path, fuzz_accepted ? "accepted" : "rejected",
            want ? "accepted" : "rejected");
    return 1;
  }
  return 0;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
  int files = 0, bad = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "replay: no such file or directory: %s\n", argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      bad += run_file(argv[i]);
      files++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    if (!d) return 1;
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
      if (e->d_name[0] == '.') continue;
      char **nn = realloc(names, (n + 1) * sizeof *names);
      size_t len = strlen(argv[i]) + strlen(e->d_name) + 2;
      char *name = malloc(len);
      if (!nn || !name) {
        fprintf(stderr, "replay: out of memory listing %s\n", argv[i]);
        return 1;
      }
      names = nn;
      snprintf(name, len, "%s/%s", argv[i], e->d_name);
      names[n++] = name;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp);
    for (size_t k = 0; k < n; k++) {
      bad += run_file(names[k]);
      free(names[k]);
      files++;
    }
    free(names);
  }
  printf("replay: %d inputs\n", files);
  return bad || files == 0;
}

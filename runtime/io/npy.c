/* The header is a Python dict literal, e.g.
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * padded with spaces and a final newline. The parser reads exactly that grammar (quoted keys,
 * a quoted descr, True/False, a tuple of integers) and nothing more general. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/check.h"
#include "io/file.h"
#include "netcl/copy.h"
#include "netcl/npy.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "npy data are read and written as little-endian host values");

static const char MAGIC[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

static const struct {
  char kind;
  int size;
  nc_dtype dtype;
  const char *descr; /* as numpy writes it */
} DTYPES[] = {{'f', 4, NC_FLOAT32, "<f4"}, {'f', 8, NC_FLOAT64, "<f8"}, {'i', 4, NC_INT32, "<i4"},
              {'i', 8, NC_INT64, "<i8"},   {'u', 1, NC_UINT8, "|u1"},   {'b', 1, NC_BOOL, "|b1"},
              {'f', 2, NC_FLOAT16, "<f2"}};
#define N_DTYPES (sizeof DTYPES / sizeof DTYPES[0])

typedef struct {
  const char *p, *end;
} cursor;

typedef struct {
  nc_dtype dtype;
  bool fortran;
  int ndim;
  int64_t shape[NC_MAX_DIMS];
  bool has_descr, has_fortran, has_shape;
} header;

static void skip_space(cursor *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static bool accept(cursor *c, char ch) {
  skip_space(c);
  if (c->p < c->end && *c->p == ch) {
    c->p++;
    return true;
  }
  return false;
}

static nc_status syntax(const cursor *c, const char *start, const char *what) {
  return nc_error(NC_ERR_FORMAT, "malformed header: expected %s at header byte %ld", what,
                  (long)(c->p - start));
}

/* A quoted string without escapes (numpy never writes any in these fields). */
static nc_status parse_string(cursor *c, const char *start, char *out, size_t cap) {
  skip_space(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return syntax(c, start, "a quoted string");
  char q = *c->p++;
  size_t n = 0;
  while (c->p < c->end && *c->p != q) {
    if (*c->p == '\\') return syntax(c, start, "a string without escapes");
    if (n + 1 >= cap) return syntax(c, start, "a shorter string");
    out[n++] = *c->p++;
  }
  if (c->p >= c->end) return syntax(c, start, "a closing quote");
  c->p++;
  out[n] = 0;
  return NC_OK;
}

static nc_status parse_descr(cursor *c, const char *start, header *h) {
  char d[32];
  skip_space(c);
  if (c->p < c->end && (*c->p == '[' || *c->p == '{'))
    return nc_error(NC_ERR_UNSUPPORTED,
                    "structured dtypes are not supported (netcl reads f2 f4 f8 i4 i8 u1 b1)");
  NC_TRY(parse_string(c, start, d, sizeof d));
  char order = d[0];
  if (!strchr("<>|=", order) || !d[1] || !d[2])
    return nc_error(NC_ERR_FORMAT, "descr '%s' is not a numpy type string", d);
  char *endp;
  long size = strtol(d + 2, &endp, 10);
  if (*endp || size <= 0) return nc_error(NC_ERR_FORMAT, "descr '%s' is not a numpy type string", d);
  for (size_t i = 0; i < N_DTYPES; i++) {
    if (DTYPES[i].kind != d[1] || DTYPES[i].size != size) continue;
    if (order == '>' && size > 1)
      return nc_error(NC_ERR_UNSUPPORTED, "big-endian data ('%s') are not supported; save little-endian", d);
    h->dtype = DTYPES[i].dtype;
    return NC_OK;
  }
  return nc_error(NC_ERR_UNSUPPORTED, "dtype '%s' is not supported (netcl reads f2 f4 f8 i4 i8 u1 b1)", d);
}

static nc_status parse_shape(cursor *c, const char *start, header *h) {
  if (!accept(c, '(')) return syntax(c, start, "a shape tuple");
  h->ndim = 0;
  for (;;) {
    if (accept(c, ')')) break;
    skip_space(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9')
      return syntax(c, start, "a non-negative integer in the shape");
    int64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
      if (v > (INT64_MAX - 9) / 10)
        return nc_error(NC_ERR_FORMAT, "malformed header: a shape size overflows");
      v = v * 10 + (*c->p++ - '0');
    }
    if (c->p < c->end && *c->p == 'L') c->p++; /* Python 2 longs */
    if (h->ndim == NC_MAX_DIMS)
      return nc_error(NC_ERR_UNSUPPORTED, "shape has more than %d dims, the most netcl supports",
                      NC_MAX_DIMS);
    h->shape[h->ndim++] = v;
    if (accept(c, ')')) break;
    if (!accept(c, ',')) return syntax(c, start, "',' or ')' in the shape");
  }
  return nc_shape_check(h->ndim, h->shape) == NC_OK
             ? NC_OK
             : nc_error_prefix(NC_ERR_FORMAT, "malformed header: shape");
}

static nc_status parse_header(const char *text, size_t len, header *h) {
  cursor c = {text, text + len};
  memset(h, 0, sizeof *h);
  if (!accept(&c, '{')) return syntax(&c, text, "'{'");
  while (!accept(&c, '}')) {
    char key[32];
    NC_TRY(parse_string(&c, text, key, sizeof key));
    if (!accept(&c, ':')) return syntax(&c, text, "':'");
    bool *seen = !strcmp(key, "descr")           ? &h->has_descr
                 : !strcmp(key, "fortran_order") ? &h->has_fortran
                 : !strcmp(key, "shape")         ? &h->has_shape
                                                 : NULL;
    if (!seen) return nc_error(NC_ERR_FORMAT, "malformed header: unexpected key '%s'", key);
    if (*seen) return nc_error(NC_ERR_FORMAT, "malformed header: key '%s' appears twice", key);
    *seen = true;
    if (seen == &h->has_descr) {
      NC_TRY(parse_descr(&c, text, h));
    } else if (seen == &h->has_shape) {
      NC_TRY(parse_shape(&c, text, h));
    } else {
      skip_space(&c);
      if (c.end - c.p >= 4 && !memcmp(c.p, "True", 4)) {
        h->fortran = true;
        c.p += 4;
      } else if (c.end - c.p >= 5 && !memcmp(c.p, "False", 5)) {
        c.p += 5;
      } else {
        return syntax(&c, text, "True or False");
      }
    }
    if (accept(&c, '}')) break;
    if (!accept(&c, ',')) return syntax(&c, text, "',' or '}'");
  }
  skip_space(&c);
  if (c.p != c.end) return syntax(&c, text, "only padding after the dict");
  if (!h->has_descr || !h->has_fortran || !h->has_shape)
    return nc_error(NC_ERR_FORMAT, "malformed header: it lacks '%s'",
                    !h->has_descr     ? "descr"
                    : !h->has_fortran ? "fortran_order"
                                      : "shape");
  return NC_OK;
}

static nc_status check_bools(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] > 1)
      return nc_error(NC_ERR_FORMAT, "bool element %zu holds %u; booleans are stored as 0 or 1", i, p[i]);
  return NC_OK;
}

/* Fortran order: the bytes are the row-major layout of the reversed shape; permuting the dims
 * back and copying gives the row-major tensor. */
static nc_status from_fortran(nc_tensor *rev, nc_tensor **out) {
  int dims[NC_MAX_DIMS];
  for (int i = 0; i < rev->ndim; i++) dims[i] = rev->ndim - 1 - i;
  nc_tensor *p;
  NC_TRY(nc_tensor_permute(rev, dims, &p));
  nc_status s = nc_to(p, nc_tensor_device(p), p->dtype, out);
  nc_tensor_release(p);
  return s;
}

/* The header of a whole file in b: h, and where its data start (they fill the rest). */
static nc_status parse_file(const unsigned char *b, size_t len, header *h, size_t *data_at) {
  if (len < 10)
    return nc_error(NC_ERR_FORMAT, "file is %zu bytes, too short for an npy header (truncated?)", len);
  if (memcmp(b, MAGIC, sizeof MAGIC) != 0) return nc_error(NC_ERR_FORMAT, "not an npy file (bad magic)");
  int major = b[6], minor = b[7];
  size_t hlen, hstart;
  if (major == 1) {
    hlen = (size_t)b[8] | (size_t)b[9] << 8;
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (len < 12)
      return nc_error(NC_ERR_FORMAT, "file is %zu bytes, too short for an npy header (truncated?)", len);
    hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
    hstart = 12;
  } else {
    return nc_error(NC_ERR_UNSUPPORTED, "npy format version %d.%d is not supported (1.0, 2.0 and 3.0 are)",
                    major, minor);
  }
  if (hlen > len - hstart)
    return nc_error(NC_ERR_FORMAT, "header length %zu is past the end of the file (%zu bytes)", hlen, len);
  NC_TRY(parse_header((const char *)b + hstart, hlen, h));
  int64_t numel = 1;
  for (int i = 0; i < h->ndim; i++) numel *= h->shape[i];
  size_t esize = nc_dtype_size(h->dtype), have = len - hstart - hlen;
  if ((uint64_t)numel > have / esize || (size_t)numel * esize != have) {
    bool big = (uint64_t)numel > SIZE_MAX / esize;
    return nc_error(NC_ERR_FORMAT, "the shape needs %s%zu bytes of data, the file holds %zu%s",
                    big ? "more than " : "", big ? SIZE_MAX : (size_t)numel * esize, have,
                    !big && (size_t)numel * esize < have ? " (extra bytes after the data)" : " (truncated?)");
  }
  *data_at = hstart + hlen;
  return NC_OK;
}

nc_status nc_npy_parse(const void *buf, size_t len, nc_device *dev, nc_tensor **out) {
  const unsigned char *b = buf;
  header h;
  size_t at;
  NC_TRY(parse_file(b, len, &h, &at));
  const size_t have = len - at;
  const unsigned char *data = b + at;
  if (h.dtype == NC_BOOL) NC_TRY(check_bools(data, have));
  int64_t shape[NC_MAX_DIMS];
  for (int i = 0; i < h.ndim; i++) shape[i] = h.fortran ? h.shape[h.ndim - 1 - i] : h.shape[i];
  nc_tensor *t;
  NC_TRY(nc_tensor_empty(dev, h.dtype, h.ndim, shape, 0, &t));
  nc_status s = nc_tensor_write_host(t, data, have);
  if (s == NC_OK && h.fortran && h.ndim > 1) {
    nc_tensor *r;
    s = from_fortran(t, &r);
    nc_tensor_release(t);
    t = s == NC_OK ? r : NULL;
  }
  if (s != NC_OK) {
    nc_tensor_release(t);
    return s;
  }
  *out = t;
  return NC_OK;
}

nc_status nc_npy_load(const char *path, nc_device *dev, nc_tensor **out) {
  nc_file_view v;
  NC_TRY(nc_file_view_open(path, &v));
  nc_status s = nc_npy_parse(v.data, v.size, dev, out);
  nc_file_view_close(&v);
  if (s != NC_OK) nc_error_prefix(s, "%s", path);
  return s;
}

nc_status nc_npy_save(const char *path, nc_tensor *t) {
  const char *descr = NULL;
  for (size_t i = 0; i < N_DTYPES; i++)
    if (DTYPES[i].dtype == t->dtype) descr = DTYPES[i].descr;
  if (!descr) return nc_error(NC_ERR_DTYPE, "dtype %s cannot be stored in npy", nc_dtype_name(t->dtype));
  /* numpy's own spelling: "(3,)" for one dim, "()" for a scalar. */
  char shape[NC_MAX_DIMS * 24 + 8];
  size_t n = (size_t)snprintf(shape, sizeof shape, "(");
  for (int i = 0; i < t->ndim; i++)
    n += (size_t)snprintf(shape + n, sizeof shape - n, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
  snprintf(shape + n, sizeof shape - n, "%s)", t->ndim == 1 ? "," : "");
  char head[512];
  int hl = snprintf(head + 10, sizeof head - 10, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                    descr, shape);
  /* Padded with spaces and ended by a newline so the data start 64-byte aligned. */
  size_t total = ((size_t)hl + 10 + 1 + 63) & ~(size_t)63;
  memset(head + 10 + hl, ' ', total - 10 - (size_t)hl - 1);
  head[total - 1] = '\n';
  memcpy(head, MAGIC, sizeof MAGIC);
  head[6] = 1;
  head[7] = 0;
  head[8] = (char)((total - 10) & 0xff);
  head[9] = (char)((total - 10) >> 8);
  size_t nbytes = nc_tensor_nbytes(t);
  void *data = malloc(nbytes ? nbytes : 1);
  if (!data) return nc_error(NC_ERR_OOM, "out of host memory staging %zu bytes", nbytes);
  nc_status s = nc_read_values(t, data, nbytes);
  nc_atomic_file af;
  if (s == NC_OK) s = nc_atomic_open(path, &af);
  if (s != NC_OK) {
    free(data);
    return s;
  }
  s = nc_atomic_write(&af, head, total);
  if (s == NC_OK) s = nc_atomic_write(&af, data, nbytes);
  free(data);
  if (s != NC_OK) {
    nc_atomic_abort(&af);
    return s;
  }
  return nc_atomic_commit(&af);
}

/* ---- mapped files ---------------------------------------------------------------------------- */

typedef struct {
  void *map;
  size_t size;
} mapping;

static void unmap(void *ud) {
  mapping *m = ud;
  munmap(m->map, m->size);
  free(m);
}

nc_status nc_npy_map(const char *path, nc_tensor **out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nc_error(NC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
    close(fd);
    nc_tensor *t;
    NC_TRY(nc_npy_load(path, nc_device_get(0), &t)); /* not a mappable file: read it (or report why not) */
    *out = t;
    return NC_OK;
  }
  size_t size = (size_t)st.st_size;
  /* Private and writable: writes to the tensor are copy-on-write pages, never the file's. */
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  int err = errno;
  close(fd);
  if (p == MAP_FAILED) return nc_error(NC_ERR_IO, "%s: cannot map: %s", path, strerror(err));
  header h;
  size_t at = 0;
  nc_status s = parse_file(p, size, &h, &at);
  if (s == NC_OK && h.dtype == NC_BOOL) s = check_bools((const unsigned char *)p + at, size - at);
  if (s != NC_OK) {
    munmap(p, size);
    nc_error_prefix(s, "%s", path);
    return s;
  }
  if ((h.fortran && h.ndim > 1) || at % nc_dtype_size(h.dtype) != 0) {
    /* Column-major data, or data not aligned for their type: a copy in row-major order. */
    munmap(p, size);
    return nc_npy_load(path, nc_device_get(0), out);
  }
  mapping *m = malloc(sizeof *m);
  if (!m) {
    munmap(p, size);
    return nc_error(NC_ERR_OOM, "out of host memory");
  }
  m->map = p;
  m->size = size;
  nc_storage *st_ = NULL;
  s = nc_storage_wrap_host((char *)p + at, size - at, unmap, m, &st_);
  if (s != NC_OK) {
    unmap(m);
    return s;
  }
  int64_t strides[NC_MAX_DIMS];
  nc_contiguous_strides(h.ndim, h.shape, strides);
  s = nc_tensor_from_storage(st_, h.dtype, h.ndim, h.shape, strides, 0, out);
  nc_storage_release(st_);
  return s;
}

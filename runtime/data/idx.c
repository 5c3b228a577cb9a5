#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "core/check.h"
#include "io/file.h"
#include "netcl/idx.h"

static const struct {
  unsigned char code;
  const char *name;
  int size; /* bytes per element in the file */
  nc_dtype dtype;
} TYPES[] = {{0x08, "ubyte", 1, NC_UINT8}, {0x09, "byte", 1, NC_INT32},    {0x0B, "short", 2, NC_INT32},
             {0x0C, "int", 4, NC_INT32},   {0x0D, "float", 4, NC_FLOAT32}, {0x0E, "double", 8, NC_FLOAT64}};

/* deflate cannot compress better than about 1032:1, so a gzip input of n bytes never holds more
 * than this many: a larger size in the dims means a truncated (or hostile) file, found before
 * allocating for it. */
#define DEFLATE_MAX_RATIO 1032u

/* The file's bytes, decompressed on the fly when they are gzip. */
typedef struct {
  const unsigned char *p; /* input not yet handed to zlib (or not yet read, when plain) */
  size_t left;
  bool gz, gz_done, z_live;
  bool gz_cut; /* the input ended inside a gzip member (before its CRC-32 and length trailer) */
  z_stream z;
} source;

static bool is_gzip(const unsigned char *p, size_t n) { return n >= 2 && p[0] == 0x1f && p[1] == 0x8b; }

static nc_status src_init(source *s, const unsigned char *buf, size_t len) {
  memset(s, 0, sizeof *s);
  s->p = buf;
  s->left = len;
  s->gz = is_gzip(buf, len);
  if (!s->gz) return NC_OK;
  if (inflateInit2(&s->z, 16 + MAX_WBITS) != Z_OK) return nc_error(NC_ERR_OOM, "out of memory starting zlib");
  s->z_live = true;
  return NC_OK;
}

static void src_end(source *s) {
  if (s->z_live) inflateEnd(&s->z);
  s->z_live = false;
}

/* Bytes of input left, compressed or not. */
static size_t src_input_left(const source *s) { return s->left + (s->gz ? s->z.avail_in : 0); }

static nc_status gz_read(source *s, unsigned char *dst, size_t n, size_t *got) {
  while (*got < n && !s->gz_done) {
    if (s->z.avail_in == 0 && s->left) {
      uInt chunk = s->left > UINT_MAX ? UINT_MAX : (uInt)s->left;
      s->z.next_in = (Bytef *)s->p;
      s->z.avail_in = chunk;
      s->p += chunk;
      s->left -= chunk;
    }
    uInt want = n - *got > UINT_MAX ? UINT_MAX : (uInt)(n - *got);
    s->z.next_out = dst + *got;
    s->z.avail_out = want;
    int r = inflate(&s->z, Z_NO_FLUSH);
    *got += want - s->z.avail_out;
    if (r == Z_STREAM_END) {
      /* Concatenated gzip members read as one stream, as gzip -d reads them. The rest of the
       * input is contiguous in memory from next_in. */
      size_t rest = src_input_left(s);
      if (rest == 0) {
        s->gz_done = true;
      } else if (is_gzip(s->z.next_in, rest)) {
        if (inflateReset(&s->z) != Z_OK) return nc_error(NC_ERR_FORMAT, "corrupt gzip stream");
      } else {
        return nc_error(NC_ERR_FORMAT, "%zu bytes of garbage after the gzip stream", rest);
      }
    } else if (r == Z_BUF_ERROR && src_input_left(s) == 0) {
      /* input ends inside the stream: the caller sees a short read, or, when every byte the
       * dims need came out, an error at the end (the trailer's CRC was never checked) */
      s->gz_done = s->gz_cut = true;
    } else if (r == Z_MEM_ERROR) {
      return nc_error(NC_ERR_OOM, "out of memory decompressing");
    } else if (r != Z_OK && r != Z_BUF_ERROR) {
      return nc_error(NC_ERR_FORMAT, "corrupt gzip data: %s", s->z.msg ? s->z.msg : "inflate failed");
    }
  }
  return NC_OK;
}

/* Reads up to n bytes; *got < n only at the end of the input. */
static nc_status src_read(source *s, unsigned char *dst, size_t n, size_t *got) {
  *got = 0;
  if (s->gz) return gz_read(s, dst, n, got);
  *got = n < s->left ? n : s->left;
  memcpy(dst, s->p, *got);
  s->p += *got;
  s->left -= *got;
  return NC_OK;
}

static uint64_t be(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v = v << 8 | p[i];
  return v;
}

/* Big-endian file elements to host values of the tensor's dtype. */
static void convert(const unsigned char *in, void *out, size_t numel, unsigned char code) {
  for (size_t i = 0; i < numel; i++) {
    switch (code) {
      case 0x09:
        ((int32_t *)out)[i] = (int8_t)in[i];
        break;
      case 0x0B:
        ((int32_t *)out)[i] = (int16_t)be(in + 2 * i, 2);
        break;
      case 0x0C:
        ((int32_t *)out)[i] = (int32_t)(uint32_t)be(in + 4 * i, 4);
        break;
      case 0x0D: {
        uint32_t u = (uint32_t)be(in + 4 * i, 4);
        memcpy((float *)out + i, &u, 4);
        break;
      }
      default: {
        uint64_t u = be(in + 8 * i, 8);
        memcpy((double *)out + i, &u, 8);
        break;
      }
    }
  }
}

static void format_dims(char *buf, size_t n, int ndim, const int64_t *shape) {
  size_t used = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && used < n; i++)
    used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (used < n) snprintf(buf + used, n - used, "]");
}

static nc_status read_header(source *s, int *type, int *ndim, int64_t *shape) {
  unsigned char magic[4], dims[4 * 255];
  size_t got;
  NC_TRY(src_read(s, magic, 4, &got));
  if (got < 4)
    return nc_error(NC_ERR_FORMAT, "file is %zu bytes, too short for the 4-byte idx magic (truncated?)", got);
  if (magic[0] || magic[1])
    return nc_error(NC_ERR_FORMAT, "not an idx file (bad magic %02x %02x %02x %02x; it starts with 00 00)",
                    magic[0], magic[1], magic[2], magic[3]);
  *type = -1;
  for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
    if (TYPES[i].code == magic[2]) *type = (int)i;
  if (*type < 0) return nc_error(NC_ERR_FORMAT, "not an idx file: unknown element type 0x%02x", magic[2]);
  *ndim = magic[3];
  if (*ndim == 0) return nc_error(NC_ERR_FORMAT, "idx header declares 0 dims");
  if (*ndim > NC_MAX_DIMS)
    return nc_error(NC_ERR_UNSUPPORTED, "idx header declares %d dims; netcl supports at most %d", *ndim,
                    NC_MAX_DIMS);
  NC_TRY(src_read(s, dims, 4 * (size_t)*ndim, &got));
  if (got < 4 * (size_t)*ndim)
    return nc_error(NC_ERR_FORMAT,
                    "file ends inside the header: %d dims need %d bytes, %zu are left (truncated?)", *ndim,
                    4 * *ndim, got);
  for (int i = 0; i < *ndim; i++) shape[i] = (int64_t)be(dims + 4 * i, 4);
  if (nc_shape_check(*ndim, shape) != NC_OK) return nc_error_prefix(NC_ERR_FORMAT, "idx dims");
  return NC_OK;
}

static nc_status parse(source *s, nc_device *dev, nc_tensor **out) {
  int type = 0, ndim = 0;
  int64_t shape[NC_MAX_DIMS];
  NC_TRY(read_header(s, &type, &ndim, shape));
  uint64_t numel = 1;
  for (int i = 0; i < ndim; i++) numel *= (uint64_t)shape[i];
  char dims[200];
  format_dims(dims, sizeof dims, ndim, shape);
  size_t esize = (size_t)TYPES[type].size;
  bool huge = numel > SIZE_MAX / esize;
  size_t need = huge ? SIZE_MAX : (size_t)numel * esize, left = src_input_left(s);
  if (huge || (!s->gz && need > left) || (s->gz && need / DEFLATE_MAX_RATIO > left))
    return nc_error(NC_ERR_FORMAT, "data are truncated: dims %s of %s need %s%zu bytes, the file holds %s%zu",
                    dims, TYPES[type].name, huge ? "more than " : "", need, s->gz ? "at most " : "",
                    s->gz ? left * DEFLATE_MAX_RATIO : left);
  unsigned char *raw = malloc(need ? need : 1), *conv = NULL;
  if (!raw) return nc_error(NC_ERR_OOM, "out of host memory reading %zu bytes", need);
  size_t got;
  nc_status st = src_read(s, raw, need, &got);
  if (st == NC_OK && got < need)
    st = nc_error(NC_ERR_FORMAT, "data are truncated: dims %s of %s need %zu bytes, the file holds %zu", dims,
                  TYPES[type].name, need, got);
  unsigned char extra;
  if (st == NC_OK) st = src_read(s, &extra, 1, &got);
  if (st == NC_OK && got)
    st = nc_error(NC_ERR_FORMAT, "wrong dims: the file holds more data than dims %s of %s need (%zu bytes)",
                  dims, TYPES[type].name, need);
  if (st == NC_OK && s->gz_cut)
    st = nc_error(NC_ERR_FORMAT,
                  "truncated gzip stream: it ends before its trailer, so its CRC-32 and length could not "
                  "be checked");
  nc_dtype dt = TYPES[type].dtype;
  const void *host = raw;
  if (st == NC_OK && TYPES[type].code != 0x08) {
    if (!(conv = malloc((size_t)numel * nc_dtype_size(dt) + 1)))
      st = nc_error(NC_ERR_OOM, "out of host memory");
    else
      convert(raw, conv, (size_t)numel, TYPES[type].code);
    host = conv;
  }
  nc_tensor *t = NULL;
  if (st == NC_OK) st = nc_tensor_empty(dev, dt, ndim, shape, 0, &t);
  if (st == NC_OK) st = nc_tensor_write_host(t, host, nc_tensor_nbytes(t));
  free(raw);
  free(conv);
  if (st != NC_OK) {
    nc_tensor_release(t);
    return st;
  }
  *out = t;
  return NC_OK;
}

nc_status nc_idx_parse(const void *buf, size_t len, nc_device *dev, nc_tensor **out) {
  source s;
  NC_TRY(src_init(&s, buf, len));
  nc_status st = parse(&s, dev, out);
  src_end(&s);
  return st;
}

nc_status nc_idx_load(const char *path, nc_device *dev, nc_tensor **out) {
  nc_file_view v;
  NC_TRY(nc_file_view_open(path, &v));
  nc_status s = nc_idx_parse(v.data, v.size, dev, out);
  nc_file_view_close(&v);
  if (s != NC_OK) nc_error_prefix(s, "%s", path);
  return s;
}

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "io/file.h"
#include "netcl/copy.h"
#include "netcl/safetensors.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors data are little-endian and are copied to and from tensors unchanged");

/* The format's own cap: a larger header is rejected by the reference implementation too. */
#define HEADER_LIMIT 100000000ull

struct nc_safetensors {
  size_t count;
  char **names;
  nc_tensor **tensors;
  size_t n_meta;
  char **meta_keys;
  char **meta_values;
};

static const struct {
  const char *name;
  nc_dtype dtype;
} DTYPES[] = {{"F32", NC_FLOAT32}, {"F64", NC_FLOAT64}, {"I32", NC_INT32},   {"I64", NC_INT64},
              {"U8", NC_UINT8},    {"BOOL", NC_BOOL},    {"BF16", NC_BFLOAT16}, {"F16", NC_FLOAT16}};
#define N_DTYPES (sizeof DTYPES / sizeof DTYPES[0])

/* Valid safetensors dtypes with no netcl element type: named as such rather than "unknown". */
static const char *const FOREIGN_DTYPES[] = {"I8",      "I16",     "U16",     "U32",     "U64",
                                             "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2",
                                             "F4",      "C64"};

static const char *st_dtype_name(nc_dtype d) {
  for (size_t i = 0; i < N_DTYPES; i++)
    if (DTYPES[i].dtype == d) return DTYPES[i].name;
  return NULL;
}

typedef struct {
  const char *name; /* borrowed from the parsed header */
  nc_dtype dtype;
  int ndim;
  int64_t shape[NC_MAX_DIMS];
  uint64_t begin, end;
} entry;

static const char *json_kind(const json_t *v) {
  switch (json_typeof(v)) {
    case JSON_OBJECT:
      return "an object";
    case JSON_ARRAY:
      return "an array";
    case JSON_STRING:
      return "a string";
    case JSON_INTEGER:
      return "an integer";
    case JSON_REAL:
      return "a real number";
    case JSON_TRUE:
    case JSON_FALSE:
      return "a boolean";
    default:
      return "null";
  }
}

static void format_shape(char *buf, size_t n, int ndim, const int64_t *shape) {
  size_t used = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && used < n; i++)
    used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (used < n) snprintf(buf + used, n - used, "]");
}

static nc_status parse_dtype(const char *name, const char *s, nc_dtype *out) {
  for (size_t i = 0; i < N_DTYPES; i++)
    if (!strcmp(s, DTYPES[i].name)) {
      *out = DTYPES[i].dtype;
      return NC_OK;
    }
  for (size_t i = 0; i < sizeof FOREIGN_DTYPES / sizeof FOREIGN_DTYPES[0]; i++)
    if (!strcmp(s, FOREIGN_DTYPES[i]))
      return nc_error(
          NC_ERR_UNSUPPORTED,
          "tensor '%.200s': dtype %s has no netcl element type (netcl reads F32, F64, I32, I64, U8, BOOL, BF16, F16)",
          name, s);
  return nc_error(NC_ERR_FORMAT, "tensor '%.200s': unknown dtype '%.50s'", name, s);
}

/* Reads one header entry and checks it against itself and the data section's size. */
static nc_status parse_entry(const char *name, json_t *v, uint64_t data_len, entry *e) {
  e->name = name;
  if (!json_is_object(v))
    return nc_error(NC_ERR_FORMAT,
                    "tensor '%.200s': expected an object with dtype, shape and data_offsets, got %s", name,
                    json_kind(v));
  json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
         *off = json_object_get(v, "data_offsets");
  if (!json_is_string(dt))
    return nc_error(NC_ERR_FORMAT, "tensor '%.200s': 'dtype' is missing or not a string", name);
  NC_TRY(parse_dtype(name, json_string_value(dt), &e->dtype));
  if (!json_is_array(sh))
    return nc_error(NC_ERR_FORMAT, "tensor '%.200s': 'shape' is missing or not an array", name);
  if (json_array_size(sh) > NC_MAX_DIMS)
    return nc_error(NC_ERR_UNSUPPORTED, "tensor '%.200s': shape has %zu dims; netcl supports at most %d",
                    name, json_array_size(sh), NC_MAX_DIMS);
  e->ndim = (int)json_array_size(sh);
  for (int i = 0; i < e->ndim; i++) {
    json_t *d = json_array_get(sh, (size_t)i);
    if (!json_is_integer(d) || json_integer_value(d) < 0)
      return nc_error(NC_ERR_FORMAT, "tensor '%.200s': shape entry %d is not a non-negative integer", name,
                      i + 1);
    e->shape[i] = json_integer_value(d);
  }
  if (nc_shape_check(e->ndim, e->shape) != NC_OK)
    return nc_error_prefix(NC_ERR_FORMAT, "tensor '%.200s'", name);
  if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(json_array_get(off, 0)) ||
      !json_is_integer(json_array_get(off, 1)))
    return nc_error(NC_ERR_FORMAT,
                    "tensor '%.200s': 'data_offsets' must be an array [begin, end] of integers", name);
  json_int_t b = json_integer_value(json_array_get(off, 0)), en = json_integer_value(json_array_get(off, 1));
  if (b < 0 || en < b)
    return nc_error(NC_ERR_FORMAT,
                    "tensor '%.200s': data_offsets [%lld, %lld] are out of range (need 0 <= begin <= end)",
                    name, (long long)b, (long long)en);
  e->begin = (uint64_t)b;
  e->end = (uint64_t)en;
  if (e->end > data_len)
    return nc_error(
        NC_ERR_FORMAT,
        "tensor '%.200s': data_offsets [%llu, %llu] are out of range: the data section holds %llu bytes "
        "(is the file truncated?)",
        name, (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)data_len);
  uint64_t numel = 1;
  for (int i = 0; i < e->ndim; i++) numel *= (uint64_t)e->shape[i];
  size_t esize = nc_dtype_size(e->dtype);
  bool too_big = numel > UINT64_MAX / esize;
  if (too_big || numel * esize != e->end - e->begin) {
    char s[200];
    format_shape(s, sizeof s, e->ndim, e->shape);
    return nc_error(
        NC_ERR_FORMAT,
        "tensor '%.200s': shape %s of %s needs %s%llu bytes but data_offsets [%llu, %llu] hold %llu", name, s,
        st_dtype_name(e->dtype), too_big ? "more than " : "",
        too_big ? (unsigned long long)UINT64_MAX : (unsigned long long)(numel * esize),
        (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)(e->end - e->begin));
  }
  return NC_OK;
}

static int by_offsets(const void *a, const void *b) {
  const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return 0;
}

/* The format requires the byte ranges to tile the data section exactly: no overlaps (two
 * tensors aliasing the same bytes) and no holes (room for a second, hidden payload). */
static nc_status check_tiling(entry *entries, size_t n, uint64_t data_len) {
  entry **order = malloc((n ? n : 1) * sizeof *order);
  if (!order) return nc_error(NC_ERR_OOM, "out of host memory");
  for (size_t i = 0; i < n; i++) order[i] = &entries[i];
  qsort(order, n, sizeof *order, by_offsets);
  nc_status s = NC_OK;
  uint64_t pos = 0;
  const entry *prev = NULL;
  for (size_t i = 0; i < n && s == NC_OK; i++) {
    const entry *e = order[i];
    if (e->begin < pos)
      s = nc_error(NC_ERR_FORMAT,
                   "tensors '%.200s' (bytes %llu..%llu) and '%.200s' (bytes %llu..%llu) overlap", prev->name,
                   (unsigned long long)prev->begin, (unsigned long long)prev->end, e->name,
                   (unsigned long long)e->begin, (unsigned long long)e->end);
    else if (e->begin > pos)
      s = nc_error(NC_ERR_FORMAT, "bytes %llu..%llu of the data section belong to no tensor",
                   (unsigned long long)pos, (unsigned long long)e->begin);
    pos = e->end;
    prev = e;
  }
  if (s == NC_OK && pos != data_len)
    s = nc_error(NC_ERR_FORMAT, "the data section holds %llu bytes but the tensors end at byte %llu",
                 (unsigned long long)data_len, (unsigned long long)pos);
  free(order);
  return s;
}

void nc_safetensors_free(nc_safetensors *f) {
  if (!f) return;
  for (size_t i = 0; i < f->count; i++) {
    free(f->names[i]);
    nc_tensor_release(f->tensors[i]);
  }
  for (size_t i = 0; i < f->n_meta; i++) {
    free(f->meta_keys[i]);
    free(f->meta_values[i]);
  }
  free(f->names);
  free(f->tensors);
  free(f->meta_keys);
  free(f->meta_values);
  free(f);
}

static nc_status read_metadata(json_t *meta, nc_safetensors *f) {
  if (!json_is_object(meta))
    return nc_error(NC_ERR_FORMAT, "__metadata__ must be an object of strings, got %s", json_kind(meta));
  size_t n = json_object_size(meta);
  f->meta_keys = calloc(n ? n : 1, sizeof(char *));
  f->meta_values = calloc(n ? n : 1, sizeof(char *));
  if (!f->meta_keys || !f->meta_values) return nc_error(NC_ERR_OOM, "out of host memory");
  const char *k;
  json_t *v;
  json_object_foreach(meta, k, v) {
    if (!json_is_string(v))
      return nc_error(NC_ERR_FORMAT, "__metadata__ must map strings to strings: '%.200s' holds %s", k,
                      json_kind(v));
    f->meta_keys[f->n_meta] = strdup(k);
    f->meta_values[f->n_meta] = strdup(json_string_value(v));
    f->n_meta++;
    if (!f->meta_keys[f->n_meta - 1] || !f->meta_values[f->n_meta - 1])
      return nc_error(NC_ERR_OOM, "out of host memory");
  }
  return NC_OK;
}

static nc_status check_bools(const entry *e, const unsigned char *p) {
  for (uint64_t i = 0; i < e->end - e->begin; i++)
    if (p[i] > 1)
      return nc_error(NC_ERR_FORMAT,
                      "tensor '%.200s': BOOL element %llu holds %u; booleans are stored as 0 or 1", e->name,
                      (unsigned long long)i, p[i]);
  return NC_OK;
}

static nc_status build(json_t *root, const unsigned char *data, uint64_t data_len, nc_device *dev,
                       nc_safetensors *f) {
  size_t n = json_object_size(root);
  entry *entries = calloc(n ? n : 1, sizeof *entries);
  f->names = calloc(n ? n : 1, sizeof(char *));
  f->tensors = calloc(n ? n : 1, sizeof(nc_tensor *));
  nc_status s = NC_OK;
  if (!entries || !f->names || !f->tensors) s = nc_error(NC_ERR_OOM, "out of host memory");
  size_t count = 0;
  const char *k;
  json_t *v;
  if (s == NC_OK) {
    json_object_foreach(root, k, v) {
      if (!strcmp(k, "__metadata__"))
        s = read_metadata(v, f);
      else
        s = parse_entry(k, v, data_len, &entries[count++]);
      if (s != NC_OK) break;
    }
  }
  if (s == NC_OK) s = check_tiling(entries, count, data_len);
  /* Every check passed: only now allocate device memory. */
  for (size_t i = 0; i < count && s == NC_OK; i++) {
    const entry *e = &entries[i];
    const unsigned char *p = data + e->begin;
    if (e->dtype == NC_BOOL) s = check_bools(e, p);
    if (s == NC_OK) s = nc_tensor_empty(dev, e->dtype, e->ndim, e->shape, 0, &f->tensors[i]);
    if (s != NC_OK) break;
    f->names[i] = strdup(e->name);
    f->count = i + 1;
    if (!f->names[i])
      s = nc_error(NC_ERR_OOM, "out of host memory");
    else
      s = nc_tensor_write_host(f->tensors[i], p, (size_t)(e->end - e->begin));
  }
  free(entries);
  return s;
}

nc_status nc_safetensors_parse(const void *buf, size_t len, nc_device *dev, nc_safetensors **out) {
  const unsigned char *b = buf;
  if (len < 8)
    return nc_error(NC_ERR_FORMAT, "file is %zu bytes, too short for the 8-byte header length (truncated?)",
                    len);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | b[i];
  if (hlen > len - 8)
    return nc_error(NC_ERR_FORMAT, "header length %llu is past the end of the file (%zu bytes)",
                    (unsigned long long)hlen, len);
  if (hlen > HEADER_LIMIT)
    return nc_error(NC_ERR_FORMAT, "header length %llu exceeds the format's limit of %llu bytes",
                    (unsigned long long)hlen, HEADER_LIMIT);
  json_error_t jerr;
  json_t *root = json_loadb((const char *)b + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
  if (!root)
    return nc_error(NC_ERR_FORMAT, "header is not valid JSON: %s (header byte %d)", jerr.text, jerr.position);
  nc_status s = NC_OK;
  nc_safetensors *f = NULL;
  if (!json_is_object(root))
    s = nc_error(NC_ERR_FORMAT, "header is %s, expected a JSON object", json_kind(root));
  else if (!(f = calloc(1, sizeof *f)))
    s = nc_error(NC_ERR_OOM, "out of host memory");
  else
    s = build(root, b + 8 + hlen, len - 8 - hlen, dev, f);
  json_decref(root);
  if (s != NC_OK) {
    nc_safetensors_free(f);
    return s;
  }
  *out = f;
  return NC_OK;
}

nc_status nc_safetensors_load(const char *path, nc_device *dev, nc_safetensors **out) {
  nc_file_view v;
  NC_TRY(nc_file_view_open(path, &v));
  nc_status s = nc_safetensors_parse(v.data, v.size, dev, out);
  nc_file_view_close(&v);
  if (s != NC_OK) nc_error_prefix(s, "%s", path);
  return s;
}

size_t nc_safetensors_count(const nc_safetensors *f) { return f->count; }
const char *nc_safetensors_name(const nc_safetensors *f, size_t i) {
  return i < f->count ? f->names[i] : NULL;
}
nc_tensor *nc_safetensors_tensor(const nc_safetensors *f, size_t i) {
  return i < f->count ? f->tensors[i] : NULL;
}
size_t nc_safetensors_metadata_count(const nc_safetensors *f) { return f->n_meta; }
const char *nc_safetensors_metadata_key(const nc_safetensors *f, size_t i) {
  return i < f->n_meta ? f->meta_keys[i] : NULL;
}
const char *nc_safetensors_metadata_value(const nc_safetensors *f, size_t i) {
  return i < f->n_meta ? f->meta_values[i] : NULL;
}

/* ---- writing ------------------------------------------------------------------------------- */

/* The safetensors package's order: larger elements first, so each tensor starts aligned to
 * its element size, then by name for a reproducible file. */
static int by_size_then_name(const void *a, const void *b) {
  const nc_named_tensor *x = *(const nc_named_tensor *const *)a, *y = *(const nc_named_tensor *const *)b;
  size_t sx = nc_dtype_size(x->tensor->dtype), sy = nc_dtype_size(y->tensor->dtype);
  if (sx != sy) return sx > sy ? -1 : 1;
  return strcmp(x->name, y->name);
}

static nc_status check_inputs(const nc_named_tensor *tensors, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!tensors[i].name) return nc_error(NC_ERR_ARG, "tensor %zu has no name", i + 1);
    if (!tensors[i].tensor) return nc_error(NC_ERR_ARG, "tensor '%.200s' is NULL", tensors[i].name);
    if (!strcmp(tensors[i].name, "__metadata__"))
      return nc_error(NC_ERR_ARG, "'__metadata__' is reserved by the format and cannot name a tensor");
    if (!st_dtype_name(tensors[i].tensor->dtype))
      return nc_error(NC_ERR_DTYPE, "tensor '%.200s': dtype %s cannot be stored", tensors[i].name,
                      nc_dtype_name(tensors[i].tensor->dtype));
  }
  return NC_OK;
}

static nc_status build_header(const nc_named_tensor *const *order, size_t n, const nc_metadata_entry *meta,
                              size_t n_meta, char **out) {
  json_t *root = json_object();
  if (!root) return nc_error(NC_ERR_OOM, "out of host memory");
  nc_status s = NC_OK;
  if (n_meta) {
    json_t *m = json_object();
    if (!m || json_object_set_new(root, "__metadata__", m) != 0)
      s = nc_error(NC_ERR_OOM, "out of host memory");
    for (size_t i = 0; i < n_meta && s == NC_OK; i++) {
      if (!meta[i].key || !meta[i].value)
        s = nc_error(NC_ERR_ARG, "metadata entry %zu is NULL", i + 1);
      else if (json_object_get(m, meta[i].key))
        s = nc_error(NC_ERR_ARG, "metadata key '%.200s' appears twice", meta[i].key);
      else if (json_object_set_new(m, meta[i].key, json_string(meta[i].value)) != 0)
        s = nc_error(NC_ERR_ARG, "metadata '%.200s': keys and values must be UTF-8 strings", meta[i].key);
    }
  }
  uint64_t pos = 0;
  for (size_t i = 0; i < n && s == NC_OK; i++) {
    const nc_tensor *t = order[i]->tensor;
    if (json_object_get(root, order[i]->name)) {
      s = nc_error(NC_ERR_ARG, "tensor name '%.200s' appears twice", order[i]->name);
      break;
    }
    json_t *shape = json_array();
    for (int d = 0; shape && d < t->ndim; d++)
      if (json_array_append_new(shape, json_integer(t->shape[d])) != 0) {
        json_decref(shape);
        shape = NULL;
      }
    uint64_t nbytes = nc_tensor_nbytes(t);
    json_t *e = shape ? json_pack("{s:s, s:o, s:[I, I]}", "dtype", st_dtype_name(t->dtype), "shape", shape,
                                  "data_offsets", (json_int_t)pos, (json_int_t)(pos + nbytes))
                      : NULL;
    if (!e)
      s = nc_error(NC_ERR_OOM, "out of host memory");
    else if (json_object_set_new(root, order[i]->name, e) != 0)
      s = nc_error(NC_ERR_ARG, "tensor name '%.200s' is not valid UTF-8", order[i]->name);
    pos += nbytes;
  }
  if (s == NC_OK && !(*out = json_dumps(root, JSON_COMPACT))) s = nc_error(NC_ERR_OOM, "out of host memory");
  json_decref(root);
  return s;
}

/* Data go straight from CPU tensors' memory; other devices and strided views are read into a
 * host buffer first. */
static nc_status write_data(nc_atomic_file *af, const nc_tensor *t, void **scratch, size_t *cap) {
  size_t nbytes = nc_tensor_nbytes(t);
  if (!nbytes) return NC_OK;
  const char *host = nc_storage_host_ptr(t->storage);
  if (host && nc_tensor_is_contiguous(t))
    return nc_atomic_write(af, host + (size_t)t->offset * nc_dtype_size(t->dtype), nbytes);
  if (nbytes > *cap) {
    void *p = realloc(*scratch, nbytes);
    if (!p) return nc_error(NC_ERR_OOM, "out of host memory staging %zu bytes", nbytes);
    *scratch = p;
    *cap = nbytes;
  }
  NC_TRY(nc_read_values((nc_tensor *)t, *scratch, nbytes));
  return nc_atomic_write(af, *scratch, nbytes);
}

nc_status nc_safetensors_save(const char *path, const nc_named_tensor *tensors, size_t n,
                              const nc_metadata_entry *metadata, size_t n_metadata) {
  NC_TRY(check_inputs(tensors, n));
  const nc_named_tensor **order = malloc((n ? n : 1) * sizeof *order);
  if (!order) return nc_error(NC_ERR_OOM, "out of host memory");
  for (size_t i = 0; i < n; i++) order[i] = &tensors[i];
  qsort(order, n, sizeof *order, by_size_then_name);
  char *header = NULL;
  nc_status s = build_header(order, n, metadata, n_metadata, &header);
  nc_atomic_file af;
  if (s == NC_OK) s = nc_atomic_open(path, &af);
  if (s != NC_OK) {
    free(header);
    free(order);
    return s;
  }
  /* Spaces pad the header so the data section starts 8-byte aligned, as the format asks. */
  size_t hlen = strlen(header), padded = (hlen + 7) & ~(size_t)7;
  unsigned char len_bytes[8];
  for (int i = 0; i < 8; i++) len_bytes[i] = (unsigned char)((uint64_t)padded >> (8 * i));
  s = nc_atomic_write(&af, len_bytes, 8);
  if (s == NC_OK) s = nc_atomic_write(&af, header, hlen);
  if (s == NC_OK) s = nc_atomic_write(&af, "        ", padded - hlen);
  void *scratch = NULL;
  size_t cap = 0;
  for (size_t i = 0; i < n && s == NC_OK; i++) {
    s = write_data(&af, order[i]->tensor, &scratch, &cap);
    if (s != NC_OK && s != NC_ERR_IO) nc_error_prefix(s, "tensor '%.200s'", order[i]->name);
  }
  free(scratch);
  free(header);
  free(order);
  if (s != NC_OK) {
    nc_atomic_abort(&af);
    return s;
  }
  return nc_atomic_commit(&af);
}

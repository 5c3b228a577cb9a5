/* Checkpoint files in the safetensors format (https://github.com/huggingface/safetensors):
 * an 8-byte little-endian header length, a JSON header naming each tensor's dtype, shape and
 * byte range, then the raw little-endian, row-major data. Files written here load in the
 * safetensors Python package and PyTorch, and theirs load here (dtypes F32 F64 I32 I64 U8
 * BOOL BF16 F16). */
#ifndef NETCL_SAFETENSORS_H
#define NETCL_SAFETENSORS_H

#include <stddef.h>
#include "device.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A loaded file: named tensors (in header order) and the "__metadata__" string map. */
typedef struct nc_safetensors nc_safetensors;

/* Reads path and creates every tensor on dev. Every structural rule of the format is checked
 * before any tensor is allocated: header length within the file, header valid JSON (no
 * duplicate keys), known dtypes, shapes matching their byte ranges, byte ranges inside the
 * data, neither overlapping nor leaving holes, and BOOL bytes 0 or 1. Errors: NC_ERR_IO (the
 * file cannot be read), NC_ERR_FORMAT (a malformed file; the message starts with the path),
 * NC_ERR_UNSUPPORTED (a valid dtype netcl has no type for), NC_ERR_OOM. */
nc_status nc_safetensors_load(const char *path, nc_device *dev, nc_safetensors **out);

/* The same from a buffer of len bytes holding a whole file (not retained). */
nc_status nc_safetensors_parse(const void *buf, size_t len, nc_device *dev, nc_safetensors **out);

void nc_safetensors_free(nc_safetensors *f);

size_t nc_safetensors_count(const nc_safetensors *f);
const char *nc_safetensors_name(const nc_safetensors *f, size_t i);
/* Borrowed: valid until nc_safetensors_free; retain it to keep it longer. */
nc_tensor *nc_safetensors_tensor(const nc_safetensors *f, size_t i);

size_t nc_safetensors_metadata_count(const nc_safetensors *f);
const char *nc_safetensors_metadata_key(const nc_safetensors *f, size_t i);
const char *nc_safetensors_metadata_value(const nc_safetensors *f, size_t i);

typedef struct {
  const char *name;
  nc_tensor *tensor; /* any device and layout */
} nc_named_tensor;

typedef struct {
  const char *key;
  const char *value;
} nc_metadata_entry;

/* Writes the tensors (names unique, UTF-8, not "__metadata__") and metadata (UTF-8 strings) to
 * path atomically: a temporary file in the same folder, fsync, rename. Data are laid out as the
 * safetensors package does (largest element size first, then by name), so every tensor is
 * aligned to its element size. Errors: NC_ERR_ARG, NC_ERR_IO, NC_ERR_OOM, or a device read
 * error. */
nc_status nc_safetensors_save(const char *path, const nc_named_tensor *tensors, size_t n,
                              const nc_metadata_entry *metadata, size_t n_metadata);

#ifdef __cplusplus
}
#endif

#endif

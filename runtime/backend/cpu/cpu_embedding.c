/* CPU embedding: row copies forward; backward adds gradient rows into dweight, parallel over
 * column blocks so no two threads touch one element (deterministic, no atomics). */
#include <stdint.h>
#include <string.h>
#include "cpu_linalg.h"

static inline int64_t index_at(const nc_tensor *idx, int64_t i) {
  return idx->dtype == NC_INT64 ? ((const int64_t *)nc_cpu_base(idx))[idx->offset + i]
                                : ((const int32_t *)nc_cpu_base(idx))[idx->offset + i];
}

nc_status nc_cpu_embedding(const nc_tensor *weight, const nc_tensor *idx, nc_tensor *out, nc_index_verdict *bad) {
  const int64_t n = nc_tensor_numel(idx), v = weight->shape[0], d = weight->shape[1];
  const size_t es = nc_dtype_size(weight->dtype), row = es * (size_t)d;
  const char *w = (const char *)nc_cpu_base(weight) + es * (size_t)weight->offset;
  char *o = (char *)nc_cpu_base(out) + es * (size_t)out->offset;
  int64_t first_bad = INT64_MAX; /* the identity of the min reduction */
#pragma omp parallel for if (n * d > 65536) reduction(min : first_bad)
  for (int64_t i = 0; i < n; i++) {
    int64_t k = index_at(idx, i);
    if (k < 0 || k >= v) {
      memset(o + row * (size_t)i, 0, row);
      if (i + 1 < first_bad) first_bad = i + 1;
      continue;
    }
    memcpy(o + row * (size_t)i, w + row * (size_t)k, row);
  }
  *bad = (nc_index_verdict){first_bad == INT64_MAX ? 0 : first_bad, NULL};
  return NC_OK;
}

nc_status nc_cpu_embedding_backward(const nc_tensor *dout, const nc_tensor *idx, int64_t padding_idx,
                                    nc_tensor *dweight) {
  const int64_t n = nc_tensor_numel(idx), v = dweight->shape[0], d = dweight->shape[1];
  const bool f32 = dweight->dtype == NC_FLOAT32;
  const size_t es = nc_dtype_size(dweight->dtype);
  const void *g = (const char *)nc_cpu_base(dout) + es * (size_t)dout->offset;
  void *w = (char *)nc_cpu_base(dweight) + es * (size_t)dweight->offset;
  memset(w, 0, es * (size_t)(v * d));
  const int64_t block = 64, nblocks = (d + block - 1) / block;
#pragma omp parallel for if (n * d > 65536)
  for (int64_t b = 0; b < nblocks; b++) {
    const int64_t j0 = b * block, j1 = j0 + block < d ? j0 + block : d;
    for (int64_t i = 0; i < n; i++) {
      const int64_t k = index_at(idx, i);
      if (k < 0 || k >= v || k == padding_idx) continue;
      for (int64_t j = j0; j < j1; j++) {
        if (f32)
          ((float *)w)[k * d + j] += ((const float *)g)[i * d + j];
        else
          ((double *)w)[k * d + j] += ((const double *)g)[i * d + j];
      }
    }
  }
  return NC_OK;
}

/* CPU index family. Each output element finds its source through its coordinates, so any
 * layout works; scatter_add sums, per output element, the sources whose index names it, in
 * index order (the OpenCL kernel does the same, so results match bit for bit). */
#include <string.h>
#include "cpu_backend.h"
#include "strided.h"

static inline void *base_of(const nc_tensor *t) { return nc_storage_host_ptr(t->storage); }

/* Offsets of out element i in out, x (without dim) and idx, and the coordinate along dim. */
typedef struct {
  int64_t o, x, i, c;
  bool inside; /* every coordinate outside dim is within idx's shape */
} coords;

/* How idx is walked: not at all (index_select reads it by the dim coordinate), with every
 * coordinate (gather: idx has out's shape), or with all but dim's (scatter_add loops over it). */
enum { IDX_NONE, IDX_ALL, IDX_BUT_DIM };

static coords locate(const nc_tensor *out, const nc_tensor *x, const nc_tensor *idx, int dim, int walk,
                     int64_t i) {
  coords r = {out->offset, x->offset, idx->offset, 0, true};
  for (int d = out->ndim - 1; d >= 0; d--) {
    const int64_t q = i / out->shape[d], c = i - q * out->shape[d];
    i = q;
    r.o += c * out->strides[d];
    if (walk == IDX_ALL) r.i += c * idx->strides[d];
    if (d == dim) {
      r.c = c;
      continue;
    }
    r.x += c * x->strides[d];
    if (walk == IDX_BUT_DIM) {
      if (c >= idx->shape[d]) r.inside = false;
      r.i += c * idx->strides[d];
    }
  }
  return r;
}

#define TAKE(T)                                                                     \
  do {                                                                              \
    T *o = base_of(out);                                                            \
    const T *src = base_of(x);                                                      \
    NC_CPU_PARALLEL_FOR(n > NC_CPU_PARALLEL_MIN, , i, n, {                          \
      coords c = locate(out, x, idx, dim, gather ? IDX_ALL : IDX_NONE, i);          \
      const int64_t v = gather ? ix[c.i] : ix[idx->offset + c.c * idx->strides[0]]; \
      o[c.o] = src[c.x + v * x->strides[dim]];                                      \
    });                                                                             \
  } while (0)

#define SCATTER(T, ADD)                                                              \
  do {                                                                               \
    T *o = base_of(out);                                                             \
    const T *src = base_of(x);                                                       \
    const int64_t m = idx->shape[dim], is = idx->strides[dim], ss = x->strides[dim]; \
    NC_CPU_PARALLEL_FOR(n *m > NC_CPU_PARALLEL_MIN, , i, n, {                        \
      coords c = locate(out, x, idx, dim, IDX_BUT_DIM, i);                           \
      if (!c.inside) continue;                                                       \
      T acc = o[c.o];                                                                \
      for (int64_t j = 0; j < m; j++)                                                \
        if (ix[c.i + j * is] == c.c) acc = ADD(acc, src[c.x + j * ss]);              \
      o[c.o] = acc;                                                                  \
    });                                                                              \
  } while (0)

#define PLAIN_ADD(a, b) ((a) + (b))
#define WRAP32(a, b) ((int32_t)((uint32_t)(a) + (uint32_t)(b)))
#define WRAP64(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
#define WRAP8(a, b) ((uint8_t)((a) + (b)))
#define OR_ADD(a, b) ((uint8_t)((a) | (b)))

nc_status nc_cpu_index(nc_op op, nc_tensor *out, const nc_tensor *x, const nc_tensor *idx, int dim) {
  const int64_t n = nc_tensor_numel(out);
  const int64_t *ix = base_of(idx);
  if (op == NC_OP_INDEX_SELECT || op == NC_OP_GATHER) {
    const bool gather = op == NC_OP_GATHER;
    switch (nc_dtype_size(out->dtype)) {
      case 1:
        TAKE(uint8_t);
        break;
      case 4:
        TAKE(uint32_t);
        break;
      case 8:
        TAKE(uint64_t);
        break;
      default:
        return nc_error(NC_ERR_UNSUPPORTED, "cpu index: element size %zu", nc_dtype_size(out->dtype));
    }
    return NC_OK;
  }
  if (op != NC_OP_SCATTER_ADD)
    return nc_error(NC_ERR_UNSUPPORTED, "cpu index: %s is not an index op", nc_op_get(op)->name);
  switch (out->dtype) {
    case NC_FLOAT32:
      SCATTER(float, PLAIN_ADD);
      break;
    case NC_FLOAT64:
      SCATTER(double, PLAIN_ADD);
      break;
    case NC_INT32:
      SCATTER(int32_t, WRAP32);
      break;
    case NC_INT64:
      SCATTER(int64_t, WRAP64);
      break;
    case NC_UINT8:
      SCATTER(uint8_t, WRAP8);
      break;
    case NC_BOOL:
      SCATTER(uint8_t, OR_ADD);
      break;
    default:
      return nc_error(NC_ERR_UNSUPPORTED, "cpu scatter_add: %s", nc_dtype_name(out->dtype));
  }
  return NC_OK;
}

/* Fill and strided copy for the storage dtypes (bfloat16, float16): every conversion goes
 * through float32 with netcl/half.h's bit arithmetic, one block of a row at a time. float32 rows
 * convert in place (the loops vectorize); other dtypes pass through a float32 buffer. */
#include "cpu_backend.h"
#include "netcl/half.h"
#include "strided.h"

static inline char *base_of(const nc_tensor *t) { return nc_storage_host_ptr(t->storage); }

NC_CPU_CLONES static void encode_row(nc_dtype dt, uint16_t *d, int64_t ds, const float *s, int64_t ss, int64_t n) {
  if (dt == NC_BFLOAT16) {
    if (ds == 1 && ss == 1) {
#pragma omp simd
      for (int64_t i = 0; i < n; i++) d[i] = nc_f32_to_bf16(s[i]);
    } else {
      for (int64_t i = 0; i < n; i++) d[i * ds] = nc_f32_to_bf16(s[i * ss]);
    }
  } else {
    if (ds == 1 && ss == 1) {
#pragma omp simd
      for (int64_t i = 0; i < n; i++) d[i] = nc_f32_to_f16(s[i]);
    } else {
      for (int64_t i = 0; i < n; i++) d[i * ds] = nc_f32_to_f16(s[i * ss]);
    }
  }
}

NC_CPU_CLONES static void decode_row(nc_dtype dt, float *d, int64_t ds, const uint16_t *s, int64_t ss, int64_t n) {
  if (dt == NC_BFLOAT16) {
    if (ds == 1 && ss == 1) {
#pragma omp simd
      for (int64_t i = 0; i < n; i++) d[i] = nc_bf16_to_f32(s[i]);
    } else {
      for (int64_t i = 0; i < n; i++) d[i * ds] = nc_bf16_to_f32(s[i * ss]);
    }
  } else {
    if (ds == 1 && ss == 1) {
#pragma omp simd
      for (int64_t i = 0; i < n; i++) d[i] = nc_f16_to_f32(s[i]);
    } else {
      for (int64_t i = 0; i < n; i++) d[i * ds] = nc_f16_to_f32(s[i * ss]);
    }
  }
}

void nc_cpu_half_to_f32(nc_dtype dt, float *d, int64_t ds, const uint16_t *s, int64_t ss, int64_t n) {
  decode_row(dt, d, ds, s, ss, n);
}

void nc_cpu_f32_to_half(nc_dtype dt, uint16_t *d, int64_t ds, const float *s, int64_t ss, int64_t n) {
  encode_row(dt, d, ds, s, ss, n);
}

/* n elements of a non-storage dtype, from element offset o with stride st, into float32 (the
 * conversion C's casts make; float64 rounds to nearest). */
static void load_floats(float *buf, nc_dtype dt, const char *base, int64_t o, int64_t st, int64_t n) {
  switch (dt) {
#define LOAD(DT, T)                                                               \
  case DT: {                                                                      \
    const T *p = (const T *)base + o;                                             \
    for (int64_t i = 0; i < n; i++) buf[i] = (float)p[i * st];                    \
    break;                                                                        \
  }
    LOAD(NC_FLOAT32, float)
    LOAD(NC_FLOAT64, double)
    LOAD(NC_INT32, int32_t)
    LOAD(NC_INT64, int64_t)
    LOAD(NC_UINT8, uint8_t)
    LOAD(NC_BOOL, uint8_t)
#undef LOAD
    default: break;
  }
}

/* The reverse: float32 values into a non-storage dtype (bool: nonzero, NaN included). */
static void store_floats(nc_dtype dt, char *base, int64_t o, int64_t st, const float *buf, int64_t n) {
  switch (dt) {
#define STORE(DT, T)                                                              \
  case DT: {                                                                      \
    T *p = (T *)base + o;                                                         \
    for (int64_t i = 0; i < n; i++) p[i * st] = (T)buf[i];                        \
    break;                                                                        \
  }
    STORE(NC_FLOAT32, float)
    STORE(NC_FLOAT64, double)
    STORE(NC_INT32, int32_t)
    STORE(NC_INT64, int64_t)
    STORE(NC_UINT8, uint8_t)
#undef STORE
    case NC_BOOL: {
      uint8_t *p = (uint8_t *)base + o;
      for (int64_t i = 0; i < n; i++) p[i * st] = buf[i] != 0;
      break;
    }
    default: break;
  }
}

/* One block: len elements of dst from src, at element offsets od/os with strides ds/ss. */
static void copy_block(const nc_tensor *dst, const nc_tensor *src, int64_t od, int64_t ds, int64_t os, int64_t ss,
                       int64_t len) {
  const nc_dtype dd = dst->dtype, sd = src->dtype;
  char *db = base_of(dst);
  const char *sb = base_of(src);
  if (dd == sd) { /* both storage: the bits move unchanged */
    uint16_t *d = (uint16_t *)db + od;
    const uint16_t *s = (const uint16_t *)sb + os;
    for (int64_t i = 0; i < len; i++) d[i * ds] = s[i * ss];
  } else if (nc_dtype_is_storage(dd) && sd == NC_FLOAT32) {
    encode_row(dd, (uint16_t *)db + od, ds, (const float *)sb + os, ss, len);
  } else if (nc_dtype_is_storage(sd) && dd == NC_FLOAT32) {
    decode_row(sd, (float *)db + od, ds, (const uint16_t *)sb + os, ss, len);
  } else {
    float buf[NC_CPU_BLOCK];
    if (nc_dtype_is_storage(sd))
      decode_row(sd, buf, 1, (const uint16_t *)sb + os, ss, len);
    else
      load_floats(buf, sd, sb, os, ss, len);
    if (nc_dtype_is_storage(dd))
      encode_row(dd, (uint16_t *)db + od, ds, buf, 1, len);
    else
      store_floats(dd, db, od, ds, buf, len);
  }
}

nc_status nc_cpu_copy_half(nc_tensor *dst, const nc_tensor *src) {
  nc_cpu_iter it;
  const nc_tensor *ops[2] = {dst, src};
  nc_cpu_iter_init(&it, 2, ops);
  const int64_t numel = nc_tensor_numel(dst), nblk = nc_cpu_iter_blocks(&it);
  NC_CPU_PARALLEL_FOR(numel > NC_CPU_PARALLEL_MIN, , b, nblk, {
    int64_t o[2], len;
    nc_cpu_iter_block(&it, b, o, &len);
    copy_block(dst, src, o[0], it.strides[0][it.ndim - 1], o[1], it.strides[1][it.ndim - 1], len);
  });
  return NC_OK;
}

nc_status nc_cpu_fill_half(nc_tensor *t, double v) {
  nc_cpu_iter it;
  const nc_tensor *ops[1] = {t};
  nc_cpu_iter_init(&it, 1, ops);
  const uint16_t bits = nc_half_from_double(t->dtype, v);
  const int64_t numel = nc_tensor_numel(t), nblk = nc_cpu_iter_blocks(&it);
  uint16_t *p = (uint16_t *)base_of(t);
  NC_CPU_PARALLEL_FOR(numel > NC_CPU_PARALLEL_MIN, , b, nblk, {
    int64_t o, len;
    nc_cpu_iter_block(&it, b, &o, &len);
    const int64_t s = it.strides[0][it.ndim - 1];
    for (int64_t i = 0; i < len; i++) p[o + i * s] = bits;
  });
  return NC_OK;
}

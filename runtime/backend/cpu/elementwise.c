/* CPU elementwise families (unary, binary, comparisons, where). Each op is its own loop, with
 * the switch outside, so that contiguous rows vectorize; strided rows run the same expression
 * with strides. Integer arithmetic wraps (computed unsigned), as on OpenCL devices. The
 * expressions match kernels/elementwise.cl term for term. The storage dtypes (bfloat16, float16)
 * run the float32 loops on blocks widened to float32 and round once into the result. */
#include <string.h>
#include <tgmath.h>
#include "cpu_backend.h"
#include "strided.h"
#include "vmath.h"

static inline void *base_of(const nc_tensor *t) { return nc_storage_host_ptr(t->storage); }

/* A scalar operand iterates as a tensor of out's shape with all strides 0. */
static void scalar_header(nc_tensor *fake, const nc_tensor *out) {
  memset(fake, 0, sizeof *fake);
  fake->ndim = out->ndim;
  memcpy(fake->shape, out->shape, sizeof fake->shape);
}

#define SCALAR_TO(T, s) ((s)->is_int ? (T)(s)->i : (T)(s)->f)

static inline int64_t ipow(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
  uint64_t r = 1, base = (uint64_t)a, e = (uint64_t)b;
  while (e) {
    if (e & 1) r *= base;
    base *= base;
    e >>= 1;
  }
  return (int64_t)r;
}

/* floor_divide and remainder as PyTorch computes them (Python's // and %): from fmod, which is
 * exact, the quotient rounded toward -inf and a remainder with the sign of the divisor. A float
 * divisor of 0 gives a / 0 (inf or nan) and nan; integer divisors of 0 never get here (the op
 * checks them first) but give 0 rather than a trap, and -1 is handled without the overflow of
 * INT_MIN / -1 (the quotient wraps, as in Lua). */
#define FLOORDIV_FLOAT(T)                                        \
  static inline T floordiv_##T(T a, T b) {                       \
    if (b == 0) return a / b;                                     \
    T mod = fmod(a, b), div = (a - mod) / b;                      \
    if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;               \
    if (div == 0) return copysign((T)0, a / b);                   \
    T fl = floor(div);                                            \
    return div - fl > (T)0.5 ? fl + 1 : fl;                       \
  }                                                               \
  static inline T remainder_##T(T a, T b) {                      \
    T mod = fmod(a, b);                                           \
    return mod != 0 && (b < 0) != (mod < 0) ? mod + b : mod;      \
  }
FLOORDIV_FLOAT(float)
FLOORDIV_FLOAT(double)

#define FLOORDIV_INT(T, U)                                                 \
  static inline T floordiv_##T(T a, T b) {                                 \
    if (b == 0) return 0;                                                  \
    if (b == -1) return (T)((U)0 - (U)a);                                  \
    T q = a / b, r = a % b;                                                \
    return r != 0 && (r < 0) != (b < 0) ? (T)(q - 1) : q;                  \
  }                                                                        \
  static inline T remainder_##T(T a, T b) {                                \
    if (b == 0 || b == -1) return 0;                                       \
    T r = a % b;                                                           \
    return r != 0 && (r < 0) != (b < 0) ? (T)(r + b) : r;                  \
  }
FLOORDIV_INT(int32_t, uint32_t)
FLOORDIV_INT(int64_t, uint64_t)
static inline uint8_t floordiv_uint8_t(uint8_t a, uint8_t b) { return b ? (uint8_t)(a / b) : 0; }
static inline uint8_t remainder_uint8_t(uint8_t a, uint8_t b) { return b ? (uint8_t)(a % b) : 0; }

/* ---- row loops: d = E over one block; v (and w) are the input elements ------------------------ */
#define ROW1(T, E)                                          \
  do {                                                      \
    if (ds == 1 && xs == 1) {                               \
      _Pragma("omp simd") for (int64_t i = 0; i < n; i++) { \
        const T v = x[i];                                   \
        d[i] = (E);                                         \
      }                                                     \
    } else {                                                \
      for (int64_t i = 0; i < n; i++) {                     \
        const T v = x[i * xs];                              \
        d[i * ds] = (E);                                    \
      }                                                     \
    }                                                       \
  } while (0)

#define ROW2(T, E)                                          \
  do {                                                      \
    if (ds == 1 && as == 1 && bs == 1) {                    \
      _Pragma("omp simd") for (int64_t i = 0; i < n; i++) { \
        const T v = a[i], w = b[i];                         \
        d[i] = (E);                                         \
      }                                                     \
    } else if (ds == 1 && as == 1 && bs == 0) {             \
      const T w = b[0];                                     \
      _Pragma("omp simd") for (int64_t i = 0; i < n; i++) { \
        const T v = a[i];                                   \
        d[i] = (E);                                         \
      }                                                     \
    } else {                                                \
      for (int64_t i = 0; i < n; i++) {                     \
        const T v = a[i * as], w = b[i * bs];               \
        d[i * ds] = (E);                                    \
      }                                                     \
    }                                                       \
  } while (0)

/* float32 exp, log, tanh and 1 + erf through vmath.h (vectorized, checked against libm by
 * test_vmath); float64 through libm. */
#define VEXP(v) _Generic((v), float: nc_vexpf((float)(v)), default: exp(v))
#define VLOG(v) _Generic((v), float: nc_vlogf((float)(v)), default: log(v))
#define VTANH(v) _Generic((v), float: nc_vtanhf((float)(v)), default: tanh(v))
#define VERF1P(v) _Generic((v), float: nc_verf1pf((float)(v)), default: 1 + erf(v))

/* ---- unary --------------------------------------------------------------------------------- */
#define UNARY_FLOAT(SUF, T)                                                                             \
  NC_CPU_CLONES static bool unary_##SUF(nc_op op, T *d, int64_t ds, const T *x, int64_t xs, int64_t n, T lo, T hi) {  \
    switch (op) {                                                                                       \
      case NC_OP_ABS:                                                                                   \
        ROW1(T, fabs(v));                                                                               \
        return true;                                                                                    \
      case NC_OP_NEG:                                                                                   \
        ROW1(T, -v);                                                                                    \
        return true;                                                                                    \
      case NC_OP_EXP:                                                                                   \
        ROW1(T, VEXP(v));                                                                                \
        return true;                                                                                    \
      case NC_OP_LOG:                                                                                   \
        ROW1(T, VLOG(v));                                                                                \
        return true;                                                                                    \
      case NC_OP_LOG1P:                                                                                 \
        ROW1(T, log1p(v));                                                                              \
        return true;                                                                                    \
      case NC_OP_SQRT:                                                                                  \
        ROW1(T, sqrt(v));                                                                               \
        return true;                                                                                    \
      case NC_OP_RSQRT:                                                                                 \
        ROW1(T, (T)1 / sqrt(v));                                                                        \
        return true;                                                                                    \
      case NC_OP_SIN:                                                                                   \
        ROW1(T, sin(v));                                                                                \
        return true;                                                                                    \
      case NC_OP_COS:                                                                                   \
        ROW1(T, cos(v));                                                                                \
        return true;                                                                                    \
      case NC_OP_TANH:                                                                                  \
        ROW1(T, VTANH(v));                                                                               \
        return true;                                                                                    \
      case NC_OP_SIGMOID:                                                                               \
        ROW1(T, (T)1 / ((T)1 + VEXP(-v)));                                                               \
        return true;                                                                                    \
      case NC_OP_RELU:                                                                                  \
        ROW1(T, v < 0 ? (T)0 : v);                                                                      \
        return true;                                                                                    \
      case NC_OP_GELU:                                                                                  \
        ROW1(T, (T)0.5 * v * VERF1P(v * (T)0.70710678118654752440));                                     \
        return true;                                                                                    \
      case NC_OP_GELU_TANH: /* 0.5 (1 + tanh u) = 1 / (1 + exp(-2u)): no reliance on tanh saturating */ \
        ROW1(T, v / ((T)1 + VEXP((T)-1.5957691216057307118 * (v + (T)0.044715 * v * v * v))));           \
        return true;                                                                                    \
      case NC_OP_SILU:                                                                                  \
        ROW1(T, v / ((T)1 + VEXP(-v)));                                                                  \
        return true;                                                                                    \
      case NC_OP_FLOOR:                                                                                 \
        ROW1(T, floor(v));                                                                              \
        return true;                                                                                    \
      case NC_OP_CEIL:                                                                                  \
        ROW1(T, ceil(v));                                                                               \
        return true;                                                                                    \
      case NC_OP_ROUND:                                                                                 \
        ROW1(T, rint(v));                                                                               \
        return true;                                                                                    \
      case NC_OP_SIGN:                                                                                  \
        ROW1(T, v > 0 ? (T)1 : v < 0 ? (T)-1 : (T)0);                                                   \
        return true;                                                                                    \
      case NC_OP_CLAMP:                                                                                 \
        ROW1(T, (v < lo ? lo : v) > hi ? hi : (v < lo ? lo : v));                                       \
        return true;                                                                                    \
      default:                                                                                          \
        return false;                                                                                   \
    }                                                                                                   \
  }

/* Negation through the unsigned type: wraps instead of overflowing. */
#define UNARY_INT(SUF, T, U, NEG)                                                                      \
  static bool unary_##SUF(nc_op op, T *d, int64_t ds, const T *x, int64_t xs, int64_t n, T lo, T hi) { \
    switch (op) {                                                                                      \
      case NC_OP_ABS:                                                                                  \
        ROW1(T, NEG(v) ? (T)((U)0 - (U)v) : v);                                                        \
        return true;                                                                                   \
      case NC_OP_NEG:                                                                                  \
        ROW1(T, (T)((U)0 - (U)v));                                                                     \
        return true;                                                                                   \
      case NC_OP_RELU:                                                                                 \
        ROW1(T, NEG(v) ? (T)0 : v);                                                                    \
        return true;                                                                                   \
      case NC_OP_FLOOR:                                                                                \
      case NC_OP_CEIL:                                                                                 \
      case NC_OP_ROUND:                                                                                \
        ROW1(T, v);                                                                                    \
        return true;                                                                                   \
      case NC_OP_SIGN:                                                                                 \
        ROW1(T, (T)((v > 0) - NEG(v)));                                                                \
        return true;                                                                                   \
      case NC_OP_CLAMP:                                                                                \
        ROW1(T, (v < lo ? lo : v) > hi ? hi : (v < lo ? lo : v));                                      \
        return true;                                                                                   \
      default:                                                                                         \
        return false;                                                                                  \
    }                                                                                                  \
  }

UNARY_FLOAT(float32, float)
UNARY_FLOAT(float64, double)
#define SIGNED_NEG(v) ((v) < 0)
#define UNSIGNED_NEG(v) 0
UNARY_INT(int32, int32_t, uint32_t, SIGNED_NEG)
UNARY_INT(int64, int64_t, uint64_t, SIGNED_NEG)
UNARY_INT(uint8, uint8_t, uint8_t, UNSIGNED_NEG)

#define PRED_FLOAT(SUF, T)                                                                      \
  static bool pred_##SUF(nc_op op, uint8_t *d, int64_t ds, const T *x, int64_t xs, int64_t n) { \
    switch (op) {                                                                               \
      case NC_OP_ISNAN:                                                                         \
        ROW1(T, (uint8_t)(isnan(v) != 0));                                                      \
        return true;                                                                            \
      case NC_OP_ISINF:                                                                         \
        ROW1(T, (uint8_t)(isinf(v) != 0));                                                      \
        return true; /* glibc: -1 for -inf */                                                   \
      default:                                                                                  \
        return false;                                                                           \
    }                                                                                           \
  }
PRED_FLOAT(float32, float)
PRED_FLOAT(float64, double)

static nc_status unsupported(const char *family, nc_op op, nc_dtype dt) {
  return nc_error(NC_ERR_UNSUPPORTED, "cpu %s: op %s on %s is not implemented", family, nc_op_get(op)->name,
                  nc_dtype_name(dt));
}

/* Runs ROWFN over the blocks of a two-operand iteration (d, x). */
#define DRIVE1(ROWFN, TD, TX, ...)                                                                        \
  do {                                                                                                    \
    TD *D = base_of(out);                                                                                 \
    const TX *X = base_of(x);                                                                             \
    const int64_t ds = it.strides[0][it.ndim - 1], xs = it.strides[1][it.ndim - 1];                       \
    NC_CPU_PARALLEL_FOR(numel > NC_CPU_PARALLEL_MIN, reduction(&& : ok), blk, nblk, {                     \
      int64_t o[2], len;                                                                                  \
      nc_cpu_iter_block(&it, blk, o, &len);                                                               \
      ok = ROWFN(op, D + o[0], ds, X + o[1], xs, len, ##__VA_ARGS__) && ok;                               \
    });                                                                                                   \
  } while (0)

/* ---- storage dtypes (bfloat16, float16) ---------------------------------------------------------
 * Each block of x (a, b) is widened into float32 buffers (cpu_half.c's exact conversions), goes
 * through the float32 row function, whose contiguous loops vectorize, and is rounded once (to
 * nearest, ties to even; NaN stays NaN) into out: every element is the float32 op's value on the
 * widened inputs, rounded to out's dtype. Scalar operands are float32, as for float32 tensors. */
static nc_status unary_half(nc_op op, nc_tensor *out, const nc_tensor *x, float lo, float hi) {
  nc_cpu_iter it;
  const nc_tensor *ts[2] = {out, x};
  nc_cpu_iter_init(&it, 2, ts);
  const int64_t numel = nc_tensor_numel(out), nblk = nc_cpu_iter_blocks(&it);
  const bool pred = op == NC_OP_ISNAN || op == NC_OP_ISINF;
  char *D = base_of(out);
  const uint16_t *X = base_of(x);
  const int64_t ds = it.strides[0][it.ndim - 1], xs = it.strides[1][it.ndim - 1];
  bool ok = true;
  NC_CPU_PARALLEL_FOR(numel > NC_CPU_PARALLEL_MIN, reduction(&& : ok), blk, nblk, {
    float buf[NC_CPU_BLOCK];
    int64_t o[2], len;
    nc_cpu_iter_block(&it, blk, o, &len);
    nc_cpu_half_to_f32(x->dtype, buf, 1, X + o[1], xs, len);
    if (pred) {
      ok = pred_float32(op, (uint8_t *)D + o[0], ds, buf, 1, len) && ok;
    } else {
      ok = unary_float32(op, buf, 1, buf, 1, len, lo, hi) && ok;
      nc_cpu_f32_to_half(out->dtype, (uint16_t *)D + o[0], ds, buf, 1, len);
    }
  });
  return ok ? NC_OK : unsupported("unary", op, x->dtype);
}

nc_status nc_cpu_unary(nc_op op, nc_tensor *out, const nc_tensor *x, const nc_scalar *p) {
  const nc_scalar zero = nc_scalar_int(0);
  if (nc_dtype_is_storage(x->dtype))
    return unary_half(op, out, x, SCALAR_TO(float, p ? &p[0] : &zero), SCALAR_TO(float, p ? &p[1] : &zero));
  nc_cpu_iter it;
  const nc_tensor *ts[2] = {out, x};
  nc_cpu_iter_init(&it, 2, ts);
  const int64_t numel = nc_tensor_numel(out), nblk = nc_cpu_iter_blocks(&it);
  bool ok = true;
  if (op == NC_OP_ISNAN || op == NC_OP_ISINF) {
    if (!nc_dtype_is_float(x->dtype))
      return nc_cpu_fill(out, 0); /* never nan or inf */
    if (x->dtype == NC_FLOAT32)
      DRIVE1(pred_float32, uint8_t, float);
    else
      DRIVE1(pred_float64, uint8_t, double);
    return ok ? NC_OK : unsupported("unary", op, x->dtype);
  }
  const nc_scalar *lo = p ? &p[0] : &zero, *hi = p ? &p[1] : &zero;
  switch (x->dtype) {
    case NC_FLOAT32:
      DRIVE1(unary_float32, float, float, SCALAR_TO(float, lo), SCALAR_TO(float, hi));
      break;
    case NC_FLOAT64:
      DRIVE1(unary_float64, double, double, SCALAR_TO(double, lo), SCALAR_TO(double, hi));
      break;
    case NC_INT32:
      DRIVE1(unary_int32, int32_t, int32_t, SCALAR_TO(int32_t, lo), SCALAR_TO(int32_t, hi));
      break;
    case NC_INT64:
      DRIVE1(unary_int64, int64_t, int64_t, SCALAR_TO(int64_t, lo), SCALAR_TO(int64_t, hi));
      break;
    case NC_UINT8:
      DRIVE1(unary_uint8, uint8_t, uint8_t, SCALAR_TO(uint8_t, lo), SCALAR_TO(uint8_t, hi));
      break;
    default:
      ok = false;
  }
  return ok ? NC_OK : unsupported("unary", op, x->dtype);
}

/* ---- binary and comparisons -------------------------------------------------------------------- */
#define BINARY_FLOAT(SUF, T)                                                                           \
  static bool binary_##SUF(nc_op op, T *d, int64_t ds, const T *a, int64_t as, const T *b, int64_t bs, \
                           int64_t n) {                                                                \
    switch (op) {                                                                                      \
      case NC_OP_ADD:                                                                                  \
        ROW2(T, v + w);                                                                                \
        return true;                                                                                   \
      case NC_OP_SUB:                                                                                  \
        ROW2(T, v - w);                                                                                \
        return true;                                                                                   \
      case NC_OP_MUL:                                                                                  \
        ROW2(T, v *w);                                                                                 \
        return true;                                                                                   \
      case NC_OP_DIV:                                                                                  \
        ROW2(T, v / w);                                                                                \
        return true;                                                                                   \
      case NC_OP_POW:                                                                                  \
        ROW2(T, pow(v, w));                                                                            \
        return true;                                                                                   \
      case NC_OP_MAXIMUM:                                                                              \
        ROW2(T, (v > w || isnan(v)) ? v : w);                                                          \
        return true;                                                                                   \
      case NC_OP_MINIMUM:                                                                              \
        ROW2(T, (v < w || isnan(v)) ? v : w);                                                          \
        return true;                                                                                   \
      case NC_OP_FLOOR_DIVIDE:                                                                         \
        ROW2(T, floordiv_##T(v, w));                                                                   \
        return true;                                                                                   \
      case NC_OP_REMAINDER:                                                                            \
        ROW2(T, remainder_##T(v, w));                                                                  \
        return true;                                                                                   \
      default:                                                                                         \
        return false;                                                                                  \
    }                                                                                                  \
  }

#define BINARY_INT(SUF, T, U)                                                                          \
  static bool binary_##SUF(nc_op op, T *d, int64_t ds, const T *a, int64_t as, const T *b, int64_t bs, \
                           int64_t n) {                                                                \
    switch (op) {                                                                                      \
      case NC_OP_ADD:                                                                                  \
        ROW2(T, (T)((U)v + (U)w));                                                                     \
        return true;                                                                                   \
      case NC_OP_SUB:                                                                                  \
        ROW2(T, (T)((U)v - (U)w));                                                                     \
        return true;                                                                                   \
      case NC_OP_MUL:                                                                                  \
        ROW2(T, (T)((U)v * (U)w));                                                                     \
        return true;                                                                                   \
      case NC_OP_POW:                                                                                  \
        ROW2(T, (T)ipow(v, w));                                                                        \
        return true;                                                                                   \
      case NC_OP_MAXIMUM:                                                                              \
        ROW2(T, v > w ? v : w);                                                                        \
        return true;                                                                                   \
      case NC_OP_MINIMUM:                                                                              \
        ROW2(T, v < w ? v : w);                                                                        \
        return true;                                                                                   \
      case NC_OP_FLOOR_DIVIDE:                                                                         \
        ROW2(T, floordiv_##T(v, w));                                                                   \
        return true;                                                                                   \
      case NC_OP_REMAINDER:                                                                            \
        ROW2(T, remainder_##T(v, w));                                                                  \
        return true;                                                                                   \
      default:                                                                                         \
        return false;                                                                                  \
    }                                                                                                  \
  }

/* bool: add and maximum are "or", mul and minimum are "and". */
static bool binary_bool(nc_op op, uint8_t *d, int64_t ds, const uint8_t *a, int64_t as, const uint8_t *b,
                        int64_t bs, int64_t n) {
  switch (op) {
    case NC_OP_ADD:
    case NC_OP_MAXIMUM:
      ROW2(uint8_t, (uint8_t)(v | w));
      return true;
    case NC_OP_MUL:
    case NC_OP_MINIMUM:
      ROW2(uint8_t, (uint8_t)(v & w));
      return true;
    default:
      return false;
  }
}

#define COMPARE(SUF, T)                                                                           \
  static bool compare_##SUF(nc_op op, uint8_t *d, int64_t ds, const T *a, int64_t as, const T *b, \
                            int64_t bs, int64_t n) {                                              \
    switch (op) {                                                                                 \
      case NC_OP_EQ:                                                                              \
        ROW2(T, (uint8_t)(v == w));                                                               \
        return true;                                                                              \
      case NC_OP_NE:                                                                              \
        ROW2(T, (uint8_t)(v != w));                                                               \
        return true;                                                                              \
      case NC_OP_LT:                                                                              \
        ROW2(T, (uint8_t)(v < w));                                                                \
        return true;                                                                              \
      case NC_OP_LE:                                                                              \
        ROW2(T, (uint8_t)(v <= w));                                                               \
        return true;                                                                              \
      case NC_OP_GT:                                                                              \
        ROW2(T, (uint8_t)(v > w));                                                                \
        return true;                                                                              \
      case NC_OP_GE:                                                                              \
        ROW2(T, (uint8_t)(v >= w));                                                               \
        return true;                                                                              \
      default:                                                                                    \
        return false;                                                                             \
    }                                                                                             \
  }

BINARY_FLOAT(float32, float)
BINARY_FLOAT(float64, double)
BINARY_INT(int32, int32_t, uint32_t)
BINARY_INT(int64, int64_t, uint64_t)
BINARY_INT(uint8, uint8_t, uint8_t)
COMPARE(float32, float)
COMPARE(float64, double)
COMPARE(int32, int32_t)
COMPARE(int64, int64_t)
COMPARE(uint8, uint8_t)

/* Runs ROWFN over the blocks of a three-operand iteration (d, a, b); a scalar operand reads a
 * local copy with stride 0. */
#define DRIVE2(ROWFN, TD, T)                                                                              \
  do {                                                                                                    \
    TD *D = base_of(out);                                                                                 \
    const T sa = a->t ? (T)0 : SCALAR_TO(T, &a->s), sb = b->t ? (T)0 : SCALAR_TO(T, &b->s);               \
    const T *A = a->t ? (const T *)base_of(a->t) : &sa, *B = b->t ? (const T *)base_of(b->t) : &sb;       \
    const int64_t ds = it.strides[0][it.ndim - 1], as = it.strides[1][it.ndim - 1],                       \
                  bs = it.strides[2][it.ndim - 1];                                                        \
    NC_CPU_PARALLEL_FOR(numel > NC_CPU_PARALLEL_MIN, reduction(&& : ok), blk, nblk, {                     \
      int64_t o[3], len;                                                                                  \
      nc_cpu_iter_block(&it, blk, o, &len);                                                               \
      ok = ROWFN(op, D + o[0], ds, A + o[1], as, B + o[2], bs, len) && ok;                                \
    });                                                                                                   \
  } while (0)

/* Binary ops and comparisons on storage dtypes: a and b widened block by block (a scalar is
 * the float32 value, read with stride 0), the float32 row function, then out rounded once
 * (comparisons write bools directly). */
static bool binary_half_row(nc_op op, bool compare, nc_dtype dt, char *D, int64_t ds, const uint16_t *A,
                            int64_t as, const uint16_t *B, int64_t bs, float sa, float sb, int64_t len) {
  float fa[NC_CPU_BLOCK], fb[NC_CPU_BLOCK];
  const float *pa = &sa, *pb = &sb;
  int64_t sta = 0, stb = 0;
  if (A) nc_cpu_half_to_f32(dt, fa, 1, A, as, len), pa = fa, sta = 1;
  if (B) nc_cpu_half_to_f32(dt, fb, 1, B, bs, len), pb = fb, stb = 1;
  if (compare) return compare_float32(op, (uint8_t *)D, ds, pa, sta, pb, stb, len);
  /* the result goes to fa (in place over a's values when a is a tensor: same index, read first) */
  if (!binary_float32(op, fa, 1, pa, sta, pb, stb, len)) return false;
  nc_cpu_f32_to_half(dt, (uint16_t *)D, ds, fa, 1, len);
  return true;
}

static nc_status binary_half(nc_op op, nc_tensor *out, const nc_operand *a, const nc_operand *b,
                             const nc_tensor *const *ts) {
  const nc_dtype dt = a->t ? a->t->dtype : b->t->dtype;
  const bool compare = nc_op_get(op)->result == NC_RES_BOOL;
  nc_cpu_iter it;
  nc_cpu_iter_init(&it, 3, ts);
  const int64_t numel = nc_tensor_numel(out), nblk = nc_cpu_iter_blocks(&it);
  const float sa = a->t ? 0.0f : SCALAR_TO(float, &a->s), sb = b->t ? 0.0f : SCALAR_TO(float, &b->s);
  char *D = base_of(out);
  const uint16_t *A = a->t ? base_of(a->t) : NULL, *B = b->t ? base_of(b->t) : NULL;
  const size_t es = nc_dtype_size(out->dtype);
  const int64_t ds = it.strides[0][it.ndim - 1], as = it.strides[1][it.ndim - 1],
                bs = it.strides[2][it.ndim - 1];
  bool ok = true;
  NC_CPU_PARALLEL_FOR(numel > NC_CPU_PARALLEL_MIN, reduction(&& : ok), blk, nblk, {
    int64_t o[3], len;
    nc_cpu_iter_block(&it, blk, o, &len);
    ok = binary_half_row(op, compare, dt, D + o[0] * (int64_t)es, ds, A ? A + o[1] : NULL, as, B ? B + o[2] : NULL,
                         bs, sa, sb, len) &&
         ok;
  });
  return ok ? NC_OK : unsupported(compare ? "compare" : "binary", op, dt);
}

nc_status nc_cpu_binary(nc_op op, nc_tensor *out, const nc_operand *a, const nc_operand *b) {
  nc_tensor fa, fb;
  if (!a->t) scalar_header(&fa, out);
  if (!b->t) scalar_header(&fb, out);
  const nc_tensor *ts[3] = {out, a->t ? a->t : &fa, b->t ? b->t : &fb};
  const nc_dtype dt = a->t ? a->t->dtype : b->t->dtype;
  if (nc_dtype_is_storage(dt)) return binary_half(op, out, a, b, ts);
  nc_cpu_iter it;
  nc_cpu_iter_init(&it, 3, ts);
  const int64_t numel = nc_tensor_numel(out), nblk = nc_cpu_iter_blocks(&it);
  bool ok = true;
  if (nc_op_get(op)->result == NC_RES_BOOL) {
    switch (dt) {
      case NC_FLOAT32:
        DRIVE2(compare_float32, uint8_t, float);
        break;
      case NC_FLOAT64:
        DRIVE2(compare_float64, uint8_t, double);
        break;
      case NC_INT32:
        DRIVE2(compare_int32, uint8_t, int32_t);
        break;
      case NC_INT64:
        DRIVE2(compare_int64, uint8_t, int64_t);
        break;
      case NC_UINT8:
      case NC_BOOL:
        DRIVE2(compare_uint8, uint8_t, uint8_t);
        break;
      default:
        ok = false;
    }
    return ok ? NC_OK : unsupported("compare", op, dt);
  }
  switch (dt) {
    case NC_FLOAT32:
      DRIVE2(binary_float32, float, float);
      break;
    case NC_FLOAT64:
      DRIVE2(binary_float64, double, double);
      break;
    case NC_INT32:
      DRIVE2(binary_int32, int32_t, int32_t);
      break;
    case NC_INT64:
      DRIVE2(binary_int64, int64_t, int64_t);
      break;
    case NC_UINT8:
      DRIVE2(binary_uint8, uint8_t, uint8_t);
      break;
    case NC_BOOL:
      DRIVE2(binary_bool, uint8_t, uint8_t);
      break;
    default:
      ok = false;
  }
  return ok ? NC_OK : unsupported("binary", op, dt);
}

/* ---- where ----------------------------------------------------------------------------------- */
#define WHERE_DRIVE(T)                                                                                      \
  do {                                                                                                      \
    T *D = base_of(out);                                                                                    \
    const uint8_t *C = base_of(cond);                                                                       \
    const T sa = a->t ? (T)0 : SCALAR_TO(T, &a->s), sb = b->t ? (T)0 : SCALAR_TO(T, &b->s);                 \
    const T *A = a->t ? (const T *)base_of(a->t) : &sa, *B = b->t ? (const T *)base_of(b->t) : &sb;         \
    const int64_t ds = it.strides[0][it.ndim - 1], cs = it.strides[1][it.ndim - 1],                         \
                  as = it.strides[2][it.ndim - 1], bs = it.strides[3][it.ndim - 1];                         \
    NC_CPU_PARALLEL_FOR(numel > NC_CPU_PARALLEL_MIN, , blk, nblk, {                                         \
      int64_t o[4], n;                                                                                      \
      nc_cpu_iter_block(&it, blk, o, &n);                                                                   \
      T *d = D + o[0];                                                                                      \
      const uint8_t *c = C + o[1];                                                                          \
      const T *x = A + o[2], *y = B + o[3];                                                                 \
      /* contiguous: loops that vectorize (both sides loaded, then a select) */                            \
      if (ds == 1 && cs == 1 && as == 1 && bs == 1)                                                         \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) { const T u = x[i], v = y[i]; d[i] = c[i] ? u : v; } \
      else if (ds == 1 && cs == 1 && as == 1 && bs == 0) /* where(cond, t, scalar) */                      \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) { const T u = x[i], v = y[0]; d[i] = c[i] ? u : v; } \
      else if (ds == 1 && cs == 1 && as == 0 && bs == 0) /* where(cond, scalar, scalar) */                  \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) { const T u = x[0], v = y[0]; d[i] = c[i] ? u : v; } \
      else                                                                                                  \
        for (int64_t i = 0; i < n; i++) d[i * ds] = c[i * cs] ? x[i * as] : y[i * bs];                      \
    });                                                                                                     \
  } while (0)

nc_status nc_cpu_where(nc_tensor *out, const nc_tensor *cond, const nc_operand *a, const nc_operand *b) {
  nc_tensor fa, fb;
  if (!a->t) scalar_header(&fa, out);
  if (!b->t) scalar_header(&fb, out);
  const nc_tensor *ts[4] = {out, cond, a->t ? a->t : &fa, b->t ? b->t : &fb};
  nc_cpu_iter it;
  nc_cpu_iter_init(&it, 4, ts);
  const int64_t numel = nc_tensor_numel(out), nblk = nc_cpu_iter_blocks(&it);
  switch (out->dtype) {
    case NC_FLOAT32:
      WHERE_DRIVE(float);
      break;
    case NC_FLOAT64:
      WHERE_DRIVE(double);
      break;
    case NC_INT32:
      WHERE_DRIVE(int32_t);
      break;
    case NC_INT64:
      WHERE_DRIVE(int64_t);
      break;
    case NC_UINT8:
      WHERE_DRIVE(uint8_t);
      break;
    case NC_BOOL:
      WHERE_DRIVE(uint8_t);
      break;
    default:
      return unsupported("where", NC_OP_WHERE, out->dtype);
  }
  return NC_OK;
}

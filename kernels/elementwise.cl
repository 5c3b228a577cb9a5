/* Elementwise families. Each op's expression is written once, in the lists below, and
 * expands into two kinds of kernels:
 *   - general kernels unary_<T>, binary_<T>, compare_<T> (bool out; also isnan/isinf) and
 *     where_<T>: any layout, the op code (NC_OP_*, from the op table) as an argument;
 *   - fast kernels <op>_<T> (add_float32, exp_float64, ...): contiguous operands, one element per
 *     work-item, the op fixed at compile time so CPU drivers vectorize them (a run-time switch
 *     inside the work-item loop defeats PoCL's vectorizer).
 * mode bit 0 / bit 1: operand a / b is the scalar sa / sb instead of a tensor (the buffer passed
 * for it is then any valid buffer of n elements). Expressions match
 * runtime/backend/cpu/elementwise.c term for term; integer arithmetic wraps (computed unsigned). */

/* Planted faults for the parity harness's self-test (NETCL_FAULT=elementwise): add is wrong at
 * the last element, relu maps nan to 0, neg writes one element past a contiguous output. */
#ifdef NC_FAULT
#define NC_FAULT_VALUE(op, i, n, r) (((op) == NC_OP_ADD && (i) == (n) - 1) ? (r) + 1 : (r))
#define FAULT_RELU(r) (isnan(v) ? 0 : (r))
#define NC_FAULT_OOB(op, out, o, n) \
  if ((op) == NC_OP_NEG && get_global_id(0) == 0) out[(o) + (n)] = 0;
#else
#define NC_FAULT_VALUE(op, i, n, r) (r)
#define FAULT_RELU(r) (r)
#define NC_FAULT_OOB(op, out, o, n)
#endif

inline long nc_ipow(long a, long b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
  ulong r = 1, base = (ulong)a, e = (ulong)b;
  while (e) {
    if (e & 1) r *= base;
    base *= base;
    e >>= 1;
  }
  return (long)r;
}

/* ---- the expressions: X(N, T, ID, name, expr) with v (and w, lo, hi) of type T -------------------- */
#define FLOAT_UNARY(X, N, T)                                                                      \
  X(N, T, ABS, abs, fabs(v))                                                                      \
  X(N, T, NEG, neg, -v)                                                                           \
  X(N, T, EXP, exp, exp(v))                                                                       \
  X(N, T, LOG, log, log(v))                                                                       \
  X(N, T, LOG1P, log1p, log1p(v))                                                                 \
  X(N, T, SQRT, sqrt, sqrt(v))                                                                    \
  X(N, T, RSQRT, rsqrt, (T)1 / sqrt(v))                                                           \
  X(N, T, SIN, sin, sin(v))                                                                       \
  X(N, T, COS, cos, cos(v))                                                                       \
  X(N, T, TANH, tanh, tanh(v))                                                                    \
  X(N, T, SIGMOID, sigmoid, (T)1 / ((T)1 + exp(-v)))                                              \
  X(N, T, RELU, relu, FAULT_RELU(v < 0 ? (T)0 : v))                                               \
  X(N, T, GELU, gelu, (T)0.5 * v * ((T)1 + erf(v * (T)0.70710678118654752440)))                   \
  /* 0.5 (1 + tanh u) = 1 / (1 + exp(-2u)): no reliance on tanh saturating */                     \
  X(N, T, GELU_TANH, gelu_tanh, v / ((T)1 + exp((T)-1.5957691216057307118 * (v + (T)0.044715 * v * v * v)))) \
  X(N, T, SILU, silu, v / ((T)1 + exp(-v)))                                                       \
  X(N, T, FLOOR, floor, floor(v))                                                                 \
  X(N, T, CEIL, ceil, ceil(v))                                                                    \
  X(N, T, ROUND, round, rint(v))                                                                  \
  X(N, T, SIGN, sign, v > 0 ? (T)1 : v < 0 ? (T)-1 : (T)0)                                        \
  X(N, T, CLAMP, clamp, (v < lo ? lo : v) > hi ? hi : (v < lo ? lo : v))

#define SIGNED_NEG(v) ((v) < 0)
#define UNSIGNED_NEG(v) 0
#define INT_UNARY(X, N, T, U, ISNEG)                                                              \
  X(N, T, ABS, abs, ISNEG(v) ? (T)((U)0 - (U)v) : v)                                              \
  X(N, T, NEG, neg, (T)((U)0 - (U)v))                                                             \
  X(N, T, RELU, relu, ISNEG(v) ? (T)0 : v)                                                        \
  X(N, T, FLOOR, floor, v)                                                                        \
  X(N, T, CEIL, ceil, v)                                                                          \
  X(N, T, ROUND, round, v)                                                                        \
  X(N, T, SIGN, sign, (T)((v > 0) - ISNEG(v)))                                                    \
  X(N, T, CLAMP, clamp, (v < lo ? lo : v) > hi ? hi : (v < lo ? lo : v))

#define FLOAT_BINARY(X, N, T)                                                                     \
  X(N, T, ADD, add, v + w)                                                                        \
  X(N, T, SUB, sub, v - w)                                                                        \
  X(N, T, MUL, mul, v * w)                                                                        \
  X(N, T, DIV, div, v / w)                                                                        \
  X(N, T, POW, pow, pow(v, w))                                                                    \
  X(N, T, MAXIMUM, maximum, (v > w || isnan(v)) ? v : w)                                          \
  X(N, T, MINIMUM, minimum, (v < w || isnan(v)) ? v : w)                                          \
  X(N, T, FLOOR_DIVIDE, floor_divide, nc_floordiv_##N(v, w))                                      \
  X(N, T, REMAINDER, remainder, nc_remainder_##N(v, w))

#define INT_BINARY(X, N, T, U)                                                                    \
  X(N, T, ADD, add, (T)((U)v + (U)w))                                                             \
  X(N, T, SUB, sub, (T)((U)v - (U)w))                                                             \
  X(N, T, MUL, mul, (T)((U)v * (U)w))                                                             \
  X(N, T, POW, pow, (T)nc_ipow((long)v, (long)w))                                                 \
  X(N, T, MAXIMUM, maximum, v > w ? v : w)                                                        \
  X(N, T, MINIMUM, minimum, v < w ? v : w)                                                        \
  X(N, T, FLOOR_DIVIDE, floor_divide, nc_floordiv_##N(v, w))                                      \
  X(N, T, REMAINDER, remainder, nc_remainder_##N(v, w))

/* floor_divide and remainder as PyTorch computes them (Python's // and %), as in the CPU backend
 * (runtime/backend/cpu/elementwise.c): from fmod, the quotient rounded toward -inf, the remainder
 * with the sign of the divisor. Integer divisors of 0 are rejected by the op before any launch;
 * here they give 0 rather than a trap, and -1 avoids the overflow of INT_MIN / -1. */
#define FLOORDIV_FLOAT(N, T)                                                                      \
  inline T nc_floordiv_##N(T a, T b) {                                                            \
    if (b == 0) return a / b;                                                                     \
    const T mod = fmod(a, b);                                                                     \
    T div = (a - mod) / b;                                                                        \
    if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;                                               \
    if (div == 0) return copysign((T)0, a / b);                                                   \
    const T fl = floor(div);                                                                      \
    return div - fl > (T)0.5 ? fl + 1 : fl;                                                       \
  }                                                                                               \
  inline T nc_remainder_##N(T a, T b) {                                                           \
    const T mod = fmod(a, b);                                                                     \
    return mod != 0 && (b < 0) != (mod < 0) ? mod + b : mod;                                      \
  }
#define FLOORDIV_INT(N, T, U, SIGNED)                                                             \
  inline T nc_floordiv_##N(T a, T b) {                                                            \
    if (b == 0) return 0;                                                                         \
    if (SIGNED && b == (T)-1) return (T)((U)0 - (U)a);                                            \
    const T q = a / b, r = a % b;                                                                 \
    return r != 0 && SIGNED && ((r < 0) != (b < 0)) ? (T)(q - 1) : q;                             \
  }                                                                                               \
  inline T nc_remainder_##N(T a, T b) {                                                           \
    if (b == 0 || (SIGNED && b == (T)-1)) return 0;                                               \
    const T r = a % b;                                                                            \
    return r != 0 && SIGNED && ((r < 0) != (b < 0)) ? (T)(r + b) : r;                             \
  }
FLOORDIV_FLOAT(float32, float)
#ifdef NC_FP64
FLOORDIV_FLOAT(float64, double)
#endif
FLOORDIV_INT(int32, int, uint, 1)
FLOORDIV_INT(int64, long, ulong, 1)
FLOORDIV_INT(uint8, uchar, uchar, 0)

/* bool: add and maximum are "or", mul and minimum are "and" */
#define BOOL_BINARY(X, N, T)                                                                      \
  X(N, T, ADD, add, (uchar)(v | w))                                                               \
  X(N, T, MUL, mul, (uchar)(v & w))                                                               \
  X(N, T, MAXIMUM, maximum, (uchar)(v | w))                                                       \
  X(N, T, MINIMUM, minimum, (uchar)(v & w))

#define COMPARE(X, N, T, PNAN, PINF)                                                              \
  X(N, T, EQ, eq, v == w)                                                                         \
  X(N, T, NE, ne, v != w)                                                                         \
  X(N, T, LT, lt, v < w)                                                                          \
  X(N, T, LE, le, v <= w)                                                                         \
  X(N, T, GT, gt, v > w)                                                                          \
  X(N, T, GE, ge, v >= w)                                                                         \
  X(N, T, ISNAN, isnan, PNAN)                                                                     \
  X(N, T, ISINF, isinf, PINF)

/* ---- per-element functions of the general kernels --------------------------------------------------- */
#define CASE(N, T, ID, name, expr) \
  case NC_OP_##ID: return expr;

#define UNARY_FN(N, T, LIST)                                                                      \
  inline T uop_##N(int op, T v, T lo, T hi) {                                                     \
    switch (op) { LIST }                                                                          \
    return v;                                                                                     \
  }
#define BINARY_FN(N, T, LIST)                                                                     \
  inline T bop_##N(int op, T v, T w) {                                                            \
    switch (op) { LIST }                                                                          \
    return v;                                                                                     \
  }
#define COMPARE_FN(N, T, LIST)                                                                    \
  inline uchar cop_##N(int op, T v, T w) {                                                        \
    switch (op) { LIST }                                                                          \
    return 0;                                                                                     \
  }

/* ---- general kernels: any layout ------------------------------------------------------------------ */
#define UNARY_K(N, T)                                                                             \
  __kernel void unary_##N(int op, __global T *out, nc_layout lo, __global const T *x, nc_layout lx, T p0, T p1, \
                          long n) {                                                               \
    NC_GRID_LOOP(i, n) out[nc_offset(&lo, i)] = uop_##N(op, x[nc_offset(&lx, i)], p0, p1);        \
  }

#define OPERAND(p, l, s, bit, i) ((mode & (bit)) ? (s) : (p)[nc_offset(&(l), (i))])

#define BINARY_K(KN, N, T, OUT, FN)                                                               \
  __kernel void KN##_##N(int op, __global OUT *out, nc_layout lo, __global const T *a, nc_layout la, \
                         __global const T *b, nc_layout lb, T sa, T sb, int mode, long n) {       \
    NC_GRID_LOOP(i, n)                                                                            \
    out[nc_offset(&lo, i)] = NC_FAULT_VALUE(op, i, n, FN(op, OPERAND(a, la, sa, 1, i), OPERAND(b, lb, sb, 2, i))); \
  }

#define WHERE_K(N, T)                                                                             \
  __kernel void where_##N(__global T *out, nc_layout lo, __global const uchar *c, nc_layout lc,    \
                          __global const T *a, nc_layout la, __global const T *b, nc_layout lb, T sa, T sb, \
                          int mode, long n) {                                                     \
    NC_GRID_LOOP(i, n)                                                                            \
    out[nc_offset(&lo, i)] = c[nc_offset(&lc, i)] ? OPERAND(a, la, sa, 1, i) : OPERAND(b, lb, sb, 2, i); \
  }

/* ---- fast kernels: contiguous operands from element offsets. The host launches G >= n / 4
 * items (NC_FAST_PER_ITEM). When every offset is a multiple of 4 (buffers are aligned, so the
 * operands are 16-byte aligned for 4-byte types), item q takes the 4-vector of elements
 * 4q .. 4q + 3 (one vector load per operand and one store; then 4(q + G) .. while any are left)
 * and items q < n % 4 the scalar tail;
 * otherwise item i takes elements i, i + G, i + 2G and i + 3G, so every load of a round is
 * coalesced and each item has four in flight. ------------------------------------------ */
#define NC_FAST_PER_ITEM 4
#define EW_CAT2(a, b) a##b
#define EW_CAT(a, b) EW_CAT2(a, b)
#define EW_VEC_ALIGNED(offs) (((offs) & 3) == 0)
/* lane c of a 4-vector result r from lanes of va (and wb): v (and w) are the lane's values */
#define EW_LANE1(T, r, va, c, i, ID, expr) { const T v = (va).s##c; (r).s##c = (expr); }
#define EW_LANE2(T, r, va, wb, c, i, ID, expr) { const T v = (va).s##c, w = (wb).s##c; (r).s##c = NC_FAULT_VALUE(NC_OP_##ID, (i) + c, n, expr); }

#define FAST_UNARY_K(N, T, ID, name, expr)                                                        \
  __kernel void name##_##N(__global T *out, long oo, __global const T *x, long xo, T lo, T hi, long n) { \
    const long g = get_global_size(0);                                                            \
    if (EW_VEC_ALIGNED(oo | xo)) {                                                                \
      const long nv = n >> 2;                                                                     \
      for (long q = get_global_id(0); q < nv; q += g) {                                           \
        const EW_CAT(T, 4) xa = *(__global const EW_CAT(T, 4) *)(x + xo + 4 * q);                 \
        EW_CAT(T, 4) r;                                                                           \
        EW_LANE1(T, r, xa, 0, 4 * q, ID, expr) EW_LANE1(T, r, xa, 1, 4 * q, ID, expr)                   \
        EW_LANE1(T, r, xa, 2, 4 * q, ID, expr) EW_LANE1(T, r, xa, 3, 4 * q, ID, expr)                   \
        *(__global EW_CAT(T, 4) *)(out + oo + 4 * q) = r;                                         \
      }                                                                                           \
      for (long q = get_global_id(0); q < (n & 3); q += g) {                                      \
        const T v = x[xo + 4 * nv + q];                                                           \
        out[oo + 4 * nv + q] = expr;                                                              \
      }                                                                                           \
    } else {                                                                                      \
      for (int k = 0; k < NC_FAST_PER_ITEM; k++) {                                                \
        const long i = get_global_id(0) + k * g;                                                  \
        if (i < n) {                                                                              \
          const T v = x[xo + i];                                                                  \
          out[oo + i] = expr;                                                                     \
        }                                                                                         \
      }                                                                                           \
    }                                                                                             \
    NC_FAULT_OOB(NC_OP_##ID, out, oo, n)                                                          \
  }

#define FAST_BINARY_K(N, T, ID, name, expr)                                                       \
  __kernel void name##_##N(__global T *out, long oo, __global const T *a, long ao, __global const T *b, long bo, \
                           T sa, T sb, int mode, long n) {                                        \
    const long g = get_global_size(0);                                                            \
    if (EW_VEC_ALIGNED(oo | ao | bo)) {                                                           \
      const long nv = n >> 2;                                                                     \
      for (long q = get_global_id(0); q < nv; q += g) {                                           \
        const EW_CAT(T, 4) va = (mode & 1) ? (EW_CAT(T, 4))(sa) : *(__global const EW_CAT(T, 4) *)(a + ao + 4 * q); \
        const EW_CAT(T, 4) wb = (mode & 2) ? (EW_CAT(T, 4))(sb) : *(__global const EW_CAT(T, 4) *)(b + bo + 4 * q); \
        EW_CAT(T, 4) r;                                                                           \
        EW_LANE2(T, r, va, wb, 0, 4 * q, ID, expr) EW_LANE2(T, r, va, wb, 1, 4 * q, ID, expr)           \
        EW_LANE2(T, r, va, wb, 2, 4 * q, ID, expr) EW_LANE2(T, r, va, wb, 3, 4 * q, ID, expr)           \
        *(__global EW_CAT(T, 4) *)(out + oo + 4 * q) = r;                                         \
      }                                                                                           \
      for (long q = get_global_id(0); q < (n & 3); q += g) {                                      \
        const long i = 4 * nv + q;                                                                \
        const T v = (mode & 1) ? sa : a[ao + i], w = (mode & 2) ? sb : b[bo + i];                 \
        out[oo + i] = NC_FAULT_VALUE(NC_OP_##ID, i, n, expr);                                     \
      }                                                                                           \
    } else {                                                                                      \
      for (int k = 0; k < NC_FAST_PER_ITEM; k++) {                                                \
        const long i = get_global_id(0) + k * g;                                                  \
        if (i < n) {                                                                              \
          const T v = (mode & 1) ? sa : a[ao + i], w = (mode & 2) ? sb : b[bo + i];               \
          out[oo + i] = NC_FAULT_VALUE(NC_OP_##ID, i, n, expr);                                   \
        }                                                                                         \
      }                                                                                           \
    }                                                                                             \
  }

#define FLOAT_FAMILY(N, T)                                                                        \
  UNARY_FN(N, T, FLOAT_UNARY(CASE, N, T))                                                         \
  BINARY_FN(N, T, FLOAT_BINARY(CASE, N, T))                                                       \
  COMPARE_FN(N, T, COMPARE(CASE, N, T, isnan(v), isinf(v)))                                       \
  UNARY_K(N, T)                                                                                   \
  BINARY_K(binary, N, T, T, bop_##N)                                                              \
  BINARY_K(compare, N, T, uchar, cop_##N)                                                         \
  WHERE_K(N, T)                                                                                   \
  FLOAT_UNARY(FAST_UNARY_K, N, T)                                                                 \
  FLOAT_BINARY(FAST_BINARY_K, N, T)

#define INT_FAMILY(N, T, U, ISNEG)                                                                \
  UNARY_FN(N, T, INT_UNARY(CASE, N, T, U, ISNEG))                                                 \
  BINARY_FN(N, T, INT_BINARY(CASE, N, T, U))                                                      \
  COMPARE_FN(N, T, COMPARE(CASE, N, T, 0, 0))                                                     \
  UNARY_K(N, T)                                                                                   \
  BINARY_K(binary, N, T, T, bop_##N)                                                              \
  BINARY_K(compare, N, T, uchar, cop_##N)                                                         \
  WHERE_K(N, T)                                                                                   \
  INT_UNARY(FAST_UNARY_K, N, T, U, ISNEG)                                                         \
  INT_BINARY(FAST_BINARY_K, N, T, U)

FLOAT_FAMILY(float32, float)
#ifdef NC_FP64
FLOAT_FAMILY(float64, double)
#endif
INT_FAMILY(int32, int, uint, SIGNED_NEG)
INT_FAMILY(int64, long, ulong, SIGNED_NEG)
INT_FAMILY(uint8, uchar, uchar, UNSIGNED_NEG)
BINARY_FN(bool, uchar, BOOL_BINARY(CASE, bool, uchar))
BINARY_K(binary, bool, uchar, uchar, bop_bool)
WHERE_K(bool, uchar)
BOOL_BINARY(FAST_BINARY_K, bool, uchar)

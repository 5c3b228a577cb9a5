/* Elementwise families: unary_<T>, binary_<T>, compare_<T> (bool out; also isnan/isinf) and
 * where_<T>. One kernel per dtype with the op code as an argument (NC_OP_* comes from the op
 * table), so the program stays small; expressions match runtime/backend/cpu/elementwise.c.
 * mode bit 0 / bit 1: operand a / b is the scalar sa / sb instead of a tensor. Layouts arrive
 * merged by the host; all-contiguous operands take the direct-index path. Integer arithmetic
 * wraps (computed unsigned). */

#define NC_ALL_CONTIG3(x, y, z) ((x).contiguous && (y).contiguous && (z).contiguous)

/* Out-of-bounds, value and nan faults for the parity harness's self-test (NETCL_FAULT). */
#ifdef NC_FAULT
#define NC_FAULT_VALUE(op, i, n, r) (((op) == NC_OP_ADD && (i) == (n) - 1) ? (r) + 1 : (r))
#else
#define NC_FAULT_VALUE(op, i, n, r) (r)
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

/* ---- per-element functions -------------------------------------------------------------------- */
#define UNARY_FLOAT_FN(N, T)                                                                    \
  inline T uop_##N(int op, T v, T lo, T hi) {                                                   \
    switch (op) {                                                                               \
      case NC_OP_ABS: return fabs(v);                                                           \
      case NC_OP_NEG: return -v;                                                                \
      case NC_OP_EXP: return exp(v);                                                            \
      case NC_OP_LOG: return log(v);                                                            \
      case NC_OP_LOG1P: return log1p(v);                                                        \
      case NC_OP_SQRT: return sqrt(v);                                                          \
      case NC_OP_RSQRT: return (T)1 / sqrt(v);                                                  \
      case NC_OP_SIN: return sin(v);                                                            \
      case NC_OP_COS: return cos(v);                                                            \
      case NC_OP_TANH: return tanh(v);                                                          \
      case NC_OP_SIGMOID: return (T)1 / ((T)1 + exp(-v));                                       \
      case NC_OP_RELU: return FAULT_RELU(v < 0 ? (T)0 : v);                                     \
      case NC_OP_GELU: return (T)0.5 * v * ((T)1 + erf(v * (T)0.70710678118654752440));         \
      case NC_OP_GELU_TANH: /* 0.5 (1 + tanh u) = 1 / (1 + exp(-2u)): no reliance on tanh saturating */ \
        return v / ((T)1 + exp((T)-1.5957691216057307118 * (v + (T)0.044715 * v * v * v)));       \
      case NC_OP_SILU: return v / ((T)1 + exp(-v));                                             \
      case NC_OP_FLOOR: return floor(v);                                                        \
      case NC_OP_CEIL: return ceil(v);                                                          \
      case NC_OP_ROUND: return rint(v);                                                         \
      case NC_OP_SIGN: return v > 0 ? (T)1 : v < 0 ? (T)-1 : (T)0;                               \
      case NC_OP_CLAMP: return (v < lo ? lo : v) > hi ? hi : (v < lo ? lo : v);                 \
    }                                                                                           \
    return v;                                                                                   \
  }

#ifdef NC_FAULT
#define FAULT_RELU(r) (isnan(v) ? 0 : (r))
#else
#define FAULT_RELU(r) (r)
#endif

#define UNARY_INT_FN(N, T, U)                                                                   \
  inline T uop_##N(int op, T v, T lo, T hi) {                                                   \
    switch (op) {                                                                               \
      case NC_OP_ABS: return v < 0 ? (T)((U)0 - (U)v) : v;                                      \
      case NC_OP_NEG: return (T)((U)0 - (U)v);                                                  \
      case NC_OP_RELU: return v < 0 ? (T)0 : v;                                                 \
      case NC_OP_SIGN: return (T)((v > 0) - (v < 0));                                           \
      case NC_OP_CLAMP: return (v < lo ? lo : v) > hi ? hi : (v < lo ? lo : v);                 \
    }                                                                                           \
    return v; /* floor, ceil, round */                                                          \
  }

#define BINARY_FLOAT_FN(N, T)                                                                   \
  inline T bop_##N(int op, T v, T w) {                                                          \
    switch (op) {                                                                               \
      case NC_OP_ADD: return v + w;                                                             \
      case NC_OP_SUB: return v - w;                                                             \
      case NC_OP_MUL: return v * w;                                                             \
      case NC_OP_DIV: return v / w;                                                             \
      case NC_OP_POW: return pow(v, w);                                                         \
      case NC_OP_MAXIMUM: return (v > w || isnan(v)) ? v : w;                                   \
      case NC_OP_MINIMUM: return (v < w || isnan(v)) ? v : w;                                   \
    }                                                                                           \
    return v;                                                                                   \
  }

#define BINARY_INT_FN(N, T, U)                                                                  \
  inline T bop_##N(int op, T v, T w) {                                                          \
    switch (op) {                                                                               \
      case NC_OP_ADD: return (T)((U)v + (U)w);                                                  \
      case NC_OP_SUB: return (T)((U)v - (U)w);                                                  \
      case NC_OP_MUL: return (T)((U)v * (U)w);                                                  \
      case NC_OP_POW: return (T)nc_ipow((long)v, (long)w);                                      \
      case NC_OP_MAXIMUM: return v > w ? v : w;                                                 \
      case NC_OP_MINIMUM: return v < w ? v : w;                                                 \
    }                                                                                           \
    return v;                                                                                   \
  }

/* bool: add and maximum are "or", mul and minimum are "and". */
inline uchar bop_bool(int op, uchar v, uchar w) {
  return (op == NC_OP_ADD || op == NC_OP_MAXIMUM) ? (uchar)(v | w) : (uchar)(v & w);
}

#define COMPARE_FN(N, T, ISNAN, ISINF)                                                          \
  inline uchar cop_##N(int op, T v, T w) {                                                      \
    switch (op) {                                                                               \
      case NC_OP_EQ: return v == w;                                                             \
      case NC_OP_NE: return v != w;                                                             \
      case NC_OP_LT: return v < w;                                                              \
      case NC_OP_LE: return v <= w;                                                             \
      case NC_OP_GT: return v > w;                                                              \
      case NC_OP_GE: return v >= w;                                                             \
      case NC_OP_ISNAN: return ISNAN;                                                           \
      case NC_OP_ISINF: return ISINF;                                                           \
    }                                                                                           \
    return 0;                                                                                   \
  }

/* ---- kernels ------------------------------------------------------------------------------------ */
#ifdef NC_FAULT
/* The self-test's out-of-bounds fault: neg writes one element past a contiguous output. */
#define NC_FAULT_OOB(op, out, lo, n)                                                            \
  if ((op) == NC_OP_NEG && lo.contiguous && get_global_id(0) == 0) out[lo.offset + (n)] = 0;
#else
#define NC_FAULT_OOB(op, out, lo, n)
#endif

#define UNARY_K(N, T)                                                                           \
  __kernel void unary_##N(int op, __global T *out, nc_layout lo, __global const T *x, nc_layout lx, T p0, T p1, \
                          long n) {                                                             \
    if (lo.contiguous && lx.contiguous) {                                                       \
      NC_GRID_LOOP(i, n) out[lo.offset + i] = uop_##N(op, x[lx.offset + i], p0, p1);            \
    } else {                                                                                    \
      NC_GRID_LOOP(i, n) out[nc_offset(&lo, i)] = uop_##N(op, x[nc_offset(&lx, i)], p0, p1);    \
    }                                                                                           \
    NC_FAULT_OOB(op, out, lo, n)                                                                \
  }

#define OPERAND(p, l, s, bit, i) ((mode & (bit)) ? (s) : (p)[(l).contiguous ? (l).offset + (i) : nc_offset(&(l), (i))])

/* Two-operand kernels: OUT is the output element type, FN the element function. */
#define BINARY_K(KN, N, T, OUT, FN)                                                             \
  __kernel void KN##_##N(int op, __global OUT *out, nc_layout lo, __global const T *a, nc_layout la, \
                         __global const T *b, nc_layout lb, T sa, T sb, int mode, long n) {     \
    if (NC_ALL_CONTIG3(lo, la, lb)) {                                                           \
      if (mode == 0) {                                                                          \
        NC_GRID_LOOP(i, n) out[lo.offset + i] = NC_FAULT_VALUE(op, i, n, FN(op, a[la.offset + i], b[lb.offset + i])); \
      } else {                                                                                  \
        NC_GRID_LOOP(i, n)                                                                      \
        out[lo.offset + i] = FN(op, (mode & 1) ? sa : a[la.offset + i], (mode & 2) ? sb : b[lb.offset + i]); \
      }                                                                                         \
    } else {                                                                                    \
      NC_GRID_LOOP(i, n)                                                                        \
      out[nc_offset(&lo, i)] = NC_FAULT_VALUE(op, i, n, FN(op, OPERAND(a, la, sa, 1, i), OPERAND(b, lb, sb, 2, i))); \
    }                                                                                           \
  }

#define WHERE_K(N, T)                                                                           \
  __kernel void where_##N(__global T *out, nc_layout lo, __global const uchar *c, nc_layout lc,  \
                          __global const T *a, nc_layout la, __global const T *b, nc_layout lb, T sa, T sb, \
                          int mode, long n) {                                                   \
    NC_GRID_LOOP(i, n) {                                                                        \
      uchar k = c[lc.contiguous ? lc.offset + i : nc_offset(&lc, i)];                           \
      out[lo.contiguous ? lo.offset + i : nc_offset(&lo, i)] = k ? OPERAND(a, la, sa, 1, i) : OPERAND(b, lb, sb, 2, i); \
    }                                                                                           \
  }

#define FLOAT_FAMILY(N, T)                                                                      \
  UNARY_FLOAT_FN(N, T)                                                                          \
  BINARY_FLOAT_FN(N, T)                                                                         \
  COMPARE_FN(N, T, isnan(v), isinf(v))                                                          \
  UNARY_K(N, T)                                                                                 \
  BINARY_K(binary, N, T, T, bop_##N)                                                            \
  BINARY_K(compare, N, T, uchar, cop_##N)                                                       \
  WHERE_K(N, T)

#define INT_FAMILY(N, T, U)                                                                     \
  UNARY_INT_FN(N, T, U)                                                                         \
  BINARY_INT_FN(N, T, U)                                                                        \
  COMPARE_FN(N, T, 0, 0)                                                                        \
  UNARY_K(N, T)                                                                                 \
  BINARY_K(binary, N, T, T, bop_##N)                                                            \
  BINARY_K(compare, N, T, uchar, cop_##N)                                                       \
  WHERE_K(N, T)

FLOAT_FAMILY(float32, float)
#ifdef NC_FP64
FLOAT_FAMILY(float64, double)
#endif
INT_FAMILY(int32, int, uint)
INT_FAMILY(int64, long, ulong)
INT_FAMILY(uint8, uchar, uchar)
BINARY_K(binary, bool, uchar, uchar, bop_bool)
WHERE_K(bool, uchar)

/* CPU reductions: the reference for every device. Floats accumulate in double; int64 wraps.
 * Each row is cut into fixed blocks of NC_CPU_BLOCK elements whose partial states merge in
 * order, so results depend on the shape only, never on the thread count. */
#include <math.h>
#include <stdlib.h>
#include "cpu_backend.h"
#include "strided.h"

static inline void *base_of(const nc_tensor *t) { return nc_storage_host_ptr(t->storage); }

/* a: sum, product, extreme, mean (var), max (logsumexp), flag; b: M2 (var), scaled sum
 * (logsumexp); n: count (var) or position (argmax/argmin). */
typedef struct {
  double a, b;
  int64_t n;
} fstate;

typedef struct {
  int64_t a, n;
} istate;

/* ---- float states ------------------------------------------------------------------------------ */
static fstate f_init(nc_op op, double p) {
  switch (op) {
    case NC_OP_PROD:
    case NC_OP_ALL:
      return (fstate){1, 0, 0};
    case NC_OP_MAX:
    case NC_OP_LOGSUMEXP:
      return (fstate){-INFINITY, 0, 0};
    case NC_OP_MIN:
      return (fstate){INFINITY, 0, 0};
    case NC_OP_ARGMAX:
      return (fstate){-INFINITY, 0, INT64_MAX};
    case NC_OP_ARGMIN:
      return (fstate){INFINITY, 0, INT64_MAX};
    case NC_OP_NORM:
      return (fstate){p == -INFINITY ? INFINITY : 0, 0, 0};
    default:
      return (fstate){0, 0, 0};
  }
}

/* Whether (x, i) beats (a, n): the larger (argmax) or smaller value, nan beating numbers, the
 * smaller position among equals. */
static inline bool arg_better(bool is_max, double x, int64_t i, double a, int64_t n) {
  if (isnan(a)) return isnan(x) && i < n;
  if (isnan(x)) return true;
  if (x == a) return i < n;
  return is_max ? x > a : x < a;
}

static inline void lse_add(fstate *s, double m2, double s2) {
  if (isnan(s->a) || isnan(m2)) {
    s->a = NAN;
    return;
  }
  double m = s->a > m2 ? s->a : m2;
  if (m == -INFINITY) return;
  if (isinf(m)) {
    s->a = m;
    s->b = 1;
    return;
  }
  s->b = (s->a == -INFINITY ? 0 : s->b * exp(s->a - m)) + (m2 == -INFINITY ? 0 : s2 * exp(m2 - m));
  s->a = m;
}

static fstate f_merge(nc_op op, fstate s, fstate t, double p) {
  switch (op) {
    case NC_OP_SUM:
    case NC_OP_MEAN:
    case NC_OP_ANY:
      s.a = op == NC_OP_ANY ? (s.a != 0 || t.a != 0) : s.a + t.a;
      break;
    case NC_OP_ALL:
      s.a = s.a != 0 && t.a != 0;
      break;
    case NC_OP_PROD:
      s.a *= t.a;
      break;
    case NC_OP_MAX:
      s.a = (t.a > s.a || isnan(t.a)) ? t.a : s.a;
      break;
    case NC_OP_MIN:
      s.a = (t.a < s.a || isnan(t.a)) ? t.a : s.a;
      break;
    case NC_OP_ARGMAX:
    case NC_OP_ARGMIN:
      if (arg_better(op == NC_OP_ARGMAX, t.a, t.n, s.a, s.n)) s = t;
      break;
    case NC_OP_VAR:
    case NC_OP_STD: {
      if (t.n == 0) break;
      if (s.n == 0) return t;
      int64_t n = s.n + t.n;
      double d = t.a - s.a;
      s.a += d * (double)t.n / (double)n;
      s.b += t.b + d * d * (double)s.n * (double)t.n / (double)n;
      s.n = n;
      break;
    }
    case NC_OP_NORM:
      if (p == INFINITY)
        s.a = (t.a > s.a || isnan(t.a)) ? t.a : s.a;
      else if (p == -INFINITY)
        s.a = (t.a < s.a || isnan(t.a)) ? t.a : s.a;
      else
        s.a += t.a;
      break;
    case NC_OP_LOGSUMEXP:
      lse_add(&s, t.a, t.b);
      break;
    default:
      break;
  }
  return s;
}

/* Sum of m elements of stride st in double. Contiguous runs keep SUM_LANES independent partial
 * sums (a single accumulator would be bound by the add latency, not by memory), added up in a
 * fixed order so the result does not depend on the machine; the lanes are vector lanes (omp
 * simd), which changes no lane's order of additions. */
#define SUM_LANES 16
#define SUM_FN(T)                                                 \
  NC_CPU_CLONES static double sum_##T(const T *px, int64_t st, int64_t m) { \
    double acc = 0;                                               \
    int64_t j = 0;                                                \
    if (st == 1 && m >= SUM_LANES) {                              \
      double lane[SUM_LANES] = {0};                               \
      for (; j + SUM_LANES <= m; j += SUM_LANES)                  \
        _Pragma("omp simd") for (int k = 0; k < SUM_LANES; k++)   \
          lane[k] += px[j + k];                                   \
      for (int k = 0; k < SUM_LANES; k++) acc += lane[k];         \
    }                                                             \
    for (; j < m; j++) acc += px[j * st];                         \
    return acc;                                                   \
  }
SUM_FN(float)
SUM_FN(double)

/* Accumulates m elements of stride st from px (the first at row position r0) into s. */
#define F_ACCUMULATE(T)                                                                                  \
  static void f_run_##T(nc_op op, fstate *s, const T *px, int64_t st, int64_t m, int64_t r0, double p) { \
    switch (op) {                                                                                        \
      case NC_OP_SUM:                                                                                    \
      case NC_OP_MEAN:                                                                                   \
        s->a += sum_##T(px, st, m);                                                                      \
        break;                                                                                           \
      case NC_OP_PROD:                                                                                   \
        for (int64_t j = 0; j < m; j++) s->a *= px[j * st];                                              \
        break;                                                                                           \
      case NC_OP_MAX:                                                                                    \
        for (int64_t j = 0; j < m; j++) {                                                                \
          double x = px[j * st];                                                                         \
          s->a = (x > s->a || isnan(x)) ? x : s->a;                                                      \
        }                                                                                                \
        break;                                                                                           \
      case NC_OP_MIN:                                                                                    \
        for (int64_t j = 0; j < m; j++) {                                                                \
          double x = px[j * st];                                                                         \
          s->a = (x < s->a || isnan(x)) ? x : s->a;                                                      \
        }                                                                                                \
        break;                                                                                           \
      case NC_OP_ARGMAX:                                                                                 \
      case NC_OP_ARGMIN:                                                                                 \
        for (int64_t j = 0; j < m; j++) {                                                                \
          double x = px[j * st];                                                                         \
          if (arg_better(op == NC_OP_ARGMAX, x, r0 + j, s->a, s->n)) {                                   \
            s->a = x;                                                                                    \
            s->n = r0 + j;                                                                               \
          }                                                                                              \
        }                                                                                                \
        break;                                                                                           \
      case NC_OP_VAR:                                                                                    \
      case NC_OP_STD:                                                                                    \
        for (int64_t j = 0; j < m; j++) {                                                                \
          double x = px[j * st], d = x - s->a;                                                           \
          s->n++;                                                                                        \
          s->a += d / (double)s->n;                                                                      \
          s->b += d * (x - s->a);                                                                        \
        }                                                                                                \
        break;                                                                                           \
      case NC_OP_NORM:                                                                                   \
        for (int64_t j = 0; j < m; j++) {                                                                \
          double x = fabs((double)px[j * st]);                                                           \
          if (p == 2)                                                                                    \
            s->a += x * x;                                                                               \
          else if (p == 1)                                                                               \
            s->a += x;                                                                                   \
          else if (p == INFINITY)                                                                        \
            s->a = (x > s->a || isnan(x)) ? x : s->a;                                                    \
          else if (p == -INFINITY)                                                                       \
            s->a = (x < s->a || isnan(x)) ? x : s->a;                                                    \
          else if (p == 0)                                                                               \
            s->a += x != 0;                                                                              \
          else                                                                                           \
            s->a += pow(x, p);                                                                           \
        }                                                                                                \
        break;                                                                                           \
      case NC_OP_LOGSUMEXP:                                                                              \
        for (int64_t j = 0; j < m; j++) lse_add(s, px[j * st], 1);                                       \
        break;                                                                                           \
      case NC_OP_ANY:                                                                                    \
        for (int64_t j = 0; j < m; j++) s->a = s->a != 0 || px[j * st] != 0;                             \
        break;                                                                                           \
      case NC_OP_ALL:                                                                                    \
        for (int64_t j = 0; j < m; j++) s->a = s->a != 0 && px[j * st] != 0;                             \
        break;                                                                                           \
      default:                                                                                           \
        break;                                                                                           \
    }                                                                                                    \
  }
F_ACCUMULATE(float)
F_ACCUMULATE(double)

static double f_final(nc_op op, fstate s, int64_t count, const nc_reduce_args *a) {
  switch (op) {
    case NC_OP_MEAN:
      return s.a / (double)count;
    case NC_OP_VAR:
      return s.b / ((double)count - a->correction);
    case NC_OP_STD:
      return sqrt(s.b / ((double)count - a->correction));
    case NC_OP_NORM:
      if (a->p == 2) return sqrt(s.a);
      if (a->p == 1 || a->p == 0 || isinf(a->p)) return s.a;
      return pow(s.a, 1.0 / a->p);
    case NC_OP_LOGSUMEXP:
      if (isnan(s.a) || isinf(s.a)) return s.a;
      return s.a + log(s.b);
    default:
      return s.a;
  }
}

/* ---- int64 states (sum prod max min argmax argmin any all) ---------------------------------------- */
static istate i_init(nc_op op) {
  switch (op) {
    case NC_OP_PROD:
    case NC_OP_ALL:
      return (istate){1, 0};
    case NC_OP_MAX:
      return (istate){INT64_MIN, 0};
    case NC_OP_MIN:
      return (istate){INT64_MAX, 0};
    case NC_OP_ARGMAX:
      return (istate){INT64_MIN, INT64_MAX};
    case NC_OP_ARGMIN:
      return (istate){INT64_MAX, INT64_MAX};
    default:
      return (istate){0, 0};
  }
}

static inline bool iarg_better(bool is_max, int64_t x, int64_t i, int64_t a, int64_t n) {
  if (x == a) return i < n;
  return is_max ? x > a : x < a;
}

static istate i_merge(nc_op op, istate s, istate t) {
  switch (op) {
    case NC_OP_SUM:
      s.a = (int64_t)((uint64_t)s.a + (uint64_t)t.a);
      break;
    case NC_OP_PROD:
      s.a = (int64_t)((uint64_t)s.a * (uint64_t)t.a);
      break;
    case NC_OP_MAX:
      s.a = t.a > s.a ? t.a : s.a;
      break;
    case NC_OP_MIN:
      s.a = t.a < s.a ? t.a : s.a;
      break;
    case NC_OP_ARGMAX:
    case NC_OP_ARGMIN:
      if (iarg_better(op == NC_OP_ARGMAX, t.a, t.n, s.a, s.n)) s = t;
      break;
    case NC_OP_ANY:
      s.a = s.a || t.a;
      break;
    case NC_OP_ALL:
      s.a = s.a && t.a;
      break;
    default:
      break;
  }
  return s;
}

static void i_run(nc_op op, istate *s, const int64_t *px, int64_t st, int64_t m, int64_t r0) {
  switch (op) {
    case NC_OP_SUM: {
      uint64_t acc = 0;
      for (int64_t j = 0; j < m; j++) acc += (uint64_t)px[j * st];
      s->a = (int64_t)((uint64_t)s->a + acc);
      break;
    }
    case NC_OP_ARGMAX:
    case NC_OP_ARGMIN:
      for (int64_t j = 0; j < m; j++)
        if (iarg_better(op == NC_OP_ARGMAX, px[j * st], r0 + j, s->a, s->n)) {
          s->a = px[j * st];
          s->n = r0 + j;
        }
      break;
    default:
      for (int64_t j = 0; j < m; j++)
        *s = i_merge(op, *s, (istate){op == NC_OP_ANY || op == NC_OP_ALL ? px[j * st] != 0 : px[j * st], 0});
  }
}

/* ---- driver ----------------------------------------------------------------------------------------- */
typedef struct {
  nc_op op;
  const nc_tensor *x;
  nc_cpu_rowlayout rl;
  int kdim; /* kept dims of x */
  int64_t inner, nblk;
  double p;
} plan;

static int64_t row_base(const plan *pl, int64_t row) {
  return nc_cpu_offset(pl->kdim, pl->x->shape, pl->x->strides, pl->x->offset, row);
}

#define RUN_FLOAT(off, st, m, r0) f_run_float(pl->op, &s, (const float *)X + (off), st, m, r0, pl->p)
#define RUN_DOUBLE(off, st, m, r0) f_run_double(pl->op, &s, (const double *)X + (off), st, m, r0, pl->p)

/* The state of row `row`, elements [start, start + len). */
static fstate f_block(const plan *pl, int64_t row, int64_t start, int64_t len) {
  fstate s = f_init(pl->op, pl->p);
  if (len == 0) return s;
  const int64_t base = row_base(pl, row);
  if (pl->x->dtype == NC_FLOAT32) {
    const float *X = (const float *)base_of(pl->x) + base;
    NC_CPU_FOR_RUNS(&pl->rl, start, len, RUN_FLOAT);
  } else {
    const double *X = (const double *)base_of(pl->x) + base;
    NC_CPU_FOR_RUNS(&pl->rl, start, len, RUN_DOUBLE);
  }
  return s;
}

#define RUN_I_BODY(off, s, m, r0) i_run(pl->op, S_, X_ + (off), (s), (m), (r0))
static istate i_block(const plan *pl, int64_t row, int64_t start, int64_t len) {
  istate st = i_init(pl->op);
  if (len == 0) return st;
  const int64_t *X_ = (const int64_t *)base_of(pl->x) + row_base(pl, row);
  istate *S_ = &st;
  NC_CPU_FOR_RUNS(&pl->rl, start, len, RUN_I_BODY);
  return st;
}

static void store(const nc_tensor *out, const nc_tensor *idx, int64_t row, double fv, int64_t iv,
                  int64_t pos) {
  int64_t o = nc_cpu_offset(out->ndim, out->shape, out->strides, out->offset, row);
  switch (out->dtype) {
    case NC_FLOAT32:
      ((float *)base_of(out))[o] = (float)fv;
      break;
    case NC_FLOAT64:
      ((double *)base_of(out))[o] = fv;
      break;
    default:
      ((int64_t *)base_of(out))[o] = iv;
      break;
  }
  if (idx)
    ((int64_t *)base_of(idx))[nc_cpu_offset(idx->ndim, idx->shape, idx->strides, idx->offset, row)] = pos;
}

nc_status nc_cpu_reduce(nc_op op, nc_tensor *out, nc_tensor *idx, const nc_tensor *x, int nred,
                        const nc_reduce_args *args) {
  if (idx && op == NC_OP_MAX) op = NC_OP_ARGMAX;
  if (idx && op == NC_OP_MIN) op = NC_OP_ARGMIN;
  plan pl = {.op = op, .x = x, .kdim = x->ndim - nred, .p = args->p};
  nc_cpu_rowlayout_init(&pl.rl, nred, x->shape + pl.kdim, x->strides + pl.kdim);
  pl.inner = 1;
  for (int d = pl.kdim; d < x->ndim; d++) pl.inner *= x->shape[d];
  pl.nblk = pl.inner > NC_CPU_BLOCK ? (pl.inner + NC_CPU_BLOCK - 1) / NC_CPU_BLOCK : 1;
  const int64_t outer = nc_tensor_numel(out), work = outer * pl.inner;
  const bool is_float = x->dtype != NC_INT64;
  const int64_t nstates = pl.nblk > 1 ? outer * pl.nblk : 0;
  fstate *fs = is_float && nstates ? malloc(sizeof *fs * (size_t)nstates) : NULL;
  istate *is = !is_float && nstates ? malloc(sizeof *is * (size_t)nstates) : NULL;
  if (nstates && !fs && !is)
    return nc_error(NC_ERR_OOM, "out of host memory for %lld partial sums", (long long)nstates);

  NC_CPU_PARALLEL_FOR(work > NC_CPU_PARALLEL_MIN, , u, nstates ? nstates : outer, {
    const int64_t row = nstates ? u / pl.nblk : u, blk = nstates ? u % pl.nblk : 0;
    const int64_t start = blk * NC_CPU_BLOCK,
                  len = nstates ? (pl.inner - start < NC_CPU_BLOCK ? pl.inner - start : NC_CPU_BLOCK)
                                : pl.inner;
    if (is_float) {
      fstate s = f_block(&pl, row, start, len);
      if (nstates)
        fs[u] = s;
      else
        store(out, idx, row, f_final(op, s, pl.inner, args), 0, s.n);
    } else {
      istate s = i_block(&pl, row, start, len);
      if (nstates)
        is[u] = s;
      else
        store(out, idx, row, 0, s.a, s.n);
    }
  });
  if (nstates) {
#pragma omp parallel for if (outer > 64)
    for (int64_t row = 0; row < outer; row++) {
      if (is_float) {
        fstate s = fs[row * pl.nblk];
        for (int64_t b = 1; b < pl.nblk; b++) s = f_merge(op, s, fs[row * pl.nblk + b], pl.p);
        store(out, idx, row, f_final(op, s, pl.inner, args), 0, s.n);
      } else {
        istate s = is[row * pl.nblk];
        for (int64_t b = 1; b < pl.nblk; b++) s = i_merge(op, s, is[row * pl.nblk + b]);
        store(out, idx, row, 0, s.a, s.n);
      }
    }
  }
  free(fs);
  free(is);
  return NC_OK;
}

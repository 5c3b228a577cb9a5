/* Activations defined by their op-table rows (elu, softplus, mish, leaky_relu), through the
 * generic launcher's convention: each tensor as (buffer, element offset), then the integers
 * (n elements, chunk), then the op's reals. x and y are contiguous; work-group g handles the
 * elements [g * chunk, min((g + 1) * chunk, n)), its work-items striding by the local size, so
 * consecutive work-items touch consecutive elements. No local memory, no barriers. The
 * expressions match runtime/backend/cpu/cpu_activation.c term for term. -DREAL=double for
 * float64. */
#ifndef REAL
#define REAL float
#endif

/* The loop over this work-group's chunk; v is x's element, the body stores y's. */
#define ACT_FOR_CHUNK(i)                                                         \
  const long start_ = (long)get_group_id(0) * chunk, end_ = min(start_ + chunk, n); \
  for (long i = start_ + (long)get_local_id(0); i < end_; i += (long)get_local_size(0))

inline REAL act_softplus(REAL v, REAL beta, REAL threshold) {
  const REAL bv = v * beta;
  return bv > threshold ? v : log1p(exp(bv)) / beta;
}

__kernel void elu_fwd(__global const REAL *x, const long xo, __global REAL *y, const long yo, const long n,
                      const long chunk, const REAL alpha) {
  ACT_FOR_CHUNK(i) {
    const REAL v = x[xo + i];
    y[yo + i] = v > (REAL)0 ? v : alpha * expm1(v);
  }
}

__kernel void softplus_fwd(__global const REAL *x, const long xo, __global REAL *y, const long yo, const long n,
                           const long chunk, const REAL beta, const REAL threshold) {
  ACT_FOR_CHUNK(i) { y[yo + i] = act_softplus(x[xo + i], beta, threshold); }
}

__kernel void mish_fwd(__global const REAL *x, const long xo, __global REAL *y, const long yo, const long n,
                       const long chunk) {
  ACT_FOR_CHUNK(i) {
    const REAL v = x[xo + i];
    y[yo + i] = v * tanh(act_softplus(v, (REAL)1, (REAL)20));
  }
}

__kernel void leaky_relu_fwd(__global const REAL *x, const long xo, __global REAL *y, const long yo, const long n,
                             const long chunk, const REAL negative_slope) {
  ACT_FOR_CHUNK(i) {
    const REAL v = x[xo + i];
    y[yo + i] = v > (REAL)0 ? v : negative_slope * v;
  }
}

/* Activations defined by their op-table rows (elu, softplus, mish, leaky_relu, and relu's
 * gradient relu_backward, last), through the generic launcher's convention: each tensor as
 * (buffer, element offset), then the integers (n elements, chunk), then the op's reals. The
 * tensors are contiguous; work-group g handles the elements [g * chunk, min((g + 1) * chunk, n)),
 * its work-items striding by the local size, so consecutive work-items touch consecutive
 * elements. No local memory, no barriers. The expressions match
 * runtime/backend/cpu/cpu_activation.c term for term. -DREAL=double for float64. */
#ifndef REAL
#define REAL float
#endif

/* relu_backward's y: REAL, or in the storage build ("half+activation" with -DNC_STORAGE=<dtype>,
 * after half.cl's conversions: cl_program.c) that dtype's bits, read into float32 (exactly). */
#define ACT_CAT_(a, b) a##b
#define ACT_CAT(a, b) ACT_CAT_(a, b)
#define ACT_R4 ACT_CAT(REAL, 4)
#ifdef NC_STORAGE
#define ACT_Y ushort
#define ACT_READ_Y(v) ACT_CAT(READ_, NC_STORAGE)(v)
#define ACT_LOAD4_Y(p) ACT_CAT(nc_load4_, NC_STORAGE)(p)
#else
#define ACT_Y REAL
#define ACT_READ_Y(v) (v)
#define ACT_LOAD4_Y(p) vload4(0, p)
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

/* dx = y <= 0 ? 0 : dy, torch's threshold_backward at 0 (a nan y passes dy, as relu passes nan
 * on). When the offsets are multiples of 4 (chunk is one too), each work-item takes 4-vectors
 * (y's 8 or 16 bytes, dy's and dx's 16 or 32) and the scalar rest of its chunk; otherwise single
 * elements. */
inline REAL relu_bwd_one(REAL g, REAL v) { return v <= (REAL)0 ? (REAL)0 : g; }

__kernel void relu_bwd(__global const REAL *dy, const long dyo, __global const ACT_Y *y, const long yo,
                       __global REAL *dx, const long dxo, const long n, const long chunk) {
  const long start = (long)get_group_id(0) * chunk, end = min(start + chunk, n);
  if (((dyo | yo | dxo | chunk) & 3) == 0) {
    const long step = 4 * (long)get_local_size(0);
    long i = start + 4 * (long)get_local_id(0);
    for (; i + 4 <= end; i += step) {
      const ACT_R4 v = ACT_LOAD4_Y(y + yo + i);
      const ACT_R4 g = vload4(0, dy + dyo + i);
      vstore4((ACT_R4)(relu_bwd_one(g.s0, v.s0), relu_bwd_one(g.s1, v.s1), relu_bwd_one(g.s2, v.s2),
                      relu_bwd_one(g.s3, v.s3)),
              0, dx + dxo + i);
    }
    for (; i < end; i++) dx[dxo + i] = relu_bwd_one(dy[dyo + i], ACT_READ_Y(y[yo + i]));
  } else {
    ACT_FOR_CHUNK(i) { dx[dxo + i] = relu_bwd_one(dy[dyo + i], ACT_READ_Y(y[yo + i])); }
  }
}

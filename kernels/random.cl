/* Random family beyond uniform/normal (kernels/core.cl): element i uses Philox counter
 * offset + i, as runtime/backend/cpu/random.c. */

__kernel void bernoulli_float32(__global float *out, long off, __global const float *p, nc_layout lp, ulong seed,
                                ulong offset, long n) {
  NC_GRID_LOOP(i, n) {
    uint4 w = nc_philox_element(seed, offset + (ulong)i);
    out[off + i] = nc_u24(w.x) < p[nc_offset(&lp, i)];
  }
}

#ifdef NC_FP64
__kernel void bernoulli_float64(__global double *out, long off, __global const double *p, nc_layout lp, ulong seed,
                                ulong offset, long n) {
  NC_GRID_LOOP(i, n) {
    uint4 w = nc_philox_element(seed, offset + (ulong)i);
    out[off + i] = nc_u53(w.x, w.y) < p[nc_offset(&lp, i)];
  }
}
#endif

__kernel void randint_int64(__global long *out, long off, long lo, ulong range, ulong seed, ulong offset, long n) {
  NC_GRID_LOOP(i, n) {
    uint4 w = nc_philox_element(seed, offset + (ulong)i);
    out[off + i] = (long)((ulong)lo + ((((ulong)w.y) << 32) | w.x) % range);
  }
}

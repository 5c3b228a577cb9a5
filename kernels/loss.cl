/* Cross entropy with the log-softmax fused: one work-group per position reduces max, sum of
 * exponentials and sum of logits over the classes; a one-group kernel reduces the per-position
 * losses for "mean"/"sum"; the backward writes softmax - smoothed one-hot, scaled.
 * Logits [N, C, S], targets [N, S] (int64). -DREAL=double for float64. */
#ifndef REAL
#define REAL float
#endif
#define NC_LOSS_WG 256

inline REAL wg_reduce(REAL v, __local REAL *scratch, int is_max) {
  const int lid = get_local_id(0), ls = get_local_size(0);
  scratch[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = ls / 2; h > 0; h >>= 1) {
    if (lid < h) scratch[lid] = is_max ? fmax(scratch[lid], scratch[lid + h]) : scratch[lid] + scratch[lid + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const REAL r = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

/* bad: first invalid target position + 1 (atomic min from INT_MAX). */
__kernel void ce_fwd(__global const REAL *x, __global const long *t, const long c, const long s, const long ignore,
                     const REAL eps, __global REAL *loss, __global REAL *lse, __global int *bad) {
  __local REAL scratch[NC_LOSS_WG];
  const long pos = get_group_id(0), i = pos / s, j = pos - i * s, base = i * c * s + j, tgt = t[pos];
  const int lid = get_local_id(0), ls = get_local_size(0);
  REAL m = -INFINITY;
  NC_GROUP_FOR(long, k, 0, lid, c, ls) m = fmax(m, x[base + k * s]);
  m = wg_reduce(m, scratch, 1);
  REAL se = 0, sx = 0;
  NC_GROUP_FOR(long, k, 0, lid, c, ls) {
    const REAL v = x[base + k * s];
    se += exp(v - m);
    sx += v;
  }
  se = wg_reduce(se, scratch, 0);
  sx = wg_reduce(sx, scratch, 0);
  if (lid != 0) return;
  const REAL l = m + log(se);
  lse[pos] = l;
  REAL r = 0;
  if (tgt != ignore) {
    if (tgt < 0 || tgt >= c) atomic_min(bad, (int)min(pos + 1, (long)INT_MAX));
    else r = l - (1 - eps) * x[base + tgt * s] - eps / (REAL)c * sx;
  }
  loss[pos] = r;
}

/* out[0] = sum of loss over valid positions, divided by their count when mean != 0. */
__kernel void ce_reduce(__global const REAL *loss, __global const long *t, const long npos, const long c,
                        const long ignore, const int mean, __global REAL *out) {
  __local REAL scratch[NC_LOSS_WG];
  const int lid = get_local_id(0), ls = get_local_size(0);
  REAL a = 0, n = 0;
  NC_GROUP_FOR(long, p, 0, lid, npos, ls) {
    a += loss[p];
    n += (t[p] != ignore && t[p] >= 0 && t[p] < c) ? 1 : 0;
  }
  a = wg_reduce(a, scratch, 0);
  n = wg_reduce(n, scratch, 0);
  if (lid == 0) out[0] = mean ? a / n : a;
}

/* count[0] = number of non-ignored targets (the mean's divisor). */
__kernel void ce_count(__global const long *t, const long npos, const long c, const long ignore, __global REAL *count) {
  __local REAL scratch[NC_LOSS_WG];
  const int lid = get_local_id(0), ls = get_local_size(0);
  REAL n = 0;
  NC_GROUP_FOR(long, p, 0, lid, npos, ls) n += (t[p] != ignore && t[p] >= 0 && t[p] < c) ? 1 : 0;
  n = wg_reduce(n, scratch, 0);
  if (lid == 0) count[0] = n;
}

/* reduction: 0 none (dloss per position), 1 mean (dloss[0] / count[0]), 2 sum (dloss[0]). */
__kernel void ce_bwd(__global const REAL *dloss, __global const REAL *x, __global const long *t,
                     __global const REAL *lse, __global const REAL *count, const long n, const long c, const long s,
                     const long ignore, const REAL eps, const int reduction, __global REAL *dx) {
  NC_GRID_LOOP(e, n * c * s) {
    const long i = e / (c * s), r = e - i * c * s, k = r / s, j = r - k * s, pos = i * s + j, tgt = t[pos];
    if (tgt == ignore || tgt < 0 || tgt >= c) {
      dx[e] = 0;
      continue;
    }
    const REAL g = reduction == 0 ? dloss[pos] : reduction == 1 ? dloss[0] / count[0] : dloss[0];
    const REAL p = exp(x[e] - lse[pos]);
    dx[e] = g * (p - eps / (REAL)c - (k == tgt ? 1 - eps : (REAL)0));
  }
}

/* Batch, layer and RMS norm, forward and fused backward. Statistics use one work-group per
 * channel (batch norm) or per row (layer/RMS norm): each work-item accumulates a strided
 * share, then a tree reduction in local memory; mean first, then squared deviations, as on
 * the CPU backend. Local size: a power of two <= NC_NORM_WG. -DREAL=double for float64.
 *
 * The batch norm kernels also have a build for the storage dtypes (bfloat16, float16: ushort
 * bits), "half+norm" with -DNC_STORAGE=<dtype> after half.cl's conversions (cl_program.c): x, y,
 * dy and dx are elements of that dtype (ELEM), read into float32 and rounded once when written;
 * everything else is float32's code, operation for operation, so the results are the float32
 * kernels' on the widened values, rounded once. There the parameters (weight, bias, running
 * statistics; dweight and dbias) have the input's dtype or float32 (pf32), and dy may be float32
 * (dyf32), which makes dx float32 too; the saved mean and invstd and the scratch buffers are
 * float32. In the REAL builds
 * both flags are ignored and every buffer is REAL. */
#ifndef REAL
#define REAL float
#endif
#ifdef NC_STORAGE
#define NC_READ_(N, v) READ_##N(v)
#define NC_READ(N, v) NC_READ_(N, v)
#define NC_WRITE_(N, v) WRITE_##N(v)
#define NC_WRITE(N, v) NC_WRITE_(N, v)
#define NC_LOAD4_(N, p) nc_load4_##N(p)
#define NC_LOAD4(N, p) NC_LOAD4_(N, p)
#define NC_STORE4_(N, p, v) nc_store4_##N(p, v)
#define NC_STORE4(N, p, v) NC_STORE4_(N, p, v)
#define ELEM ushort
/* Element i of p as float32; v stored as element i (rounded once); the same for the four
 * elements at 4 e (x's layout keeps them 8-byte aligned: s % 4 == 0, buffers from element 0). */
#define LD(p, i) NC_READ(NC_STORAGE, (p)[i])
#define ST(p, i, v) ((p)[i] = NC_WRITE(NC_STORAGE, (v)))
#define LD4(e, p) NC_LOAD4(NC_STORAGE, (p) + 4 * (size_t)(e))
#define ST4(v, e, p) NC_STORE4(NC_STORAGE, (p) + 4 * (size_t)(e), (v))
/* A parameter (ELEM pointer) that is float32 when f32, else of the input's dtype. */
#define PLD(p, i, f32) ((f32) ? ((__global const float *)(p))[i] : LD(p, i))
#define PST(p, i, v, f32)                                                                         \
  do {                                                                                            \
    if (f32)                                                                                      \
      ((__global float *)(p))[i] = (v);                                                           \
    else                                                                                          \
      ST(p, i, v);                                                                                \
  } while (0)
/* dy (ELEM pointer), float32 when f32; dx the same (a float32 dy gives a float32 dx). */
#define GLD(p, i, f32) PLD(p, i, f32)
#define GLD4(e, p, f32) ((f32) ? vload4(e, (__global const float *)(p)) : LD4(e, p))
#define GST(p, i, v, f32) PST(p, i, v, f32)
#define GST4(v, e, p, f32)                                                                        \
  do {                                                                                            \
    if (f32)                                                                                      \
      vstore4(v, e, (__global float *)(p));                                                       \
    else                                                                                          \
      ST4(v, e, p);                                                                               \
  } while (0)
#else
#define ELEM REAL
#define LD(p, i) ((p)[i])
#define ST(p, i, v) ((p)[i] = (v))
#define LD4(e, p) vload4(e, p)
#define ST4(v, e, p) vstore4(v, e, p)
#define PLD(p, i, f32) ((p)[i])
#define PST(p, i, v, f32) ((p)[i] = (v))
#define GLD(p, i, f32) ((p)[i])
#define GLD4(e, p, f32) vload4(e, p)
#define GST(p, i, v, f32) ((p)[i] = (v))
#define GST4(v, e, p, f32) vstore4(v, e, p)
#endif
#define NC_NORM_WG 256

/* Sum of v over the work-group (every work-item gets it). */
inline REAL wg_sum(REAL v, __local REAL *scratch) {
  const int lid = get_local_id(0), ls = get_local_size(0);
  scratch[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = ls / 2; h > 0; h >>= 1) {
    if (lid < h) scratch[lid] += scratch[lid + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const REAL r = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

/* x viewed as [n, c, s]; group = channel. */
__kernel void batch_norm_fwd(__global const ELEM *x, __global const ELEM *w, __global const ELEM *b, const int has_w,
                             const int has_b, __global ELEM *rm, __global ELEM *rv, const int has_running,
                             const int training, const REAL momentum, const REAL eps, __global ELEM *y,
                             __global REAL *sm, __global REAL *si, const long n, const long c, const long s,
                             const int pf32) {
  __local REAL scratch[NC_NORM_WG];
  const long ch = get_group_id(0), cnt = n * s;
  const int lid = get_local_id(0), ls = get_local_size(0);
  REAL mean, var;
  if (training) {
    REAL acc = 0;
    NC_GROUP_FOR(long, e, 0, lid, cnt, ls) acc += LD(x, ((e / s) * c + ch) * s + e % s);
    mean = wg_sum(acc, scratch) / (REAL)cnt;
    acc = 0;
    NC_GROUP_FOR(long, e, 0, lid, cnt, ls) {
      const REAL d = LD(x, ((e / s) * c + ch) * s + e % s) - mean;
      acc += d * d;
    }
    const REAL sq = wg_sum(acc, scratch);
    var = sq / (REAL)cnt;
    if (has_running) {
      /* Every work-item reads, then one writes the same values: the update stays correct even
       * if a compiler runs the guarded store for more than one work-item (PoCL 3.1 does). */
      const REAL nrm = (1 - momentum) * PLD(rm, ch, pf32) + momentum * mean;
      const REAL nrv = (1 - momentum) * PLD(rv, ch, pf32) + momentum * sq / (REAL)(cnt - 1);
      barrier(CLK_GLOBAL_MEM_FENCE);
      if (lid == 0) {
        PST(rm, ch, nrm, pf32);
        PST(rv, ch, nrv, pf32);
      }
    }
  } else {
    mean = PLD(rm, ch, pf32);
    var = PLD(rv, ch, pf32);
  }
  const REAL invstd = 1 / sqrt(var + eps), wv = has_w ? PLD(w, ch, pf32) : (REAL)1,
             bv = has_b ? PLD(b, ch, pf32) : (REAL)0;
  if (lid == 0) {
    sm[ch] = mean;
    si[ch] = invstd;
  }
  NC_GROUP_FOR(long, e, 0, lid, cnt, ls) {
    const long k = ((e / s) * c + ch) * s + e % s;
    ST(y, k, (LD(x, k) - mean) * invstd * wv + bv);
  }
}

__kernel void batch_norm_bwd(__global const ELEM *dy, __global const ELEM *x, __global const ELEM *w, const int has_w,
                             __global const REAL *mean, __global const REAL *invstd, const int training,
                             __global ELEM *dx, const int want_dx, __global ELEM *dw, const int want_dw,
                             __global ELEM *db, const int want_db, const long n, const long c, const long s,
                             const int pf32, const int dyf32) {
  __local REAL scratch[NC_NORM_WG];
  const long ch = get_group_id(0), cnt = n * s;
  const int lid = get_local_id(0), ls = get_local_size(0);
  const REAL m = mean[ch], is = invstd[ch], wv = has_w ? PLD(w, ch, pf32) : (REAL)1;
  REAL a1 = 0, a2 = 0;
  NC_GROUP_FOR(long, e, 0, lid, cnt, ls) {
    const long k = ((e / s) * c + ch) * s + e % s;
    a1 += GLD(dy, k, dyf32);
    a2 += GLD(dy, k, dyf32) * (LD(x, k) - m);
  }
  const REAL sdy = wg_sum(a1, scratch), sdyx = wg_sum(a2, scratch);
  if (lid == 0) {
    if (want_dw) PST(dw, ch, sdyx * is, pf32);
    if (want_db) PST(db, ch, sdy, pf32);
  }
  if (!want_dx) return;
  const REAL a = wv * is, mdy = training ? sdy / (REAL)cnt : (REAL)0,
             mdyx = training ? sdyx * is * is / (REAL)cnt : (REAL)0;
  NC_GROUP_FOR(long, e, 0, lid, cnt, ls) {
    const long k = ((e / s) * c + ch) * s + e % s;
    GST(dx, k, a * (GLD(dy, k, dyf32) - mdy - (LD(x, k) - m) * mdyx), dyf32);
  }
}

/* ---- batch norm over many work-groups per channel (x with fewer than 2^31 elements) --------------
 * Channel ch's cnt = n * s elements are the n runs of s at (i * c + ch) * s. Work-group g takes
 * channel g / chunks and elements [k * len, (k + 1) * len) of it (k = g % chunks), in (i, j)
 * order; item lid starts at element e0 + lid and steps by ls, carrying its address and j, so no
 * element needs a division. Indices are 32-bit. Partial results go to `part` per (channel,
 * chunk); a second kernel merges a channel's chunks in order (deterministic, no atomics), and a
 * third writes the output elementwise (four at a time when s is a multiple of 4).
 *
 * Statistics: each item sums d = x - K and d * d, with K the channel's first element (a shift
 * that keeps the sums of squares free of the cancellation of sum(x^2) - n mean^2 when the mean
 * is large against the spread), over its few elements (len / ls); then the items' (count, mean,
 * M2) merge pairwise with Chan et al.'s update, which is exact in exact arithmetic and stable. */
#define NC_CAT2(a, b) a##b
#define NC_CAT(a, b) NC_CAT2(a, b)
#define REAL4 NC_CAT(REAL, 4)

/* Item lid's elements of the group's chunk: BN_ITEMS(e, addr) body. Every item runs `rounds`
 * rounds (group-uniform) and skips the body past e1. */
#define BN_ITEMS(e, addr)                                                                         \
  const uint g_ = get_group_id(0), ch = g_ / chunks, e0_ = (g_ - ch * chunks) * len,             \
             e1_ = min(cnt, e0_ + len), cs_ = c * s, di_ = ls / s, dj_ = ls - di_ * s,           \
             rounds_ = (e1_ - e0_ + ls - 1) / ls;                                                 \
  uint e = e0_ + lid, j_ = e % s, addr = ((e / s) * c + ch) * s + j_;                             \
  for (uint r_ = 0; r_ < rounds_; r_++, e += ls, j_ += dj_, addr += di_ * cs_ + dj_,            \
            addr += j_ >= s ? cs_ - s : 0, j_ -= j_ >= s ? s : 0)                                 \
    if (e < e1_)

/* Merges (nb, mb, qb) into (na, ma, qa): count, mean, sum of squared deviations. */
#define BN_CHAN(na, ma, qa, nb, mb, qb)                                                           \
  if ((nb) > 0) {                                                                                 \
    const uint n_ = (na) + (nb);                                                                  \
    const REAL d_ = (mb) - (ma), f_ = (REAL)(nb) / (REAL)n_;                                      \
    (ma) += d_ * f_;                                                                              \
    (qa) += (qb) + d_ * d_ * (REAL)(na) * f_;                                                     \
    (na) = n_;                                                                                    \
  }

__kernel void bn_stats(__global const ELEM *x, const uint c, const uint s, const uint cnt, const uint chunks,
                       const uint len, __global REAL *part) {
  __local REAL lm[NC_NORM_WG], lq[NC_NORM_WG];
  __local uint ln[NC_NORM_WG];
  const uint lid = get_local_id(0), ls = get_local_size(0);
  REAL sd = 0, sq = 0, k0 = LD(x, (get_group_id(0) / chunks) * s);
  uint m = 0;
  BN_ITEMS(e, addr) {
    const REAL d = LD(x, addr) - k0;
    sd += d;
    sq += d * d;
    m++;
  }
  ln[lid] = m;
  lm[lid] = m ? k0 + sd / (REAL)m : (REAL)0;
  lq[lid] = m ? fmax(sq - sd * (sd / (REAL)m), (REAL)0) : (REAL)0;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint h = ls / 2; h > 0; h >>= 1) {
    if (lid < h) {
      uint na = ln[lid];
      REAL ma = lm[lid], qa = lq[lid];
      if (na == 0) {
        na = ln[lid + h], ma = lm[lid + h], qa = lq[lid + h];
      } else {
        BN_CHAN(na, ma, qa, ln[lid + h], lm[lid + h], lq[lid + h]);
      }
      ln[lid] = na, lm[lid] = ma, lq[lid] = qa;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) {
    const uint g = get_group_id(0);
    part[3 * g] = (REAL)ln[0];
    part[3 * g + 1] = lm[0];
    part[3 * g + 2] = lq[0];
  }
}

/* One item per channel: merges its chunks in order, updates the running statistics, saves mean
 * and invstd, and leaves (mean, invstd * weight, bias) in coef[3 * ch ...]. */
__kernel void bn_finish(__global const REAL *part, const uint chunks, const uint c, const int training,
                        __global const ELEM *w, __global const ELEM *b, const int has_w, const int has_b,
                        __global ELEM *rm, __global ELEM *rv, const int has_running, const REAL momentum,
                        const REAL eps, __global REAL *sm, __global REAL *si, __global REAL *coef, const int pf32) {
  for (uint ch = get_global_id(0); ch < c; ch += get_global_size(0)) {
    REAL mean, var;
    if (training) {
      uint na = 0;
      REAL ma = 0, qa = 0;
      for (uint k = 0; k < chunks; k++) {
        __global const REAL *q = part + 3 * (ch * chunks + k);
        const uint nb = (uint)q[0];
        if (na == 0) {
          na = nb, ma = q[1], qa = q[2];
        } else {
          BN_CHAN(na, ma, qa, nb, q[1], q[2]);
        }
      }
      mean = ma;
      var = qa / (REAL)na;
      if (has_running) {
        PST(rm, ch, (1 - momentum) * PLD(rm, ch, pf32) + momentum * mean, pf32);
        PST(rv, ch, (1 - momentum) * PLD(rv, ch, pf32) + momentum * qa / (REAL)(na - 1), pf32);
      }
    } else {
      mean = PLD(rm, ch, pf32);
      var = PLD(rv, ch, pf32);
    }
    const REAL invstd = 1 / sqrt(var + eps);
    sm[ch] = mean;
    si[ch] = invstd;
    coef[3 * ch] = mean;
    coef[3 * ch + 1] = invstd * (has_w ? PLD(w, ch, pf32) : (REAL)1);
    coef[3 * ch + 2] = has_b ? PLD(b, ch, pf32) : (REAL)0;
  }
}

/* y = (x - mean) * scale + bias, elementwise; vec: s % 4 == 0, four elements of one channel at a
 * time (total counts them in fours then). */
__kernel void bn_apply(__global const ELEM *x, __global ELEM *y, __global const REAL *coef, const uint c,
                       const uint s, const uint total, const int vec) {
  if (vec) {
    const uint s4 = s / 4;
    for (uint e = get_global_id(0); e < total; e += get_global_size(0)) {
      const uint ch = (e / s4) % c;
      const REAL m = coef[3 * ch], k = coef[3 * ch + 1], b = coef[3 * ch + 2];
      ST4((LD4(e, x) - m) * k + b, e, y);
    }
  } else {
    for (uint e = get_global_id(0); e < total; e += get_global_size(0)) {
      const uint ch = (e / s) % c;
      ST(y, e, (LD(x, e) - coef[3 * ch]) * coef[3 * ch + 1] + coef[3 * ch + 2]);
    }
  }
}

/* Backward sums per (channel, chunk): sum dy and sum dy * (x - mean). */
__kernel void bn_bwd_sums(__global const ELEM *dy, __global const ELEM *x, __global const REAL *mean,
                          const uint c, const uint s, const uint cnt, const uint chunks, const uint len,
                          __global REAL *part, const int dyf32) {
  __local REAL scratch[NC_NORM_WG];
  const uint lid = get_local_id(0), ls = get_local_size(0);
  const REAL m = mean[get_group_id(0) / chunks];
  REAL a1 = 0, a2 = 0;
  BN_ITEMS(e, addr) {
    const REAL g = GLD(dy, addr, dyf32);
    a1 += g;
    a2 += g * (LD(x, addr) - m);
  }
  a1 = wg_sum(a1, scratch);
  a2 = wg_sum(a2, scratch);
  if (lid == 0) {
    part[2 * get_group_id(0)] = a1;
    part[2 * get_group_id(0) + 1] = a2;
  }
}

/* One item per channel: dweight, dbias, and dx's coefficients (a, mean dy, mean, mean dy xhat
 * terms) in coef[4 * ch ...]. */
__kernel void bn_bwd_finish(__global const REAL *part, const uint chunks, const uint c, const uint cnt,
                            const int training, __global const ELEM *w, const int has_w,
                            __global const REAL *mean, __global const REAL *invstd, __global ELEM *dw,
                            const int want_dw, __global ELEM *db, const int want_db, __global REAL *coef,
                            const int pf32) {
  for (uint ch = get_global_id(0); ch < c; ch += get_global_size(0)) {
    REAL sdy = 0, sdyx = 0;
    for (uint k = 0; k < chunks; k++) {
      sdy += part[2 * (ch * chunks + k)];
      sdyx += part[2 * (ch * chunks + k) + 1];
    }
    const REAL is = invstd[ch];
    if (want_dw) PST(dw, ch, sdyx * is, pf32);
    if (want_db) PST(db, ch, sdy, pf32);
    coef[4 * ch] = (has_w ? PLD(w, ch, pf32) : (REAL)1) * is;
    coef[4 * ch + 1] = training ? sdy / (REAL)cnt : (REAL)0;
    coef[4 * ch + 2] = mean[ch];
    coef[4 * ch + 3] = training ? sdyx * is * is / (REAL)cnt : (REAL)0;
  }
}

/* dx = a * (dy - mdy - (x - mean) * mdyx), elementwise (vec as for bn_apply). */
__kernel void bn_bwd_apply(__global const ELEM *dy, __global const ELEM *x, __global ELEM *dx,
                           __global const REAL *coef, const uint c, const uint s, const int dyf32, const uint total,
                           const int vec) {
  if (vec) {
    const uint s4 = s / 4;
    for (uint e = get_global_id(0); e < total; e += get_global_size(0)) {
      const uint ch = (e / s4) % c;
      const REAL a = coef[4 * ch], mdy = coef[4 * ch + 1], m = coef[4 * ch + 2], mdyx = coef[4 * ch + 3];
      GST4(a * (GLD4(e, dy, dyf32) - mdy - (LD4(e, x) - m) * mdyx), e, dx, dyf32);
    }
  } else {
    for (uint e = get_global_id(0); e < total; e += get_global_size(0)) {
      const uint ch = (e / s) % c;
      GST(dx, e,
          coef[4 * ch] * (GLD(dy, e, dyf32) - coef[4 * ch + 1] - (LD(x, e) - coef[4 * ch + 2]) * coef[4 * ch + 3]),
          dyf32);
    }
  }
}

#ifndef NC_STORAGE /* the rest takes the storage dtypes through the op layer's float32 path */
/* Rows of length d; group = row. mean is written only for layer norm (rms = 0). */
__kernel void row_norm_fwd(const int rms, __global const REAL *x, __global const REAL *w, const int has_w,
                           __global const REAL *b, const int has_b, const REAL eps, __global REAL *y,
                           __global REAL *mean, __global REAL *rstd, const long d) {
  __local REAL scratch[NC_NORM_WG];
  const long row = get_group_id(0);
  const int lid = get_local_id(0), ls = get_local_size(0);
  __global const REAL *xr = x + row * d;
  REAL mu = 0, acc = 0;
  if (!rms) {
    NC_GROUP_FOR(long, j, 0, lid, d, ls) acc += xr[j];
    mu = wg_sum(acc, scratch) / (REAL)d;
    acc = 0;
  }
  NC_GROUP_FOR(long, j, 0, lid, d, ls) {
    const REAL v = xr[j] - mu;
    acc += v * v;
  }
  const REAL rs = 1 / sqrt(wg_sum(acc, scratch) / (REAL)d + eps);
  if (lid == 0) {
    if (!rms) mean[row] = mu;
    rstd[row] = rs;
  }
  NC_GROUP_FOR(long, j, 0, lid, d, ls) {
    REAL v = (xr[j] - mu) * rs;
    if (has_w) v *= w[j];
    if (has_b && !rms) v += b[j];
    y[row * d + j] = v;
  }
}

__kernel void row_norm_bwd_dx(const int rms, __global const REAL *dy, __global const REAL *x, __global const REAL *w,
                              const int has_w, __global const REAL *mean, __global const REAL *rstd,
                              __global REAL *dx, const long d) {
  __local REAL scratch[NC_NORM_WG];
  const long row = get_group_id(0);
  const int lid = get_local_id(0), ls = get_local_size(0);
  const REAL mu = rms ? (REAL)0 : mean[row], rs = rstd[row];
  REAL a1 = 0, a2 = 0;
  NC_GROUP_FOR(long, j, 0, lid, d, ls) {
    const REAL g = dy[row * d + j] * (has_w ? w[j] : (REAL)1), xh = (x[row * d + j] - mu) * rs;
    a1 += g;
    a2 += g * xh;
  }
  const REAL sg = wg_sum(a1, scratch), sgx = wg_sum(a2, scratch);
  const REAL mg = rms ? (REAL)0 : sg / (REAL)d, mgx = sgx / (REAL)d;
  NC_GROUP_FOR(long, j, 0, lid, d, ls) {
    const REAL g = dy[row * d + j] * (has_w ? w[j] : (REAL)1), xh = (x[row * d + j] - mu) * rs;
    dx[row * d + j] = rs * (g - mg - xh * mgx);
  }
}

/* Column sums over r rows in two stages, in a fixed order: work-item (j, c) of row_norm_dw_part
 * sums rows [c len, (c + 1) len) of column j into part[c][j] (dw's sums, then db's at
 * part[chunks][...]), and row_norm_dw_sum adds each column's chunks in order. Every chunk and
 * the sum run in parallel over the columns, with reads coalesced along a row. */
__kernel void row_norm_dw_part(const int rms, __global const REAL *dy, __global const REAL *x,
                               __global const REAL *mean, __global const REAL *rstd, __global REAL *part,
                               const uint r, const uint d, const uint len, const uint chunks) {
  const uint j = get_global_id(0), c = get_global_id(1);
  if (j >= d) return;
  const uint i1 = min(r, (c + 1) * len);
  REAL sw = 0, sb = 0;
  for (uint i = c * len; i < i1; i++) {
    const size_t e = (size_t)i * d + j;
    const REAL g = dy[e];
    sw += g * (x[e] - (rms ? (REAL)0 : mean[i])) * rstd[i];
    sb += g;
  }
  part[(size_t)c * d + j] = sw;
  part[((size_t)chunks + c) * d + j] = sb;
}

__kernel void row_norm_dw_sum(__global const REAL *part, const uint d, const uint chunks, __global REAL *dw,
                              const int want_dw, __global REAL *db, const int want_db) {
  const uint j = get_global_id(0);
  if (j >= d) return;
  REAL sw = 0, sb = 0;
  for (uint c = 0; c < chunks; c++) {
    sw += part[(size_t)c * d + j];
    sb += part[((size_t)chunks + c) * d + j];
  }
  if (want_dw) dw[j] = sw;
  if (want_db) db[j] = sb;
}

/* Column sums over r rows in one pass (few rows, or sizes past 32-bit counts): dw[j] = sum dy *
 * xhat, db[j] = sum dy. */
__kernel void row_norm_bwd_dw(const int rms, __global const REAL *dy, __global const REAL *x,
                              __global const REAL *mean, __global const REAL *rstd, __global REAL *dw,
                              const int want_dw, __global REAL *db, const int want_db, const long r, const long d) {
  NC_GRID_LOOP(j, d) {
    REAL sw = 0, sb = 0;
    for (long i = 0; i < r; i++) {
      const REAL g = dy[i * d + j];
      sw += g * (x[i * d + j] - (rms ? (REAL)0 : mean[i])) * rstd[i];
      sb += g;
    }
    if (want_dw) dw[j] = sw;
    if (want_db) db[j] = sb;
  }
}

/* Group norm over contiguous [n, c, s] in groups of c / groups channels: one work-group per
 * (sample, group) row of m = (c / groups) * s elements. Each tensor comes with its element
 * offset; an absent weight or bias has offset -1 (the generic launcher's convention). */
__kernel void group_norm_fwd(__global const REAL *x, const long xo, __global const REAL *w, const long wo,
                             __global const REAL *b, const long bo, __global REAL *y, const long yo,
                             __global REAL *mean, const long mo, __global REAL *rstd, const long ro, const long c,
                             const long s, const long groups, const REAL eps) {
  __local REAL scratch[NC_NORM_WG];
  const long row = get_group_id(0), cpg = c / groups, m = cpg * s, g = row % groups;
  const long base = row * m; /* (sample * c + g * cpg) * s */
  const int lid = get_local_id(0), ls = get_local_size(0);
  REAL acc = 0;
  NC_GROUP_FOR(long, e, 0, lid, m, ls) acc += x[xo + base + e];
  const REAL mu = wg_sum(acc, scratch) / (REAL)m;
  acc = 0;
  NC_GROUP_FOR(long, e, 0, lid, m, ls) {
    const REAL d = x[xo + base + e] - mu;
    acc += d * d;
  }
  const REAL rs = 1 / sqrt(wg_sum(acc, scratch) / (REAL)m + eps);
  if (lid == 0) {
    mean[mo + row] = mu;
    rstd[ro + row] = rs;
  }
  NC_GROUP_FOR(long, e, 0, lid, m, ls) {
    const long ch = g * cpg + e / s;
    const REAL wv = wo >= 0 ? w[wo + ch] : (REAL)1, bv = bo >= 0 ? b[bo + ch] : (REAL)0;
    y[yo + base + e] = (x[xo + base + e] - mu) * rs * wv + bv;
  }
}

/* dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) with gw = dy * weight, per row. */
__kernel void group_norm_bwd(__global const REAL *dy, const long dyo, __global const REAL *x, const long xo,
                             __global const REAL *w, const long wo, __global const REAL *mean, const long mo,
                             __global const REAL *rstd, const long ro, __global REAL *dx, const long dxo,
                             const long c, const long s, const long groups) {
  __local REAL scratch[NC_NORM_WG];
  const long row = get_group_id(0), cpg = c / groups, m = cpg * s, g = row % groups, base = row * m;
  const int lid = get_local_id(0), ls = get_local_size(0);
  const REAL mu = mean[mo + row], rs = rstd[ro + row];
  REAL a1 = 0, a2 = 0;
  NC_GROUP_FOR(long, e, 0, lid, m, ls) {
    const REAL gw = dy[dyo + base + e] * (wo >= 0 ? w[wo + g * cpg + e / s] : (REAL)1);
    a1 += gw;
    a2 += gw * (x[xo + base + e] - mu) * rs;
  }
  const REAL mg = wg_sum(a1, scratch) / (REAL)m, mgx = wg_sum(a2, scratch) / (REAL)m;
  NC_GROUP_FOR(long, e, 0, lid, m, ls) {
    const REAL gw = dy[dyo + base + e] * (wo >= 0 ? w[wo + g * cpg + e / s] : (REAL)1);
    dx[dxo + base + e] = rs * (gw - mg - (x[xo + base + e] - mu) * rs * mgx);
  }
}
#endif

/* Rotary embeddings and fused attention (op-table KERNEL rows rope, flash_attention and its two
 * backward ops), through the generic launcher's convention: each tensor as (buffer, element
 * offset), then the integers, then the reals. Tensors are contiguous. The CPU backend's
 * runtime/backend/cpu/cpu_attention.inc computes the same sums in the same order per row, and is
 * the reference the parity harness compares these kernels with. Local size: a power of two
 * <= NC_ATT_WG. -DREAL=double for float64. */
#ifndef REAL
#define REAL float
#endif
#define NC_ATT_WG 256
#define NC_ATT_MAX_D 256

/* ---- rope --------------------------------------------------------------------------------------- */
/* x [rows, dh] (row r at position positions[r % t]); work-group g turns the pairs
 * [g * chunk, min((g + 1) * chunk, npairs)). No barriers. */
__kernel void rope_fwd(__global const REAL *x, const long xo, __global const long *pos, const long po,
                       __global REAL *y, const long yo, const long t, const long dh, const long npairs,
                       const long chunk, const long inverse, const REAL theta) {
  const long npr = dh / 2, start = (long)get_group_id(0) * chunk, end = min(start + chunk, npairs);
  const REAL lt = log(theta);
  for (long p = start + (long)get_local_id(0); p < end; p += (long)get_local_size(0)) {
    const long r = p / npr, j = p - r * npr;
    const REAL inv_freq = exp(-(REAL)(2 * j) / (REAL)dh * lt);
    const REAL ang = (REAL)pos[po + r % t] * inv_freq;
    const REAL c = cos(ang), s = inverse ? -sin(ang) : sin(ang);
    const REAL x0 = x[xo + 2 * p], x1 = x[xo + 2 * p + 1];
    y[yo + 2 * p] = x0 * c - x1 * s;
    y[yo + 2 * p + 1] = x0 * s + x1 * c;
  }
}

/* ---- flash attention ---------------------------------------------------------------------------- */
inline REAL att_sum(REAL v, __local REAL *scratch) {
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

inline REAL att_max(REAL v, __local REAL *scratch) {
  const int lid = get_local_id(0), ls = get_local_size(0);
  scratch[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = ls / 2; h > 0; h >>= 1) {
    if (lid < h) scratch[lid] = fmax(scratch[lid], scratch[lid + h]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const REAL r = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

/* Dot product of two rows of d elements. */
inline REAL att_dot_gl(__local const REAL *a, __global const REAL *b, const long d) {
  REAL s = 0;
  for (long e = 0; e < d; e++) s += a[e] * b[e];
  return s;
}

/* a + sum_t w[t] x[t * stride] for t < n. */
inline REAL att_wsum(REAL a, __local const REAL *w, __global const REAL *x, const long n, const long stride) {
  for (long t = 0; t < n; t++) a += w[t] * x[t * stride];
  return a;
}

/* Integers of every attention kernel: h, hkv, tq, tk, d, causal; real: scale (> 0). */

/* One work-group per query row (b, h, i): the keys in blocks of the local size, one key per
 * work-item; a running max m and sum l of exp(s - m) rescale the accumulated output. */
__kernel void flash_attention_fwd(__global const REAL *q, const long qo, __global const REAL *k, const long ko,
                                  __global const REAL *v, const long vo, __global REAL *out, const long oo,
                                  __global REAL *lse, const long lo, const long h, const long hkv, const long tq,
                                  const long tk, const long d, const long causal, const REAL scale) {
  __local REAL qs[NC_ATT_MAX_D], acc[NC_ATT_MAX_D], ps[NC_ATT_WG], scratch[NC_ATT_WG];
  const long row = get_group_id(0), i = row % tq, bh = row / tq, hh = bh % h, b = bh / h;
  const long kh = hh / (h / hkv), kvb = (b * hkv + kh) * tk * d;
  const int lid = get_local_id(0), ls = get_local_size(0);
  const long nk = causal ? min(tk, i + tk - tq + 1) : tk;
  NC_GROUP_FOR(long, e, 0, lid, d, ls) {
    qs[e] = q[qo + row * d + e];
    acc[e] = 0;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  REAL m = -INFINITY, l = 0;
  for (long j0 = 0; j0 < nk; j0 += ls) {
    const long cnt = min((long)ls, nk - j0);
    const long j = j0 + lid;
    REAL s = -INFINITY;
    if (j < nk) s = att_dot_gl(qs, k + ko + kvb + j * d, d) * scale;
    const REAL mnew = fmax(m, att_max(s, scratch));
    const REAL p = j < nk ? exp(s - mnew) : (REAL)0;
    ps[lid] = p;
    const REAL corr = exp(m - mnew);
    l = l * corr + att_sum(p, scratch);
    for (long e0 = 0; e0 < d; e0 += ls) { /* column e0 + lid; items past d read column d - 1 and drop it */
      const long e = min(e0 + lid, d - 1);
      const REAL a = att_wsum(e0 + lid < d ? acc[e] * corr : (REAL)0, ps, v + vo + kvb + j0 * d + e, cnt, d);
      if (e0 + lid < d) acc[e] = a;
    }
    m = mnew;
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  NC_GROUP_FOR(long, e, 0, lid, d, ls) out[oo + row * d + e] = acc[e] / l;
  if (lid == 0) lse[lo + row] = m + log(l);
}

/* dq: one work-group per query row; ds_j = p_j (dout . v_j - delta), p_j = exp(s_j - lse). */
__kernel void flash_attention_bwd_q(__global const REAL *dout, const long go, __global const REAL *q, const long qo,
                                    __global const REAL *k, const long ko, __global const REAL *v, const long vo,
                                    __global const REAL *lse, const long lo, __global const REAL *delta,
                                    const long dlo, __global REAL *dq, const long dqo, const long h, const long hkv,
                                    const long tq, const long tk, const long d, const long causal,
                                    const REAL scale) {
  __local REAL qs[NC_ATT_MAX_D], gs[NC_ATT_MAX_D], acc[NC_ATT_MAX_D], dss[NC_ATT_WG];
  const long row = get_group_id(0), i = row % tq, bh = row / tq, hh = bh % h, b = bh / h;
  const long kh = hh / (h / hkv), kvb = (b * hkv + kh) * tk * d;
  const int lid = get_local_id(0), ls = get_local_size(0);
  const long nk = causal ? min(tk, i + tk - tq + 1) : tk;
  const REAL lrow = lse[lo + row], drow = delta[dlo + row];
  NC_GROUP_FOR(long, e, 0, lid, d, ls) {
    qs[e] = q[qo + row * d + e];
    gs[e] = dout[go + row * d + e];
    acc[e] = 0;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (long j0 = 0; j0 < nk; j0 += ls) {
    const long cnt = min((long)ls, nk - j0);
    const long j = j0 + lid;
    REAL ds = 0;
    if (j < nk) {
      const REAL p = exp(att_dot_gl(qs, k + ko + kvb + j * d, d) * scale - lrow);
      ds = p * (att_dot_gl(gs, v + vo + kvb + j * d, d) - drow);
    }
    dss[lid] = ds;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (long e0 = 0; e0 < d; e0 += ls) {
      const long e = min(e0 + lid, d - 1);
      const REAL a = att_wsum(e0 + lid < d ? acc[e] : (REAL)0, dss, k + ko + kvb + j0 * d + e, cnt, d);
      if (e0 + lid < d) acc[e] = a;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  NC_GROUP_FOR(long, e, 0, lid, d, ls) dq[dqo + row * d + e] = acc[e] * scale;
}

/* dk and dv: one work-group per key row (b, kh, j), over the query heads that share key head kh
 * and the queries that see key j; the result is [2, B, Hkv, Tk, D] (dk, then dv). */
__kernel void flash_attention_bwd_kv(__global const REAL *dout, const long go, __global const REAL *q, const long qo,
                                     __global const REAL *k, const long ko, __global const REAL *v, const long vo,
                                     __global const REAL *lse, const long lo, __global const REAL *delta,
                                     const long dlo, __global REAL *dkv, const long dko, const long h,
                                     const long hkv, const long tq, const long tk, const long d, const long causal,
                                     const REAL scale) {
  __local REAL ks[NC_ATT_MAX_D], vs[NC_ATT_MAX_D], dk[NC_ATT_MAX_D], dv[NC_ATT_MAX_D], pss[NC_ATT_WG],
      dss[NC_ATT_WG];
  const long row = get_group_id(0), j = row % tk, bk = row / tk, kh = bk % hkv,
             b = bk / hkv, group = h / hkv;
  const int lid = get_local_id(0), ls = get_local_size(0);
  const long i0min = causal ? max(0L, j - (tk - tq)) : 0, nkv = (long)get_num_groups(0) * d;
  NC_GROUP_FOR(long, e, 0, lid, d, ls) {
    ks[e] = k[ko + row * d + e];
    vs[e] = v[vo + row * d + e];
    dk[e] = 0;
    dv[e] = 0;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (long g = 0; g < group; g++) {
    const long qrow0 = (b * h + kh * group + g) * tq;
    for (long i0 = i0min; i0 < tq; i0 += ls) {
      const long cnt = min((long)ls, tq - i0);
      const long i = i0 + lid;
      REAL p = 0, ds = 0;
      if (i < tq) {
        p = exp(att_dot_gl(ks, q + qo + (qrow0 + i) * d, d) * scale - lse[lo + qrow0 + i]);
        ds = p * (att_dot_gl(vs, dout + go + (qrow0 + i) * d, d) - delta[dlo + qrow0 + i]);
      }
      pss[lid] = p;
      dss[lid] = ds;
      barrier(CLK_LOCAL_MEM_FENCE);
      for (long e0 = 0; e0 < d; e0 += ls) {
        const long e = min(e0 + lid, d - 1);
        const REAL a = att_wsum(e0 + lid < d ? dk[e] : (REAL)0, dss, q + qo + (qrow0 + i0) * d + e, cnt, d);
        const REAL c = att_wsum(e0 + lid < d ? dv[e] : (REAL)0, pss, dout + go + (qrow0 + i0) * d + e, cnt, d);
        if (e0 + lid < d) {
          dk[e] = a;
          dv[e] = c;
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
  }
  NC_GROUP_FOR(long, e, 0, lid, d, ls) {
    dkv[dko + row * d + e] = dk[e] * scale;
    dkv[dko + nkv + row * d + e] = dv[e];
  }
}

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

/* ---- tiled flash attention (FlashAttention-2 style) ---------------------------------------------
 * Built per head-dim class with -DHD=<32|64|128|256> (the padded head dim; columns past d are
 * zeros) and each kernel's block sizes: -DFBR/-DFBC (forward), -DQBR/-DQBC (dq), -DKBR/-DKBC
 * (dk, dv), multiples of 16 (runtime/backend/opencl/cl_attention.c picks them so that the
 * local arrays fit the device). 256 work-items as a 16 x 16 grid (ty, tx). In a product over
 * the head dim (S = Q K^T and its kin), item (ty, tx) holds rows ty + 16 i and keys (or
 * queries) tx + 16 j; in a product into the head dim (O = P V and its kin) it holds rows
 * ty + 16 i and the HD / 16 adjacent head-dim columns from tx * HD / 16. The operands come from
 * local memory four elements at a time along the summed index (one 16-byte load each: rows
 * are padded by 4 elements, which keeps them aligned and spreads 8 consecutive rows over the
 * banks). Same arguments as the row kernels above. */
#ifdef HD
#define ATT_T 16
#define ATT_LS (ATT_T * ATT_T)
#define ATT_LD (HD + 4)
#define ATT_PLD(n) ((n) + 4)
#ifdef NC_REAL_DOUBLE
#define REAL4 double4
#define ATT_ALIGN __attribute__((aligned(32)))
#else
#define REAL4 float4
#define ATT_ALIGN __attribute__((aligned(16)))
#endif
/* four elements from a local array, at an index that is a multiple of 4 */
#define ATT_V4(arr, idx) (*(__local const REAL4 *)((arr) + (idx)))
#define ATT_UNPACK(dst, v) \
  do {                     \
    const REAL4 u_ = (v);  \
    (dst)[0] = u_.s0;      \
    (dst)[1] = u_.s1;      \
    (dst)[2] = u_.s2;      \
    (dst)[3] = u_.s3;      \
  } while (0)
/* dst[0 .. HD/16) = the item's head-dim columns of local row src[row * ATT_LD ...] */
#if (HD / ATT_T) % 4 == 0
#define ATT_COLS(dst, src, row, tx)                                                              \
  do {                                                                                           \
    _Pragma("unroll") for (int q_ = 0; q_ < HD / ATT_T; q_ += 4)                                 \
        ATT_UNPACK((dst) + q_, ATT_V4(src, (row) * ATT_LD + (tx) * (HD / ATT_T) + q_));           \
  } while (0)
#else
#define ATT_COLS(dst, src, row, tx)                                                              \
  do {                                                                                           \
    _Pragma("unroll") for (int q_ = 0; q_ < HD / ATT_T; q_++)(dst)[q_] =                         \
        (src)[(row) * ATT_LD + (tx) * (HD / ATT_T) + q_];                                         \
  } while (0)
#endif

/* dst[r][e] (row stride ATT_LD) = src[(row0 + r) * d + e] for r < rows, e < HD, zero past the
 * n rows and d columns of src; rows * HD is a multiple of ATT_LS. */
inline void att_stage(__local REAL *dst, __global const REAL *src, const long row0, const long n, const long d,
                      const int rows, const int lid) {
  for (int t = 0; t < rows * HD / ATT_LS; t++) {
    const int idx = t * ATT_LS + lid, r = idx / HD, e = idx % HD;
    const long gr = row0 + r;
    dst[r * ATT_LD + e] = (gr < n && e < d) ? src[gr * d + e] : (REAL)0;
  }
}

/* Whether key kj is seen by query qi (both in range). */
#define ATT_SEES(qi, kj) ((qi) < tq && (kj) < tk && (!causal || (kj) <= (qi) + tk - tq))

/* acc[i][j] += sum over e of A[(ty + 16 i) * ATT_LD + e] * B[(tx + 16 j) * ATT_LD + e], e < HD */
#define ATT_ROWDOT(acc, A, NA, B, NB)                                                \
  for (int e = 0; e < HD; e += 4) {                                                  \
    REAL a_[NA][4], b_[NB][4];                                                       \
    _Pragma("unroll") for (int i = 0; i < NA; i++)                                   \
        ATT_UNPACK(a_[i], ATT_V4(A, (ty + ATT_T * i) * ATT_LD + e));                 \
    _Pragma("unroll") for (int j = 0; j < NB; j++)                                   \
        ATT_UNPACK(b_[j], ATT_V4(B, (tx + ATT_T * j) * ATT_LD + e));                 \
    _Pragma("unroll") for (int u = 0; u < 4; u++)                                    \
        _Pragma("unroll") for (int i = 0; i < NA; i++)                               \
            _Pragma("unroll") for (int j = 0; j < NB; j++)                           \
                acc[i][j] = fma(a_[i][u], b_[j][u], acc[i][j]);                       \
  }

/* Forward: one work-group per block of FBR query rows of one (batch, head), the heaviest
 * (causal: the last) blocks first; key blocks of FBC rows staged in local memory (K, then V in
 * the same array), the blocks above the diagonal skipped. */
#define RM (FBR / ATT_T)
#define CN (FBC / ATT_T)
#define DN (HD / ATT_T)
__kernel __attribute__((reqd_work_group_size(ATT_LS, 1, 1))) void flash_attention_fwd_tiled(
    __global const REAL *q, const long qo, __global const REAL *k, const long ko, __global const REAL *v,
    const long vo, __global REAL *out, const long oo, __global REAL *lse, const long lo, const long h,
    const long hkv, const long tq, const long tk, const long d, const long causal, const REAL scale) {
  __local REAL qs[FBR * ATT_LD] ATT_ALIGN, kvs[FBC * ATT_LD] ATT_ALIGN, ps[FBR * ATT_PLD(FBC)] ATT_ALIGN,
      red[FBR * ATT_T] ATT_ALIGN;
  const long nqb = (tq + FBR - 1) / FBR, grp = get_group_id(0), qb = nqb - 1 - grp % nqb, bh = grp / nqb;
  const long hh = bh % h, b = bh / h, kvb = (b * hkv + hh / (h / hkv)) * tk * d, q0 = qb * FBR;
  const int lid = get_local_id(0), ty = lid / ATT_T, tx = lid % ATT_T;
  const long nk = causal ? min(tk, q0 + FBR + tk - tq) : tk; /* keys any row of the block sees */
  att_stage(qs, q + qo + bh * tq * d, q0, tq, d, FBR, lid);
  REAL o[RM][DN], m[RM], l[RM];
#pragma unroll
  for (int i = 0; i < RM; i++) {
    m[i] = -INFINITY;
    l[i] = 0;
#pragma unroll
    for (int j = 0; j < DN; j++) o[i][j] = 0;
  }
  for (long j0 = 0; j0 < nk; j0 += FBC) {
    barrier(CLK_LOCAL_MEM_FENCE);
    att_stage(kvs, k + ko + kvb, j0, tk, d, FBC, lid);
    barrier(CLK_LOCAL_MEM_FENCE);
    REAL s[RM][CN];
#pragma unroll
    for (int i = 0; i < RM; i++)
#pragma unroll
      for (int j = 0; j < CN; j++) s[i][j] = 0;
    ATT_ROWDOT(s, qs, RM, kvs, CN)
#pragma unroll
    for (int i = 0; i < RM; i++) {
      const long qi = q0 + ty + ATT_T * i;
      REAL pm = -INFINITY;
#pragma unroll
      for (int j = 0; j < CN; j++) {
        const long kj = j0 + tx + ATT_T * j;
        s[i][j] = ATT_SEES(qi, kj) || (qi >= tq && kj < tk) ? s[i][j] * scale : -INFINITY;
        pm = fmax(pm, s[i][j]);
      }
      red[(ty + ATT_T * i) * ATT_T + tx] = pm;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    REAL corr[RM];
#pragma unroll
    for (int i = 0; i < RM; i++) {
      REAL mn = m[i];
      for (int t = 0; t < ATT_T; t += 4) {
        const REAL4 r4 = ATT_V4(red, (ty + ATT_T * i) * ATT_T + t);
        mn = fmax(mn, fmax(fmax(r4.s0, r4.s1), fmax(r4.s2, r4.s3)));
      }
      corr[i] = exp(m[i] - mn);
      m[i] = mn;
      REAL ls = 0;
#pragma unroll
      for (int j = 0; j < CN; j++) {
        const REAL p = exp(s[i][j] - mn);
        ps[(ty + ATT_T * i) * ATT_PLD(FBC) + tx + ATT_T * j] = p;
        ls += p;
      }
      l[i] = l[i] * corr[i] + ls;
    }
    att_stage(kvs, v + vo + kvb, j0, tk, d, FBC, lid); /* every item read its K before the barrier */
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int i = 0; i < RM; i++)
#pragma unroll
      for (int j = 0; j < DN; j++) o[i][j] *= corr[i];
    for (int c = 0; c < FBC; c += 4) {
      REAL a[RM][4];
#pragma unroll
      for (int i = 0; i < RM; i++) ATT_UNPACK(a[i], ATT_V4(ps, (ty + ATT_T * i) * ATT_PLD(FBC) + c));
#pragma unroll
      for (int u = 0; u < 4; u++) {
        REAL w[DN];
        ATT_COLS(w, kvs, c + u, tx);
#pragma unroll
        for (int i = 0; i < RM; i++)
#pragma unroll
          for (int j = 0; j < DN; j++) o[i][j] = fma(a[i][u], w[j], o[i][j]);
      }
    }
  }
  /* the row sums: each item holds its columns' part */
  barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
  for (int i = 0; i < RM; i++) red[(ty + ATT_T * i) * ATT_T + tx] = l[i];
  barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
  for (int i = 0; i < RM; i++) {
    const long qi = q0 + ty + ATT_T * i;
    REAL lt = 0;
    for (int t = 0; t < ATT_T; t++) lt += red[(ty + ATT_T * i) * ATT_T + t];
    if (qi < tq) {
      const long row = bh * tq + qi;
#pragma unroll
      for (int j = 0; j < DN; j++)
        if (tx * DN + j < d) out[oo + row * d + tx * DN + j] = o[i][j] / lt;
      if (tx == 0) lse[lo + row] = m[i] + log(lt);
    }
  }
}
#undef RM
#undef CN
#undef DN

/* dq: one work-group per block of QBR query rows; for each block of QBC keys, P from the saved
 * lse, dP = dO V^T, dS = P (dP - delta) in registers, then dQ += dS K through local memory. */
#define RM (QBR / ATT_T)
#define CN (QBC / ATT_T)
#define DN (HD / ATT_T)
__kernel __attribute__((reqd_work_group_size(ATT_LS, 1, 1))) void flash_attention_bwd_q_tiled(
    __global const REAL *dout, const long go, __global const REAL *q, const long qo, __global const REAL *k,
    const long ko, __global const REAL *v, const long vo, __global const REAL *lse, const long lo,
    __global const REAL *delta, const long dlo, __global REAL *dq, const long dqo, const long h, const long hkv,
    const long tq, const long tk, const long d, const long causal, const REAL scale) {
  __local REAL qs[QBR * ATT_LD] ATT_ALIGN, gs[QBR * ATT_LD] ATT_ALIGN, ks[QBC * ATT_LD] ATT_ALIGN,
      vs[QBC * ATT_LD] ATT_ALIGN, dss[QBR * ATT_PLD(QBC)] ATT_ALIGN;
  const long nqb = (tq + QBR - 1) / QBR, grp = get_group_id(0), qb = nqb - 1 - grp % nqb, bh = grp / nqb;
  const long hh = bh % h, b = bh / h, kvb = (b * hkv + hh / (h / hkv)) * tk * d, q0 = qb * QBR;
  const int lid = get_local_id(0), ty = lid / ATT_T, tx = lid % ATT_T;
  const long nk = causal ? min(tk, q0 + QBR + tk - tq) : tk;
  att_stage(qs, q + qo + bh * tq * d, q0, tq, d, QBR, lid);
  att_stage(gs, dout + go + bh * tq * d, q0, tq, d, QBR, lid);
  REAL acc[RM][DN], lr[RM], dr[RM];
#pragma unroll
  for (int i = 0; i < RM; i++) {
    const long qi = q0 + ty + ATT_T * i;
    lr[i] = qi < tq ? lse[lo + bh * tq + qi] : (REAL)0;
    dr[i] = qi < tq ? delta[dlo + bh * tq + qi] : (REAL)0;
#pragma unroll
    for (int j = 0; j < DN; j++) acc[i][j] = 0;
  }
  for (long j0 = 0; j0 < nk; j0 += QBC) {
    barrier(CLK_LOCAL_MEM_FENCE);
    att_stage(ks, k + ko + kvb, j0, tk, d, QBC, lid);
    att_stage(vs, v + vo + kvb, j0, tk, d, QBC, lid);
    barrier(CLK_LOCAL_MEM_FENCE);
    REAL s[RM][CN], dp[RM][CN];
#pragma unroll
    for (int i = 0; i < RM; i++)
#pragma unroll
      for (int j = 0; j < CN; j++) s[i][j] = dp[i][j] = 0;
    ATT_ROWDOT(s, qs, RM, ks, CN)
    ATT_ROWDOT(dp, gs, RM, vs, CN)
#pragma unroll
    for (int i = 0; i < RM; i++) {
      const long qi = q0 + ty + ATT_T * i;
#pragma unroll
      for (int j = 0; j < CN; j++) {
        const long kj = j0 + tx + ATT_T * j;
        const REAL p = ATT_SEES(qi, kj) ? exp(s[i][j] * scale - lr[i]) : (REAL)0;
        dss[(ty + ATT_T * i) * ATT_PLD(QBC) + tx + ATT_T * j] = p * (dp[i][j] - dr[i]);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int c = 0; c < QBC; c += 4) {
      REAL a[RM][4];
#pragma unroll
      for (int i = 0; i < RM; i++) ATT_UNPACK(a[i], ATT_V4(dss, (ty + ATT_T * i) * ATT_PLD(QBC) + c));
#pragma unroll
      for (int u = 0; u < 4; u++) {
        REAL w[DN];
        ATT_COLS(w, ks, c + u, tx);
#pragma unroll
        for (int i = 0; i < RM; i++)
#pragma unroll
          for (int j = 0; j < DN; j++) acc[i][j] = fma(a[i][u], w[j], acc[i][j]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < RM; i++) {
    const long qi = q0 + ty + ATT_T * i;
    if (qi < tq) {
#pragma unroll
      for (int j = 0; j < DN; j++)
        if (tx * DN + j < d) dq[dqo + (bh * tq + qi) * d + tx * DN + j] = acc[i][j] * scale;
    }
  }
}
#undef RM
#undef CN
#undef DN

/* dk and dv: one work-group per block of KBC key rows of one (batch, key head), over the query
 * heads sharing it and their blocks of KBR queries that see any of the keys (causal: from the
 * diagonal on); P^T and dS^T go through local memory, dK and dV stay in registers. The result
 * is [2, B, Hkv, Tk, D] (dk, then dv). */
#define CM (KBC / ATT_T)
#define QN (KBR / ATT_T)
#define DN (HD / ATT_T)
__kernel __attribute__((reqd_work_group_size(ATT_LS, 1, 1))) void flash_attention_bwd_kv_tiled(
    __global const REAL *dout, const long go, __global const REAL *q, const long qo, __global const REAL *k,
    const long ko, __global const REAL *v, const long vo, __global const REAL *lse, const long lo,
    __global const REAL *delta, const long dlo, __global REAL *dkv, const long dko, const long h, const long hkv,
    const long tq, const long tk, const long d, const long causal, const REAL scale) {
  __local REAL ks[KBC * ATT_LD] ATT_ALIGN, vs[KBC * ATT_LD] ATT_ALIGN, qs[KBR * ATT_LD] ATT_ALIGN,
      gs[KBR * ATT_LD] ATT_ALIGN, pts[KBC * ATT_PLD(KBR)] ATT_ALIGN, dsts[KBC * ATT_PLD(KBR)] ATT_ALIGN, ls_[KBR],
      ds_[KBR];
  const long nkb = (tk + KBC - 1) / KBC, grp = get_group_id(0), kb = grp % nkb, bk = grp / nkb;
  const long kh = bk % hkv, b = bk / hkv, group = h / hkv, k0 = kb * KBC, kvb = bk * tk * d;
  const int lid = get_local_id(0), ty = lid / ATT_T, tx = lid % ATT_T;
  /* causal: query i sees key j when i >= j - (tk - tq); the first block holding such a query */
  const long qstart = causal ? (max(0L, k0 - (tk - tq)) / KBR) * KBR : 0;
  att_stage(ks, k + ko + kvb, k0, tk, d, KBC, lid);
  att_stage(vs, v + vo + kvb, k0, tk, d, KBC, lid);
  REAL dk[CM][DN], dv[CM][DN];
#pragma unroll
  for (int i = 0; i < CM; i++)
#pragma unroll
    for (int j = 0; j < DN; j++) dk[i][j] = dv[i][j] = 0;
  for (long g = 0; g < group; g++) {
    const long qrow0 = (b * h + kh * group + g) * tq;
    for (long i0 = qstart; i0 < tq; i0 += KBR) {
      barrier(CLK_LOCAL_MEM_FENCE);
      att_stage(qs, q + qo + qrow0 * d, i0, tq, d, KBR, lid);
      att_stage(gs, dout + go + qrow0 * d, i0, tq, d, KBR, lid);
      if (lid < KBR) {
        ls_[lid] = i0 + lid < tq ? lse[lo + qrow0 + i0 + lid] : (REAL)0;
        ds_[lid] = i0 + lid < tq ? delta[dlo + qrow0 + i0 + lid] : (REAL)0;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      REAL s[CM][QN], dp[CM][QN];
#pragma unroll
      for (int i = 0; i < CM; i++)
#pragma unroll
        for (int j = 0; j < QN; j++) s[i][j] = dp[i][j] = 0;
      ATT_ROWDOT(s, ks, CM, qs, QN)
      ATT_ROWDOT(dp, vs, CM, gs, QN)
#pragma unroll
      for (int i = 0; i < CM; i++) {
        const long kj = k0 + ty + ATT_T * i;
#pragma unroll
        for (int j = 0; j < QN; j++) {
          const int qj = tx + ATT_T * j;
          const REAL p = ATT_SEES(i0 + qj, kj) ? exp(s[i][j] * scale - ls_[qj]) : (REAL)0;
          pts[(ty + ATT_T * i) * ATT_PLD(KBR) + qj] = p;
          dsts[(ty + ATT_T * i) * ATT_PLD(KBR) + qj] = p * (dp[i][j] - ds_[qj]);
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int c = 0; c < KBR; c += 4) {
        REAL pa[CM][4], da[CM][4];
#pragma unroll
        for (int i = 0; i < CM; i++) {
          ATT_UNPACK(pa[i], ATT_V4(pts, (ty + ATT_T * i) * ATT_PLD(KBR) + c));
          ATT_UNPACK(da[i], ATT_V4(dsts, (ty + ATT_T * i) * ATT_PLD(KBR) + c));
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
          REAL gw[DN], qw[DN];
          ATT_COLS(gw, gs, c + u, tx);
          ATT_COLS(qw, qs, c + u, tx);
#pragma unroll
          for (int i = 0; i < CM; i++)
#pragma unroll
            for (int j = 0; j < DN; j++) {
              dv[i][j] = fma(pa[i][u], gw[j], dv[i][j]);
              dk[i][j] = fma(da[i][u], qw[j], dk[i][j]);
            }
        }
      }
    }
  }
  const long kvoff = (b * hkv + kh) * tk * d, total = (long)(get_num_groups(0) / nkb) * tk * d;
#pragma unroll
  for (int i = 0; i < CM; i++) {
    const long kj = k0 + ty + ATT_T * i;
    if (kj < tk) {
#pragma unroll
      for (int j = 0; j < DN; j++)
        if (tx * DN + j < d) {
          dkv[dko + kvoff + kj * d + tx * DN + j] = dk[i][j] * scale;
          dkv[dko + total + kvoff + kj * d + tx * DN + j] = dv[i][j];
        }
    }
  }
}
#undef CM
#undef QN
#undef DN
#endif

/* Flash attention on tensor cores: the forward, dq and dk/dv kernels of kernels/attention.cl's
 * tiled family with every product on mma.sync m16n8k8 .tf32 (kernels/mma.cl), for float32 and
 * head dims up to 64 on NVIDIA devices of compute capability 8.0 or later
 * (runtime/backend/opencl/cl_attention.c picks them). Same arguments, same results layout.
 *
 * Precision. With -DNC_ATT_SPLIT=1 (the matmul precision "highest"; "high" and "medium" build
 * with -DNC_ATT_SPLIT=0) each operand x is split into
 * hi = x rounded to tf32 and lo = x - hi (exact in float32), and a product takes three mma:
 * lo_a hi_b + hi_a lo_b + hi_a hi_b, the lo lo term (below 2^-22 of the product) left out. The
 * tensor core reads the top 19 bits of lo, so each product is within about 2^-21 of its float32
 * value, the arithmetic of PyTorch's float32 memory-efficient attention ("3xTF32"). Without it
 * ("high", "medium") a product is one mma of the rounded operands (about 2^-11).
 *
 * Work: a work-group of four warps (128 work-items) owns 64 rows, each warp 16 of them: query
 * rows in the forward and dq, key rows in dk/dv. The operand that only enters as mma's A (the
 * rows the group owns: Q in the forward, Q and dO in dq, K and V in dk/dv) stays in registers as
 * fragments for the whole kernel; the other side's blocks are staged in local memory (rows of
 * HD + 4 floats, so that the fragment reads below fall in 32 distinct banks). Scores are mma
 * accumulators: a work-item holds rows g and g + 8 (g = lane / 4) and the columns 2t, 2t + 1
 * (t = lane % 4) of every 8-column tile, and row statistics merge the four work-items of a row
 * with two butterfly exchanges. A score tile feeds the next product as mma's A without moving:
 * the k order of an 8-wide step is permuted, slot t taking column 2t and slot t + 4 column
 * 2t + 1, and the B fragment reads the staged rows in the same order.
 *
 * Emulation (NETCL_MMA_EMULATE=1): mma.sync and the exchanges go through local memory with
 * barriers, so that PoCL runs the same indexing against the CPU backend; every work-item
 * reaches every mma and exchange (loops are uniform over the work-group). */

#ifdef NC_MMA_TF32
#ifdef HD /* the head-dim class the host builds for (32 or 64) */
#define AM_HD HD
#else
#define AM_HD 64
#endif
#if AM_HD % 8 != 0 || AM_HD > 64
#error "attention_mma.cl: AM_HD must be a multiple of 8, at most 64"
#endif
#ifndef AM_FBC
#define AM_FBC 64 /* forward: keys per block */
#endif
#ifndef AM_QBC
#define AM_QBC 32 /* dq: keys per block */
#endif
/* dk/dv keep K and V as local rows (fewer registers: on the H100, 165 per work-item without
 * spills against 255 with 736 bytes of spills, dk/dv 2.80 -> 2.07 ms at B 8, H 8, T 2048); -DAM_KV_REGS=1
 * keeps them in registers instead, with blocks of 32 queries. */
#ifndef AM_KV_REGS
#define AM_K_LOCAL 1
#define AM_V_LOCAL 1
#endif
#ifndef AM_KBR
#ifdef AM_V_LOCAL
#define AM_KBR 16 /* dk/dv: queries per block */
#else
#define AM_KBR 32
#endif
#endif
#define AM_ITEMS 128
#define AM_ROWS 64 /* rows a work-group owns */
#if AM_FBC < AM_ROWS || AM_FBC % 8 || AM_QBC < AM_ROWS / 2 || AM_QBC % 8 || AM_KBR % 8 || \
    (AM_KBR < AM_ROWS / 2 && !defined(AM_V_LOCAL))
#error "attention_mma.cl: blocks of at least 64 (forward) and 32 (dq; dk/dv unless AM_V_LOCAL) rows, multiples of 8"
#endif
#define AM_LD (AM_HD + 4)
#define AM_KS (AM_HD / 8) /* k steps over the head dim, and 8-column tiles of it */

/* ---- rounding, splitting and the product ------------------------------------------------------ */
#ifdef NC_MMA_EMULATE
#define am_round(x) as_uint(mma_tf32(x))
#else
inline uint am_round(const float x) {
  uint r;
  __asm__("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
#endif

/* x (n floats) as tf32 fragments: hi always, lo with NC_ATT_SPLIT */
#if NC_ATT_SPLIT
#define AM_SPLIT(x, hi, lo, n)                                                 \
  _Pragma("unroll") for (int e_ = 0; e_ < (n); e_++) {                         \
    (hi)[e_] = am_round((x)[e_]);                                              \
    (lo)[e_] = as_uint((x)[e_] - as_float((hi)[e_]));                          \
  }
#ifdef NC_MMA_EMULATE
/* The emulation of the three mma.sync below in one exchange (one pair of barriers instead of
 * three, which keeps PoCL's compile of these kernels short): the same sums in the same order,
 * from the fragment layouts of kernels/mma.cl. A lane's words: ah 0-3, al 4-7, bh 8-9, bl 10-11. */
inline void am_mma3_emulated(__local uint *x, const int lid, float *c, const uint *ah, const uint *al,
                             const uint *bh, const uint *bl) {
  const int lane = lid % 32, g = lane >> 2, t = lane & 3;
  __local uint *w = x + (lid / 32) * 32 * 12;
  for (int e = 0; e < 4; e++) w[lane * 12 + e] = ah[e], w[lane * 12 + 4 + e] = al[e];
  w[lane * 12 + 8] = bh[0], w[lane * 12 + 9] = bh[1], w[lane * 12 + 10] = bl[0], w[lane * 12 + 11] = bl[1];
  barrier(CLK_LOCAL_MEM_FENCE);
  float d[4];
  for (int e = 0; e < 4; e++) {
    const int r = g + (e >= 2 ? 8 : 0), n = 2 * t + (e & 1);
    float acc = c[e];
    for (int pass = 0; pass < 3; pass++) { /* lo_a hi_b, hi_a lo_b, hi_a hi_b */
      const int ao = pass == 0 ? 4 : 0, bo = pass == 1 ? 10 : 8;
      for (int k = 0; k < 8; k++)
        acc = fma(as_float(w[((r % 8) * 4 + k % 4) * 12 + ao + (k < 4 ? 0 : 2) + (r >= 8 ? 1 : 0)]),
                  as_float(w[(n * 4 + k % 4) * 12 + bo + (k < 4 ? 0 : 1)]), acc);
    }
    d[e] = acc;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int e = 0; e < 4; e++) c[e] = d[e];
}
#define AM_MSCRATCH __local uint am_m3_[AM_ITEMS * 12];
#define AM_MMA(c, ah, al, bh, bl) am_mma3_emulated(am_m3_, lid, c, ah, al, bh, bl)
#else
#define AM_MMA(c, ah, al, bh, bl) \
  do {                            \
    MMA_SYNC(c, al, bh);          \
    MMA_SYNC(c, ah, bl);          \
    MMA_SYNC(c, ah, bh);          \
  } while (0)
#endif
#else
#define AM_SPLIT(x, hi, lo, n) _Pragma("unroll") for (int e_ = 0; e_ < (n); e_++)(hi)[e_] = am_round((x)[e_]);
#define AM_MMA(c, ah, al, bh, bl) MMA_SYNC(c, ah, bh)
#endif
#ifndef AM_MSCRATCH
#define AM_MSCRATCH MMA_SCRATCH(AM_ITEMS)
#endif

/* ---- the four work-items of a row: butterfly exchanges ----------------------------------------- */
#ifdef NC_MMA_EMULATE
inline float am_xor(__local float *x, const float v, const int lid, const int mask) {
  x[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  const float r = x[lid ^ mask];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}
#define AM_XSCRATCH __local float am_x_[AM_ITEMS];
#define AM_XOR(v, mask) am_xor(am_x_, v, lid, mask)
#else
inline float am_xor(const float v, const int mask) {
  uint r;
  __asm__ volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(as_uint(v)), "r"(mask));
  return as_float(r);
}
#define AM_XSCRATCH
#define AM_XOR(v, mask) am_xor(v, mask)
#endif
#define AM_QUAD_MAX(v) v = fmax(v, AM_XOR(v, 1)), v = fmax(v, AM_XOR(v, 2))
#define AM_QUAD_SUM(v) v += AM_XOR(v, 1), v += AM_XOR(v, 2)

/* PoCL's compile of the emulation grows with unrolled code between barriers */
#ifdef NC_MMA_EMULATE
#define AM_STAGE_UNROLL _Pragma("unroll 1")
#else
#define AM_STAGE_UNROLL
#endif

/* ---- staging and fragments --------------------------------------------------------------------- */
/* dst[r * AM_LD + e] = src[(row0 + r) * d + e] for r < rows, e < AM_HD; zeros past n rows and d
 * columns. Full blocks of rows of AM_HD floats starting 16 bytes aligned go four floats at a time. */
inline void am_stage(__local float *dst, __global const float *src, const long row0, const long n, const long d,
                     const int rows, const int lid) {
  if (d == AM_HD && row0 + rows <= n && ((ulong)(src + row0 * d) & 15) == 0) {
    __global const float4 *s4 = (__global const float4 *)(src + row0 * d);
    AM_STAGE_UNROLL for (int u = 0; u < rows * AM_HD / 4 / AM_ITEMS; u++) { /* rows * AM_HD is a multiple of 512 */
      const int idx = u * AM_ITEMS + lid, r = idx / (AM_HD / 4), e = (idx % (AM_HD / 4)) * 4;
      *(__local float4 *)(dst + r * AM_LD + e) = s4[idx];
    }
  } else {
    AM_STAGE_UNROLL for (int u = 0; u < rows * AM_HD / AM_ITEMS; u++) {
      const int idx = u * AM_ITEMS + lid, r = idx / AM_HD, e = idx % AM_HD;
      const long gr = row0 + r;
      dst[r * AM_LD + e] = (gr < n && e < d) ? src[gr * d + e] : 0.0f;
    }
  }
}

/* Loops around mma: unrolled, so that fragment arrays are indexed by constants (registers); not
 * under emulation, where PoCL would compile hundreds of inlined barriers. */
#ifdef NC_MMA_EMULATE
#define AM_UNROLL _Pragma("unroll 1")
#else
#define AM_UNROLL _Pragma("unroll")
#endif

/* f[s][0..3]: A fragments of the 16 staged rows from r0, k = the head dim (step s: columns 8s..) */
#define AM_A_ROWS(f, src, r0)                                     \
  _Pragma("unroll") for (int s_ = 0; s_ < AM_KS; s_++) {          \
    (f)[s_][0] = (src)[((r0) + g) * AM_LD + 8 * s_ + t];          \
    (f)[s_][1] = (src)[((r0) + g + 8) * AM_LD + 8 * s_ + t];      \
    (f)[s_][2] = (src)[((r0) + g) * AM_LD + 8 * s_ + t + 4];      \
    (f)[s_][3] = (src)[((r0) + g + 8) * AM_LD + 8 * s_ + t + 4];  \
  }

/* c[n][..] += A B^T over the head dim: A the registers f (16 rows), B the staged rows 8n.. of src
 * (NT tiles of 8 rows); AM_ROWDOT_L takes A from the staged rows r0.. of a local array instead */
#define AM_ROWDOT_STEP(c, a_, src, NT)                                          \
  {                                                                             \
    uint ah_[4], al_[4];                                                        \
    AM_SPLIT(a_, ah_, al_, 4)                                                   \
    AM_UNROLL for (int n_ = 0; n_ < (NT); n_++) {                               \
      const float b_[2] = {(src)[(8 * n_ + g) * AM_LD + 8 * s_ + t],            \
                           (src)[(8 * n_ + g) * AM_LD + 8 * s_ + t + 4]};       \
      uint bh_[2], bl_[2];                                                      \
      AM_SPLIT(b_, bh_, bl_, 2)                                                 \
      AM_MMA((c)[n_], ah_, al_, bh_, bl_);                                      \
    }                                                                           \
  }
#define AM_ROWDOT(c, f, src, NT) \
  AM_UNROLL for (int s_ = 0; s_ < AM_KS; s_++) AM_ROWDOT_STEP(c, (f)[s_], src, NT)
#define AM_ROWDOT_L(c, A, r0, src, NT)                                                              \
  AM_UNROLL for (int s_ = 0; s_ < AM_KS; s_++) {                                                    \
    const float f_[4] = {(A)[((r0) + g) * AM_LD + 8 * s_ + t], (A)[((r0) + g + 8) * AM_LD + 8 * s_ + t], \
                         (A)[((r0) + g) * AM_LD + 8 * s_ + t + 4],                                  \
                         (A)[((r0) + g + 8) * AM_LD + 8 * s_ + t + 4]};                             \
    AM_ROWDOT_STEP(c, f_, src, NT)                                                                  \
  }

/* o[j][..] += P X over NT 8-column tiles of P (the accumulators p[n][..], 16 rows), X the staged
 * rows of src (k = those rows, in the permuted order; n = the head dim) */
#define AM_ACCUM(o, p, src, NT)                                                 \
  AM_UNROLL for (int n_ = 0; n_ < (NT); n_++) {                         \
    const float a_[4] = {(p)[n_][0], (p)[n_][2], (p)[n_][1], (p)[n_][3]};       \
    uint ah_[4], al_[4];                                                        \
    AM_SPLIT(a_, ah_, al_, 4)                                                   \
    AM_UNROLL for (int j_ = 0; j_ < AM_KS; j_++) {                      \
      const float b_[2] = {(src)[(8 * n_ + 2 * t) * AM_LD + 8 * j_ + g],        \
                           (src)[(8 * n_ + 2 * t + 1) * AM_LD + 8 * j_ + g]};   \
      uint bh_[2], bl_[2];                                                      \
      AM_SPLIT(b_, bh_, bl_, 2)                                                 \
      AM_MMA((o)[j_], ah_, al_, bh_, bl_);                                      \
    }                                                                           \
  }

#define AM_ZERO(c, N)                                 \
  _Pragma("unroll") for (int n_ = 0; n_ < (N); n_++)  \
      _Pragma("unroll") for (int e_ = 0; e_ < 4; e_++)(c)[n_][e_] = 0.0f;

/* The results: dst[base_r + col] = VAL for the item's two rows r_ (0: row g, 1: row g + 8; written
 * where ok_r) and its columns col = 8 j_ + 2t + e_ < d, VAL an expression of the accumulator
 * element a_ and r_. Guards inside the loops: uniform trip counts (tests/kernels/barrier_check.lua). */
#define AM_STORE(dst, ok0, ok1, base0, base1, acc, VAL)                                   \
  _Pragma("unroll") for (int r_ = 0; r_ < 2; r_++)                                        \
      _Pragma("unroll") for (int j_ = 0; j_ < AM_KS; j_++)                                \
          _Pragma("unroll") for (int e_ = 0; e_ < 2; e_++) {                              \
    const long col_ = 8 * j_ + 2 * t + e_;                                                \
    const float a_ = (acc)[j_][2 * r_ + e_];                                              \
    if ((r_ ? (ok1) : (ok0)) && col_ < d) (dst)[(r_ ? (base1) : (base0)) + col_] = (VAL); \
  }

/* Whether key kj is seen by query qi (both in range). */
#define AM_SEES(qi, kj) ((qi) < tq && (kj) < tk && (!causal || (kj) <= (qi) + tk - tq))

/* The forward's and dq's work-group: query rows q0.. of (batch, head) bh, the heaviest (causal:
 * the last) blocks first; kvb the offset of its key head's rows, nk the keys any of its rows sees. */
#define AM_QUERY_BLOCK                                                                                      \
  const long nqb = (tq + AM_ROWS - 1) / AM_ROWS, grp = get_group_id(0), qb = nqb - 1 - grp % nqb, bh = grp / nqb; \
  const long hh = bh % h, b = bh / h, kvb = (b * hkv + hh / (h / hkv)) * tk * d, q0 = qb * AM_ROWS;              \
  const long nk = causal ? min(tk, q0 + AM_ROWS + tk - tq) : tk;

/* Integers of every attention kernel: h, hkv, tq, tk, d, causal; real: scale (> 0). */

/* Forward: a work-group per 64 query rows of one (batch, head), the heaviest (causal: last)
 * blocks first; keys in blocks of AM_FBC, K and V staged side by side; blocks wholly above the
 * diagonal skipped. Running max m and sum l per row as in attention.cl. */
__kernel __attribute__((reqd_work_group_size(AM_ITEMS, 1, 1))) void flash_attention_fwd_mma(
    __global const float *q, const long qo, __global const float *k, const long ko, __global const float *v,
    const long vo, __global float *out, const long oo, __global float *lse, const long lo, const long h,
    const long hkv, const long tq, const long tk, const long d, const long causal, const float scale) {
  __local float ks[AM_FBC * AM_LD] __attribute__((aligned(16))), vs[AM_FBC * AM_LD] __attribute__((aligned(16)));
  AM_MSCRATCH
  AM_XSCRATCH
  const int lid = get_local_id(0), lane = lid % 32, w = lid / 32, g = lane >> 2, t = lane & 3;
  AM_QUERY_BLOCK
  /* Q through local memory into registers */
  am_stage(ks, q + qo + bh * tq * d, q0, tq, d, AM_ROWS, lid);
  barrier(CLK_LOCAL_MEM_FENCE);
  float qf[AM_KS][4];
  AM_A_ROWS(qf, ks, 16 * w)
  const long qi0 = q0 + 16 * w + g, qi1 = qi0 + 8;
  float o[AM_KS][4], m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  AM_ZERO(o, AM_KS)
  for (long j0 = 0; j0 < nk; j0 += AM_FBC) {
    barrier(CLK_LOCAL_MEM_FENCE);
    am_stage(ks, k + ko + kvb, j0, tk, d, AM_FBC, lid);
    am_stage(vs, v + vo + kvb, j0, tk, d, AM_FBC, lid);
    barrier(CLK_LOCAL_MEM_FENCE);
    float s[AM_FBC / 8][4];
    AM_ZERO(s, AM_FBC / 8)
    AM_ROWDOT(s, qf, ks, AM_FBC / 8)
    float mx0 = -INFINITY, mx1 = -INFINITY;
    /* a block every row of the group sees whole takes no mask */
    const bool full = q0 + AM_ROWS <= tq && j0 + AM_FBC <= tk && (!causal || j0 + AM_FBC - 1 <= q0 + tk - tq);
    if (full) {
#pragma unroll
      for (int n = 0; n < AM_FBC / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) s[n][e] *= scale;
    } else {
#pragma unroll
      for (int n = 0; n < AM_FBC / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const long qi = e < 2 ? qi0 : qi1, kj = j0 + 8 * n + 2 * t + (e & 1);
          /* rows past tq see every key, so that their (discarded) statistics stay finite */
          s[n][e] = AM_SEES(qi, kj) || (qi >= tq && kj < tk) ? s[n][e] * scale : -INFINITY;
        }
    }
#pragma unroll
    for (int n = 0; n < AM_FBC / 8; n++)
      mx0 = fmax(mx0, fmax(s[n][0], s[n][1])), mx1 = fmax(mx1, fmax(s[n][2], s[n][3]));
    AM_QUAD_MAX(mx0);
    AM_QUAD_MAX(mx1);
    const float mn0 = fmax(m0, mx0), mn1 = fmax(m1, mx1);
    const float c0 = exp(m0 - mn0), c1 = exp(m1 - mn1);
    m0 = mn0, m1 = mn1;
    float ls0 = 0.0f, ls1 = 0.0f;
#pragma unroll
    for (int n = 0; n < AM_FBC / 8; n++) {
      s[n][0] = exp(s[n][0] - mn0), s[n][1] = exp(s[n][1] - mn0);
      s[n][2] = exp(s[n][2] - mn1), s[n][3] = exp(s[n][3] - mn1);
      ls0 += s[n][0] + s[n][1], ls1 += s[n][2] + s[n][3];
    }
    l0 = l0 * c0 + ls0, l1 = l1 * c1 + ls1;
#pragma unroll
    for (int j = 0; j < AM_KS; j++) o[j][0] *= c0, o[j][1] *= c0, o[j][2] *= c1, o[j][3] *= c1;
    AM_ACCUM(o, s, vs, AM_FBC / 8)
  }
  AM_QUAD_SUM(l0);
  AM_QUAD_SUM(l1);
  AM_STORE(out, qi0 < tq, qi1 < tq, oo + (bh * tq + qi0) * d, oo + (bh * tq + qi1) * d, o, a_ / (r_ ? l1 : l0))
  if (qi0 < tq && t == 0) lse[lo + bh * tq + qi0] = m0 + log(l0);
  if (qi1 < tq && t == 0) lse[lo + bh * tq + qi1] = m1 + log(l1);
}

/* dq: a work-group per 64 query rows; Q and dO in registers; for each block of AM_QBC keys
 * (K and V staged), S = Q K^T and dP = dO V^T, P from the saved lse, dS = P (dP - delta), and
 * dQ += dS K. */
__kernel __attribute__((reqd_work_group_size(AM_ITEMS, 1, 1))) void flash_attention_bwd_q_mma(
    __global const float *dout, const long go, __global const float *q, const long qo, __global const float *k,
    const long ko, __global const float *v, const long vo, __global const float *lse, const long lo,
    __global const float *delta, const long dlo, __global float *dq, const long dqo, const long h, const long hkv,
    const long tq, const long tk, const long d, const long causal, const float scale) {
  __local float kv[2 * AM_QBC * AM_LD] __attribute__((aligned(16))); /* K, V; first Q, then dO */
  __local float *ks = kv, *vs = kv + AM_QBC * AM_LD;
  AM_MSCRATCH
  AM_XSCRATCH
  const int lid = get_local_id(0), lane = lid % 32, w = lid / 32, g = lane >> 2, t = lane & 3;
  AM_QUERY_BLOCK
  float qf[AM_KS][4], gf[AM_KS][4];
  am_stage(kv, q + qo + bh * tq * d, q0, tq, d, AM_ROWS, lid);
  barrier(CLK_LOCAL_MEM_FENCE);
  AM_A_ROWS(qf, kv, 16 * w)
  barrier(CLK_LOCAL_MEM_FENCE);
  am_stage(kv, dout + go + bh * tq * d, q0, tq, d, AM_ROWS, lid);
  barrier(CLK_LOCAL_MEM_FENCE);
  AM_A_ROWS(gf, kv, 16 * w)
  const long qi0 = q0 + 16 * w + g, qi1 = qi0 + 8;
  const float lr0 = qi0 < tq ? lse[lo + bh * tq + qi0] : 0.0f, lr1 = qi1 < tq ? lse[lo + bh * tq + qi1] : 0.0f;
  const float dr0 = qi0 < tq ? delta[dlo + bh * tq + qi0] : 0.0f, dr1 = qi1 < tq ? delta[dlo + bh * tq + qi1] : 0.0f;
  float acc[AM_KS][4];
  AM_ZERO(acc, AM_KS)
  for (long j0 = 0; j0 < nk; j0 += AM_QBC) {
    barrier(CLK_LOCAL_MEM_FENCE);
    am_stage(ks, k + ko + kvb, j0, tk, d, AM_QBC, lid);
    am_stage(vs, v + vo + kvb, j0, tk, d, AM_QBC, lid);
    barrier(CLK_LOCAL_MEM_FENCE);
    float s[AM_QBC / 8][4], dp[AM_QBC / 8][4];
    AM_ZERO(s, AM_QBC / 8)
    AM_ZERO(dp, AM_QBC / 8)
    AM_ROWDOT(s, qf, ks, AM_QBC / 8)
    AM_ROWDOT(dp, gf, vs, AM_QBC / 8)
    const bool full = q0 + AM_ROWS <= tq && j0 + AM_QBC <= tk && (!causal || j0 + AM_QBC - 1 <= q0 + tk - tq);
#pragma unroll
    for (int n = 0; n < AM_QBC / 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const long qi = e < 2 ? qi0 : qi1, kj = j0 + 8 * n + 2 * t + (e & 1);
        const float p = full || AM_SEES(qi, kj) ? exp(s[n][e] * scale - (e < 2 ? lr0 : lr1)) : 0.0f;
        s[n][e] = p * (dp[n][e] - (e < 2 ? dr0 : dr1));
      }
    AM_ACCUM(acc, s, ks, AM_QBC / 8)
  }
  AM_STORE(dq, qi0 < tq, qi1 < tq, dqo + (bh * tq + qi0) * d, dqo + (bh * tq + qi1) * d, acc, a_ * scale)
}

/* dk and dv: a work-group per 64 key rows of one (batch, key head), K and V in registers; over
 * the query heads sharing them and their blocks of AM_KBR queries that see any of the keys
 * (causal: from the diagonal on), with Q and dO staged: S^T = K Q^T, dP^T = V dO^T, P^T from the
 * saved lse, dS^T = P^T (dP^T - delta), dV += P^T dO and dK += dS^T Q. The result is
 * [2, B, Hkv, Tk, D] (dk, then dv). */
__kernel __attribute__((reqd_work_group_size(AM_ITEMS, 1, 1))) void flash_attention_bwd_kv_mma(
    __global const float *dout, const long go, __global const float *q, const long qo, __global const float *k,
    const long ko, __global const float *v, const long vo, __global const float *lse, const long lo,
    __global const float *delta, const long dlo, __global float *dkv, const long dko, const long h, const long hkv,
    const long tq, const long tk, const long d, const long causal, const float scale) {
  __local float qg[2 * AM_KBR * AM_LD] __attribute__((aligned(16))); /* Q, dO; first K, then V */
  __local float ls_[AM_KBR] __attribute__((aligned(8))), ds_[AM_KBR] __attribute__((aligned(8)));
  __local float *qs = qg, *gs = qg + AM_KBR * AM_LD;
  AM_MSCRATCH
  const int lid = get_local_id(0), lane = lid % 32, w = lid / 32, g = lane >> 2, t = lane & 3;
  const long nkb = (tk + AM_ROWS - 1) / AM_ROWS, grp = get_group_id(0), kb = grp % nkb, bk = grp / nkb;
  const long kh = bk % hkv, b = bk / hkv, group = h / hkv, k0 = kb * AM_ROWS, kvb = bk * tk * d;
  /* causal: query i sees key j when i >= j - (tk - tq); the first block holding such a query */
  const long qstart = causal ? (max(0L, k0 - (tk - tq)) / AM_KBR) * AM_KBR : 0;
  /* K and V as registers, or (AM_K_LOCAL, AM_V_LOCAL: fewer registers) as local rows */
#ifdef AM_V_LOCAL
  __local float vsh[AM_ROWS * AM_LD] __attribute__((aligned(16)));
  __local float *kstage = vsh;
#else
  __local float *kstage = qg;
#endif
#ifdef AM_K_LOCAL
  __local float ksh[AM_ROWS * AM_LD] __attribute__((aligned(16)));
  am_stage(ksh, k + ko + kvb, k0, tk, d, AM_ROWS, lid);
#else
  float kf[AM_KS][4];
  am_stage(kstage, k + ko + kvb, k0, tk, d, AM_ROWS, lid);
  barrier(CLK_LOCAL_MEM_FENCE);
  AM_A_ROWS(kf, kstage, 16 * w)
  barrier(CLK_LOCAL_MEM_FENCE);
#endif
#ifdef AM_V_LOCAL
  am_stage(vsh, v + vo + kvb, k0, tk, d, AM_ROWS, lid);
#else
  float vf[AM_KS][4];
  am_stage(qg, v + vo + kvb, k0, tk, d, AM_ROWS, lid);
  barrier(CLK_LOCAL_MEM_FENCE);
  AM_A_ROWS(vf, qg, 16 * w)
#endif
  const long kj0 = k0 + 16 * w + g, kj1 = kj0 + 8;
  float dk[AM_KS][4], dv[AM_KS][4];
  AM_ZERO(dk, AM_KS)
  AM_ZERO(dv, AM_KS)
  for (long gq = 0; gq < group; gq++) {
    const long qrow0 = (b * h + kh * group + gq) * tq;
    for (long i0 = qstart; i0 < tq; i0 += AM_KBR) {
      barrier(CLK_LOCAL_MEM_FENCE);
      am_stage(qs, q + qo + qrow0 * d, i0, tq, d, AM_KBR, lid);
      am_stage(gs, dout + go + qrow0 * d, i0, tq, d, AM_KBR, lid);
      if (lid < AM_KBR) {
        ls_[lid] = i0 + lid < tq ? lse[lo + qrow0 + i0 + lid] : 0.0f;
        ds_[lid] = i0 + lid < tq ? delta[dlo + qrow0 + i0 + lid] : 0.0f;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      float s[AM_KBR / 8][4], dp[AM_KBR / 8][4];
      AM_ZERO(s, AM_KBR / 8)
      AM_ZERO(dp, AM_KBR / 8)
#ifdef AM_K_LOCAL
      AM_ROWDOT_L(s, ksh, 16 * w, qs, AM_KBR / 8)
#else
      AM_ROWDOT(s, kf, qs, AM_KBR / 8)
#endif
#ifdef AM_V_LOCAL
      AM_ROWDOT_L(dp, vsh, 16 * w, gs, AM_KBR / 8)
#else
      AM_ROWDOT(dp, vf, gs, AM_KBR / 8)
#endif
      const bool full = i0 + AM_KBR <= tq && k0 + AM_ROWS <= tk && (!causal || k0 + AM_ROWS - 1 <= i0 + tk - tq);
#pragma unroll
      for (int n = 0; n < AM_KBR / 8; n++) {
        const float2 lsn = *(__local const float2 *)(ls_ + 8 * n + 2 * t),
                     dsn = *(__local const float2 *)(ds_ + 8 * n + 2 * t);
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int qj = 8 * n + 2 * t + (e & 1);
          const long kj = e < 2 ? kj0 : kj1;
          const float p = full || AM_SEES(i0 + qj, kj) ? exp(s[n][e] * scale - ((e & 1) ? lsn.y : lsn.x)) : 0.0f;
          s[n][e] = p;
          dp[n][e] = p * (dp[n][e] - ((e & 1) ? dsn.y : dsn.x));
        }
      }
      AM_ACCUM(dv, s, gs, AM_KBR / 8)
      AM_ACCUM(dk, dp, qs, AM_KBR / 8)
    }
  }
  const long kvoff = (b * hkv + kh) * tk * d, total = (long)(get_num_groups(0) / nkb) * tk * d;
  AM_STORE(dkv, kj0 < tk, kj1 < tk, dko + kvoff + kj0 * d, dko + kvoff + kj1 * d, dk, a_ * scale)
  AM_STORE(dkv, kj0 < tk, kj1 < tk, dko + total + kvoff + kj0 * d, dko + total + kvoff + kj1 * d, dv, a_)
}
#endif

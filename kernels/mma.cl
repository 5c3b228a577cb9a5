/* What gemm_fast.cl and gemm_mma.cl share: the GEMM kernels' arguments, and for their
 * tensor-core builds, float32 inputs rounded to tf32 or bfloat16 and one warp-wide mma.sync
 * with float32 accumulation. Built with -DNC_MMA_TF32=1 ("high", m16n8k8 .tf32) or -DNC_MMA_BF16=1
 * ("medium", m16n8k16 .bf16) on NVIDIA devices of compute capability 8.0 or later
 * (runtime/backend/opencl/cl_gemm.c). g = lane / 4, t = lane % 4. Fragments, in mma slots
 * (rows of A, columns of B, and k):
 * - tf32: A a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4); B b0 (t, g),
 *   b1 (t + 4, g).
 * - bf16: each register holds two bf16, the lower k in its low half. A a0 (g, 2t..2t+1),
 *   a1 (g + 8, 2t..2t+1), a2 (g, 2t+8..2t+9), a3 (g + 8, 2t+8..2t+9); B b0 (2t..2t+1, g),
 *   b1 (2t+8..2t+9, g).
 * - C (both): c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1). */

#ifndef REAL
#define REAL float
#endif

/* The arguments of the GEMM kernels of both files (cl_gemm.c's launch_fast sends them to
 * either): C = alpha A B + beta C (+ bias) over a batch, with offsets and strides in elements. */
#define GEMM_ARGS                                                                                 \
  const long M_, const long N_, const long K_, __global const REAL *A, const long a_off, const long a_sb, \
      const long a_sm, const long a_sk, __global const REAL *B, const long b_off, const long b_sb,   \
      const long b_sk, const long b_sn, __global REAL *C, const long c_off, const long c_sb,         \
      const long c_sm, const long c_sn, __global const REAL *bias, const long bias_off,              \
      const long bias_sm, const long bias_sn, const int has_bias, const REAL alpha, const REAL beta

/* The start of the tensor-core kernels' bodies (gemm_mma.cl, gemm_tf32.cl, gemm_bf16.cl): the
 * work-item's lane and warp (g = lane / 4, t = lane % 4; wm and wn its warp's place, WARPS_N
 * warps along N), the batch entry bi, M, N and K, the tile's first row m0 and column n0, and A's
 * and B's leading dimensions lda, ldb and tile origins Ab, Bb (elements of type T): at row m0
 * (A K-major, A_K) or column m0, and likewise B at n0. */
#define MMA_TILE_START(T, BM, BN, WARPS_N, A_K, B_K)                                              \
  const int lid = get_local_id(0), lane = lid % 32, warp = lid / 32, g = lane >> 2, t = lane & 3; \
  const int wm = warp / (WARPS_N), wn = warp % (WARPS_N);                                        \
  const long bi = get_group_id(2);                                                               \
  const int M = (int)M_, N = (int)N_, K = (int)K_;                                               \
  const int m0 = get_group_id(1) * (BM), n0 = get_group_id(0) * (BN);                           \
  const int lda = (int)((A_K) ? a_sm : a_sk), ldb = (int)((B_K) ? b_sn : b_sk);                  \
  __global const T *Ab = A + a_off + bi * a_sb + ((A_K) ? (long)m0 * lda : (long)m0);            \
  __global const T *Bb = B + b_off + bi * b_sb + ((B_K) ? (long)n0 * ldb : (long)n0);

/* Where gemm_mma.cl's and gemm_tf32.cl's results lie in the tile (both read an M- or N-major
 * operand's fragments as 16-byte runs of 4 rows or columns that go to 4 fragments): the row of
 * accumulator row half h of fragment i, and the column of element e of fragment j, for warps WN
 * columns wide; in place for K-major operands, permuted back for the others. */
#define MMA_ROW16(A_K, i, h) (wm * 64 + ((A_K) ? (i) * 16 + (h) * 8 + g : (h) * 32 + g * 4 + (i)))
#define MMA_COL16(B_K, j, e, WN) (wn * (WN) + ((B_K) ? (j) * 8 + t * 2 + (e) : ((j) / 4) * 32 + (t * 2 + (e)) * 4 + (j) % 4))

/* The tensor-core kernels' loops over mma.sync and over guarded stores: unrolled, except under
 * the emulation, where PoCL takes seconds to minutes to build each inlined copy of an emulated
 * mma.sync (with its barriers) or of a guarded store (about 100 s for one unrolled epilogue's 128). */
#ifdef NC_MMA_EMULATE
#define MMA_UNROLL _Pragma("unroll 1")
#else
#define MMA_UNROLL _Pragma("unroll")
#endif

/* The epilogue of the tensor-core kernels (gemm_mma.cl, gemm_tf32.cl, gemm_bf16.cl): C = alpha
 * acc + beta C (+ bias) for a warp's 4 x FJ accumulator fragments, C and the bias of type T (at
 * batch entry bi of C); ROW(A_K, i, h) is the tile row of row half h of fragment i, COL(B_K, j, e) the tile
 * column of element e of fragment j; CIN(v) and COUT(x) convert T to and from float (MMA_ID for
 * float), its loops MMA_UNROLL. */
#define MMA_ID(x) (x)
#define MMA_EPILOGUE(T, FJ, ROW, A_K, COL, B_K, CIN, COUT)                                        \
  __global T *Cb = C + c_off + bi * c_sb;                                                        \
  __global const T *biasb = bias + bias_off;                                                     \
  MMA_UNROLL for (int i = 0; i < 4; i++)                                                             \
    MMA_UNROLL for (int h = 0; h < 2; h++) {                                                         \
      const int m = m0 + ROW(A_K, i, h);                                                        \
      MMA_UNROLL for (int j = 0; j < (FJ); j++)                                                      \
        MMA_UNROLL for (int e = 0; e < 2; e++) {                                                     \
          const int n = n0 + COL(B_K, j, e);                                                    \
          if (m < M && n < N) {                                                                 \
            __global T *p_ = Cb + (long)m * c_sm + (long)n * c_sn;                              \
            float o_ = acc[i][j][2 * h + e] * alpha;                                            \
            if (beta != 0.0f) o_ += beta * CIN(*p_);                                            \
            if (has_bias) o_ += CIN(biasb[(long)m * bias_sm + (long)n * bias_sn]);              \
            *p_ = COUT(o_);                                                                     \
          }                                                                                     \
        }                                                                                       \
    }

/* ---- the convolutions' geometry (gemm_fast.cl and conv_mma.cl) ---------------------------- */

/* n / d for 0 <= n < 2^31 without a division: floor(n m / 2^sh), with the host's m and sh for
 * d (nc_cl_divisor in runtime/backend/opencl/cl_conv.c). The convolutions decode indices this
 * way in every K tile: a division by a run-time value takes NVIDIA's GPUs some twenty
 * instructions. */
#define NC_DIV(n, m, sh) ((int)(((ulong)(uint)(n) * (m)) >> (sh)))

/* Mirrors cl_conv.c's cl_convi, the geometry of the large-tile convolutions: input [n, c, h, w],
 * weight [o, c, kh, kw], output [n, o, oh, ow]; every product of extents fits in 32 bits (checked
 * by the host). The NC_DIV constants of kw, kh * kw, ow and oh * ow follow (m, then sh, for
 * each). Then the output's layout, which the forward's stores follow: element (b, m, oy, ox) of
 * Y lies at (b o + m) yp + oy yr + ox yc + y0 (a dense output: yp = oh ow, yr = ow, yc = 1,
 * y0 = 0; the phases of a strided input gradient write every s-th pixel of a larger plane). */
typedef struct {
  int n, c, h, w, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw;
  uint kw_m, khw_m, ow_m, ohw_m;
  int kw_s, khw_s, ow_s, ohw_s;
  int yp, yr, yc, y0;
} nc_convi;
#define CV_DIV_KW(n) NC_DIV(n, p.kw_m, p.kw_s)
#define CV_DIV_KHW(n) NC_DIV(n, p.khw_m, p.khw_s)
#define CV_DIV_OW(n) NC_DIV(n, p.ow_m, p.ow_s)
#define CV_DIV_OHW(n) NC_DIV(n, p.ohw_m, p.ohw_s)
/* The offset in Y of output pixel q (< oh ow) of image b, channel 0 (channel m adds m yp). */
#define CV_YOFS(b, q) ((b) * p.o * p.yp + CV_DIV_OW(q) * (p.yr - p.ow * p.yc) + (q) * p.yc + p.y0)

/* The body of a kernel that stores, at p's output layout (yp, yr, yc, y0), the sum over s < splits
 * of WS[s total + i] (summed in T), i the dense index of (b, m, oy, ox) in [n, o, oh, ow], through
 * CVT (the result's conversion): a convolution forward whose K was split (runtime/backend/opencl/cl_conv.c). */
#define CV_SUM_SPLITS(T, WS, splits, Y, CVT)                                                          \
  const int ohw_ = p.oh * p.ow, total_ = p.n * p.o * ohw_;                                      \
  for (int i_ = get_global_id(0); i_ < total_; i_ += get_global_size(0)) {                      \
    T s_ = 0;                                                                                   \
    for (int t_ = 0; t_ < (splits); t_++) s_ += (WS)[(long)t_ * total_ + i_];                   \
    const int bm_ = i_ / ohw_, q_ = i_ - bm_ * ohw_, oy_ = q_ / p.ow;                           \
    (Y)[bm_ * p.yp + oy_ * p.yr + (q_ - oy_ * p.ow) * p.yc + p.y0] = CVT(s_);                   \
  }

/* Component i (a constant) of a 4-vector. */
#define NC_V4(v, i) ((i) == 0 ? (v).x : (i) == 1 ? (v).y : (i) == 2 ? (v).z : (v).w)

#if defined(NC_MMA_TF32) || defined(NC_MMA_BF16)

/* bfloat16: 7 mantissa bits, to nearest, ties to even (infinities and NaN kept). */
inline float mma_bf16(const float x) {
  const uint u = as_uint(x);
  return (u & 0x7f800000u) == 0x7f800000u ? x : as_float((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
}
inline float4 mma_bf16_4(const float4 v) { return (float4)(mma_bf16(v.x), mma_bf16(v.y), mma_bf16(v.z), mma_bf16(v.w)); }
/* two rounded floats' bit patterns as one register of bf16 pairs: lo in bits 0-15, hi in 16-31 */
#define MMA_PK(lo, hi) (((hi) & 0xffff0000u) | ((lo) >> 16))

/* tf32: 10 mantissa bits, to nearest with ties away from zero, as cvt.rna.tf32.f32. */
inline float mma_tf32(const float x) {
  const uint u = as_uint(x);
  return (u & 0x7f800000u) == 0x7f800000u ? x : as_float((u + 0x1000u) & 0xffffe000u);
}
inline float4 mma_tf32_4(const float4 v) { return (float4)(mma_tf32(v.x), mma_tf32(v.y), mma_tf32(v.z), mma_tf32(v.w)); }

#ifdef NC_MMA_EMULATE
/* A test hook (NETCL_MMA_EMULATE=1, runtime/backend/opencl/cl_gemm.c): mma.sync computed by the
 * warp's 32 work-items through local memory, from the fragment layouts above, so that devices
 * without tensor cores (PoCL in CI) run the tensor-core kernels' tiling, fragment indexing and
 * epilogues against the CPU backend. Every work-item of the group calls it at the same points;
 * MMA_SCRATCH(items) declares its local memory for a group of that many work-items. */
/* The element (r, k) of A and (k, n) of B in the warp's registers, copied to w (6 words a lane:
 * a0..a3, b0, b1), after the fragment layouts above. */
#ifdef NC_MMA_BF16
#define MMA_EMU_K 16
inline float mma_bf16_half(const uint u, const int hi) { return as_float(hi ? (u & 0xffff0000u) : (u << 16)); }
#define MMA_EMU_A(w, r, k) \
  mma_bf16_half((w)[(((r) % 8) * 4 + ((k) % 8) / 2) * 6 + ((k) >= 8 ? 2 : 0) + ((r) >= 8 ? 1 : 0)], (k) & 1)
#define MMA_EMU_B(w, n, k) mma_bf16_half((w)[((n) * 4 + ((k) % 8) / 2) * 6 + 4 + ((k) >= 8 ? 1 : 0)], (k) & 1)
#else
#define MMA_EMU_K 8
#define MMA_EMU_A(w, r, k) as_float((w)[(((r) % 8) * 4 + (k) % 4) * 6 + ((k) < 4 ? 0 : 2) + ((r) >= 8 ? 1 : 0)])
#define MMA_EMU_B(w, n, k) as_float((w)[((n) * 4 + (k) % 4) * 6 + 4 + ((k) < 4 ? 0 : 1)])
#endif
inline void mma_emulated(__local uint *x, const int lane, const int warp, float *c, const uint *a, const uint *b) {
  __local uint *w = x + warp * 32 * 6;
  for (int e = 0; e < 4; e++) w[lane * 6 + e] = a[e];
  w[lane * 6 + 4] = b[0];
  w[lane * 6 + 5] = b[1];
  barrier(CLK_LOCAL_MEM_FENCE);
  const int g = lane >> 2, t = lane & 3;
  float d[4];
  for (int e = 0; e < 4; e++) {
    const int r = g + (e >= 2 ? 8 : 0), n = 2 * t + (e & 1);
    float acc = c[e];
    for (int k = 0; k < MMA_EMU_K; k++) acc = fma(MMA_EMU_A(w, r, k), MMA_EMU_B(w, n, k), acc);
    d[e] = acc;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int e = 0; e < 4; e++) c[e] = d[e];
}
#define MMA_SCRATCH(items) __local uint mma_x_[(items) * 6];
#define MMA_SYNC(c, a, b) mma_emulated(mma_x_, lid % 32, lid / 32, c, a, b)
#else
#ifdef NC_MMA_BF16
#define MMA_SHAPE "m16n8k16.row.col.f32.bf16.bf16.f32"
#else
#define MMA_SHAPE "m16n8k8.row.col.f32.tf32.tf32.f32"
#endif
#define MMA_SCRATCH(items)
#define MMA_SYNC(c, a, b)                                                                         \
  __asm__("mma.sync.aligned." MMA_SHAPE " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                           \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
#endif

#endif

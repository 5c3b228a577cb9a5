/* Softmax and log_softmax of contiguous float32 rows of at most 1024 elements, one warp (32
 * work-items) per row, with no local memory and no barrier: the row's max and its sum of
 * exp(v - max) are reduced by butterfly shuffles (PyTorch's "persistent" softmax has the same
 * shape). runtime/backend/opencl/cl_reduce.c takes it on devices whose compiler takes NVIDIA's
 * inline PTX; other devices keep kernels/reduce.cl's softmax, which reduces through local memory.
 *
 * softmax_warp_<N>: each work-item holds N elements of its row in registers, elements lane,
 * lane + 32, ..., so that each of a warp's loads and stores covers 128 consecutive bytes. The
 * array takes constant indices only (every loop over it unrolled): NVIDIA's compiler moves an
 * array indexed otherwise to local memory. The elements are addressed from one pointer per
 * work-item at constant offsets: with an index formed per element (lane + 32 r), LLVM kept a
 * pointer per element alive across the row loop (clang 15's PTX for N = 32 took 242 registers
 * in ptxas for sm_90, against 63 this way). Rows of at most 32 elements (N = 1) take `width`
 * work-items each (the power of two at or above the row's length), several rows to a warp.
 * Padding is -inf, which adds 0. NaN and +inf give NaN rows, and the values are those of
 * reduce.cl's register kernel: SM_TERM, SM_MAX, exp(v - max) / sum, (v - max) - log(sum).
 *
 * softmax_warp4_<N>: the same with 16-byte loads and stores, for rows whose length is a multiple
 * of 4 and that start on a 16-byte boundary (lengths 65 to 1024 here): a work-item holds N
 * elements as N / 4 vectors, vector r at vector index lane + 32 r of its row, so that a warp's
 * access covers 512 consecutive bytes. On the H100 a row of 1024 went from 2,197 to 2,829 GB/s
 * (PyTorch 2,774; tests/bench/kernel_probe.c, docs/performance.md).
 *
 * A butterfly leaves every lane of a row with the same max and the same sum (each step merges
 * the same two values in either lane, and addition commutes), so every lane writes its own
 * elements with no broadcast of the results. */

#ifdef NC_SHFL_PTX
/* v of lane (lane ^ mask) of the warp: shfl.sync.bfly over the whole warp (membermask all 32
 * lanes; every lane of the warp reaches every call, as the loops around it are uniform). */
inline float sw_xor(const float v, const int mask) {
  uint r;
  __asm__ volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(as_uint(v)), "r"(mask));
  return as_float(r);
}
#define SW_SCRATCH
#define SW_XOR(v, mask) sw_xor(v, mask)
#else
/* The same exchange through local memory, with two barriers: the test hook NETCL_SHFL_EMULATE=1
 * (cl_reduce.c), so that devices without PTX (PoCL in CI) run the kernel's indexing against the
 * CPU backend, and what --warmup builds (it builds every program without options, which must
 * work on any device). Every work-item of the group calls it at the same points. Work-groups
 * are at most 256 wide (nc_cl_local_size). */
inline float sw_xor(__local float *x, const float v, const int lid, const int mask) {
  x[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  const float r = x[lid ^ mask];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}
#define SW_SCRATCH __local float sw_x_[256];
#define SW_XOR(v, mask) sw_xor(sw_x_, v, lid, mask)
#endif

#define SW_PLUS(a, b) ((a) + (b))
/* x reduced with MERGE over the `w` lanes of its row (the partner's value taken once: MERGE may
 * name an argument twice) */
#define SW_REDUCE(x, MERGE)                  \
  for (int s_ = w / 2; s_ > 0; s_ >>= 1) {   \
    const float other_ = SW_XOR(x, s_);      \
    x = MERGE(x, other_);                    \
  }

/* The rows of the work-group's turns, ls / w at a time: max, then the sum, then WRITES (a loop
 * per op, and the kernel branches around the whole row loop, not between its shuffles): the
 * softmax keeps exp(v - max) from the sum for its writes, the log-softmax its inputs. */
#define SW_ROWS(N, KEEP_EXP, WRITES)                                                              \
  for (long base = get_group_id(0) * (long)per_group; base < outer;                               \
       base += get_num_groups(0) * (long)per_group) {                                             \
    const long row = base + lid / w;                                                              \
    const int rest = (row < outer ? inner : 0) - lane;                                            \
    __global const float *xl = x + x_off + row * inner + lane;                                    \
    __global float *ol = out + out_off + row * inner + lane;                                      \
    float v[N];                                                                                   \
    float m = -INFINITY, sum = 0;                                                                 \
    _Pragma("unroll") for (int r = 0; r < N; r++) {                                               \
      v[r] = r * 32 < rest ? xl[r * 32] : -INFINITY;                                              \
      m = SM_MAX(m, v[r]);                                                                        \
    }                                                                                             \
    SW_REDUCE(m, SM_MAX);                                                                         \
    _Pragma("unroll") for (int r = 0; r < N; r++) {                                               \
      const float e = SM_TERM(v[r], m);                                                           \
      sum += e;                                                                                   \
      if (KEEP_EXP) v[r] = e;                                                                     \
    }                                                                                             \
    SW_REDUCE(sum, SW_PLUS);                                                                      \
    WRITES(N)                                                                                     \
  }
#define SW_SOFTMAX_WRITES(N)                                                                      \
  _Pragma("unroll") for (int r = 0; r < N; r++) if (r * 32 < rest) ol[r * 32] = v[r] / sum;
#define SW_LOG_SOFTMAX_WRITES(N)                                                                  \
  const float ls = log(sum);                                                                      \
  _Pragma("unroll") for (int r = 0; r < N; r++) if (r * 32 < rest) ol[r * 32] = (v[r] - m) - ls;

/* A kernel of this file: NAME with ROWS(N, ...) and its two WRITES, rows of W work-items. */
#define SW_KERNEL(NAME, N, W, ROWS, SOFTMAX_WRITES, LOG_SOFTMAX_WRITES)                           \
  __kernel void NAME(int op, __global float *out, long out_off, __global const float *x, long x_off, \
                     long outer, int inner, int width) {                                           \
    SW_SCRATCH                                                                                    \
    const int lid = get_local_id(0);                                                              \
    const int w = (W), lane = lid % w, per_group = get_local_size(0) / w;                         \
    if (op == NC_OP_LOG_SOFTMAX) {                                                                \
      ROWS(N, false, LOG_SOFTMAX_WRITES)                                                          \
    } else {                                                                                      \
      ROWS(N, true, SOFTMAX_WRITES)                                                               \
    }                                                                                             \
  }
#define SOFTMAX_WARP_K(N) \
  SW_KERNEL(softmax_warp_##N, N, N == 1 ? width : 32, SW_ROWS, SW_SOFTMAX_WRITES, SW_LOG_SOFTMAX_WRITES)

SOFTMAX_WARP_K(1)
SOFTMAX_WARP_K(2)
SOFTMAX_WARP_K(4)
SOFTMAX_WARP_K(8)
SOFTMAX_WARP_K(16)
SOFTMAX_WARP_K(32)

/* The float4 rows (softmax_warp4_<N>, see the top of this file). */
#define SW4_ROWS(N, KEEP_EXP, WRITES)                                                             \
  for (long base = get_group_id(0) * (long)per_group; base < outer;                               \
       base += get_num_groups(0) * (long)per_group) {                                             \
    const long row = base + lid / 32;                                                             \
    const int rest = (row < outer ? inner : 0) - 4 * lane;                                        \
    __global const float4 *xl = (__global const float4 *)(x + x_off + row * inner) + lane;        \
    __global float4 *ol = (__global float4 *)(out + out_off + row * inner) + lane;                \
    float4 v[N / 4];                                                                              \
    float m = -INFINITY, sum = 0;                                                                 \
    _Pragma("unroll") for (int r = 0; r < N / 4; r++) {                                           \
      v[r] = r * 128 < rest ? xl[r * 32] : (float4)(-INFINITY);                                   \
      m = SM_MAX(m, v[r].x);                                                                      \
      m = SM_MAX(m, v[r].y);                                                                      \
      m = SM_MAX(m, v[r].z);                                                                      \
      m = SM_MAX(m, v[r].w);                                                                      \
    }                                                                                             \
    SW_REDUCE(m, SM_MAX);                                                                         \
    _Pragma("unroll") for (int r = 0; r < N / 4; r++) {                                           \
      const float4 e = (float4)(SM_TERM(v[r].x, m), SM_TERM(v[r].y, m), SM_TERM(v[r].z, m),       \
                                SM_TERM(v[r].w, m));                                              \
      sum += e.x;                                                                                 \
      sum += e.y;                                                                                 \
      sum += e.z;                                                                                 \
      sum += e.w;                                                                                 \
      if (KEEP_EXP) v[r] = e;                                                                     \
    }                                                                                             \
    SW_REDUCE(sum, SW_PLUS);                                                                      \
    WRITES(N)                                                                                     \
  }
#define SW4_SOFTMAX_WRITES(N)                                                                     \
  _Pragma("unroll") for (int r = 0; r < N / 4; r++) if (r * 128 < rest) ol[r * 32] = v[r] / sum;
#define SW4_LOG_SOFTMAX_WRITES(N)                                                                 \
  const float ls = log(sum);                                                                      \
  _Pragma("unroll") for (int r = 0; r < N / 4; r++) if (r * 128 < rest) ol[r * 32] = (v[r] - m) - ls;

/* Rows of 32 work-items only (width is 32 for these lengths). */
#define SOFTMAX_WARP4_K(N) \
  SW_KERNEL(softmax_warp4_##N, N, 32, SW4_ROWS, SW4_SOFTMAX_WRITES, SW4_LOG_SOFTMAX_WRITES)

SOFTMAX_WARP4_K(4)
SOFTMAX_WARP4_K(8)
SOFTMAX_WARP4_K(16)
SOFTMAX_WARP4_K(32)

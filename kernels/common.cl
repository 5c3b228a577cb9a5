/* Prepended to every program. */
#ifdef NC_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double nc_acc; /* accumulation type for host-provided reals */
#else
typedef float nc_acc;
#endif
/* Same rounding as the CPU backend: no fused multiply-add contraction. */
#pragma OPENCL FP_CONTRACT OFF

/* Mirrors nc_cl_layout (runtime/backend/opencl/cl_backend.h). */
typedef struct {
  long offset;
  int ndim;
  int contiguous;
  long shape[8];
  long strides[8];
} nc_layout;

/* Element offset of flat (row-major) index i. */
inline long nc_offset(const nc_layout *l, long i) {
  if (l->contiguous) return l->offset + i;
  long off = l->offset;
  for (int d = l->ndim - 1; d >= 0; d--) {
    long s = l->shape[d];
    long q = i / s;
    off += (i - q * s) * l->strides[d];
    i = q;
  }
  return off;
}

#define NC_GRID_LOOP(i, n) for (long i = get_global_id(0); i < (n); i += get_global_size(0))

/* In kernels with barriers: for (T i = first + lid; i < n; i += step), but with a trip count that
 * every work-item of the group shares (first, n and step are group-uniform, 0 <= lid < step):
 * each item runs the same rounds and skips the body past n. Same elements, same order. Loops
 * whose trip count differs between work-items make PoCL 5.0's work-group compiler abort
 * (docs/architecture.md, "Writing kernels"). Usage: NC_GROUP_FOR(long, e, 0, lid, cnt, ls) body */
#define NC_GROUP_FOR(T, i, first, lid, n, step)                                                  \
  for (T i##_base_ = (first), i = i##_base_ + (lid); i##_base_ < (n); i##_base_ += (step), i = i##_base_ + (lid)) \
    if (i < (n))

/* Softmax's terms (kernels/reduce.cl, kernels/softmax_warp.cl): SM_TERM(v, m) is exp(v - m) with
 * -inf contributing 0 even when m is -inf too, so rows that start with -inf (masked positions)
 * stay exact; nan and +inf reach the sum as in the two-pass form, so such rows give nan. SM_MAX
 * is the max with nan winning. */
#define SM_TERM(v, m) ((v) == -INFINITY ? 0 : exp((v) - (m)))
#define SM_MAX(a, b) (((b) > (a) || isnan(b)) ? (b) : (a))

#define NC_CONV_PLAIN(T, x) ((T)(x))
#define NC_CONV_BOOL(T, x) ((T)((x) != 0))

/* Philox 4x32-10, as runtime/core/random.c. */
inline uint4 nc_philox(uint4 c, uint2 k) {
  for (int r = 0; r < 10; r++) {
    uint hi0 = mul_hi(0xD2511F53u, c.x), lo0 = 0xD2511F53u * c.x;
    uint hi1 = mul_hi(0xCD9E8D57u, c.z), lo1 = 0xCD9E8D57u * c.z;
    c = (uint4)(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    k += (uint2)(0x9E3779B9u, 0xBB67AE85u);
  }
  return c;
}

inline uint4 nc_philox_element(ulong seed, ulong counter) {
  return nc_philox((uint4)((uint)counter, (uint)(counter >> 32), 0u, 0u), (uint2)((uint)seed, (uint)(seed >> 32)));
}

inline float nc_u24(uint w) { return (float)(w >> 8) * 0x1p-24f; }
#ifdef NC_FP64
inline double nc_u53(uint a, uint b) { return (double)(((ulong)(a >> 5) << 26) | (ulong)(b >> 6)) * 0x1p-53; }
#endif

/* Index family. take_<bytes>: index_select and gather move elements by size (1, 4 or 8 bytes);
 * scatter_add_<T>: each output element adds, in index order, the sources whose index names it
 * (deterministic, no atomics; matches runtime/backend/cpu/index.c bit for bit). Layouts are
 * unmerged: dims of out, x and idx correspond. */

#define TAKE_K(B, T)                                                                             \
  __kernel void take_##B(int op, __global T *out, nc_layout lo, __global const T *x, nc_layout lx, \
                         __global const long *idx, nc_layout li, int dim, long n) {              \
    NC_GRID_LOOP(i, n) {                                                                         \
      long rem = i, oo = lo.offset, xo = lx.offset, io = li.offset, cd = 0;                      \
      for (int d = lo.ndim - 1; d >= 0; d--) {                                                   \
        const long q = rem / lo.shape[d], c = rem - q * lo.shape[d];                             \
        rem = q;                                                                                 \
        oo += c * lo.strides[d];                                                                 \
        if (d == dim) cd = c;                                                                    \
        else xo += c * lx.strides[d];                                                            \
        if (op == NC_OP_GATHER) io += c * li.strides[d];                                         \
      }                                                                                          \
      if (op != NC_OP_GATHER) io += cd * li.strides[0];                                          \
      out[oo] = x[xo + idx[io] * lx.strides[dim]];                                               \
    }                                                                                            \
  }

TAKE_K(1, uchar)
TAKE_K(4, uint)
TAKE_K(8, ulong)

#define SCATTER_K(N, T, ADD)                                                                     \
  __kernel void scatter_add_##N(__global T *out, nc_layout lo, __global const T *src, nc_layout ls, \
                                __global const long *idx, nc_layout li, int dim, long n) {       \
    NC_GRID_LOOP(i, n) {                                                                         \
      long rem = i, oo = lo.offset, so = ls.offset, io = li.offset, cd = 0;                      \
      bool inside = true;                                                                        \
      for (int d = lo.ndim - 1; d >= 0; d--) {                                                   \
        const long q = rem / lo.shape[d], c = rem - q * lo.shape[d];                             \
        rem = q;                                                                                 \
        oo += c * lo.strides[d];                                                                 \
        if (d == dim) {                                                                          \
          cd = c;                                                                                \
          continue;                                                                              \
        }                                                                                        \
        if (c >= li.shape[d]) inside = false;                                                    \
        so += c * ls.strides[d];                                                                 \
        io += c * li.strides[d];                                                                 \
      }                                                                                          \
      if (!inside) continue;                                                                     \
      T acc = out[oo];                                                                           \
      for (long j = 0; j < li.shape[dim]; j++)                                                   \
        if (idx[io + j * li.strides[dim]] == cd) acc = ADD(acc, src[so + j * ls.strides[dim]]);  \
      out[oo] = acc;                                                                             \
    }                                                                                            \
  }

#define PLAIN_ADD(a, b) ((a) + (b))
#define WRAP_ADD_I(a, b) ((int)((uint)(a) + (uint)(b)))
#define WRAP_ADD_L(a, b) ((long)((ulong)(a) + (ulong)(b)))
#define WRAP_ADD_U8(a, b) ((uchar)((a) + (b)))
#define OR_ADD(a, b) ((uchar)((a) | (b)))

SCATTER_K(float32, float, PLAIN_ADD)
SCATTER_K(int32, int, WRAP_ADD_I)
SCATTER_K(int64, long, WRAP_ADD_L)
SCATTER_K(uint8, uchar, WRAP_ADD_U8)
SCATTER_K(bool, uchar, OR_ADD)
#ifdef NC_FP64
SCATTER_K(float64, double, PLAIN_ADD)
#endif

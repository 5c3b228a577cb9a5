/* k-means steps (op-table KERNEL rows kmeans_assign and kmeans_update; runtime/ops/cluster.c).
 * -DREAL=double for float64. Local size: a power of two <= KM_WG.
 *
 * kmeans_assign_tiled (at the end) is the one OpenCL runs where it fits; this one is the fallback.
 * kmeans_assign: one work-group per tile of KM_TP points (the ops layer's NC_KMEANS_TILE). The
 * group walks the centroids in tiles: points and centroids are staged through local memory
 * KM_TD dims at a time, each work-item accumulates the squared distances of one point to
 * KM_CPL centroids of the tile in registers, and keeps the running best and second best; the
 * lanes (work-items that share a point) merge at the end. No N x K matrix is ever formed.
 * With Hamerly's bounds (labels given), a point whose bounds prove its label is kept; a group
 * none of whose points needs a search skips the centroid tiles altogether. */
#ifndef REAL
#define REAL float
#endif
#define KM_WG 256
#define KM_TP 64
#define KM_TD 16
#define KM_CPL 8
#define KM_TC ((KM_WG / KM_TP) * KM_CPL)

/* t = {x [n, d], centroids [k, d], labels [n]?, bounds [n, 2]?, moves [k, 2]?, out [n], dist [n, 2]}
 * i = {n, d, k}. */
__kernel void kmeans_assign(__global const REAL *x, const long xo, __global const REAL *c, const long co,
                            __global const long *lab, const long lo, __global const REAL *bnd, const long bo,
                            __global const REAL *mv, const long mo, __global long *out, const long oo,
                            __global REAL *dist, const long dso, const long n, const long d, const long k) {
  __local REAL xs[KM_TP][KM_TD + 1];
  __local REAL cs[KM_TC][KM_TD + 1];
  __local REAL red1[KM_WG], red2[KM_WG];
  __local long redi[KM_WG];
  __local int needs[KM_TP];
  const int lid = get_local_id(0), ls = get_local_size(0);
  const int lanes = ls >= KM_TP ? ls / KM_TP : 1, pr = ls >= KM_TP ? KM_TP : ls, rounds = KM_TP / pr;
  const int q = lid / pr, pl = lid % pr, tc = lanes * KM_CPL;
  const long p0 = get_group_id(0) * KM_TP;
  const int pruned = lo >= 0;
  /* The largest move of any centroid (lowers every lower bound). */
  REAL mx = 0;
  if (pruned) {
    NC_GROUP_FOR(long, j, 0, lid, k, ls) mx = fmax(mx, mv[mo + 2 * j]);
  }
  red1[lid] = mx;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = ls / 2; h > 0; h >>= 1) {
    if (lid < h) red1[lid] = fmax(red1[lid], red1[lid + h]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const REAL maxmove = red1[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int r = 0; r < rounds; r++) {
    const long i = p0 + r * pr + pl;
    /* The bounds test, by lane 0 of each point (the distance loop runs in every item, so that
     * its trip count is the group's). */
    int need = q == 0 && i < n, check = 0;
    long a = 0;
    REAL u = 0, l = 0, m = 0;
    if (need && pruned) {
      a = lab[lo + i];
      if (a >= 0 && a < k) {
        check = 1;
        u = bnd[bo + 2 * i] + mv[mo + 2 * a];
        l = bnd[bo + 2 * i + 1] - maxmove;
        m = fmax(mv[mo + 2 * a + 1], l);
      }
    }
    const int tighten = check && u > m;
    REAL s = 0;
    for (long e = 0; e < d; e++) {
      if (tighten) {
        const REAL t = x[xo + i * d + e] - c[co + a * d + e];
        s += t * t;
      }
    }
    if (tighten) u = sqrt(s);
    if (check && !(u > m)) {
      need = 0;
      out[oo + i] = a;
      dist[dso + 2 * i] = u;
      dist[dso + 2 * i + 1] = l;
    }
    if (q == 0) needs[pl] = need;
    barrier(CLK_LOCAL_MEM_FENCE);
    int any = 0;
    for (int e = 0; e < pr; e++) any |= needs[e];
    REAL b1 = INFINITY, b2 = INFINITY;
    long bi = 0;
    if (any) {
      for (long c0 = 0; c0 < k; c0 += tc) {
        REAL acc[KM_CPL];
        for (int j = 0; j < KM_CPL; j++) acc[j] = 0;
        for (long d0 = 0; d0 < d; d0 += KM_TD) {
          barrier(CLK_LOCAL_MEM_FENCE);
          NC_GROUP_FOR(int, e, 0, lid, pr * KM_TD, ls) {
            const int pp = e / KM_TD, dd = e % KM_TD;
            const long gi = p0 + r * pr + pp, gd = d0 + dd;
            xs[pp][dd] = gi < n && gd < d ? x[xo + gi * d + gd] : (REAL)0;
          }
          NC_GROUP_FOR(int, e, 0, lid, tc * KM_TD, ls) {
            const int cc = e / KM_TD, dd = e % KM_TD;
            const long gj = c0 + cc, gd = d0 + dd;
            cs[cc][dd] = gj < k && gd < d ? c[co + gj * d + gd] : (REAL)0;
          }
          barrier(CLK_LOCAL_MEM_FENCE);
          for (int dd = 0; dd < KM_TD; dd++) {
            const REAL xv = xs[pl][dd];
            for (int j = 0; j < KM_CPL; j++) {
              const REAL t = xv - cs[q + j * lanes][dd];
              acc[j] = mad(t, t, acc[j]);
            }
          }
        }
        for (int j = 0; j < KM_CPL; j++) {
          const long gj = c0 + q + j * lanes;
          if (gj < k) {
            if (acc[j] < b1) {
              b2 = b1;
              b1 = acc[j];
              bi = gj;
            } else if (acc[j] < b2) {
              b2 = acc[j];
            }
          }
        }
      }
    }
    /* Lanes merge: lane 0 of each point takes the best two over its lanes (ties: lower index). */
    red1[lid] = b1;
    red2[lid] = b2;
    redi[lid] = bi;
    barrier(CLK_LOCAL_MEM_FENCE);
    const int merge = q == 0 && i < n && needs[pl];
    for (int o = 1; o < lanes; o++) {
      if (merge) {
        const REAL o1 = red1[lid + o * pr], o2 = red2[lid + o * pr];
        const long oi = redi[lid + o * pr];
        if (o1 < b1 || (o1 == b1 && oi < bi)) {
          b2 = fmin(b1, o2);
          b1 = o1;
          bi = oi;
        } else {
          b2 = fmin(b2, o1);
        }
      }
    }
    if (merge) {
      out[oo + i] = bi;
      dist[dso + 2 * i] = sqrt(b1);
      dist[dso + 2 * i + 1] = sqrt(b2);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

/* t = {x [n, d], labels [n], part [chunks, k, d], counts [chunks, k]}, i = {n, d, k, chunk}: one
 * work-group per chunk of points; work-item e owns dims e, e + ls, ... of every cluster's sum, so
 * nothing is shared and there are no barriers; each sum runs over the chunk's points in order. */
__kernel void kmeans_update(__global const REAL *x, const long xo, __global const long *lab, const long lo,
                            __global REAL *part, const long po, __global long *cnt, const long cno, const long n,
                            const long d, const long k, const long chunk) {
  const long p = get_group_id(0), i0 = p * chunk, i1 = min(n, i0 + chunk);
  const int lid = get_local_id(0), ls = get_local_size(0);
  __global REAL *pp = part + po + p * k * d;
  for (long e = lid; e < d; e += ls) {
    for (long j = 0; j < k; j++) pp[j * d + e] = 0;
    for (long i = i0; i < i1; i++) {
      const long l = lab[lo + i];
      if (l >= 0 && l < k) pp[l * d + e] += x[xo + i * d + e];
    }
  }
  if (lid == 0) {
    __global long *cp = cnt + cno + p * k;
    for (long j = 0; j < k; j++) cp[j] = 0;
    for (long i = i0; i < i1; i++) {
      const long l = lab[lo + i];
      if (l >= 0 && l < k) cp[l]++;
    }
  }
}

/* kmeans_assign_tiled: the same results as kmeans_assign, for 256-item groups
 * (runtime/backend/opencl/cl_attention.c launches it where the local arrays fit). Like a GEMM: a
 * group owns KT_P points and walks the centroids in tiles of KT_C; points and centroids are
 * staged KT_D dims at a time (transposed, padded by one element); work-item (ty, tx) of the
 * 16 x 16 grid accumulates the dot products of points ty + 16 i (i < 8) with centroids
 * tx + 16 j (j < 4) in registers, then scores them as |c|^2 - 2 x.c (the CPU backend's form;
 * |c|^2 summed from the staged tiles) and keeps each point's best and second best. The 16
 * items that share a point merge at the end (ties: lower index); dist adds |x|^2. Hamerly's
 * bounds as in kmeans_assign. */
#define KT_T 16
#define KT_P 128
#define KT_C 64
#define KT_D 32
#define KT_RP (KT_P / KT_T)
#define KT_RC (KT_C / KT_T)
#define KT_XS(dd, p) tiles[(dd) * (KT_P + 1) + (p)]
#define KT_CS(dd, cc) tiles[KT_D * (KT_P + 1) + (dd) * (KT_C + 1) + (cc)]
__kernel __attribute__((reqd_work_group_size(KT_T * KT_T, 1, 1))) void kmeans_assign_tiled(
    __global const REAL *x, const long xo, __global const REAL *c, const long co, __global const long *lab,
    const long lo, __global const REAL *bnd, const long bo, __global const REAL *mv, const long mo,
    __global long *out, const long oo, __global REAL *dist, const long dso, const long n, const long d,
    const long k) {
  /* the staged tiles; at the end, the per-lane best and second best (2 x KT_P x KT_T) */
  __local REAL tiles[KT_D * (KT_P + 1) + KT_D * (KT_C + 1)];
  __local REAL cn[KT_C], red[KT_T * KT_T];
  __local int mi[KT_P * KT_T], needs[KT_P];
  const int lid = get_local_id(0), ty = lid / KT_T, tx = lid % KT_T, ls = KT_T * KT_T;
  const long p0 = get_group_id(0) * KT_P;
  const int pruned = lo >= 0;
  REAL mx = 0;
  if (pruned) {
    NC_GROUP_FOR(long, j, 0, lid, k, ls) mx = fmax(mx, mv[mo + 2 * j]);
  }
  red[lid] = mx;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = ls / 2; h > 0; h >>= 1) {
    if (lid < h) red[lid] = fmax(red[lid], red[lid + h]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const REAL maxmove = red[0];
  /* The bounds test: item lid < KT_P for point p0 + lid. */
  {
    const long i = p0 + lid;
    int need = lid < KT_P && i < n, check = 0;
    long a = 0;
    REAL u = 0, l = 0, m = 0;
    if (need && pruned) {
      a = lab[lo + i];
      if (a >= 0 && a < k) {
        check = 1;
        u = bnd[bo + 2 * i] + mv[mo + 2 * a];
        l = bnd[bo + 2 * i + 1] - maxmove;
        m = fmax(mv[mo + 2 * a + 1], l);
      }
    }
    const int tighten = check && u > m;
    REAL s = 0;
    for (long e = 0; e < d; e++) {
      if (tighten) {
        const REAL t = x[xo + i * d + e] - c[co + a * d + e];
        s += t * t;
      }
    }
    if (tighten) u = sqrt(s);
    if (check && !(u > m)) {
      need = 0;
      out[oo + i] = a;
      dist[dso + 2 * i] = u;
      dist[dso + 2 * i + 1] = l;
    }
    if (lid < KT_P) needs[lid] = need;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  int any = 0;
  for (int e = 0; e < KT_P; e++) any |= needs[e];
  REAL b1[KT_RP], b2[KT_RP];
  int bi[KT_RP];
#pragma unroll
  for (int i = 0; i < KT_RP; i++) {
    b1[i] = b2[i] = INFINITY;
    bi[i] = 0;
  }
  if (any) {
    for (long c0 = 0; c0 < k; c0 += KT_C) {
      REAL acc[KT_RP][KT_RC], cnorm = 0;
#pragma unroll
      for (int i = 0; i < KT_RP; i++)
#pragma unroll
        for (int j = 0; j < KT_RC; j++) acc[i][j] = 0;
      for (long d0 = 0; d0 < d; d0 += KT_D) {
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = 0; t < KT_P * KT_D / (KT_T * KT_T); t++) {
          const int idx = t * KT_T * KT_T + lid, dd = idx % KT_D, pp = idx / KT_D;
          const long gi = p0 + pp, gd = d0 + dd;
          KT_XS(dd, pp) = gi < n && gd < d ? x[xo + gi * d + gd] : (REAL)0;
        }
        for (int t = 0; t < KT_C * KT_D / (KT_T * KT_T); t++) {
          const int idx = t * KT_T * KT_T + lid, dd = idx % KT_D, cc = idx / KT_D;
          const long gj = c0 + cc, gd = d0 + dd;
          KT_CS(dd, cc) = gj < k && gd < d ? c[co + gj * d + gd] : (REAL)0;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int dd = 0; dd < KT_D; dd++)
          if (lid < KT_C) cnorm += KT_CS(dd, lid) * KT_CS(dd, lid);
        for (int dd = 0; dd < KT_D; dd++) {
          REAL xa[KT_RP], ca[KT_RC];
#pragma unroll
          for (int i = 0; i < KT_RP; i++) xa[i] = KT_XS(dd, ty + KT_T * i);
#pragma unroll
          for (int j = 0; j < KT_RC; j++) ca[j] = KT_CS(dd, tx + KT_T * j);
#pragma unroll
          for (int i = 0; i < KT_RP; i++)
#pragma unroll
            for (int j = 0; j < KT_RC; j++) acc[i][j] = fma(xa[i], ca[j], acc[i][j]);
        }
      }
      if (lid < KT_C) cn[lid] = cnorm;
      barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
      for (int j = 0; j < KT_RC; j++) {
        const long gj = c0 + tx + KT_T * j;
        const REAL cnj = cn[tx + KT_T * j];
#pragma unroll
        for (int i = 0; i < KT_RP; i++) {
          const REAL v = cnj + (REAL)-2 * acc[i][j];
          if (gj < k && v < b2[i]) {
            if (v < b1[i]) {
              b2[i] = b1[i];
              b1[i] = v;
              bi[i] = (int)gj;
            } else {
              b2[i] = v;
            }
          }
        }
      }
    }
  }
  /* Merge the 16 lanes of each point (lane order = centroid order within a tile column). */
  barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
  for (int i = 0; i < KT_RP; i++) {
    const int p = ty + KT_T * i;
    tiles[p * KT_T + tx] = b1[i];
    tiles[KT_P * KT_T + p * KT_T + tx] = b2[i];
    mi[p * KT_T + tx] = bi[i];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const long i = p0 + lid;
  const int merge = lid < KT_P && i < n && needs[lid % KT_P], pm = lid % KT_P;
  REAL m1 = tiles[pm * KT_T], m2 = tiles[KT_P * KT_T + pm * KT_T], xn = 0;
  int mj = mi[pm * KT_T];
  for (int o = 1; o < KT_T; o++) {
    if (merge) {
      const REAL o1 = tiles[pm * KT_T + o], o2 = tiles[KT_P * KT_T + pm * KT_T + o];
      const int oi = mi[pm * KT_T + o];
      if (o1 < m1 || (o1 == m1 && oi < mj)) {
        m2 = fmin(m1, o2);
        m1 = o1;
        mj = oi;
      } else {
        m2 = fmin(m2, o1);
      }
    }
  }
  for (long e = 0; e < d; e++)
    if (merge) xn += x[xo + i * d + e] * x[xo + i * d + e];
  if (merge) {
    m1 += xn;
    m2 += xn;
    out[oo + i] = mj;
    dist[dso + 2 * i] = sqrt(m1 > 0 ? m1 : (REAL)0);
    dist[dso + 2 * i + 1] = sqrt(m2 > 0 ? m2 : (REAL)0);
  }
}

/* kmeans_update_sliced: the same contract as kmeans_update (one partial [k, d] sum and [k] count
 * per chunk of points), for GPUs (runtime/backend/opencl/cl_cluster.c launches it, 256 items a
 * group). kmeans_update's group walks its chunk with one point in flight and a read-modify-write
 * of global memory per point, which leaves a GPU idle; here each chunk is cut by clusters into
 * slices of ks clusters, one work-group per (chunk, slice), whose sums live in local memory. The
 * group takes its chunk KU_B points at a time: each item reads the labels of 4 consecutive points,
 * a prefix sum over the items lists the batch's points of this slice in point order, and the
 * four lanes of 64 items take every fourth entry of the list, KU_U entries at a time (their rows
 * read together, then added to the lane's own sums in list order; a lane's items own dims li,
 * li + 64, ...). At the end the lanes are added in order. Every sum runs in a fixed order: the
 * results do not depend on timing. ks = KU_ELEMS / (4 d), at most KU_MAXS. */
#define KU_LANES 4
#define KU_LW 64
#define KU_LS (KU_LANES * KU_LW)
#define KU_MAXS 256
#define KU_B (4 * KU_LS)
#define KU_U 8
#ifdef NC_REAL_DOUBLE
#define KU_ELEMS 4096
#else
#define KU_ELEMS 8192
#endif
__kernel __attribute__((reqd_work_group_size(KU_LS, 1, 1))) void kmeans_update_sliced(
    __global const REAL *x, const long xo, __global const long *lab, const long lo, __global REAL *part, const long po,
    __global long *cnt, const long cno, const long n, const long d, const long k, const long chunk) {
  __local REAL acc[KU_ELEMS];
  /* lst: the batch's points of the slice, (position in the batch) | (cluster in the slice) << 10 */
  __local int cs[KU_LANES * KU_MAXS], lst[KU_B], sc[KU_LS];
  const int ks = (int)min((long)KU_MAXS, (long)KU_ELEMS / (KU_LANES * d));
  const long slices = (k + ks - 1) / ks, g = get_group_id(0), p = g / slices, s0 = (g % slices) * ks;
  const int sv = (int)min((long)ks, k - s0), lid = get_local_id(0), lane = lid / KU_LW, li = lid % KU_LW;
  const long i0 = p * chunk, i1 = min(n, i0 + chunk);
  NC_GROUP_FOR(int, t, 0, lid, KU_LANES * ks * (int)d, KU_LS) acc[t] = 0;
  NC_GROUP_FOR(int, t, 0, lid, KU_LANES * ks, KU_LS) cs[t] = 0;
  __local REAL *mine = acc + lane * ks * d;
  for (long b0 = i0; b0 < i1; b0 += KU_B) {
    int f[4], mine_n = 0;
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const long gi = b0 + 4 * lid + u;
      const long l = gi < i1 ? lab[lo + gi] - s0 : -1;
      f[u] = l >= 0 && l < sv ? (int)l : -1;
      mine_n += f[u] >= 0;
    }
    barrier(CLK_LOCAL_MEM_FENCE); /* the previous batch's list is used up */
    sc[lid] = mine_n;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int off = 1; off < KU_LS; off <<= 1) {
      const int v = lid >= off ? sc[lid - off] : 0;
      barrier(CLK_LOCAL_MEM_FENCE);
      sc[lid] += v;
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    const int total = sc[KU_LS - 1];
    int at = sc[lid] - mine_n;
#pragma unroll
    for (int u = 0; u < 4; u++)
      if (f[u] >= 0) lst[at++] = (4 * lid + u) | (f[u] << 10);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int jb = 0; jb < total; jb += KU_LANES * KU_U) {
      int ent[KU_U];
#pragma unroll
      for (int u = 0; u < KU_U; u++) {
        const int j = jb + lane + KU_LANES * u;
        ent[u] = j < total ? lst[j] : -1;
      }
      for (long eb = 0; eb < d; eb += KU_LW) {
        const long e = eb + li;
        REAL r[KU_U];
#pragma unroll
        for (int u = 0; u < KU_U; u++)
          r[u] = e < d && ent[u] >= 0 ? x[xo + (b0 + (ent[u] & 1023)) * d + e] : (REAL)0;
#pragma unroll
        for (int u = 0; u < KU_U; u++)
          if (e < d && ent[u] >= 0) mine[(ent[u] >> 10) * d + e] += r[u];
      }
#pragma unroll
      for (int u = 0; u < KU_U; u++)
        if (li == 0 && ent[u] >= 0) cs[lane * ks + (ent[u] >> 10)]++;
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  __global REAL *pp = part + po + (p * k + s0) * d;
  for (long tb = 0; tb < (long)sv * d; tb += KU_LS) {
    const long t = tb + lid, tt = t < (long)sv * d ? t : 0;
    REAL v = acc[tt];
    for (int L = 1; L < KU_LANES; L++) v += acc[L * ks * d + tt];
    if (t < (long)sv * d) pp[t] = v;
  }
  __global long *cp = cnt + cno + p * k + s0;
  for (int tb = 0; tb < sv; tb += KU_LS) {
    const int t = tb + lid, tt = t < sv ? t : 0;
    long v = 0;
    for (int L = 0; L < KU_LANES; L++) v += cs[L * ks + tt];
    if (t < sv) cp[t] = v;
  }
}

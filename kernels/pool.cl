/* 2-D pooling, one work-item per output (forward) or per input element (backward: each
 * input gathers from the outputs whose windows hold it, so no atomics are needed). The rules
 * match the CPU backend (runtime/backend/cpu/cpu_pool.c). -DREAL=double for float64. */
#ifndef REAL
#define REAL float
#endif

/* Mirrors cl_pool in runtime/backend/opencl/cl_pool.c. */
typedef struct {
  long planes, h, w, oh, ow;
  long kh, kw, sh, sw, ph, pw, dh, dw;
  int count_include_pad, pad_;
} nc_pool;

inline long ad_start(long o, long in, long out) { return (o * in) / out; }
inline long ad_end(long o, long in, long out) { return ((o + 1) * in + out - 1) / out; }

/* Window of avg output (oy, ox) clipped to the input, and its divisor. */
inline REAL avg_window(const nc_pool *p, long oy, long ox, long *y0, long *y1, long *x0, long *x1) {
  long ys = oy * p->sh - p->ph, xs = ox * p->sw - p->pw;
  long ye = min(ys + p->kh, p->h + p->ph), xe = min(xs + p->kw, p->w + p->pw);
  const long padded = (ye - ys) * (xe - xs);
  ys = max(ys, 0L), xs = max(xs, 0L), ye = min(ye, p->h), xe = min(xe, p->w);
  *y0 = ys, *y1 = ye, *x0 = xs, *x1 = xe;
  return (REAL)(p->count_include_pad ? padded : (ye - ys) * (xe - xs));
}

__kernel void max_pool_fwd(const nc_pool p, __global const REAL *x, __global REAL *y, __global long *idx) {
  const long ohw = p.oh * p.ow, total = p.planes * ohw;
  NC_GRID_LOOP(o, total) {
    const long pl = o / ohw, q = o - pl * ohw, oy = q / p.ow, ox = q - oy * p.ow;
    __global const REAL *xp = x + pl * p.h * p.w;
    REAL best = -INFINITY;
    long bi = -1;
    for (long i = 0; i < p.kh; i++) {
      const long yy = oy * p.sh - p.ph + i * p.dh;
      if (yy < 0 || yy >= p.h) continue;
      for (long j = 0; j < p.kw; j++) {
        const long xx = ox * p.sw - p.pw + j * p.dw;
        if (xx < 0 || xx >= p.w) continue;
        const REAL v = xp[yy * p.w + xx];
        if (bi < 0 || v > best || isnan(v)) {
          best = v;
          bi = yy * p.w + xx;
          if (isnan(v)) i = p.kh, j = p.kw;
        }
      }
    }
    y[o] = best;
    idx[o] = bi;
  }
}

__kernel void avg_pool_fwd(const nc_pool p, const int adaptive, __global const REAL *x, __global REAL *y) {
  const long ohw = p.oh * p.ow, total = p.planes * ohw;
  NC_GRID_LOOP(o, total) {
    const long pl = o / ohw, q = o - pl * ohw, oy = q / p.ow, ox = q - oy * p.ow;
    __global const REAL *xp = x + pl * p.h * p.w;
    long y0, y1, x0, x1;
    REAL div;
    if (adaptive) {
      y0 = ad_start(oy, p.h, p.oh), y1 = ad_end(oy, p.h, p.oh);
      x0 = ad_start(ox, p.w, p.ow), x1 = ad_end(ox, p.w, p.ow);
      div = (REAL)((y1 - y0) * (x1 - x0));
    } else {
      div = avg_window(&p, oy, ox, &y0, &y1, &x0, &x1);
    }
    REAL s = 0;
    for (long yy = y0; yy < y1; yy++)
      for (long xx = x0; xx < x1; xx++) s += xp[yy * p.w + xx];
    y[o] = s / div;
  }
}

/* dx[y, x] = sum of dy over the outputs whose window position (i, j) lands on (y, x) and, for
 * max, whose recorded index is (y, x). */
__kernel void max_pool_bwd(const nc_pool p, __global const REAL *dy, __global const long *idx, __global REAL *dx) {
  const long hw = p.h * p.w, ohw = p.oh * p.ow, total = p.planes * hw;
  NC_GRID_LOOP(e, total) {
    const long pl = e / hw, q = e - pl * hw, yy = q / p.w, xx = q - yy * p.w;
    REAL s = 0;
    for (long i = 0; i < p.kh; i++) {
      const long ty = yy + p.ph - i * p.dh;
      if (ty < 0 || ty % p.sh) continue;
      const long oy = ty / p.sh;
      if (oy >= p.oh) continue;
      for (long j = 0; j < p.kw; j++) {
        const long tx = xx + p.pw - j * p.dw;
        if (tx < 0 || tx % p.sw) continue;
        const long ox = tx / p.sw;
        if (ox >= p.ow) continue;
        const long o = pl * ohw + oy * p.ow + ox;
        if (idx[o] == q) s += dy[o];
      }
    }
    dx[e] = s;
  }
}

__kernel void avg_pool_bwd(const nc_pool p, const int adaptive, __global const REAL *dy, __global REAL *dx) {
  const long hw = p.h * p.w, ohw = p.oh * p.ow, total = p.planes * hw;
  NC_GRID_LOOP(e, total) {
    const long pl = e / hw, q = e - pl * hw, yy = q / p.w, xx = q - yy * p.w;
    REAL s = 0;
    if (adaptive) {
      /* Windows overlap by at most one step, so a few candidates around y*OH/H cover all. */
      for (long oy = max(0L, yy * p.oh / p.h - 1); oy < p.oh && ad_start(oy, p.h, p.oh) <= yy; oy++) {
        if (yy >= ad_end(oy, p.h, p.oh)) continue;
        for (long ox = max(0L, xx * p.ow / p.w - 1); ox < p.ow && ad_start(ox, p.w, p.ow) <= xx; ox++) {
          if (xx >= ad_end(ox, p.w, p.ow)) continue;
          const long ny = ad_end(oy, p.h, p.oh) - ad_start(oy, p.h, p.oh);
          const long nx = ad_end(ox, p.w, p.ow) - ad_start(ox, p.w, p.ow);
          s += dy[pl * ohw + oy * p.ow + ox] / (REAL)(ny * nx);
        }
      }
    } else {
      for (long i = 0; i < p.kh; i++) {
        const long ty = yy + p.ph - i;
        if (ty < 0 || ty % p.sh) continue;
        const long oy = ty / p.sh;
        if (oy >= p.oh) continue;
        for (long j = 0; j < p.kw; j++) {
          const long tx = xx + p.pw - j;
          if (tx < 0 || tx % p.sw) continue;
          const long ox = tx / p.sw;
          if (ox >= p.ow) continue;
          long y0, y1, x0, x1;
          const REAL div = avg_window(&p, oy, ox, &y0, &y1, &x0, &x1);
          s += dy[pl * ohw + oy * p.ow + ox] / div;
        }
      }
    }
    dx[e] = s;
  }
}

/* Image transforms on batches [N, C, H, W] (op-table rows resized_crop, adjust_color,
 * gaussian_blur), through the generic launcher's convention: each tensor as (buffer, element
 * offset), then the integers, then the reals; contiguous tensors; one work-group per row of work
 * (a plane for resized_crop and gaussian_blur, a sample for adjust_color). The arithmetic
 * follows runtime/backend/cpu/cpu_image.c step for step. -DREAL=double for float64. */
#ifndef REAL
#define REAL float
#endif
#define NC_IMAGE_WG 256
#define NC_BLUR_MAX 63

/* ---- resized_crop ------------------------------------------------------------------------ */

/* The pixel at (r, c) of a plane, or fill outside it. */
inline REAL img_at(__global const REAL *p, const long r, const long c, const long h, const long w, const REAL fill) {
  return (r >= 0 && r < h && c >= 0 && c < w) ? p[r * w + c] : fill;
}

/* Source index and weight of output index o for a box of n pixels resized to m (torch's
 * bilinear, align_corners false: src = (o + 0.5) n / m - 0.5, clamped below at 0). */
inline void img_src(const long o, const long n, const long m, long *i0, long *i1, REAL *l) {
  const REAL s = max(((REAL)o + (REAL)0.5) * ((REAL)n / (REAL)m) - (REAL)0.5, (REAL)0);
  long i = (long)s;
  if (i > n - 1) i = n - 1;
  *i0 = i;
  *i1 = i < n - 1 ? i + 1 : i;
  *l = s - (REAL)i;
}

/* boxes [N, 5] = {top, left, box_h, box_w, flip}; ints {c, h, w, oh, ow}; reals {fill}. */
__kernel void resized_crop(__global const REAL *x, const long xo, __global const REAL *box, const long bo,
                           __global REAL *y, const long yo, const long c, const long h, const long w, const long oh,
                           const long ow, const REAL fill) {
  const long plane = get_group_id(0), n = plane / c;
  __global const REAL *b = box + bo + n * 5;
  const long top = (long)b[0], left = (long)b[1], bh = max((long)b[2], 1L), bw = max((long)b[3], 1L);
  const int flip = b[4] != (REAL)0;
  __global const REAL *src = x + xo + plane * h * w;
  __global REAL *dst = y + yo + plane * oh * ow;
  if (bh == oh && bw == ow) { /* a plain crop: every weight is 0, the pixels are copied */
    for (long e = get_local_id(0); e < oh * ow; e += get_local_size(0)) {
      const long oy = e / ow, ox = flip ? ow - 1 - e % ow : e % ow;
      dst[e] = img_at(src, top + oy, left + ox, h, w, fill);
    }
    return;
  }
  for (long e = get_local_id(0); e < oh * ow; e += get_local_size(0)) {
    const long oy = e / ow, ox = flip ? ow - 1 - e % ow : e % ow;
    long y0, y1, x0, x1;
    REAL ly, lx;
    img_src(oy, bh, oh, &y0, &y1, &ly);
    img_src(ox, bw, ow, &x0, &x1, &lx);
    const REAL a = img_at(src, top + y0, left + x0, h, w, fill), bb = img_at(src, top + y0, left + x1, h, w, fill);
    const REAL cc = img_at(src, top + y1, left + x0, h, w, fill), d = img_at(src, top + y1, left + x1, h, w, fill);
    dst[e] = ((REAL)1 - ly) * (((REAL)1 - lx) * a + lx * bb) + ly * (((REAL)1 - lx) * cc + lx * d);
  }
}

/* ---- adjust_color ------------------------------------------------------------------------ */

inline REAL img_sum(REAL v, __local REAL *scratch) {
  const int lid = get_local_id(0), ls = get_local_size(0);
  scratch[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int k = ls / 2; k > 0; k >>= 1) {
    if (lid < k) scratch[lid] += scratch[lid + k];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const REAL r = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

inline REAL img_gray(const REAL r, const REAL g, const REAL b) {
  return (REAL)0.2989 * r + (REAL)0.587 * g + (REAL)0.114 * b;
}

inline REAL img_blend(const REAL a, const REAL b, const REAL ratio) {
  return clamp(ratio * a + ((REAL)1 - ratio) * b, (REAL)0, (REAL)1);
}

/* torchvision's adjust_hue: to HSV, h shifted by hue (mod 1), back to RGB. */
inline void img_hue(REAL *r, REAL *g, REAL *b, const REAL hue) {
  const REAL maxc = max(*r, max(*g, *b)), minc = min(*r, min(*g, *b));
  const int eqc = maxc == minc;
  const REAL cr = maxc - minc, s = cr / (eqc ? (REAL)1 : maxc), div = eqc ? (REAL)1 : cr;
  const REAL rc = (maxc - *r) / div, gc = (maxc - *g) / div, bc = (maxc - *b) / div;
  REAL hh;
  if (maxc == *r)
    hh = bc - gc;
  else if (maxc == *g)
    hh = (REAL)2 + rc - bc;
  else
    hh = (REAL)4 + gc - rc;
  hh = fmod(hh / (REAL)6 + (REAL)1, (REAL)1);
  hh = hh + hue;
  hh = hh - floor(hh); /* Python's % 1.0 */
  const REAL v = maxc, i6 = floor(hh * (REAL)6), f = hh * (REAL)6 - i6;
  const int i = ((int)i6 % 6 + 6) % 6;
  const REAL p = clamp(v * ((REAL)1 - s), (REAL)0, (REAL)1), q = clamp(v * ((REAL)1 - s * f), (REAL)0, (REAL)1);
  const REAL t = clamp(v * ((REAL)1 - s * ((REAL)1 - f)), (REAL)0, (REAL)1);
  REAL o0, o1, o2;
  switch (i) {
    case 0: o0 = v, o1 = t, o2 = p; break;
    case 1: o0 = q, o1 = v, o2 = p; break;
    case 2: o0 = p, o1 = v, o2 = t; break;
    case 3: o0 = p, o1 = q, o2 = v; break;
    case 4: o0 = t, o1 = p, o2 = v; break;
    default: o0 = v, o1 = p, o2 = q; break;
  }
  *r = o0, *g = o1, *b = o2;
}

/* factors [N, 6] = {brightness, contrast, saturation, hue, order, grayscale}; ints {hw}. Each
 * work-item keeps the same pixels through every step, so only contrast's mean (over the
 * sample's gray values at that step) needs the group. */
__kernel void adjust_color(__global const REAL *x, const long xo, __global const REAL *fac, const long fo,
                           __global REAL *y, const long yo, const long hw) {
  __local REAL scratch[NC_IMAGE_WG];
  const long n = get_group_id(0);
  const int lid = get_local_id(0), ls = get_local_size(0);
  __global const REAL *p = fac + fo + n * 6;
  const REAL bright = p[0], contrast = p[1], sat = p[2], hue = p[3];
  const long order = (long)p[4];
  const int gray = p[5] != (REAL)0;
  __global const REAL *src = x + xo + n * 3 * hw;
  __global REAL *dst = y + yo + n * 3 * hw;
  NC_GROUP_FOR(long, e, 0, lid, hw, ls) {
    dst[e] = src[e];
    dst[hw + e] = src[hw + e];
    dst[2 * hw + e] = src[2 * hw + e];
  }
  for (int step = 0; step < 4; step++) {
    const long op = (order >> (2 * step)) & 3;
    REAL mean = 0;
    if (op == 1 && contrast != (REAL)1) {
      REAL acc = 0;
      NC_GROUP_FOR(long, e, 0, lid, hw, ls) acc += img_gray(dst[e], dst[hw + e], dst[2 * hw + e]);
      mean = img_sum(acc, scratch) / (REAL)hw;
    }
    NC_GROUP_FOR(long, e, 0, lid, hw, ls) {
      REAL r = dst[e], g = dst[hw + e], b = dst[2 * hw + e];
      if (op == 0 && bright != (REAL)1) {
        r = img_blend(r, (REAL)0, bright), g = img_blend(g, (REAL)0, bright), b = img_blend(b, (REAL)0, bright);
      } else if (op == 1 && contrast != (REAL)1) {
        r = img_blend(r, mean, contrast), g = img_blend(g, mean, contrast), b = img_blend(b, mean, contrast);
      } else if (op == 2 && sat != (REAL)1) {
        const REAL l = img_gray(r, g, b);
        r = img_blend(r, l, sat), g = img_blend(g, l, sat), b = img_blend(b, l, sat);
      } else if (op == 3 && hue != (REAL)0) {
        img_hue(&r, &g, &b, hue);
      }
      dst[e] = r, dst[hw + e] = g, dst[2 * hw + e] = b;
    }
  }
  if (gray) {
    NC_GROUP_FOR(long, e, 0, lid, hw, ls) {
      const REAL l = img_gray(dst[e], dst[hw + e], dst[2 * hw + e]);
      dst[e] = l, dst[hw + e] = l, dst[2 * hw + e] = l;
    }
  }
}

/* ---- gaussian_blur ----------------------------------------------------------------------- */

inline long img_reflect(long i, const long n) {
  if (i < 0) i = -i;
  if (i >= n) i = 2 * n - 2 - i;
  return i;
}

/* sigmas [N]; ints {c, h, w, k}. The 1-d weights exp(-(i - k/2)^2 / (2 sigma^2)), normalized
 * to sum 1, in both directions. */
__kernel void gaussian_blur(__global const REAL *x, const long xo, __global const REAL *sig, const long so,
                            __global REAL *y, const long yo, const long c, const long h, const long w, const long k) {
  const long plane = get_group_id(0), n = plane / c, hk = k / 2;
  const REAL sigma = sig[so + n];
  REAL wt[NC_BLUR_MAX];
  REAL norm = 0;
  for (long i = 0; i < k; i++) {
    const REAL d = (REAL)(i - hk) / sigma;
    wt[i] = exp((REAL)-0.5 * d * d);
    norm += wt[i];
  }
  for (long i = 0; i < k; i++) wt[i] /= norm;
  __global const REAL *src = x + xo + plane * h * w;
  __global REAL *dst = y + yo + plane * h * w;
  for (long e = get_local_id(0); e < h * w; e += get_local_size(0)) {
    const long oy = e / w, ox = e % w;
    REAL acc = 0;
    for (long i = 0; i < k; i++) {
      const long r = img_reflect(oy + i - hk, h);
      REAL row = 0;
      for (long j = 0; j < k; j++) row += wt[j] * src[r * w + img_reflect(ox + j - hk, w)];
      acc += wt[i] * row;
    }
    dst[e] = acc;
  }
}

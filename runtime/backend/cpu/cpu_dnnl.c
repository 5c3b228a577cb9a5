/* conv2d's three passes on oneDNN (libdnnl 2.x, C API), for float32 tensors in netcl's plain
 * layouts (x, y: NCHW; weight: OIHW, or GOIHW with groups). Each pass lets oneDNN pick its
 * layouts (format `any`: blocked ones such as nChw8c, which its JIT kernels need) and reorders
 * between them and netcl's around the call, as PyTorch does.
 *
 * Primitives are created once per shape and pass and kept in a cache of the most recently used
 * MAX_ENTRIES; a shape for which oneDNN offers only its reference implementation is cached as
 * declined and left to the im2col + GEMM path of cpu_conv.c.
 *
 * Threads: oneDNN (built with OpenMP) runs its parallel regions through GOMP_parallel, which
 * runtime/core/threads.c exports in these builds, so they run on netcl's pool. A primitive
 * splits its work over the thread count it was created for, and needs exactly that many
 * threads: every call holds the pool (nc_threads_reserve) from lookup to the last reorder, so
 * its regions get the whole team. Holding it also serializes the calls, which lets them share
 * one set of layout buffers and one scratchpad. */
#ifdef NC_HAVE_DNNL
#include <dnnl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "core/threads_internal.h"
#include "cpu_dnnl.h"
#include "netcl/threads.h"

enum { PASS_FWD = 0, PASS_BWD_DATA = 1, PASS_BWD_WEIGHTS = 2 };
enum { MAX_ENTRIES = 128, SLOTS = 4 /* three tensors and the scratchpad */ };

typedef struct {
  int pass, nthr, bias;
  int64_t n, c, h, w, o, kh, kw, oh, ow, g, s[2], pad[2], dil[2];
} conv_key;

/* A tensor argument: netcl's layout, the primitive's, and the reorder between them (from netcl's
 * for inputs, to it for outputs; NULL when the layouts are the same). */
typedef struct {
  int arg;
  bool out;
  dnnl_memory_desc_t user, prim;
  dnnl_primitive_t reorder;
} conv_arg;

typedef struct entry {
  conv_key key;
  dnnl_primitive_desc_t hint, pd; /* hint: the forward pd a backward pass was created with */
  dnnl_primitive_t prim;          /* NULL: declined */
  conv_arg args[3];
  size_t scratch;
  struct entry *next;
} entry;

static struct {
  pthread_once_t once;
  bool ok;
  dnnl_engine_t engine;
  dnnl_stream_t stream;
  dnnl_primitive_attr_t attr; /* user-managed scratchpad */
  entry *head;                /* most recently used first */
  int count;
  void *slot[SLOTS];
  size_t slot_size[SLOTS];
} S = {.once = PTHREAD_ONCE_INIT};

static void init_once(void) {
  if (dnnl_engine_create(&S.engine, dnnl_cpu, 0) != dnnl_success) return;
  if (dnnl_stream_create(&S.stream, S.engine, dnnl_stream_default_flags) != dnnl_success) return;
  if (dnnl_primitive_attr_create(&S.attr) != dnnl_success) return;
  if (dnnl_primitive_attr_set_scratchpad_mode(S.attr, dnnl_scratchpad_mode_user) != dnnl_success) return;
  S.ok = true;
}

static void entry_free(entry *e) {
  for (int i = 0; i < 3; i++)
    if (e->args[i].reorder) dnnl_primitive_destroy(e->args[i].reorder);
  if (e->prim) dnnl_primitive_destroy(e->prim);
  if (e->pd) dnnl_primitive_desc_destroy(e->pd);
  if (e->hint) dnnl_primitive_desc_destroy(e->hint);
  free(e);
}

static conv_key key_of(int pass, const nc_conv2d_desc *p, bool bias) {
  conv_key k;
  memset(&k, 0, sizeof k); /* padding bytes too: keys are compared with memcmp */
  k.pass = pass, k.nthr = nc_get_num_threads(), k.bias = bias;
  k.n = p->n, k.c = p->c_in, k.h = p->h, k.w = p->w, k.o = p->c_out, k.kh = p->kh, k.kw = p->kw;
  k.oh = p->oh, k.ow = p->ow, k.g = p->groups;
  for (int i = 0; i < 2; i++) k.s[i] = p->stride[i], k.pad[i] = p->padding[i], k.dil[i] = p->dilation[i];
  return k;
}

#define DN(call)                              \
  do {                                        \
    if ((call) != dnnl_success) goto fail;    \
  } while (0)

static bool md_init(dnnl_memory_desc_t *md, int nd, const int64_t *dims, dnnl_format_tag_t tag) {
  dnnl_dims_t d;
  for (int i = 0; i < nd; i++) d[i] = dims[i];
  return dnnl_memory_desc_init_by_tag(md, nd, d, dnnl_f32, tag) == dnnl_success;
}

/* The descriptor of one pass with layouts src, wei, dst (format `any` or netcl's). */
static bool conv_desc(int pass, const conv_key *k, const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *wei,
                      const dnnl_memory_desc_t *bias, const dnnl_memory_desc_t *dst, dnnl_convolution_desc_t *cd) {
  dnnl_dims_t strides = {k->s[0], k->s[1]}, dil = {k->dil[0] - 1, k->dil[1] - 1}, pl = {k->pad[0], k->pad[1]};
  /* right/bottom padding: what makes oneDNN's output size netcl's (floor division) */
  dnnl_dims_t pr = {(k->oh - 1) * k->s[0] + (k->kh - 1) * k->dil[0] + 1 - k->h - k->pad[0],
                    (k->ow - 1) * k->s[1] + (k->kw - 1) * k->dil[1] + 1 - k->w - k->pad[1]};
  dnnl_status_t st;
  if (pass == PASS_FWD)
    st = dnnl_dilated_convolution_forward_desc_init(cd, dnnl_forward_training, dnnl_convolution_direct, src, wei,
                                                    bias, dst, strides, dil, pl, pr);
  else if (pass == PASS_BWD_DATA)
    st = dnnl_dilated_convolution_backward_data_desc_init(cd, dnnl_convolution_direct, src, wei, dst, strides, dil,
                                                          pl, pr);
  else
    st = dnnl_dilated_convolution_backward_weights_desc_init(cd, dnnl_convolution_direct, src, wei, bias, dst,
                                                             strides, dil, pl, pr);
  return st == dnnl_success;
}

/* Creates the entry's primitive, or leaves it declined (prim NULL). */
static void entry_build(entry *e) {
  const conv_key *k = &e->key;
  dnnl_memory_desc_t src_u, wei_u, dst_u, bias_u, src_a, wei_a, dst_a;
  const int64_t xd[4] = {k->n, k->c, k->h, k->w}, yd[4] = {k->n, k->o, k->oh, k->ow}, bd[1] = {k->o};
  const int64_t wd1[4] = {k->o, k->c, k->kh, k->kw}, wdg[5] = {k->g, k->o / k->g, k->c / k->g, k->kh, k->kw};
  const bool grouped = k->g > 1;
  if (!md_init(&src_u, 4, xd, dnnl_nchw) || !md_init(&dst_u, 4, yd, dnnl_nchw) ||
      !md_init(&bias_u, 1, bd, dnnl_x) || !md_init(&src_a, 4, xd, dnnl_format_tag_any) ||
      !md_init(&dst_a, 4, yd, dnnl_format_tag_any))
    return;
  if (grouped ? !md_init(&wei_u, 5, wdg, dnnl_goihw) || !md_init(&wei_a, 5, wdg, dnnl_format_tag_any)
              : !md_init(&wei_u, 4, wd1, dnnl_oihw) || !md_init(&wei_a, 4, wd1, dnnl_format_tag_any))
    return;
  dnnl_convolution_desc_t cd;
  if (k->pass != PASS_FWD) {
    /* the backward passes are created with the forward pass as a hint */
    if (!conv_desc(PASS_FWD, k, &src_a, &wei_a, NULL, &dst_a, &cd)) return;
    DN(dnnl_primitive_desc_create(&e->hint, &cd, NULL, S.engine, NULL));
  }
  if (!conv_desc(k->pass, k, &src_a, &wei_a, k->pass == PASS_FWD && k->bias ? &bias_u : NULL, &dst_a, &cd)) return;
  DN(dnnl_primitive_desc_create(&e->pd, &cd, S.attr, S.engine, e->hint));
  const char *impl = NULL;
  DN(dnnl_primitive_desc_query(e->pd, dnnl_query_impl_info_str, 0, &impl));
  if (!impl || strncmp(impl, "ref", 3) == 0) goto fail; /* slower than im2col + GEMM */
  struct {
    int arg;
    bool out;
    dnnl_query_t q;
    const dnnl_memory_desc_t *user;
  } spec[3][3] = {
      {{DNNL_ARG_SRC, false, dnnl_query_src_md, &src_u},
       {DNNL_ARG_WEIGHTS, false, dnnl_query_weights_md, &wei_u},
       {DNNL_ARG_DST, true, dnnl_query_dst_md, &dst_u}},
      {{DNNL_ARG_DIFF_DST, false, dnnl_query_diff_dst_md, &dst_u},
       {DNNL_ARG_WEIGHTS, false, dnnl_query_weights_md, &wei_u},
       {DNNL_ARG_DIFF_SRC, true, dnnl_query_diff_src_md, &src_u}},
      {{DNNL_ARG_SRC, false, dnnl_query_src_md, &src_u},
       {DNNL_ARG_DIFF_DST, false, dnnl_query_diff_dst_md, &dst_u},
       {DNNL_ARG_DIFF_WEIGHTS, true, dnnl_query_diff_weights_md, &wei_u}},
  };
  for (int i = 0; i < 3; i++) {
    conv_arg *a = &e->args[i];
    a->arg = spec[k->pass][i].arg, a->out = spec[k->pass][i].out, a->user = *spec[k->pass][i].user;
    const dnnl_memory_desc_t *pm = dnnl_primitive_desc_query_md(e->pd, spec[k->pass][i].q, 0);
    if (!pm) goto fail;
    a->prim = *pm;
    if (dnnl_memory_desc_equal(&a->user, &a->prim)) continue;
    dnnl_primitive_desc_t rpd;
    DN(a->out ? dnnl_reorder_primitive_desc_create(&rpd, &a->prim, S.engine, &a->user, S.engine, NULL)
              : dnnl_reorder_primitive_desc_create(&rpd, &a->user, S.engine, &a->prim, S.engine, NULL));
    dnnl_status_t st = dnnl_primitive_create(&a->reorder, rpd);
    dnnl_primitive_desc_destroy(rpd);
    if (st != dnnl_success) goto fail;
  }
  const dnnl_memory_desc_t *sm = dnnl_primitive_desc_query_md(e->pd, dnnl_query_scratchpad_md, 0);
  e->scratch = sm ? dnnl_memory_desc_get_size(sm) : 0;
  DN(dnnl_primitive_create(&e->prim, e->pd));
  return;
fail:
  for (int i = 0; i < 3; i++)
    if (e->args[i].reorder) dnnl_primitive_destroy(e->args[i].reorder), e->args[i].reorder = NULL;
  e->prim = NULL;
}

/* The entry for k, created on a miss; moved to the front. NULL when out of memory. */
static entry *lookup(const conv_key *k) {
  entry **pp = &S.head, *last_prev = NULL;
  for (entry *e = S.head; e; pp = &e->next, e = e->next) {
    if (memcmp(&e->key, k, sizeof *k) == 0) {
      *pp = e->next;
      e->next = S.head, S.head = e;
      return e;
    }
    if (e->next && !e->next->next) last_prev = e;
  }
  if (S.count >= MAX_ENTRIES && last_prev) {
    entry_free(last_prev->next);
    last_prev->next = NULL;
    S.count--;
  }
  entry *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  e->key = *k;
  entry_build(e);
  e->next = S.head, S.head = e;
  S.count++;
  return e;
}

static void *slot(int i, size_t size) {
  if (size <= S.slot_size[i]) return S.slot[i];
  free(S.slot[i]);
  S.slot_size[i] = 0;
  S.slot[i] = NULL;
  if (posix_memalign(&S.slot[i], 64, size) != 0) return S.slot[i] = NULL;
  S.slot_size[i] = size;
  return S.slot[i];
}

static bool disabled(void) {
  const char *env = getenv("NETCL_DNNL");
  return env && strcmp(env, "0") == 0;
}

static void *host(const nc_tensor *t) { return (float *)nc_cpu_base(t) + t->offset; }

/* Runs pass `pass` on the tensors ptr[i] (netcl's layouts; the order of the entry's args) and
 * bias (forward, or NULL). */
static bool run(int pass, const nc_conv2d_desc *p, void *const ptr[3], void *bias, nc_status *status) {
  if (disabled() || p->n < 1 || p->c_in < 1 || p->c_out < 1 || p->oh < 1 || p->ow < 1) return false;
  pthread_once(&S.once, init_once);
  if (!S.ok || !nc_threads_reserve()) return false;
  const conv_key k = key_of(pass, p, bias != NULL);
  entry *e = lookup(&k);
  if (!e) {
    nc_threads_release();
    *status = nc_error(NC_ERR_OOM, "out of host memory for a oneDNN convolution");
    return true;
  }
  if (!e->prim) {
    nc_threads_release();
    return false;
  }
  dnnl_memory_t user[3] = {NULL, NULL, NULL}, prim[3] = {NULL, NULL, NULL}, scratch = NULL;
  dnnl_exec_arg_t args[5];
  int nargs = 0;
  bool ok = true;
  for (int i = 0; i < 3 && ok; i++) {
    conv_arg *a = &e->args[i];
    ok = dnnl_memory_create(&user[i], &a->user, S.engine, ptr[i]) == dnnl_success;
    if (ok && a->reorder) {
      void *buf = slot(i, dnnl_memory_desc_get_size(&a->prim));
      ok = buf && dnnl_memory_create(&prim[i], &a->prim, S.engine, buf) == dnnl_success;
      if (ok && !a->out) {
        dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, user[i]}, {DNNL_ARG_TO, prim[i]}};
        ok = dnnl_primitive_execute(a->reorder, S.stream, 2, r) == dnnl_success;
      }
    }
    if (ok) args[nargs++] = (dnnl_exec_arg_t){a->arg, prim[i] ? prim[i] : user[i]};
  }
  dnnl_memory_t bias_mem = NULL;
  if (ok && bias) {
    const dnnl_memory_desc_t *bm = dnnl_primitive_desc_query_md(e->pd, dnnl_query_weights_md, 1);
    ok = bm && dnnl_memory_create(&bias_mem, bm, S.engine, bias) == dnnl_success;
    if (ok) args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, bias_mem};
  }
  if (ok && e->scratch) {
    const dnnl_memory_desc_t *sm = dnnl_primitive_desc_query_md(e->pd, dnnl_query_scratchpad_md, 0);
    void *buf = slot(3, e->scratch);
    ok = sm && buf && dnnl_memory_create(&scratch, sm, S.engine, buf) == dnnl_success;
    if (ok) args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, scratch};
  }
  if (ok) ok = dnnl_primitive_execute(e->prim, S.stream, nargs, args) == dnnl_success;
  for (int i = 0; i < 3 && ok; i++)
    if (e->args[i].out && e->args[i].reorder) {
      dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, prim[i]}, {DNNL_ARG_TO, user[i]}};
      ok = dnnl_primitive_execute(e->args[i].reorder, S.stream, 2, r) == dnnl_success;
    }
  if (ok) ok = dnnl_stream_wait(S.stream) == dnnl_success;
  for (int i = 0; i < 3; i++) {
    if (user[i]) dnnl_memory_destroy(user[i]);
    if (prim[i]) dnnl_memory_destroy(prim[i]);
  }
  if (bias_mem) dnnl_memory_destroy(bias_mem);
  if (scratch) dnnl_memory_destroy(scratch);
  nc_threads_release();
  *status = ok ? NC_OK : nc_error(NC_ERR_DEVICE, "oneDNN convolution failed (out of memory?)");
  return true;
}

bool nc_cpu_dnnl_conv2d(const nc_conv2d_desc *p, const nc_tensor *x, const nc_tensor *w, const nc_tensor *bias,
                        nc_tensor *y, nc_status *status) {
  if (y->dtype != NC_FLOAT32) return false;
  void *const ptr[3] = {host(x), host(w), host(y)};
  return run(PASS_FWD, p, ptr, bias ? host(bias) : NULL, status);
}

bool nc_cpu_dnnl_conv2d_backward_input(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *w,
                                       nc_tensor *dx, nc_status *status) {
  if (dx->dtype != NC_FLOAT32) return false;
  void *const ptr[3] = {host(dy), host(w), host(dx)};
  return run(PASS_BWD_DATA, p, ptr, NULL, status);
}

bool nc_cpu_dnnl_conv2d_backward_weight(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *x,
                                        nc_tensor *dw, nc_status *status) {
  if (dw->dtype != NC_FLOAT32) return false;
  void *const ptr[3] = {host(x), host(dy), host(dw)};
  return run(PASS_BWD_WEIGHTS, p, ptr, NULL, status);
}

#endif

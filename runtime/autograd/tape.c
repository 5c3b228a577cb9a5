/* The tape and its nodes (see netcl/autograd.h). Entries hold references to their inputs and
 * output; an output points back at its entry weakly (the entry clears the pointer when it is
 * freed), so freeing a tape frees everything it saved. */
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "netcl/autograd.h"
#include "netcl/copy.h"
#include "netcl/creation.h"
#include "accumulate.h"

struct nc_node {
  nc_tensor *value;
  nc_tensor *grad;
  nc_tensor *pending; /* gradient gathered during a backward pass, for non-leaf nodes */
  struct nc_tape_entry *creator;
  bool requires_grad;
  int refcount;
  /* A hooked backward pass's bookkeeping for a leaf (nc_tape_backward_hooked): the pass that
   * set it, the index of the first entry using the leaf (its gradient is final once that entry
   * has run), and whether the pass gave it a gradient. */
  uint64_t hook_pass;
  size_t hook_first;
  bool hook_got;
};

typedef struct {
  nc_tensor *t;
  uint64_t version;
} saved_slot;

struct nc_ag_ctx {
  int n_inputs;
  nc_node **inputs;
  saved_slot saved[NC_AG_MAX_SAVED];
  int n_saved;
  double params[16];
  int64_t iparams[16];
  void *user;
  void (*free_user)(void *);
};

typedef struct nc_tape_entry {
  nc_tape *tape;
  const char *op;
  nc_backward_fn fn;
  nc_node *out;
  nc_ag_ctx ctx;
} nc_tape_entry;

struct nc_tape {
  nc_tape_entry **entries;
  size_t n, cap;
  bool consumed;
  bool busy; /* a backward pass is walking the entries (a hook runs) */
};

/* ---- nodes ---------------------------------------------------------------------------------- */
nc_status nc_node_new(nc_tensor *value, bool requires_grad, nc_node **out) {
  nc_node *n = calloc(1, sizeof *n);
  if (!n) return nc_error(NC_ERR_OOM, "out of host memory for a node");
  n->value = nc_tensor_retain(value);
  n->requires_grad = requires_grad;
  n->refcount = 1;
  *out = n;
  return NC_OK;
}

nc_node *nc_node_retain(nc_node *n) {
  n->refcount++;
  return n;
}

void nc_node_release(nc_node *n) {
  if (!n || --n->refcount > 0) return;
  nc_tensor_release(n->value);
  nc_tensor_release(n->grad);
  nc_tensor_release(n->pending);
  free(n);
}

nc_tensor *nc_node_value(const nc_node *n) { return n->value; }
nc_tensor *nc_node_grad(const nc_node *n) { return n->grad; }
bool nc_node_requires_grad(const nc_node *n) { return n->requires_grad; }
void nc_node_set_requires_grad(nc_node *n, bool on) { n->requires_grad = on; }
bool nc_node_is_leaf(const nc_node *n) { return n->creator == NULL; }
const char *nc_node_op(const nc_node *n) { return n->creator ? n->creator->op : NULL; }

nc_status nc_node_set_value(nc_node *n, nc_tensor *v) {
  if (n->creator)
    return nc_error(NC_ERR_STATE, "only a leaf node's value can be replaced (this one was made by %s)",
                    n->creator->op);
  nc_tensor_retain(v);
  nc_tensor_release(n->value);
  n->value = v;
  return NC_OK;
}

void nc_node_set_grad(nc_node *n, nc_tensor *g) {
  if (g) nc_tensor_retain(g);
  nc_tensor_release(n->grad);
  n->grad = g;
}

/* ---- context ----------------------------------------------------------------------------------- */
int nc_ag_save(nc_ag_ctx *ctx, nc_tensor *t) {
  NC_ASSERT(ctx->n_saved < NC_AG_MAX_SAVED);
  saved_slot *s = &ctx->saved[ctx->n_saved];
  s->t = nc_tensor_retain(t);
  s->version = nc_storage_version(t->storage);
  return ctx->n_saved++;
}

nc_status nc_ag_saved(nc_ag_ctx *ctx, int i, nc_tensor **t) {
  saved_slot *s = &ctx->saved[i];
  if (!s->t) return nc_error(NC_ERR_STATE, "saved tensor %d was already released", i);
  uint64_t now = nc_storage_version(s->t->storage);
  if (now != s->version)
    return nc_error(NC_ERR_STATE,
                    "a tensor saved for backward was modified in place after it was saved "
                    "(version %llu, saved at version %llu); clone it before changing it",
                    (unsigned long long)now, (unsigned long long)s->version);
  *t = s->t;
  return NC_OK;
}

double *nc_ag_params(nc_ag_ctx *ctx) { return ctx->params; }
int64_t *nc_ag_iparams(nc_ag_ctx *ctx) { return ctx->iparams; }
const nc_tensor *nc_ag_input_value(nc_ag_ctx *ctx, int i) { return ctx->inputs[i]->value; }
bool nc_ag_needs_grad(nc_ag_ctx *ctx, int i) { return ctx->inputs[i]->requires_grad; }
int nc_ag_n_inputs(nc_ag_ctx *ctx) { return ctx->n_inputs; }
void nc_ag_set_user(nc_ag_ctx *ctx, void *user, void (*free_fn)(void *)) {
  ctx->user = user;
  ctx->free_user = free_fn;
}
void *nc_ag_user(nc_ag_ctx *ctx) { return ctx->user; }

/* ---- tape ---------------------------------------------------------------------------------------- */
nc_status nc_tape_new(nc_tape **out) {
  *out = calloc(1, sizeof **out);
  return *out ? NC_OK : nc_error(NC_ERR_OOM, "out of host memory for a tape");
}

static void free_entry(nc_tape_entry *e) {
  nc_ag_ctx *c = &e->ctx;
  for (int i = 0; i < c->n_saved; i++) nc_tensor_release(c->saved[i].t);
  if (c->free_user) c->free_user(c->user);
  for (int i = 0; i < c->n_inputs; i++) nc_node_release(c->inputs[i]);
  free(c->inputs);
  if (e->out->creator == e) e->out->creator = NULL;
  nc_node_release(e->out);
  free(e);
}

static void clear(nc_tape *t) {
  for (size_t i = t->n; i-- > 0;) free_entry(t->entries[i]);
  t->n = 0;
}

void nc_tape_free(nc_tape *t) {
  if (!t) return;
  clear(t);
  free(t->entries);
  free(t);
}

size_t nc_tape_size(const nc_tape *t) { return t->n; }
bool nc_tape_consumed(const nc_tape *t) { return t->consumed; }
bool nc_tape_busy(const nc_tape *t) { return t->busy; }

bool nc_ag_should_record(const nc_tape *t, int n, nc_node *const *in) {
  if (!t) return false;
  for (int i = 0; i < n; i++)
    if (in[i] && in[i]->requires_grad) return true;
  return false;
}

nc_status nc_tape_record(nc_tape *t, const char *op, nc_backward_fn fn, int n, nc_node *const *in,
                         nc_node *out, nc_ag_ctx **ctx) {
  if (t->busy)
    return nc_error(NC_ERR_STATE, "cannot record %s on a tape while its backward pass runs (from a gradient hook)", op);
  if (t->consumed)
    return nc_error(NC_ERR_STATE,
                    "this tape was freed by backward; record on a new tape (or pass retain=true)");
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    nc_tape_entry **e = realloc(t->entries, cap * sizeof *e);
    if (!e) return nc_error(NC_ERR_OOM, "out of host memory growing the tape");
    t->entries = e;
    t->cap = cap;
  }
  nc_tape_entry *e = calloc(1, sizeof *e);
  nc_node **inputs = calloc((size_t)(n > 0 ? n : 1), sizeof *inputs);
  if (!e || !inputs) {
    free(e);
    free(inputs);
    return nc_error(NC_ERR_OOM, "out of host memory recording %s", op);
  }
  e->tape = t;
  e->op = op;
  e->fn = fn;
  e->out = nc_node_retain(out);
  e->ctx.n_inputs = n;
  e->ctx.inputs = inputs;
  for (int i = 0; i < n; i++) inputs[i] = nc_node_retain(in[i]);
  out->creator = e;
  out->requires_grad = true;
  t->entries[t->n++] = e;
  if (ctx) *ctx = &e->ctx;
  return NC_OK;
}

/* Adds g (taking the reference) into *slot. */
static nc_status accumulate(nc_tensor **slot, nc_tensor *g) {
  if (!*slot) {
    *slot = g;
    return NC_OK;
  }
  nc_tensor *sum;
  nc_status s = nc_ag_accumulate(*slot, g, &sum);
  nc_tensor_release(g);
  if (s != NC_OK) return s;
  nc_tensor_release(*slot);
  *slot = sum;
  return NC_OK;
}

static bool same_shape(const nc_tensor *a, const nc_tensor *b) {
  if (a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return false;
  return true;
}

/* The dtype of a gradient of value: value's, but float32 for a storage dtype (bfloat16,
 * float16), which no op computes on: a storage parameter's .grad is float32 (the optimizers
 * keep a float32 master copy of such parameters). */
static nc_dtype grad_dtype(const nc_tensor *value) {
  return nc_dtype_is_storage(value->dtype) ? NC_FLOAT32 : value->dtype;
}

/* Into n->grad (taking g's reference). Rules may hand out views of another gradient, or the
 * same tensor to several inputs, so the first gradient a node keeps is its own contiguous copy
 * in the value's dtype: changing one .grad in place never changes another, and .grad holds no
 * larger storage alive. Later ones add into a new tensor. */
static nc_status accumulate_grad(nc_node *n, nc_tensor *g) {
  if (n->grad) return accumulate(&n->grad, g);
  nc_tensor *own;
  nc_status s = nc_to(g, nc_tensor_device(n->value), grad_dtype(n->value), &own);
  nc_tensor_release(g);
  if (s != NC_OK) return s;
  n->grad = own;
  return NC_OK;
}

/* Whether in is a leaf for this pass: a node that requires a gradient and was not produced on t
 * (its gradient goes to .grad). */
static bool pass_leaf(const nc_tape *t, const nc_node *in) {
  return in->requires_grad && !(in->creator && in->creator->tape == t);
}

/* After entry k has run (or was skipped): the hook for each leaf whose first use is k and that got
 * a gradient in this pass, in input order, each once. */
static nc_status fire_hooks(nc_tape *t, size_t k, uint64_t pass, nc_grad_hook hook, void *ud) {
  nc_ag_ctx *c = &t->entries[k]->ctx;
  for (int i = 0; i < c->n_inputs; i++) {
    nc_node *in = c->inputs[i];
    if (!pass_leaf(t, in) || in->hook_pass != pass || in->hook_first != k) continue;
    in->hook_first = SIZE_MAX; /* fired (or not to fire): once */
    if (!in->hook_got) continue;
    nc_status s = hook(in, ud);
    if (s != NC_OK) return s;
  }
  return NC_OK;
}

nc_status nc_tape_backward(nc_tape *t, nc_node *out, nc_tensor *grad, bool retain) {
  return nc_tape_backward_hooked(t, out, grad, retain, NULL, NULL);
}

nc_status nc_tape_backward_hooked(nc_tape *t, nc_node *out, nc_tensor *grad, bool retain, nc_grad_hook hook,
                                  void *ud) {
  static _Atomic uint64_t passes;
  if (t->busy)
    return nc_error(NC_ERR_STATE, "backward called from inside a gradient hook of the same tape's backward");
  if (t->consumed)
    return nc_error(NC_ERR_STATE,
                    "backward called twice: the first backward freed the tape "
                    "(pass retain=true to the first one)");
  if (!out->requires_grad)
    return nc_error(NC_ERR_STATE, "the output does not require a gradient (nothing was recorded)");
  if (out->creator && out->creator->tape != t)
    return nc_error(NC_ERR_STATE, "the output was recorded on another tape");
  nc_tensor *g0;
  if (grad) {
    if (!same_shape(grad, out->value))
      return nc_error(NC_ERR_SHAPE, "the gradient's shape does not match the output's");
    g0 = nc_tensor_retain(grad);
  } else {
    if (nc_tensor_numel(out->value) != 1)
      return nc_error(NC_ERR_SHAPE,
                      "backward of a non-scalar output (%lld elements) needs a gradient argument",
                      (long long)nc_tensor_numel(out->value));
    NC_TRY(nc_tensor_empty(nc_tensor_device(out->value), out->value->dtype, out->value->ndim,
                           out->value->shape, 0, &g0));
    nc_status s = nc_fill(g0, 1.0);
    if (s != NC_OK) {
      nc_tensor_release(g0);
      return s;
    }
  }
  nc_status st = NC_OK;
  t->busy = true;
  bool on_tape = out->creator != NULL && out->creator->tape == t;
  if (!on_tape) { /* a leaf: its gradient is the seed */
    st = accumulate_grad(out, g0);
    if (st == NC_OK && hook) st = hook(out, ud);
    goto done;
  }
  /* With a hook: each leaf's first use (lowest entry index) in this pass. */
  uint64_t pass = hook ? ++passes : 0;
  for (size_t k = 0; hook && k < t->n; k++) {
    nc_ag_ctx *c = &t->entries[k]->ctx;
    for (int i = 0; i < c->n_inputs; i++) {
      nc_node *in = c->inputs[i];
      if (pass_leaf(t, in) && in->hook_pass != pass) {
        in->hook_pass = pass;
        in->hook_first = k;
        in->hook_got = false;
      }
    }
  }
  out->pending = g0;
  for (size_t k = t->n; k-- > 0 && st == NC_OK;) {
    nc_tape_entry *e = t->entries[k];
    nc_tensor *g = e->out->pending;
    if (!g) {
      if (hook) st = fire_hooks(t, k, pass, hook, ud); /* its leaves may be final all the same */
      continue;
    }
    e->out->pending = NULL;
    nc_tensor *gin[16] = {NULL};
    nc_tensor **grads = e->ctx.n_inputs <= 16 ? gin : calloc((size_t)e->ctx.n_inputs, sizeof *grads);
    if (!grads) {
      nc_tensor_release(g);
      st = nc_error(NC_ERR_OOM, "out of host memory in backward");
      break;
    }
    st = e->fn(&e->ctx, g, grads);
    if (st != NC_OK) nc_error_prefix(st, "backward of %s", e->op);
    nc_tensor_release(g);
    for (int i = 0; i < e->ctx.n_inputs; i++) {
      nc_node *in = e->ctx.inputs[i];
      if (!grads[i]) continue;
      if (st != NC_OK || !in->requires_grad) {
        nc_tensor_release(grads[i]);
        continue;
      }
      if (!same_shape(grads[i], in->value)) {
        nc_tensor_release(grads[i]);
        st = nc_error(NC_ERR_STATE, "backward of %s produced a gradient of the wrong shape for input %d",
                      e->op, i + 1);
        continue;
      }
      if (grads[i]->dtype != grad_dtype(in->value)) { /* mixed-dtype ops: a gradient takes its input's dtype */
        nc_tensor *c;
        st = nc_to(grads[i], nc_tensor_device(in->value), grad_dtype(in->value), &c);
        nc_tensor_release(grads[i]);
        if (st != NC_OK) continue;
        grads[i] = c;
      }
      /* Nodes produced on this tape gather gradients until their own entry runs; leaves (and
       * nodes from other tapes) accumulate into .grad. */
      if (in->creator && in->creator->tape == t) {
        st = accumulate(&in->pending, grads[i]);
      } else {
        st = accumulate_grad(in, grads[i]);
        if (st == NC_OK) in->hook_got = true;
      }
    }
    if (grads != gin) free(grads);
    if (st == NC_OK && hook) st = fire_hooks(t, k, pass, hook, ud);
  }
  /* drop anything left pending (an error, or branches that never reached an entry) */
  for (size_t k = 0; k < t->n; k++) {
    nc_tensor_release(t->entries[k]->out->pending);
    t->entries[k]->out->pending = NULL;
  }
done:
  t->busy = false;
  if (!retain) {
    clear(t);
    t->consumed = true;
  }
  return st;
}

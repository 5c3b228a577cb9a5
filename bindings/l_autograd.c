/* Node and Tape userdata, the active tape of a Lua state, and ag.Function (ops defined in Lua
 * with a Lua backward). Ops on nodes are bound with the Tensor ops of the same name (l_ops.c and
 * the family files it calls). */
#include <stdlib.h>
#include <string.h>
#include "l_autograd.h"

static const char STATE_KEY = 'A'; /* registry: {tape = Tape|nil, enabled = bool} */

/* ---- nodes ------------------------------------------------------------------------------------ */
void nc_lua_pushnode_owned(lua_State *L, nc_node *n) {
  nc_lua_node_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->n = n;
  luaL_setmetatable(L, NC_NODE_MT);
}

nc_node *nc_lua_tonode(lua_State *L, int idx) {
  nc_lua_node_box *b = luaL_testudata(L, idx, NC_NODE_MT);
  return b ? b->n : NULL;
}

nc_node *nc_lua_checknode(lua_State *L, int idx, const char *fname) {
  nc_lua_node_box *b = luaL_testudata(L, idx, NC_NODE_MT);
  if (!b) {
    nc_lua_argerror(L, fname, idx, "expected Node, got %s", luaL_typename(L, idx));
    return NULL;
  }
  if (!b->n) nc_lua_argerror(L, fname, idx, "the node was freed");
  return b->n;
}

nc_node *nc_lua_checknodelike(lua_State *L, int idx, const char *fname) {
  nc_node *n = nc_lua_tonode(L, idx);
  if (n) return n;
  if (luaL_testudata(L, idx, NC_TENSOR_MT)) {
    nc_tensor *t = nc_lua_checktensor_f(L, idx, fname);
    NC_LUA_CHECK(L, fname, nc_node_new(t, false, &n));
    nc_lua_pushnode_owned(L, n); /* owned by the stack until the call returns */
    lua_replace(L, idx);
    return n;
  }
  nc_lua_argerror(L, fname, idx, "expected Node or Tensor, got %s", luaL_typename(L, idx));
  return NULL;
}

bool nc_lua_isnode(lua_State *L, int idx) { return luaL_testudata(L, idx, NC_NODE_MT) != NULL; }

bool nc_lua_has_node(lua_State *L, int from, int to) {
  for (int i = from; i <= to; i++)
    if (nc_lua_isnode(L, i)) return true;
  return false;
}

void nc_lua_no_out(lua_State *L, int opts, const char *fname) {
  if (nc_lua_opt_field(L, opts, "out") != LUA_TNIL)
    nc_lua_errorf(L, "%s: out= is for Tensors; an op on Nodes always makes a new Node", fname);
  lua_pop(L, 1);
}

void nc_lua_ag_push(lua_State *L, nc_node *n) {
  nc_lua_pushnode_owned(L, n);
  nc_lua_account(L, nc_tensor_nbytes(nc_node_value(n)));
}

int nc_lua_ag_result(lua_State *L, nc_status s, nc_node **out, const char *fname) {
  if (s != NC_OK) nc_lua_raise(L, fname);
  nc_lua_ag_push(L, *out);
  return 1;
}

nc_tensor *nc_lua_ag_checktensor(lua_State *L, int idx, const char *fname) {
  if (nc_lua_isnode(L, idx)) return nc_node_value(nc_lua_checknode(L, idx, fname)); /* freed: raises */
  return nc_lua_checktensor_f(L, idx, fname);
}

/* ---- active tape ---------------------------------------------------------------------------------- */
static void push_state(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &STATE_KEY) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_createtable(L, 0, 2);
  lua_pushboolean(L, 1);
  lua_setfield(L, -2, "enabled");
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &STATE_KEY);
}

nc_tape *nc_lua_active_tape(lua_State *L) {
  push_state(L);
  lua_getfield(L, -1, "enabled");
  bool enabled = lua_toboolean(L, -1);
  lua_getfield(L, -2, "tape");
  nc_lua_tape_box *b = luaL_testudata(L, -1, NC_TAPE_MT);
  lua_pop(L, 3);
  return enabled && b ? b->t : NULL;
}

static nc_lua_tape_box *checktape(lua_State *L, int idx, const char *fname) {
  nc_lua_tape_box *b = luaL_checkudata(L, idx, NC_TAPE_MT);
  if (!b->t) nc_lua_errorf(L, "%s: the tape was freed", fname);
  return b;
}

static int tape_new(lua_State *L) {
  nc_lua_tape_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->t = NULL;
  luaL_setmetatable(L, NC_TAPE_MT);
  NC_LUA_CHECK(L, "netcl.autograd.Tape", nc_tape_new(&b->t));
  return 1;
}

static int tape_gc(lua_State *L) {
  nc_lua_tape_box *b = luaL_checkudata(L, 1, NC_TAPE_MT);
  if (b->t && nc_tape_busy(b->t)) /* free from an on_grad hook: the pass still walks it */
    return nc_lua_errorf(L, "netcl.autograd.Tape:free: the tape's backward pass is running (called from on_grad)");
  nc_tape_free(b->t);
  b->t = NULL;
  return 0;
}

/* Swaps the active tape and the enabled flag; pushes nothing. Returns the previous values on
 * the stack: prev_tape, prev_enabled (caller restores with restore_state). */
static void swap_state(lua_State *L, int tape_idx, int enabled) {
  tape_idx = lua_absindex(L, tape_idx);
  push_state(L);
  lua_getfield(L, -1, "tape");
  lua_getfield(L, -2, "enabled");
  lua_pushvalue(L, tape_idx);
  lua_setfield(L, -4, "tape");
  lua_pushboolean(L, enabled);
  lua_setfield(L, -4, "enabled");
  lua_remove(L, -3); /* state table */
}

static void restore_state(lua_State *L, int prev_tape_idx, int prev_enabled_idx) {
  prev_tape_idx = lua_absindex(L, prev_tape_idx);
  prev_enabled_idx = lua_absindex(L, prev_enabled_idx);
  push_state(L);
  lua_pushvalue(L, prev_tape_idx);
  lua_setfield(L, -2, "tape");
  lua_pushvalue(L, prev_enabled_idx);
  lua_setfield(L, -2, "enabled");
  lua_pop(L, 1);
}

/* Runs the function at fn_idx with (tape, enabled) active; returns its results or re-raises. */
static int run_with(lua_State *L, int fn_idx, int tape_idx, int enabled) {
  int base = lua_gettop(L);
  swap_state(L, tape_idx, enabled); /* base+1: prev tape, base+2: prev enabled */
  lua_pushvalue(L, fn_idx);
  int status = lua_pcall(L, 0, LUA_MULTRET, 0);
  restore_state(L, base + 1, base + 2);
  if (status != LUA_OK) return lua_error(L);
  return lua_gettop(L) - base - 2;
}

static int tape_record(lua_State *L) {
  checktape(L, 1, "netcl.autograd.Tape:record");
  luaL_checktype(L, 2, LUA_TFUNCTION);
  return run_with(L, 2, 1, 1);
}

static int no_grad(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_pushnil(L);
  return run_with(L, 1, lua_gettop(L), 0);
}

/* tape:scope(): a to-be-closed value; the tape is active until it closes. */
static int scope_close(lua_State *L) {
  lua_getiuservalue(L, 1, 1);
  lua_getiuservalue(L, 1, 2);
  if (!lua_isnil(L, -1) || !lua_isnil(L, -2)) restore_state(L, -2, -1);
  lua_pushnil(L);
  lua_setiuservalue(L, 1, 1);
  lua_pushnil(L);
  lua_setiuservalue(L, 1, 2);
  return 0;
}

static int tape_scope(lua_State *L) {
  checktape(L, 1, "netcl.autograd.Tape:scope");
  swap_state(L, 1, 1);
  lua_newuserdatauv(L, 1, 2);
  lua_insert(L, -3);
  lua_setiuservalue(L, -3, 2);
  lua_setiuservalue(L, -2, 1);
  if (luaL_newmetatable(L, "netcl.TapeScope")) {
    lua_pushcfunction(L, scope_close);
    lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, scope_close);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  return 1;
}

/* The on_grad hook of tape:backward: calls the Lua function at fn_idx with the leaf, in
 * protected mode (a Lua error must not unwind through the C tape); its message becomes the
 * backward's error. */
typedef struct {
  lua_State *L;
  int fn_idx;
} grad_hook;

static nc_status call_grad_hook(nc_node *leaf, void *ud) {
  grad_hook *h = ud;
  lua_State *L = h->L;
  int top = lua_gettop(L);
  lua_pushvalue(L, h->fn_idx);
  nc_lua_pushnode_owned(L, nc_node_retain(leaf));
  if (lua_pcall(L, 1, 0, 0) == LUA_OK) return NC_OK;
  const char *msg = luaL_tolstring(L, -1, NULL);
  nc_status s = nc_error(NC_ERR_STATE, "the on_grad hook failed: %s", msg);
  lua_settop(L, top);
  return s;
}

/* tape:backward(out, grad?, {retain=false, on_grad=fn}) */
static int tape_backward(lua_State *L) {
  const char *fname = "netcl.autograd.backward";
  nc_lua_tape_box *b = checktape(L, 1, fname);
  nc_node *out = nc_lua_checknode(L, 2, fname);
  nc_tensor *grad = NULL;
  int opts = lua_istable(L, 3) ? 3 : 4; /* backward(out, opts) or backward(out, grad|nil, opts) */
  if (!lua_isnoneornil(L, 3) && !lua_istable(L, 3)) {
    grad = nc_lua_totensor(L, 3);
    if (!grad && nc_lua_tonode(L, 3)) grad = nc_node_value(nc_lua_tonode(L, 3));
    if (!grad) return nc_lua_argerror(L, fname, 3, "expected a Tensor gradient, got %s", luaL_typename(L, 3));
  }
  bool retain = false;
  grad_hook hook = {L, 0};
  if (lua_istable(L, opts)) {
    lua_getfield(L, opts, "retain");
    retain = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (lua_getfield(L, opts, "on_grad") != LUA_TNIL) {
      if (!lua_isfunction(L, -1))
        return nc_lua_errorf(L, "%s: on_grad must be a function(leaf), got %s", fname, luaL_typename(L, -1));
      hook.fn_idx = lua_gettop(L);
    } else {
      lua_pop(L, 1);
    }
  }
  NC_LUA_CHECK(L, fname,
               nc_tape_backward_hooked(b->t, out, grad, retain, hook.fn_idx ? call_grad_hook : NULL, &hook));
  return 0;
}

static int tape_len(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)nc_tape_size(checktape(L, 1, "netcl.autograd.Tape")->t));
  return 1;
}

/* ---- node fields and methods ----------------------------------------------------------------------- */
static int ag_tensor(lua_State *L) {
  const char *fname = "netcl.autograd.tensor";
  nc_tensor *t = nc_lua_checktensor_f(L, 1, fname);
  bool rg = false;
  int opts = nc_lua_checkopts(L, 2, fname, "requires_grad");
  if (opts) {
    lua_getfield(L, opts, "requires_grad");
    rg = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  nc_node *n;
  NC_LUA_CHECK(L, fname, nc_node_new(t, rg, &n));
  nc_lua_pushnode_owned(L, n);
  return 1;
}

static int ag_param(lua_State *L) {
  nc_tensor *t = nc_lua_checktensor_f(L, 1, "netcl.autograd.param");
  nc_node *n;
  NC_LUA_CHECK(L, "netcl.autograd.param", nc_node_new(t, true, &n));
  nc_lua_pushnode_owned(L, n);
  return 1;
}

static int node_detach(lua_State *L) {
  nc_node *n = nc_lua_checknode(L, 1, "netcl.autograd.detach"), *d;
  NC_LUA_CHECK(L, "netcl.autograd.detach", nc_node_new(nc_node_value(n), false, &d));
  nc_lua_pushnode_owned(L, d);
  return 1;
}

static int node_zero_grad(lua_State *L) {
  nc_node_set_grad(nc_lua_checknode(L, 1, "netcl.autograd.zero_grad"), NULL);
  return 0;
}

static int node_gc(lua_State *L) {
  nc_lua_node_box *b = luaL_checkudata(L, 1, NC_NODE_MT);
  nc_node_release(b->n);
  b->n = NULL;
  return 0;
}

static int node_tostring(lua_State *L) {
  nc_node *n = nc_lua_checknode(L, 1, "netcl.autograd.tostring");
  char *s;
  NC_LUA_CHECK(L, "netcl.autograd.tostring", nc_tensor_format(nc_node_value(n), &s));
  const char *op = nc_node_op(n);
  if (op)
    lua_pushfstring(L, "Node(%s, op=%s)", s, op);
  else
    lua_pushfstring(L, "Node(%s, requires_grad=%s)", s, nc_node_requires_grad(n) ? "true" : "false");
  free(s);
  return 1;
}

static int node_index(lua_State *L) {
  if (lua_type(L, 2) == LUA_TNUMBER) {
    /* n[i]: the handler l_view.c registers (x[i] of Tensors too; a lookup, so that this file
     * does not call into the op bindings, which call into it) */
    lua_getmetatable(L, 1);
    lua_getfield(L, -1, "__index_number");
    lua_replace(L, -2);
    lua_insert(L, 1);
    lua_call(L, 2, 1);
    return 1;
  }
  if (lua_type(L, 2) != LUA_TSTRING)
    return nc_lua_errorf(L, "netcl.autograd.index: a Node takes integer keys (n[i], n[i][j] for more dims) or field "
                            "names, got a %s key",
                         luaL_typename(L, 2));
  const char *k = lua_tostring(L, 2);
  lua_getmetatable(L, 1);
  lua_getfield(L, -1, "methods");
  if (lua_getfield(L, -1, k) != LUA_TNIL) return 1;
  lua_pop(L, 3);
  nc_node *n = nc_lua_checknode(L, 1, "netcl.autograd.index");
  nc_tensor *v = nc_node_value(n);
  if (!strcmp(k, "value"))
    nc_lua_pushtensor_borrowed(L, nc_tensor_retain(v), "value");
  else if (!strcmp(k, "grad")) {
    if (nc_node_grad(n))
      nc_lua_pushtensor_borrowed(L, nc_tensor_retain(nc_node_grad(n)), "grad");
    else
      lua_pushnil(L);
  } else if (!strcmp(k, "requires_grad"))
    lua_pushboolean(L, nc_node_requires_grad(n));
  else if (!strcmp(k, "is_leaf"))
    lua_pushboolean(L, nc_node_is_leaf(n));
  else if (!strcmp(k, "id")) /* the node's identity: Node values over one node share it */
    lua_pushinteger(L, (lua_Integer)(uintptr_t)n);
  else if (!strcmp(k, "op")) {
    if (nc_node_op(n))
      lua_pushstring(L, nc_node_op(n));
    else
      lua_pushnil(L);
  } else if (!strcmp(k, "shape"))
    nc_lua_pushshape(L, v->ndim, v->shape);
  else if (!strcmp(k, "ndim"))
    lua_pushinteger(L, v->ndim);
  else if (!strcmp(k, "dtype"))
    lua_pushstring(L, nc_dtype_name(v->dtype));
  else if (!strcmp(k, "device"))
    nc_lua_pushdevice(L, nc_tensor_device(v));
  else
    return nc_lua_errorf(L, "netcl.autograd.index: a Node has no field or method '%s' (fields: value, grad, "
                            "requires_grad, is_leaf, op, id, shape, ndim, dtype, device)", k);
  return 1;
}

static int node_len(lua_State *L) {
  const nc_tensor *v = nc_node_value(nc_lua_checknode(L, 1, "netcl.autograd.#"));
  if (v->ndim == 0) return nc_lua_errorf(L, "netcl.autograd.#: a 0-dim node has no length");
  lua_pushinteger(L, v->shape[0]);
  return 1;
}

/* ag.recording(): whether ops on nodes record now (a tape is active and not under no_grad). */
static int ag_recording(lua_State *L) {
  lua_pushboolean(L, nc_lua_active_tape(L) != NULL);
  return 1;
}

static int node_newindex(lua_State *L) {
  const char *fname = "netcl.autograd.setfield";
  nc_node *n = nc_lua_checknode(L, 1, fname);
  const char *k = luaL_checkstring(L, 2);
  if (!strcmp(k, "grad")) {
    if (lua_isnil(L, 3))
      nc_node_set_grad(n, NULL);
    else
      nc_node_set_grad(n, nc_lua_checktensor_f(L, 3, fname));
  } else if (!strcmp(k, "value")) {
    NC_LUA_CHECK(L, fname, nc_node_set_value(n, nc_lua_checktensor_f(L, 3, fname)));
  } else if (!strcmp(k, "requires_grad")) {
    if (!nc_node_is_leaf(n))
      return nc_lua_errorf(L, "%s: requires_grad can only be set on leaf nodes", fname);
    nc_node_set_requires_grad(n, lua_toboolean(L, 3));
  } else {
    return nc_lua_errorf(L, "%s: cannot set field '%s' of a Node (fields: value, grad, requires_grad)", fname,
                         k);
  }
  return 0;
}

/* ---- ag.Function: an op whose forward and backward are Lua functions ------------------------------- */
typedef struct {
  lua_State *L;
  int fn_ref;  /* the Function table {forward=, backward=} */
  int ctx_ref; /* the ctx table forward filled */
  int nargs;   /* backward returns one gradient per forward argument */
  int pos[16]; /* argument position (0-based) of each recorded node input */
} lua_rule;

static void lua_rule_free(void *p) {
  lua_rule *r = p;
  luaL_unref(r->L, LUA_REGISTRYINDEX, r->fn_ref);
  luaL_unref(r->L, LUA_REGISTRYINDEX, r->ctx_ref);
  free(r);
}

static nc_status lua_rule_backward(nc_ag_ctx *ctx, nc_tensor *grad_out, nc_tensor **grad_in) {
  lua_rule *r = nc_ag_user(ctx);
  lua_State *L = r->L;
  int top = lua_gettop(L), n = nc_ag_n_inputs(ctx);
  lua_rawgeti(L, LUA_REGISTRYINDEX, r->fn_ref);
  lua_getfield(L, -1, "backward");
  lua_rawgeti(L, LUA_REGISTRYINDEX, r->ctx_ref);
  nc_lua_pushtensor_owned(L, nc_tensor_retain(grad_out));
  if (lua_pcall(L, 2, r->nargs, 0) != LUA_OK) {
    nc_status s = nc_error(NC_ERR_STATE, "custom Function backward failed: %s", lua_tostring(L, -1));
    lua_settop(L, top);
    return s;
  }
  nc_status s = NC_OK;
  for (int i = 0; i < n; i++) {
    int idx = top + 2 + r->pos[i];
    if (lua_isnil(L, idx)) continue;
    nc_tensor *g = nc_lua_totensor(L, idx);
    if (!g && nc_lua_tonode(L, idx)) g = nc_node_value(nc_lua_tonode(L, idx));
    if (!g) {
      s = nc_error(NC_ERR_STATE,
                   "custom Function backward returned a %s for input %d (expected a Tensor or nil)",
                   luaL_typename(L, idx), i + 1);
      break;
    }
    grad_in[i] = nc_tensor_retain(g);
  }
  if (s != NC_OK)
    for (int i = 0; i < n; i++) {
      nc_tensor_release(grad_in[i]);
      grad_in[i] = NULL;
    }
  lua_settop(L, top);
  return s;
}

/* Function:__call(...) — upvalue 1 is the Function table. */
static int function_call(lua_State *L) {
  const char *fname = "netcl.autograd.Function";
  int nargs = lua_gettop(L) - 1; /* arg 1 is the Function table itself */
  nc_node *inputs[16];
  if (nargs > 16) return nc_lua_errorf(L, "%s: at most 16 inputs", fname);
  lua_newtable(L); /* ctx */
  int ctx = lua_gettop(L);
  lua_getfield(L, 1, "forward");
  lua_pushvalue(L, ctx);
  for (int i = 0; i < nargs; i++) {
    int idx = 2 + i;
    nc_node *n = nc_lua_tonode(L, idx);
    inputs[i] = n;
    if (n)
      nc_lua_pushtensor_owned(L, nc_tensor_retain(nc_node_value(n)));
    else
      lua_pushvalue(L, idx);
  }
  lua_call(L, nargs + 1, 1);
  nc_tensor *out = nc_lua_totensor(L, -1);
  if (!out) return nc_lua_errorf(L, "%s: forward must return a Tensor, got %s", fname, luaL_typename(L, -1));
  nc_node *o;
  NC_LUA_CHECK(L, fname, nc_node_new(out, false, &o));
  nc_lua_pushnode_owned(L, o);
  /* Node arguments take part in autograd; tensors and numbers are constants. */
  nc_node *recorded[16];
  int pos[16], nrec = 0;
  for (int i = 0; i < nargs; i++)
    if (inputs[i]) {
      pos[nrec] = i;
      recorded[nrec++] = inputs[i];
    }
  nc_tape *t = nc_lua_active_tape(L);
  if (nc_ag_should_record(t, nrec, recorded)) {
    lua_rule *r = malloc(sizeof *r);
    if (!r) return nc_lua_errorf(L, "%s: out of memory", fname);
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    r->L = lua_tothread(L, -1);
    lua_pop(L, 1);
    lua_pushvalue(L, 1);
    r->fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pushvalue(L, ctx);
    r->ctx_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    r->nargs = nargs;
    memcpy(r->pos, pos, sizeof pos);
    nc_ag_ctx *c;
    nc_status s = nc_tape_record(t, "Function", lua_rule_backward, nrec, recorded, o, &c);
    if (s != NC_OK) {
      lua_rule_free(r);
      return nc_lua_fail(L, fname);
    }
    nc_ag_set_user(c, r, lua_rule_free);
  }
  lua_settop(L, ctx + 2); /* ..., ctx, out tensor, node */
  return 1;
}

static int ag_function(lua_State *L) {
  const char *fname = "netcl.autograd.Function";
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_getfield(L, 1, "forward");
  lua_getfield(L, 1, "backward");
  if (!lua_isfunction(L, -2) || !lua_isfunction(L, -1))
    return nc_lua_errorf(
        L, "%s: needs {forward = function(ctx, ...) end, backward = function(ctx, grad) end}", fname);
  lua_pop(L, 2);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, function_call);
  lua_setfield(L, -2, "__call");
  lua_setmetatable(L, 1);
  lua_settop(L, 1);
  return 1;
}

/* ag.is_node(v) (also nc.is_node): whether v is a Node userdata (a freed one too), by its
 * metatable. */
static int ag_is_node(lua_State *L) {
  lua_pushboolean(L, luaL_testudata(L, 1, NC_NODE_MT) != NULL);
  return 1;
}

void nc_lua_add_autograd(lua_State *L) {
  static const luaL_Reg tape_methods[] = {{"record", tape_record},
                                          {"scope", tape_scope},
                                          {"backward", tape_backward},
                                          {"free", tape_gc},
                                          {NULL, NULL}};
  static const luaL_Reg tape_meta[] = {
      {"__gc", tape_gc}, {"__close", tape_gc}, {"__len", tape_len}, {NULL, NULL}};
  static const luaL_Reg node_methods[] = {
      {"detach", node_detach}, {"zero_grad", node_zero_grad}, {NULL, NULL}};
  static const luaL_Reg node_meta[] = {{"__gc", node_gc},
                                       {"__close", node_gc},
                                       {"__tostring", node_tostring},
                                       {"__index", node_index},
                                       {"__newindex", node_newindex},
                                       {"__len", node_len},
                                       {NULL, NULL}};
  static const luaL_Reg funcs[] = {
      {"Tape", tape_new},        {"tensor", ag_tensor},       {"param", ag_param}, {"no_grad", no_grad},
      {"Function", ag_function}, {"recording", ag_recording}, {"is_node", ag_is_node}, {NULL, NULL}};
  luaL_newmetatable(L, NC_TAPE_MT);
  luaL_setfuncs(L, tape_meta, 0);
  luaL_newlib(L, tape_methods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  int module = lua_gettop(L);
  luaL_newmetatable(L, NC_NODE_MT);
  int meta = lua_gettop(L);
  luaL_setfuncs(L, node_meta, 0);
  luaL_newlib(L, node_methods);
  int methods = lua_gettop(L);
  /* autograd.lua adds the Lua-defined methods (in-place guards, gradcheck helpers) */
  lua_pushvalue(L, methods);
  lua_setfield(L, module, "node_methods");
  lua_setfield(L, meta, "methods");
  lua_settop(L, module);
  lua_pushcfunction(L, ag_is_node);
  lua_setfield(L, module - 1, "is_node");
  lua_setfield(L, -2, "autograd");
}

/* Tensor userdata: fields, host transfers, lifetime, in-place fills and copies. The view and
 * copy ops (view ... clone), which Nodes share, are in l_view.c. */
#include <stdlib.h>
#include <string.h>
#include "l_ops.h"

#define CHECK(fname, expr) NC_LUA_CHECK(L, fname, expr)

static nc_tensor *self(lua_State *L, const char *fname) { return nc_lua_checktensor_f(L, 1, fname); }

/* ---- fields and simple queries ---------------------------------------------------------------- */
static int t_numel(lua_State *L) {
  lua_pushinteger(L, nc_tensor_numel(self(L, "netcl.numel")));
  return 1;
}

#define SIZE_MT "netcl.Size"

/* t:size(): the shape as a Size, a plain Lua array (t:size()[1], #, ipairs) with a metatable
 * that prints it (Size([2, 3])) and compares it by value with another array (==). */
static int t_size(lua_State *L) {
  nc_tensor *t = self(L, "netcl.size");
  if (lua_isnoneornil(L, 2)) {
    nc_lua_pushshape(L, t->ndim, t->shape);
    luaL_setmetatable(L, SIZE_MT);
    return 1;
  }
  lua_pushinteger(L, t->shape[nc_lua_checkdim(L, 2, t->ndim, "netcl.size")]);
  return 1;
}

static int size_tostring(lua_State *L) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "Size([");
  lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    if (i > 1) luaL_addstring(&b, ", ");
    luaL_addvalue(&b);
  }
  luaL_addstring(&b, "])");
  luaL_pushresult(&b);
  return 1;
}

static int size_eq(lua_State *L) {
  if (!lua_istable(L, 1) || !lua_istable(L, 2) || lua_rawlen(L, 1) != lua_rawlen(L, 2)) {
    lua_pushboolean(L, 0);
    return 1;
  }
  for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, 1); i++) {
    lua_rawgeti(L, 1, i);
    lua_rawgeti(L, 2, i);
    int same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    if (!same) {
      lua_pushboolean(L, 0);
      return 1;
    }
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* t:dim(): the number of dims (t.ndim), as PyTorch's and Torch7's. */
static int t_dim(lua_State *L) {
  lua_pushinteger(L, self(L, "netcl.dim")->ndim);
  return 1;
}

static int t_is_contiguous(lua_State *L) {
  lua_pushboolean(L, nc_tensor_is_contiguous(self(L, "netcl.is_contiguous")));
  return 1;
}

static void push_value(lua_State *L, nc_dtype dt, const void *p) {
  switch (dt) {
    case NC_FLOAT32: lua_pushnumber(L, *(const float *)p); break;
    case NC_FLOAT64: lua_pushnumber(L, *(const double *)p); break;
    case NC_INT32: lua_pushinteger(L, *(const int32_t *)p); break;
    case NC_INT64: lua_pushinteger(L, *(const int64_t *)p); break;
    case NC_UINT8: lua_pushinteger(L, *(const uint8_t *)p); break;
    case NC_BFLOAT16:
    case NC_FLOAT16: lua_pushnumber(L, nc_half_to_double(dt, *(const uint16_t *)p)); break;
    default: lua_pushboolean(L, *(const uint8_t *)p != 0); break;
  }
}

static int t_item(lua_State *L) {
  nc_tensor *t = self(L, "netcl.item");
  if (nc_tensor_numel(t) != 1)
    return nc_lua_errorf(L, "netcl.item: needs a tensor with one element, this one has %lld", (long long)nc_tensor_numel(t));
  char buf[8];
  CHECK("netcl.item", nc_read_values(t, buf, nc_dtype_size(t->dtype)));
  push_value(L, t->dtype, buf);
  return 1;
}

static void build_list(lua_State *L, const nc_tensor *t, int dim, const char **p) {
  if (dim == t->ndim) {
    push_value(L, t->dtype, *p);
    *p += nc_dtype_size(t->dtype);
    return;
  }
  nc_lua_checkstack(L, 4, "netcl.tolist", "nested lists");
  lua_createtable(L, (int)t->shape[dim], 0);
  for (int64_t i = 0; i < t->shape[dim]; i++) {
    build_list(L, t, dim + 1, p);
    lua_rawseti(L, -2, i + 1);
  }
}

/* Reads t's values into a userdata-owned buffer (freed by the collector even on error). */
static char *read_all(lua_State *L, nc_tensor *t, const char *fname) {
  size_t n = nc_tensor_nbytes(t);
  char *buf = lua_newuserdatauv(L, n ? n : 1, 0);
  CHECK(fname, nc_read_values(t, buf, n));
  return buf;
}

static int t_tolist(lua_State *L) {
  nc_tensor *t = self(L, "netcl.tolist");
  const char *p = read_all(L, t, "netcl.tolist");
  build_list(L, t, 0, &p);
  return 1;
}

static int t_bytes(lua_State *L) {
  nc_tensor *t = self(L, "netcl.bytes");
  const char *p = read_all(L, t, "netcl.bytes");
  lua_pushlstring(L, p, nc_tensor_nbytes(t));
  return 1;
}

/* t:to(device | dtype | {device=, dtype=}) */
static int t_to(lua_State *L) {
  const char *fname = "netcl.to";
  nc_tensor *t = self(L, fname);
  nc_device *dev = nc_tensor_device(t);
  nc_dtype dt = t->dtype;
  int opts = 3; /* t:to(x, {non_blocking=}) */
  if (lua_type(L, 2) == LUA_TSTRING) {
    const char *name = lua_tostring(L, 2);
    if (nc_dtype_parse(name, &dt) != NC_OK && nc_device_find(name, &dev) != NC_OK)
      return nc_lua_argerror(L, fname, 2,
                             "neither a dtype nor a device is called '%s' (dtypes: float32, float64, int32, int64, "
                             "uint8, bool, bfloat16, float16; devices: %s)",
                             name, nc_last_error());
  } else if (lua_istable(L, 2)) {
    opts = nc_lua_checkopts(L, 2, fname, "device dtype non_blocking");
    if (!lua_isnone(L, 3)) return nc_lua_argerror(L, fname, 3, "unexpected: the options are argument 2's table");
    dt = nc_lua_opt_dtype(L, 2, dt, fname);
    lua_getfield(L, 2, "device");
    if (!lua_isnil(L, -1)) dev = nc_lua_checkdevice(L, -1, fname);
    lua_pop(L, 1);
  } else {
    dev = nc_lua_checkdevice(L, 2, fname);
  }
  if (opts == 3) opts = nc_lua_checkopts(L, 3, fname, "non_blocking");
  nc_lua_opt_field(L, opts, "non_blocking");
  bool non_blocking = lua_toboolean(L, -1); /* a read to the host that does not wait (nc_to_async) */
  lua_pop(L, 1);
  if (dev == nc_tensor_device(t) && dt == t->dtype) {
    lua_settop(L, 1);
    return 1;
  }
  nc_tensor *r;
  CHECK(fname, (non_blocking ? nc_to_async : nc_to)(t, dev, dt, &r));
  nc_lua_pushtensor_new(L, r);
  return 1;
}

/* t:float(), t:double(), t:long(): t:to("float32"), t:to("float64"), t:to("int64") (t itself when
 * it has that dtype already). */
static int cast(lua_State *L, const char *fname, nc_dtype dt) {
  nc_tensor *t = self(L, fname), *r;
  if (t->dtype == dt) {
    lua_settop(L, 1);
    return 1;
  }
  CHECK(fname, nc_to(t, nc_tensor_device(t), dt, &r));
  nc_lua_pushtensor_new(L, r);
  return 1;
}
static int t_float(lua_State *L) { return cast(L, "netcl.float", NC_FLOAT32); }
static int t_double(lua_State *L) { return cast(L, "netcl.double", NC_FLOAT64); }
static int t_long(lua_State *L) { return cast(L, "netcl.long", NC_INT64); }

/* t:free(): gives the tensor's memory back now. A Node's value or gradient (n.value, n.grad) is
 * the Node's: freeing the handle would free nothing, so it raises and says what does. */
static int t_free(lua_State *L) {
  nc_lua_tensor_box *b = luaL_testudata(L, 1, NC_TENSOR_MT);
  if (!b) return nc_lua_argerror(L, "netcl.free", 1, "expected Tensor, got %s", luaL_typename(L, 1));
  if (b->owner && !strcmp(b->owner, "grad"))
    return nc_lua_errorf(L, "netcl.free: this Tensor is a Node's gradient (n.grad), which the Node owns; set "
                            "n.grad = nil to drop it (optimizer:zero_grad() does)");
  if (b->owner)
    return nc_lua_errorf(L, "netcl.free: this Tensor is a Node's value (n.value), which the Node owns; its memory "
                            "is freed with the Node (drop every reference to it)");
  if (b->t) {
    nc_tensor_release(b->t);
    b->t = NULL;
  }
  return 0;
}

/* ---- in place ------------------------------------------------------------------------------------- */
static double check_scalar(lua_State *L, int idx, const char *fname) {
  if (lua_isboolean(L, idx)) return lua_toboolean(L, idx);
  int ok;
  double v = lua_tonumberx(L, idx, &ok);
  if (!ok) return nc_lua_argerror(L, fname, idx, "expected a number, got %s", luaL_typename(L, idx));
  return v;
}

static int t_fill_(lua_State *L) {
  nc_tensor *t = self(L, "netcl.fill_");
  CHECK("netcl.fill_", nc_fill(t, check_scalar(L, 2, "netcl.fill_")));
  lua_settop(L, 1);
  return 1;
}

static int t_zero_(lua_State *L) {
  CHECK("netcl.zero_", nc_fill(self(L, "netcl.zero_"), 0));
  lua_settop(L, 1);
  return 1;
}

static int t_copy_(lua_State *L) {
  nc_tensor *t = self(L, "netcl.copy_");
  nc_tensor *src = nc_lua_checktensor_f(L, 2, "netcl.copy_");
  CHECK("netcl.copy_", nc_copy(t, src));
  lua_settop(L, 1);
  return 1;
}

/* Fills a contiguous temporary and copies into t when t is strided. */
static int random_(lua_State *L, int normal, const char *fname) {
  nc_tensor *t = self(L, fname);
  double a = lua_isnoneornil(L, 2) ? 0.0 : nc_lua_checknumber(L, 2, fname),
         b = lua_isnoneornil(L, 3) ? 1.0 : nc_lua_checknumber(L, 3, fname);
  nc_rng *g = nc_lua_rng(L);
  nc_tensor *dst = t;
  if (!nc_tensor_is_contiguous(t))
    CHECK(fname, nc_tensor_empty(nc_tensor_device(t), t->dtype, t->ndim, t->shape, 0, &dst));
  nc_status s = normal ? nc_normal(dst, g, a, b) : nc_uniform(dst, g, a, b);
  if (s == NC_OK && dst != t) s = nc_copy(t, dst);
  if (dst != t) nc_tensor_release(dst);
  CHECK(fname, s);
  lua_settop(L, 1);
  return 1;
}
static int t_uniform_(lua_State *L) { return random_(L, 0, "netcl.uniform_"); }
static int t_normal_(lua_State *L) { return random_(L, 1, "netcl.normal_"); }

/* ---- metamethods -------------------------------------------------------------------------------- */
static int t_gc(lua_State *L) {
  nc_lua_tensor_box *b = lua_touserdata(L, 1);
  if (b && b->t) {
    nc_tensor_release(b->t);
    b->t = NULL;
  }
  return 0;
}

static int t_tostring(lua_State *L) {
  nc_lua_tensor_box *b = luaL_checkudata(L, 1, NC_TENSOR_MT);
  if (!b->t) {
    lua_pushliteral(L, "tensor(<freed>)");
    return 1;
  }
  char *s;
  CHECK("netcl.tostring", nc_tensor_format(b->t, &s));
  lua_pushstring(L, s);
  free(s);
  return 1;
}

static int t_len(lua_State *L) {
  nc_tensor *t = self(L, "netcl.#");
  if (t->ndim == 0) return nc_lua_errorf(L, "netcl.#: a 0-dim tensor has no length");
  lua_pushinteger(L, t->shape[0]);
  return 1;
}

static int t_index(lua_State *L) {
  if (lua_type(L, 2) == LUA_TNUMBER) return nc_lua_index_number(L);
  if (lua_type(L, 2) != LUA_TSTRING)
    return nc_lua_errorf(L, "netcl.index: a Tensor takes integer keys (t[i], t[i][j] for more dims) or field names, "
                            "got a %s key",
                         luaL_typename(L, 2));
  const char *k = lua_tostring(L, 2);
  lua_getmetatable(L, 1);
  lua_getfield(L, -1, "methods");
  if (lua_getfield(L, -1, k) != LUA_TNIL) return 1;
  lua_pop(L, 3);
  nc_tensor *t = self(L, "netcl.index");
  if (!strcmp(k, "shape")) nc_lua_pushshape(L, t->ndim, t->shape);
  else if (!strcmp(k, "strides")) nc_lua_pushshape(L, t->ndim, t->strides);
  else if (!strcmp(k, "ndim")) lua_pushinteger(L, t->ndim);
  else if (!strcmp(k, "dtype")) lua_pushstring(L, nc_dtype_name(t->dtype));
  else if (!strcmp(k, "device")) nc_lua_pushdevice(L, nc_tensor_device(t));
  else
    return nc_lua_errorf(L, "netcl.index: a Tensor has no field or method '%s' (fields: shape, strides, ndim, dtype, "
                            "device)", k);
  return 1;
}

static int t_newindex(lua_State *L) {
  const char *fname = "netcl.setindex";
  nc_tensor *t = self(L, fname), *r;
  if (lua_type(L, 2) != LUA_TNUMBER)
    return nc_lua_errorf(L, "%s: tensors take integer keys (t[i] = v), not %s", fname, luaL_typename(L, 2));
  if (t->ndim == 0) return nc_lua_errorf(L, "%s: cannot index a 0-dim tensor", fname);
  int64_t i = nc_lua_checkpos(L, 2, t->shape[0], fname);
  CHECK(fname, nc_tensor_select(t, 0, i, &r));
  nc_status s;
  nc_tensor *src = nc_lua_totensor(L, 3);
  if (src) s = nc_copy(r, src);
  else if (lua_type(L, 3) == LUA_TNUMBER || lua_isboolean(L, 3)) s = nc_fill(r, check_scalar(L, 3, fname));
  else s = nc_error(NC_ERR_ARG, "value must be a number, boolean or Tensor, got %s", luaL_typename(L, 3));
  nc_tensor_release(r);
  CHECK(fname, s);
  return 0;
}

/* nc.is_tensor(v): whether v is a Tensor userdata (a freed one too), by its metatable. */
static int l_is_tensor(lua_State *L) {
  lua_pushboolean(L, luaL_testudata(L, 1, NC_TENSOR_MT) != NULL);
  return 1;
}

/* nc._wrapper(fn) -> fn: marks a Lua dispatch wrapper (nc_lua_mark_wrapper). */
static int l_wrapper(lua_State *L) {
  if (lua_type(L, 1) != LUA_TFUNCTION)
    return nc_lua_argerror(L, "netcl._wrapper", 1, "expected a function, got %s", luaL_typename(L, 1));
  nc_lua_mark_wrapper(L, 1);
  lua_settop(L, 1);
  return 1;
}

void nc_lua_add_tensor(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"numel", t_numel},     {"size", t_size},   {"is_contiguous", t_is_contiguous}, {"item", t_item},
      {"tolist", t_tolist},   {"bytes", t_bytes}, {"to", t_to},                       {"free", t_free},
      {"fill_", t_fill_},     {"zero_", t_zero_}, {"copy_", t_copy_},                 {"uniform_", t_uniform_},
      {"normal_", t_normal_}, {NULL, NULL}};
  static const luaL_Reg meta[] = {{"__gc", t_gc},       {"__close", t_gc},       {"__tostring", t_tostring},
                                  {"__len", t_len},     {"__index", t_index},    {"__newindex", t_newindex},
                                  {NULL, NULL}};
  luaL_newmetatable(L, NC_TENSOR_MT);
  luaL_setfuncs(L, meta, 0);
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "methods");
  lua_pop(L, 1);
  /* Methods are also module functions: nc.view(t, shape) == t:view(shape). */
  luaL_setfuncs(L, methods, 0);
  /* Methods only: nc.float would read as a dtype, as torch.float is one. */
  static const luaL_Reg method_only[] = {
      {"dim", t_dim}, {"float", t_float}, {"double", t_double}, {"long", t_long}, {NULL, NULL}};
  luaL_getmetatable(L, NC_TENSOR_MT);
  lua_getfield(L, -1, "methods");
  luaL_setfuncs(L, method_only, 0);
  lua_pop(L, 2);
  static const luaL_Reg size_meta[] = {{"__tostring", size_tostring}, {"__eq", size_eq}, {NULL, NULL}};
  luaL_newmetatable(L, SIZE_MT);
  luaL_setfuncs(L, size_meta, 0);
  lua_pop(L, 1);
  lua_pushcfunction(L, l_is_tensor);
  lua_setfield(L, -2, "is_tensor");
  lua_pushcfunction(L, l_wrapper);
  lua_setfield(L, -2, "_wrapper");
}

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "l_common.h"

static const char STATE_KEY = 'S'; /* registry key (its address): module state table */

/* ---- errors ------------------------------------------------------------------------------------ */
/* Every error of the binding is raised here: "fname: message", in one string of any length (a
 * driver's build log can be long), after the calling Lua line's position (luaL_where(L, 1), as
 * luaL_error adds it). */
static void push_vfmt(lua_State *L, const char *fmt, va_list ap) {
  char small[512];
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(small, sizeof small, fmt, ap2);
  va_end(ap2);
  if (n < 0) {
    lua_pushliteral(L, "(unformattable error message)");
  } else if ((size_t)n < sizeof small) {
    lua_pushlstring(L, small, (size_t)n);
  } else {
    luaL_Buffer b;
    char *p = luaL_buffinitsize(L, &b, (size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    luaL_pushresultsize(&b, (size_t)n);
  }
}

static const char WRAPPERS_KEY = 'W'; /* registry key (its address): weak set of dispatch wrappers */

/* Pushes "file:line: " of the caller the user wrote: the first frame above the raising function
 * that runs Lua code and is not a dispatch wrapper (nc_lua_mark_wrapper). C frames between are
 * skipped too: an operator reached through a string's metamethod (`"s" + t`) or a binding
 * called by pcall, lua_call or another binding. Nothing when no such frame exists (a C host
 * calling a binding directly). */
static void push_where(lua_State *L) {
  lua_Debug ar;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &WRAPPERS_KEY); /* the set, or nil before any is marked */
  int set = lua_gettop(L);
  for (int level = 1; lua_getstack(L, level, &ar); level++) {
    lua_getinfo(L, "Slf", &ar); /* pushes the frame's function */
    int skip = ar.currentline <= 0;
    if (!skip && lua_istable(L, set)) skip = lua_rawget(L, set) != LUA_TNIL;
    lua_settop(L, set);
    if (!skip) {
      lua_pop(L, 1);
      lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
      return;
    }
  }
  lua_pop(L, 1);
  lua_pushliteral(L, "");
}

/* Marks the function at idx as a dispatch wrapper: errors raised by bindings it calls name its
 * caller's line instead of its own. */
void nc_lua_mark_wrapper(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &WRAPPERS_KEY) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &WRAPPERS_KEY);
  }
  lua_pushvalue(L, idx);
  lua_pushboolean(L, 1);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

/* Pushes the whole message: position, "fname: argument N: " for argument errors, the text. */
static void push_msg(lua_State *L, const char *arg_fname, int arg, const char *fmt, va_list ap) {
  push_where(L);
  int parts = 2;
  if (arg_fname) {
    lua_pushfstring(L, "%s: argument %d: ", arg_fname, arg);
    parts++;
  }
  push_vfmt(L, fmt, ap);
  lua_concat(L, parts);
}

int nc_lua_errorf(lua_State *L, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  push_msg(L, NULL, 0, fmt, ap);
  va_end(ap);
  return lua_error(L);
}

int nc_lua_argerror(lua_State *L, const char *fname, int arg, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  push_msg(L, fname, arg, fmt, ap);
  va_end(ap);
  return lua_error(L);
}

int nc_lua_fail(lua_State *L, const char *fname) {
  return nc_lua_errorf(L, "%s: %s", fname, nc_last_error());
}

void nc_lua_raise(lua_State *L, const char *fname) {
  nc_lua_errorf(L, "%s: %s", fname, nc_last_error());
  abort(); /* not reached: lua_error does not return */
}

lua_Integer nc_lua_checkinteger(lua_State *L, int idx, const char *fname) {
  int isint;
  lua_Integer v = lua_tointegerx(L, idx, &isint);
  if (!isint) {
    if (lua_type(L, idx) == LUA_TNUMBER)
      return nc_lua_argerror(L, fname, idx, "expected an integer, got %s", lua_tostring(L, idx));
    return nc_lua_argerror(L, fname, idx, "expected an integer, got %s", luaL_typename(L, idx));
  }
  return v;
}

double nc_lua_checknumber(lua_State *L, int idx, const char *fname) {
  int isnum;
  double v = lua_tonumberx(L, idx, &isnum);
  if (!isnum) nc_lua_argerror(L, fname, idx, "expected a number, got %s", luaL_typename(L, idx));
  return v;
}

const char *nc_lua_checklstring(lua_State *L, int idx, size_t *len, const char *fname) {
  if (!lua_isstring(L, idx))
    nc_lua_argerror(L, fname, idx, "expected a string, got %s", luaL_typename(L, idx));
  return lua_tolstring(L, idx, len);
}

void nc_lua_checkstack(lua_State *L, int n, const char *fname, const char *what) {
  if (!lua_checkstack(L, n)) nc_lua_errorf(L, "%s: stack overflow (%s)", fname, what);
}

static const char *type_name(lua_State *L, int idx) {
  if (luaL_getmetafield(L, idx, "__name") == LUA_TSTRING) {
    const char *n = lua_tostring(L, -1);
    lua_pop(L, 1);
    return n; /* interned in the metatable, stays alive */
  }
  return luaL_typename(L, idx);
}

/* ---- module state --------------------------------------------------------------------------- */
static void push_state(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &STATE_KEY) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &STATE_KEY);
}

nc_rng *nc_lua_rng(lua_State *L) {
  push_state(L);
  nc_rng *g;
  if (lua_getfield(L, -1, "rng") == LUA_TUSERDATA) {
    g = lua_touserdata(L, -1);
  } else {
    lua_pop(L, 1);
    g = lua_newuserdatauv(L, sizeof *g, 0);
    nc_rng_seed(g, 0x5eed);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "rng");
  }
  lua_pop(L, 2);
  return g;
}

nc_device *nc_lua_default_device(lua_State *L) {
  push_state(L);
  nc_device *d = NULL;
  if (lua_getfield(L, -1, "default_device") == LUA_TLIGHTUSERDATA) d = lua_touserdata(L, -1);
  lua_pop(L, 2);
  if (d) return d;
  if (nc_device_find(NULL, &d) != NC_OK) {
    nc_lua_fail(L, "netcl.default_device");
    return NULL;
  }
  nc_lua_set_default_device(L, d);
  return d;
}

void nc_lua_set_default_device(lua_State *L, nc_device *dev) {
  push_state(L);
  lua_pushlightuserdata(L, dev);
  lua_setfield(L, -2, "default_device");
  lua_pop(L, 1);
}

/* ---- tensors ------------------------------------------------------------------------------------ */
void nc_lua_pushtensor_owned(lua_State *L, nc_tensor *t) {
  nc_lua_tensor_box *b = lua_newuserdatauv(L, sizeof *b, 1);
  b->t = t;
  b->owner = NULL;
  luaL_setmetatable(L, NC_TENSOR_MT);
}

void nc_lua_pushtensor_borrowed(lua_State *L, nc_tensor *t, const char *owner) {
  nc_lua_pushtensor_owned(L, t);
  ((nc_lua_tensor_box *)lua_touserdata(L, -1))->owner = owner;
}

void nc_lua_pushtensor_new(lua_State *L, nc_tensor *t) {
  nc_lua_pushtensor_owned(L, t);
  nc_lua_account(L, nc_tensor_nbytes(t));
}

nc_tensor *nc_lua_totensor(lua_State *L, int idx) {
  nc_lua_tensor_box *b = luaL_testudata(L, idx, NC_TENSOR_MT);
  return b ? b->t : NULL;
}

nc_tensor *nc_lua_checktensor_f(lua_State *L, int idx, const char *fname) {
  nc_lua_tensor_box *b = luaL_testudata(L, idx, NC_TENSOR_MT);
  if (!b) {
    nc_lua_argerror(L, fname, idx, "expected Tensor, got %s", type_name(L, idx));
    return NULL;
  }
  if (!b->t) nc_lua_argerror(L, fname, idx, "the tensor was freed (t:free() or <close>)");
  return b->t;
}

/* ---- shapes and dims ----------------------------------------------------------------------------- */
static int64_t check_size(lua_State *L, int idx, int dim, const char *fname) {
  int isint;
  lua_Integer v = lua_tointegerx(L, idx, &isint);
  if (!isint) {
    if (lua_type(L, idx) == LUA_TNUMBER)
      return nc_lua_argerror(L, fname, 1, "size %s at dim %d is not an integer", lua_tostring(L, idx), dim);
    return nc_lua_argerror(L, fname, 1, "size at dim %d is a %s, expected an integer", dim, luaL_typename(L, idx));
  }
  if (v < 0) return nc_lua_argerror(L, fname, 1, "size %lld at dim %d is negative", (long long)v, dim);
  return (int64_t)v;
}

int nc_lua_checkshape(lua_State *L, int idx, int64_t *shape, const char *fname) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) == LUA_TNUMBER) {
    shape[0] = check_size(L, idx, 1, fname);
    return 1;
  }
  if (!lua_istable(L, idx))
    return nc_lua_argerror(L, fname, idx, "expected a shape (table of sizes), got %s", type_name(L, idx));
  lua_Integer n = luaL_len(L, idx);
  if (n > NC_MAX_DIMS)
    return nc_lua_argerror(L, fname, idx, "shape has %lld dims; at most %d are supported", (long long)n, NC_MAX_DIMS);
  for (int i = 0; i < n; i++) {
    lua_geti(L, idx, i + 1);
    shape[i] = check_size(L, -1, i + 1, fname);
    lua_pop(L, 1);
  }
  return (int)n;
}

void nc_lua_pushshape(lua_State *L, int ndim, const int64_t *v) {
  lua_createtable(L, ndim, 0);
  for (int i = 0; i < ndim; i++) {
    lua_pushinteger(L, v[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

int nc_lua_checkdim(lua_State *L, int idx, int ndim, const char *fname) {
  int isint;
  lua_Integer d = lua_tointegerx(L, idx, &isint);
  if (!isint) return nc_lua_argerror(L, fname, idx, "dim must be an integer, got %s", luaL_typename(L, idx));
  lua_Integer z = d < 0 ? d + ndim : d - 1;
  if (d == 0 || z < 0 || z >= ndim)
    return nc_lua_argerror(L, fname, idx, "dim %lld out of range for %d dims (expected 1..%d or -%d..-1)",
                           (long long)d, ndim, ndim, ndim);
  return (int)z;
}

int64_t nc_lua_checkpos(lua_State *L, int idx, int64_t n, const char *fname) {
  int isint;
  lua_Integer i = lua_tointegerx(L, idx, &isint);
  if (!isint) return nc_lua_argerror(L, fname, idx, "index must be an integer, got %s", luaL_typename(L, idx));
  int64_t z = i < 0 ? i + n : i - 1;
  if (i == 0 || z < 0 || z >= n)
    return nc_lua_argerror(L, fname, idx, "index %lld out of range for a dim of size %lld", (long long)i,
                           (long long)n);
  return z;
}

/* ---- dtypes and devices ---------------------------------------------------------------------------- */
nc_dtype nc_lua_checkdtype(lua_State *L, int idx, const char *fname) {
  nc_dtype d;
  if (lua_type(L, idx) != LUA_TSTRING)
    return (nc_dtype)nc_lua_argerror(L, fname, idx, "dtype must be a string, got %s", luaL_typename(L, idx));
  if (nc_dtype_parse(lua_tostring(L, idx), &d) != NC_OK) return (nc_dtype)nc_lua_fail(L, fname);
  return d;
}

int nc_lua_split_sizes(lua_State *L, int idx, int64_t dim_size, int64_t **sizes, const char *fname) {
  if (lua_istable(L, idx)) {
    lua_Integer len = luaL_len(L, idx);
    if (len > NC_LUA_MAX_PARTS) return nc_lua_argerror(L, fname, idx, "too many sizes (%lld)", (long long)len);
    int64_t *s = lua_newuserdatauv(L, sizeof *s * (size_t)(len ? len : 1), 0);
    for (lua_Integer i = 0; i < len; i++) {
      lua_geti(L, idx, i + 1);
      int isint;
      s[i] = lua_tointegerx(L, -1, &isint);
      if (!isint) return nc_lua_argerror(L, fname, idx, "size %lld is not an integer", (long long)i + 1);
      lua_pop(L, 1);
    }
    *sizes = s;
    return (int)len;
  }
  lua_Integer size = nc_lua_checkinteger(L, idx, fname);
  if (size <= 0) return nc_lua_argerror(L, fname, idx, "split size must be positive, got %lld", (long long)size);
  int64_t count = (dim_size + size - 1) / size;
  if (count > NC_LUA_MAX_PARTS)
    return nc_lua_argerror(L, fname, idx, "split into %lld pieces is too many", (long long)count);
  int64_t *s = lua_newuserdatauv(L, sizeof *s * (size_t)(count ? count : 1), 0);
  *sizes = s;
  return nc_split_sizes(dim_size, size, s, (int)count);
}

/* "{a=, b=}" from "a b": the accepted keys as messages show them. */
static void keys_str(const char *keys, char *buf, size_t n) {
  size_t o = 0;
  o += (size_t)snprintf(buf + o, n - o, "{");
  bool first = true;
  for (const char *p = keys + strspn(keys, " "); *p && o < n; first = false) {
    size_t len = strcspn(p, " ");
    o += (size_t)snprintf(buf + o, n - o, "%s%.*s=", first ? "" : ", ", (int)len, p);
    p += len;
    p += strspn(p, " ");
  }
  if (o < n) snprintf(buf + o, n - o, "}");
}

static bool key_accepted(const char *keys, const char *k) {
  size_t kl = strlen(k);
  for (const char *p = keys + strspn(keys, " "); *p;) {
    size_t len = strcspn(p, " ");
    if (len == kl && !strncmp(p, k, len)) return true;
    p += len;
    p += strspn(p, " ");
  }
  return false;
}

int nc_lua_checkopts(lua_State *L, int idx, const char *fname, const char *keys) {
  if (lua_isnoneornil(L, idx)) return 0;
  idx = lua_absindex(L, idx);
  char accepted[256];
  if (!lua_istable(L, idx)) {
    keys_str(keys, accepted, sizeof accepted);
    return nc_lua_argerror(L, fname, idx, "options must be a table %s, got %s", accepted,
                           luaL_typename(L, idx));
  }
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING) {
      keys_str(keys, accepted, sizeof accepted);
      return nc_lua_argerror(L, fname, idx, "options have a %s key; accepted: %s", luaL_typename(L, -1),
                             accepted);
    }
    const char *k = lua_tostring(L, -1);
    if (!key_accepted(keys, k)) {
      keys_str(keys, accepted, sizeof accepted);
      return nc_lua_argerror(L, fname, idx, "unknown option '%s' (accepted: %s)", k, accepted);
    }
  }
  return idx;
}

/* "netcl.<name the running C function was called by>", for the few helpers not given fname. */
static const char *caller_name(lua_State *L, char *buf, size_t n) {
  lua_Debug ar;
  const char *name = lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) && ar.name ? ar.name : NULL;
  snprintf(buf, n, name ? "netcl.%s" : "netcl", name);
  return buf;
}

/* An options argument that is not a table: opts is 0 (none), or an argument's index. */
static int opts_present(lua_State *L, int opts, const char *fname) {
  if (opts == 0 || lua_isnoneornil(L, opts)) return 0;
  if (!lua_istable(L, opts)) {
    char buf[128];
    nc_lua_argerror(L, fname ? fname : caller_name(L, buf, sizeof buf), opts,
                    "options must be a table, got %s", luaL_typename(L, opts));
  }
  return 1;
}

static int opt_field(lua_State *L, int opts, const char *key, const char *fname) {
  if (!opts_present(L, opts, fname)) {
    lua_pushnil(L);
    return LUA_TNIL;
  }
  return lua_getfield(L, opts, key);
}

int nc_lua_opt_field(lua_State *L, int opts, const char *key) { return opt_field(L, opts, key, NULL); }

double nc_lua_opt_number(lua_State *L, int opts, const char *key, double def, const char *fname) {
  double v = def;
  if (opt_field(L, opts, key, fname) != LUA_TNIL) {
    int ok;
    v = lua_tonumberx(L, -1, &ok);
    if (!ok) nc_lua_errorf(L, "%s: option %s must be a number, got %s", fname, key, luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  return v;
}

int64_t nc_lua_opt_integer(lua_State *L, int opts, const char *key, int64_t def, const char *fname) {
  int64_t v = def;
  if (opt_field(L, opts, key, fname) != LUA_TNIL) {
    int ok;
    v = lua_tointegerx(L, -1, &ok);
    if (!ok) nc_lua_errorf(L, "%s: option %s must be an integer, got %s", fname, key, luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  return v;
}

nc_dtype nc_lua_opt_dtype(lua_State *L, int opts, nc_dtype def, const char *fname) {
  nc_dtype d = def;
  if (opt_field(L, opts, "dtype", fname) != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TSTRING)
      nc_lua_argerror(L, fname, opts, "opts.dtype must be a string, got %s", luaL_typename(L, -1));
    d = nc_lua_checkdtype(L, -1, fname);
  }
  lua_pop(L, 1);
  return d;
}

/* ---- GC accounting -------------------------------------------------------------------------------- */
/* Lua sees a Tensor as a small box, so the collector is told of the memory behind it: each new
 * tensor's bytes advance the incremental collector as if Lua had allocated them. Small tensors
 * are summed per thread (a Lua state runs on one thread at a time) and reported once 64 KiB have
 * accumulated: a loop that makes many small tensors frees them at the pace it makes them, so
 * their blocks return to the pool instead of the pool allocating new ones. */
#define NC_LUA_ACCOUNT_BATCH (64u * 1024u)
static _Thread_local size_t pending_bytes;

void nc_lua_account(lua_State *L, size_t nbytes) {
  pending_bytes += nbytes;
  if (pending_bytes < NC_LUA_ACCOUNT_BATCH) return;
  size_t kb = pending_bytes / 1024;
  pending_bytes = 0;
  lua_gc(L, LUA_GCSTEP, kb > 0x3fffffff ? 0x3fffffff : (int)kb);
}

/* JSON <-> Lua values (core._json), through jansson: checkpoints keep optimizer state and
 * training progress as JSON in their metadata. Arrays are Lua sequences; object keys that are
 * integers in canonical decimal form come back as integer keys, so tables indexed by number
 * (optimizer state per parameter) survive a round trip. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "l_common.h"

#define MAX_DEPTH 200

/* Where in the value an error is, as ".state[3].exp_avg". */
typedef struct {
  char buf[256];
  size_t len;
} path;

static size_t path_push(path *p, lua_State *L, int key) {
  size_t old = p->len;
  if (p->len < sizeof p->buf) {
    int n = lua_type(L, key) == LUA_TNUMBER
                ? snprintf(p->buf + p->len, sizeof p->buf - p->len, "[%s]", lua_tostring(L, key))
                : snprintf(p->buf + p->len, sizeof p->buf - p->len, ".%s", lua_tostring(L, key));
    p->len += (size_t)n;
    if (p->len > sizeof p->buf) p->len = sizeof p->buf;
  }
  return old;
}

static int enc_error(lua_State *L, const path *p, const char *what) {
  return nc_lua_errorf(L, "netcl.json.encode: %s (at %.*s)", what, p->len ? (int)p->len : 1,
                       p->len ? p->buf : "$");
}

static json_t *encode(lua_State *L, int idx, path *p, int depth);

/* 1..n with nothing else and n >= 1: an array. */
static lua_Integer sequence_length(lua_State *L, int idx) {
  lua_Integer count = 0, max = 0;
  for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) {
    if (!lua_isinteger(L, -2) || lua_tointeger(L, -2) < 1) {
      lua_pop(L, 2);
      return 0;
    }
    count++;
    if (lua_tointeger(L, -2) > max) max = lua_tointeger(L, -2);
  }
  return count == max ? count : 0;
}

static json_t *encode_table(lua_State *L, int idx, path *p, int depth) {
  if (depth > MAX_DEPTH) enc_error(L, p, "tables nest deeper than 200 levels (a cycle?)");
  nc_lua_checkstack(L, 6, "netcl.json.encode", "nested tables");
  lua_Integer n = sequence_length(L, idx);
  json_t *out = n ? json_array() : json_object();
  if (!out) nc_lua_errorf(L, "netcl.json.encode: out of memory");
  /* out is not yet owned by Lua: anchor it in a box freed by __gc, so errors do not leak it. */
  json_t **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = out;
  lua_getfield(L, LUA_REGISTRYINDEX, "netcl.json.box");
  lua_setmetatable(L, -2);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_pushinteger(L, i);
    size_t old = path_push(p, L, lua_gettop(L));
    lua_geti(L, idx, i);
    json_t *v = encode(L, lua_gettop(L), p, depth + 1);
    p->len = old;
    lua_pop(L, 2);
    if (json_array_append_new(out, v) != 0) nc_lua_errorf(L, "netcl.json.encode: out of memory");
  }
  if (!n)
    for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) {
      int kt = lua_type(L, -2);
      if (kt != LUA_TSTRING && !lua_isinteger(L, -2))
        enc_error(L, p,
                  kt == LUA_TNUMBER ? "a table has a non-integer number key"
                                    : "a table has a key that is not a string or an integer");
      lua_pushvalue(L, -2); /* a copy: lua_tostring on an integer key would confuse lua_next */
      size_t old = path_push(p, L, lua_gettop(L));
      json_t *v = encode(L, lua_gettop(L) - 1, p, depth + 1);
      p->len = old;
      int rc = json_object_set_new(out, lua_tostring(L, -1), v);
      lua_pop(L, 1);
      if (rc != 0) enc_error(L, p, "a key is not valid UTF-8");
    }
  *box = NULL;
  lua_pop(L, 1);
  return out;
}

static json_t *encode(lua_State *L, int idx, path *p, int depth) {
  json_t *v = NULL;
  switch (lua_type(L, idx)) {
    case LUA_TNIL:
      v = json_null();
      break;
    case LUA_TBOOLEAN:
      v = json_boolean(lua_toboolean(L, idx));
      break;
    case LUA_TNUMBER:
      if (lua_isinteger(L, idx)) {
        v = json_integer(lua_tointeger(L, idx));
      } else {
        double d = lua_tonumber(L, idx);
        if (!isfinite(d)) enc_error(L, p, "JSON has no NaN or infinity");
        v = json_real(d);
      }
      break;
    case LUA_TSTRING: {
      size_t len;
      const char *s = lua_tolstring(L, idx, &len);
      v = json_stringn(s, len);
      if (!v) enc_error(L, p, "a string is not valid UTF-8");
      break;
    }
    case LUA_TTABLE:
      return encode_table(L, lua_absindex(L, idx), p, depth);
    default: {
      char what[64];
      snprintf(what, sizeof what, "cannot encode a %s", luaL_typename(L, idx));
      enc_error(L, p, what);
    }
  }
  if (!v) nc_lua_errorf(L, "netcl.json.encode: out of memory");
  return v;
}

static int box_gc(lua_State *L) {
  json_t **box = lua_touserdata(L, 1);
  json_decref(*box);
  *box = NULL;
  return 0;
}

/* encode(value) -> string (compact, keys in table order) */
static int l_encode(lua_State *L) {
  if (lua_isnone(L, 1)) return nc_lua_argerror(L, "netcl.json.encode", 1, "expected a value");
  lua_settop(L, 1);
  path p = {.len = 0};
  json_t *root = encode(L, 1, &p, 0);
  json_t **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = root;
  lua_getfield(L, LUA_REGISTRYINDEX, "netcl.json.box");
  lua_setmetatable(L, -2);
  char *s = json_dumps(root, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
  if (!s) return nc_lua_errorf(L, "netcl.json.encode: out of memory");
  lua_pushstring(L, s);
  free(s);
  return 1;
}

/* "12" and "-3" but not "012", "+3" or "1e3" */
static bool integer_key(const char *k, lua_Integer *out) {
  const char *d = k + (*k == '-');
  if (!*d || (d[0] == '0' && d[1]) || strspn(d, "0123456789") != strlen(d)) return false;
  errno = 0;
  long long v = strtoll(k, NULL, 10);
  if (errno) return false;
  *out = (lua_Integer)v;
  return true;
}

static void decode(lua_State *L, json_t *v, int depth) {
  if (depth > MAX_DEPTH) nc_lua_errorf(L, "netcl.json.decode: nested deeper than %d levels", MAX_DEPTH);
  nc_lua_checkstack(L, 4, "netcl.json.decode", "nested values");
  switch (json_typeof(v)) {
    case JSON_OBJECT: {
      const char *k;
      json_t *e;
      lua_createtable(L, 0, (int)json_object_size(v));
      json_object_foreach(v, k, e) {
        lua_Integer ik;
        if (integer_key(k, &ik))
          lua_pushinteger(L, ik);
        else
          lua_pushstring(L, k);
        decode(L, e, depth + 1);
        lua_rawset(L, -3);
      }
      break;
    }
    case JSON_ARRAY: {
      size_t i;
      json_t *e;
      lua_createtable(L, (int)json_array_size(v), 0);
      json_array_foreach(v, i, e) {
        decode(L, e, depth + 1);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
      }
      break;
    }
    case JSON_STRING:
      lua_pushlstring(L, json_string_value(v), json_string_length(v));
      break;
    case JSON_INTEGER:
      lua_pushinteger(L, json_integer_value(v));
      break;
    case JSON_REAL:
      lua_pushnumber(L, json_real_value(v));
      break;
    case JSON_TRUE:
      lua_pushboolean(L, 1);
      break;
    case JSON_FALSE:
      lua_pushboolean(L, 0);
      break;
    default:
      lua_pushnil(L);
      break;
  }
}

/* decode(string) -> value */
static int l_decode(lua_State *L) {
  size_t len;
  const char *s = nc_lua_checklstring(L, 1, &len, "netcl.json.decode");
  json_error_t err;
  json_t *root = json_loadb(s, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &err);
  if (!root)
    return nc_lua_errorf(L, "netcl.json.decode: not valid JSON: %s (line %d, column %d)", err.text, err.line,
                         err.column);
  json_t **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = root;
  lua_getfield(L, LUA_REGISTRYINDEX, "netcl.json.box");
  lua_setmetatable(L, -2);
  decode(L, root, 0);
  return 1;
}

void nc_lua_add_json(lua_State *L) {
  luaL_newmetatable(L, "netcl.json.box");
  lua_pushcfunction(L, box_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  static const luaL_Reg funcs[] = {{"encode", l_encode}, {"decode", l_decode}, {NULL, NULL}};
  luaL_newlib(L, funcs);
  lua_setfield(L, -2, "_json");
}

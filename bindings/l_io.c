/* File formats (core._io): safetensors, npy and idx readers and writers. The Lua modules
 * netcl.io and netcl.data wrap these and check their options tables; these functions take
 * positional arguments only, and the public name to report errors under as an optional last
 * argument. */
#include <stdlib.h>
#include <string.h>
#include "l_common.h"

#define CHECK(fname, expr) NC_LUA_CHECK(L, fname, expr)

static const char *fname_arg(lua_State *L, int idx, const char *def) {
  if (lua_isnoneornil(L, idx)) return def;
  if (lua_type(L, idx) != LUA_TSTRING)
    nc_lua_argerror(L, def, idx, "expected the name to report errors under, got %s", luaL_typename(L, idx));
  return lua_tostring(L, idx);
}

static const char *path_arg(lua_State *L, const char *fname) {
  if (lua_type(L, 1) != LUA_TSTRING)
    nc_lua_argerror(L, fname, 1, "expected a path string, got %s", luaL_typename(L, 1));
  return lua_tostring(L, 1);
}

/* nil = the default device */
static nc_device *device_arg(lua_State *L, int idx, const char *fname) {
  return lua_isnoneornil(L, idx) ? nc_lua_default_device(L) : nc_lua_checkdevice(L, idx, fname);
}

static void push_loaded(lua_State *L, nc_tensor *t) {
  nc_lua_pushtensor_owned(L, t);
  nc_lua_account(L, nc_tensor_nbytes(t));
}

/* Frees a loaded file if a Lua error interrupts the conversion. */
static int st_box_gc(lua_State *L) {
  nc_safetensors **box = lua_touserdata(L, 1);
  nc_safetensors_free(*box);
  *box = NULL;
  return 0;
}

/* load_safetensors(path, device?, fname?) -> {name = Tensor}, {key = value} */
static int l_load_safetensors(lua_State *L) {
  const char *fname = fname_arg(L, 3, "netcl.io.load");
  const char *path = path_arg(L, fname);
  nc_device *dev = device_arg(L, 2, fname);
  nc_safetensors **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL;
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, st_box_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  CHECK(fname, nc_safetensors_load(path, dev, box));
  nc_safetensors *f = *box;
  size_t n = nc_safetensors_count(f), m = nc_safetensors_metadata_count(f);
  lua_createtable(L, 0, n > 0x7fffffff ? 0x7fffffff : (int)n);
  for (size_t i = 0; i < n; i++) {
    push_loaded(L, nc_tensor_retain(nc_safetensors_tensor(f, i)));
    lua_setfield(L, -2, nc_safetensors_name(f, i));
  }
  lua_createtable(L, 0, m > 0x7fffffff ? 0x7fffffff : (int)m);
  for (size_t i = 0; i < m; i++) {
    lua_pushstring(L, nc_safetensors_metadata_value(f, i));
    lua_setfield(L, -2, nc_safetensors_metadata_key(f, i));
  }
  nc_safetensors_free(f);
  *box = NULL;
  return 2;
}

/* save_safetensors(path, {name = Tensor}, {key = string}?, fname?) */
static int l_save_safetensors(lua_State *L) {
  const char *fname = fname_arg(L, 4, "netcl.io.save");
  const char *path = path_arg(L, fname);
  if (!lua_istable(L, 2))
    return nc_lua_argerror(L, fname, 1, "expected a table of tensors, got %s", luaL_typename(L, 2));
  if (!lua_isnoneornil(L, 3) && !lua_istable(L, 3))
    return nc_lua_errorf(L, "%s: metadata must be a table of strings, got %s", fname, luaL_typename(L, 3));
  size_t n = 0, m = 0;
  for (lua_pushnil(L); lua_next(L, 2); lua_pop(L, 1)) n++;
  if (lua_istable(L, 3))
    for (lua_pushnil(L); lua_next(L, 3); lua_pop(L, 1)) m++;
  /* Arrays in userdata, so a Lua error below leaks nothing; the strings they point to stay
   * anchored in the argument tables. */
  nc_named_tensor *ts = lua_newuserdatauv(L, (n ? n : 1) * sizeof *ts, 0);
  nc_metadata_entry *meta = lua_newuserdatauv(L, (m ? m : 1) * sizeof *meta, 0);
  size_t i = 0;
  for (lua_pushnil(L); lua_next(L, 2); lua_pop(L, 1)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      return nc_lua_errorf(L, "%s: tensor names must be strings, got a %s key", fname, luaL_typename(L, -2));
    nc_tensor *t = nc_lua_totensor(L, -1);
    if (!t)
      return nc_lua_errorf(L, "%s: '%s' holds a %s, expected a Tensor%s", fname, lua_tostring(L, -2),
                           luaL_typename(L, -1), lua_isuserdata(L, -1) ? " (or it was freed)" : "");
    size_t len;
    ts[i].name = lua_tolstring(L, -2, &len);
    if (strlen(ts[i].name) != len) return nc_lua_errorf(L, "%s: tensor names cannot hold NUL bytes", fname);
    ts[i++].tensor = t;
  }
  i = 0;
  if (lua_istable(L, 3)) {
    for (lua_pushnil(L); lua_next(L, 3); lua_pop(L, 1)) {
      if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
        return nc_lua_errorf(L, "%s: metadata maps strings to strings; found a %s key holding a %s", fname,
                             luaL_typename(L, -2), luaL_typename(L, -1));
      size_t klen, vlen;
      meta[i].key = lua_tolstring(L, -2, &klen);
      meta[i].value = lua_tolstring(L, -1, &vlen);
      if (strlen(meta[i].key) != klen || strlen(meta[i].value) != vlen)
        return nc_lua_errorf(L, "%s: metadata cannot hold NUL bytes ('%s')", fname, meta[i].key);
      i++;
    }
  }
  nc_status s = nc_safetensors_save(path, ts, n, meta, m);
  if (s != NC_OK && s != NC_ERR_IO) nc_error_prefix(s, "%s", path);
  CHECK(fname, s);
  return 0;
}

/* load_npy(path, device?, fname?) -> Tensor */
static int l_load_npy(lua_State *L) {
  const char *fname = fname_arg(L, 3, "netcl.io.load_npy");
  const char *path = path_arg(L, fname);
  nc_device *dev = device_arg(L, 2, fname);
  nc_tensor *t;
  CHECK(fname, nc_npy_load(path, dev, &t));
  push_loaded(L, t);
  return 1;
}

/* map_npy(path, fname?) -> CPU Tensor over the mapped file (netcl/npy.h) */
static int l_map_npy(lua_State *L) {
  const char *fname = fname_arg(L, 2, "netcl.data.npy_dataset");
  const char *path = path_arg(L, fname);
  nc_tensor *t;
  CHECK(fname, nc_npy_map(path, &t));
  nc_lua_pushtensor_owned(L, t);
  return 1;
}

/* save_npy(path, Tensor, fname?) */
static int l_save_npy(lua_State *L) {
  const char *fname = fname_arg(L, 3, "netcl.io.save_npy");
  const char *path = path_arg(L, fname);
  nc_tensor *t = nc_lua_checktensor_f(L, 2, fname);
  nc_status s = nc_npy_save(path, t);
  if (s != NC_OK && s != NC_ERR_IO) nc_error_prefix(s, "%s", path);
  CHECK(fname, s);
  return 0;
}

/* load_idx(path, device?, fname?) -> Tensor */
static int l_load_idx(lua_State *L) {
  const char *fname = fname_arg(L, 3, "netcl.data.load_idx");
  const char *path = path_arg(L, fname);
  nc_device *dev = device_arg(L, 2, fname);
  nc_tensor *t;
  CHECK(fname, nc_idx_load(path, dev, &t));
  push_loaded(L, t);
  return 1;
}

void nc_lua_add_io(lua_State *L) {
  static const luaL_Reg funcs[] = {{"load_safetensors", l_load_safetensors},
                                   {"save_safetensors", l_save_safetensors},
                                   {"load_npy", l_load_npy},
                                   {"map_npy", l_map_npy},
                                   {"save_npy", l_save_npy},
                                   {"load_idx", l_load_idx},
                                   {NULL, NULL}};
  luaL_newlib(L, funcs);
  lua_setfield(L, -2, "_io");
}

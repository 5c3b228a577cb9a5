/* Device userdata: one per device per Lua state (cached), so `a.device == b.device` holds. */
#include <limits.h>
#include <string.h>
#include "l_common.h"

static const char CACHE_KEY = 'D';

typedef struct {
  nc_device *dev;
} device_box;

void nc_lua_pushdevice(lua_State *L, nc_device *dev) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &CACHE_KEY) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &CACHE_KEY);
  }
  if (lua_rawgetp(L, -1, dev) == LUA_TUSERDATA) {
    lua_remove(L, -2);
    return;
  }
  lua_pop(L, 1);
  device_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->dev = dev;
  luaL_setmetatable(L, NC_DEVICE_MT);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, -3, dev);
  lua_remove(L, -2);
}

nc_device *nc_lua_opt_device(lua_State *L, int opts, const char *fname) {
  if (opts == 0 || lua_isnoneornil(L, opts)) return nc_lua_default_device(L);
  if (!lua_istable(L, opts))
    nc_lua_argerror(L, fname, opts, "options must be a table, got %s", luaL_typename(L, opts));
  nc_device *d;
  if (lua_getfield(L, opts, "device") == LUA_TNIL) {
    d = nc_lua_default_device(L);
  } else if (luaL_testudata(L, -1, NC_DEVICE_MT) || lua_type(L, -1) == LUA_TSTRING) {
    d = nc_lua_checkdevice(L, -1, fname);
  } else {
    nc_lua_argerror(L, fname, opts, "opts.device: expected a Device or a device spec string, got %s",
                    luaL_typename(L, -1));
    d = NULL;
  }
  lua_pop(L, 1);
  return d;
}

nc_device *nc_lua_checkdevice(lua_State *L, int idx, const char *fname) {
  device_box *b = luaL_testudata(L, idx, NC_DEVICE_MT);
  if (b) return b->dev;
  if (lua_type(L, idx) == LUA_TSTRING) {
    nc_device *d;
    NC_LUA_CHECK(L, fname, nc_device_find(lua_tostring(L, idx), &d));
    return d;
  }
  nc_lua_argerror(L, fname, idx, "expected a Device or a device spec string, got %s", luaL_typename(L, idx));
  return NULL;
}

/* The Device at argument 1 of a metamethod. */
static nc_device *self_device(lua_State *L, const char *fname) {
  device_box *b = luaL_testudata(L, 1, NC_DEVICE_MT);
  if (!b) {
    nc_lua_argerror(L, fname, 1, "expected Device, got %s", luaL_typename(L, 1));
    return NULL;
  }
  return b->dev;
}

static int d_index(lua_State *L) {
  const char *fname = "netcl.Device";
  nc_device *dev = self_device(L, fname);
  const nc_device_info *i = nc_device_info_of(dev);
  if (lua_type(L, 2) != LUA_TSTRING)
    return nc_lua_errorf(L, "%s: fields are named by strings, got a %s key", fname, luaL_typename(L, 2));
  const char *k = lua_tostring(L, 2);
  if (!strcmp(k, "name")) lua_pushstring(L, i->name);
  else if (!strcmp(k, "kind")) lua_pushstring(L, i->kind == NC_DEVICE_CPU ? "cpu" : "opencl");
  else if (!strcmp(k, "vendor")) lua_pushstring(L, i->vendor);
  else if (!strcmp(k, "memory")) lua_pushinteger(L, (lua_Integer)i->memory);
  else if (!strcmp(k, "compute_units")) lua_pushinteger(L, i->compute_units);
  else if (!strcmp(k, "max_work_group_size")) lua_pushinteger(L, (lua_Integer)i->max_work_group_size);
  else if (!strcmp(k, "max_alloc")) lua_pushinteger(L, (lua_Integer)i->max_alloc);
  else if (!strcmp(k, "fp64")) lua_pushboolean(L, i->fp64);
  else if (!strcmp(k, "is_gpu")) lua_pushboolean(L, i->is_gpu);
  else if (!strcmp(k, "tf32")) lua_pushboolean(L, __atomic_load_n(&i->tf32, __ATOMIC_ACQUIRE));
  else if (!strcmp(k, "bf16_mma")) lua_pushboolean(L, __atomic_load_n(&i->bf16_mma, __ATOMIC_ACQUIRE));
  else if (!strcmp(k, "driver_version")) lua_pushstring(L, i->driver_version);
  else if (!strcmp(k, "spec")) lua_pushstring(L, i->spec);
  else {
    luaL_getmetatable(L, NC_DEVICE_MT);
    lua_getfield(L, -1, "methods");
    lua_getfield(L, -1, k);
  }
  return 1;
}

static int d_sync(lua_State *L) {
  nc_device *dev = nc_lua_checkdevice(L, 1, "netcl.Device:sync");
  NC_LUA_CHECK(L, "netcl.Device:sync", nc_device_sync(dev));
  return 0;
}

/* dev:peers(other): whether the two copy device to device (OpenCL devices of one platform). */
static int d_peers(lua_State *L) {
  nc_device *a = nc_lua_checkdevice(L, 1, "netcl.Device:peers");
  nc_device *b = nc_lua_checkdevice(L, 2, "netcl.Device:peers");
  lua_pushboolean(L, nc_device_peers(a, b));
  return 1;
}

static int d_tostring(lua_State *L) {
  nc_device *dev = self_device(L, "netcl.Device:__tostring");
  const nc_device_info *i = nc_device_info_of(dev);
  lua_pushfstring(L, "Device(%s: %s)", i->spec, i->name);
  return 1;
}

static int d_eq(lua_State *L) {
  device_box *a = luaL_testudata(L, 1, NC_DEVICE_MT), *b = luaL_testudata(L, 2, NC_DEVICE_MT);
  lua_pushboolean(L, a && b && a->dev == b->dev);
  return 1;
}

static int l_devices(lua_State *L) {
  int n = nc_device_count();
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    nc_lua_pushdevice(L, nc_device_get(i));
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int l_device(lua_State *L) {
  nc_device *d;
  if (lua_isnoneornil(L, 1)) d = nc_lua_default_device(L);
  else d = nc_lua_checkdevice(L, 1, "netcl.device");
  nc_lua_pushdevice(L, d);
  return 1;
}

static int l_set_default_device(lua_State *L) {
  nc_device *d = nc_lua_checkdevice(L, 1, "netcl.set_default_device");
  nc_lua_set_default_device(L, d);
  return 0;
}

static int l_default_device(lua_State *L) {
  nc_lua_pushdevice(L, nc_lua_default_device(L));
  return 1;
}

static int l_sync(lua_State *L) {
  nc_device *d = lua_isnoneornil(L, 1) ? nc_lua_default_device(L) : nc_lua_checkdevice(L, 1, "netcl.sync");
  NC_LUA_CHECK(L, "netcl.sync", nc_device_sync(d));
  return 0;
}

static int l_memory_stats(lua_State *L) {
  nc_device *d = lua_isnoneornil(L, 1) ? nc_lua_default_device(L) : nc_lua_checkdevice(L, 1, "netcl.memory_stats");
  nc_memory_stats st;
  NC_LUA_CHECK(L, "netcl.memory_stats", nc_memory_stats_get(d, &st));
  lua_createtable(L, 0, 11);
#define F(name)                                   \
  lua_pushinteger(L, (lua_Integer)st.name);       \
  lua_setfield(L, -2, #name);
  F(in_use) F(cached) F(peak) F(hits) F(misses) F(persistent_in_use) F(pinned_bytes)
  F(programs_built) F(programs_loaded) F(host_reads) F(syncs) F(async_reads)
#undef F
  return 1;
}

static int l_empty_cache(lua_State *L) {
  nc_device *d = lua_isnoneornil(L, 1) ? nc_lua_default_device(L) : nc_lua_checkdevice(L, 1, "netcl.empty_cache");
  nc_memory_empty_cache(d);
  return 0;
}

/* netcl.set_memory_limit(bytes [, device]) / netcl.get_memory_limit([device]): the device's cap
 * on pooled bytes (nil or 0: none). */
static int l_set_memory_limit(lua_State *L) {
  const char *f = "netcl.set_memory_limit";
  lua_Integer n = lua_isnil(L, 1) ? 0 : nc_lua_checkinteger(L, 1, f);
  if (n < 0) return nc_lua_argerror(L, f, 1, "a limit is a number of bytes >= 0 (0 or nil: none), not %lld", (long long)n);
  nc_device *d = lua_isnoneornil(L, 2) ? nc_lua_default_device(L) : nc_lua_checkdevice(L, 2, f);
  nc_memory_limit_set(d, (uint64_t)n);
  return 0;
}

static int l_get_memory_limit(lua_State *L) {
  nc_device *d = lua_isnoneornil(L, 1) ? nc_lua_default_device(L) : nc_lua_checkdevice(L, 1, "netcl.get_memory_limit");
  uint64_t n = nc_memory_limit_get(d);
  if (n) lua_pushinteger(L, (lua_Integer)n);
  else lua_pushnil(L);
  return 1;
}

/* netcl.set_num_threads(n) / netcl.get_num_threads(): the CPU thread pool's size. */
static int l_set_num_threads(lua_State *L) {
  lua_Integer n = nc_lua_checkinteger(L, 1, "netcl.set_num_threads");
  NC_LUA_CHECK(L, "netcl.set_num_threads", nc_set_num_threads(n < INT_MIN ? INT_MIN : n > INT_MAX ? INT_MAX : (int)n));
  return 0;
}

static int l_get_num_threads(lua_State *L) {
  lua_pushinteger(L, nc_get_num_threads());
  return 1;
}

void nc_lua_add_device(lua_State *L) {
  static const luaL_Reg methods[] = {{"sync", d_sync}, {"peers", d_peers}, {NULL, NULL}};
  static const luaL_Reg meta[] = {
      {"__index", d_index}, {"__tostring", d_tostring}, {"__eq", d_eq}, {NULL, NULL}};
  static const luaL_Reg funcs[] = {{"devices", l_devices},
                                   {"device", l_device},
                                   {"set_default_device", l_set_default_device},
                                   {"default_device", l_default_device},
                                   {"sync", l_sync},
                                   {"memory_stats", l_memory_stats},
                                   {"empty_cache", l_empty_cache},
                                   {"set_memory_limit", l_set_memory_limit},
                                   {"get_memory_limit", l_get_memory_limit},
                                   {"set_num_threads", l_set_num_threads},
                                   {"get_num_threads", l_get_num_threads},
                                   {NULL, NULL}};
  luaL_newmetatable(L, NC_DEVICE_MT);
  luaL_setfuncs(L, meta, 0);
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "methods");
  lua_pop(L, 1);
  luaL_setfuncs(L, funcs, 0);
}

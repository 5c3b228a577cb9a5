/* netcl_lua_openlibs: the C module and the Lua modules embedded at build time, as preloads,
 * so a host application and netcl-lua need no LUA_PATH. */
#include <string.h>
#include "l_common.h"
#include "netcl_lua.h"

typedef struct {
  const char *name;
  const char *data;
  size_t size;
} nc_embedded_file;
extern const nc_embedded_file nc_embedded_lua[];

/* "netcl/nn/init.lua" -> "netcl.nn", "netcl/io.lua" -> "netcl.io" */
static void module_name(const char *path, char *out, size_t n) {
  snprintf(out, n, "%s", path);
  size_t len = strlen(out);
  if (len > 4 && !strcmp(out + len - 4, ".lua")) out[len -= 4] = 0;
  if (len > 5 && !strcmp(out + len - 5, "/init")) out[len - 5] = 0;
  for (char *p = out; *p; p++)
    if (*p == '/') *p = '.';
}

static int load_embedded(lua_State *L) {
  const nc_embedded_file *f = lua_touserdata(L, lua_upvalueindex(1));
  char chunk[300];
  snprintf(chunk, sizeof chunk, "@[netcl]/lua/%s", f->name);
  if (luaL_loadbufferx(L, f->data, f->size, chunk, "t") != LUA_OK) return lua_error(L);
  lua_pushvalue(L, 1); /* module name, as require passes it */
  lua_call(L, 1, 1);
  return 1;
}

static void on_pressure(void *ud) { lua_gc((lua_State *)ud, LUA_GCCOLLECT); }

/* Runs when the state closes: no command it queued may outlive it, so every device's queue is
 * drained (the device registry is process-wide and other states may be live: nothing shared is
 * released here; that happens at process exit). */
static int unregister_pressure(lua_State *L) {
  nc_pressure_unregister(on_pressure, *(lua_State **)lua_touserdata(L, 1));
  (void)nc_sync_all();
  return 0;
}

int luaopen_netcl_core(lua_State *L) {
  /* The collector runs when a device allocation fails (DESIGN.md "Memory"); the hook leaves
   * with the state. */
  static const char HOOK_KEY = 'P';
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &HOOK_KEY) == LUA_TNIL) {
    lua_State *main;
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    main = lua_tothread(L, -1);
    lua_pop(L, 1);
    lua_State **box = lua_newuserdatauv(L, sizeof *box, 0);
    *box = main;
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, unregister_pressure);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &HOOK_KEY);
    if (nc_pressure_register(on_pressure, main) != NC_OK) return nc_lua_fail(L, "netcl");
  }
  lua_pop(L, 1);
  return nc_lua_open_core(L);
}

int netcl_lua_openlibs(lua_State *L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_netcl_core);
  lua_setfield(L, -2, "netcl.core");
  for (const nc_embedded_file *f = nc_embedded_lua; f->name; f++) {
    char name[256];
    module_name(f->name, name, sizeof name);
    lua_pushlightuserdata(L, (void *)f);
    lua_pushcclosure(L, load_embedded, 1);
    lua_setfield(L, -2, name);
  }
  lua_pop(L, 1);
  return 0;
}

int netcl_lua_pushtensor(lua_State *L, nc_tensor *t) {
  /* A host may hand over a tensor before any script ran require "netcl": the Tensor metatable
   * must exist first. */
  if (luaL_getmetatable(L, NC_TENSOR_MT) == LUA_TNIL) {
    luaL_requiref(L, "netcl.core", luaopen_netcl_core, 0);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  nc_lua_pushtensor_owned(L, nc_tensor_retain(t));
  return 1;
}

nc_tensor *netcl_lua_checktensor(lua_State *L, int idx) {
  return nc_lua_checktensor_f(L, idx, "netcl_lua_checktensor");
}

/* Reads to the host that do not wait: t:is_ready() and nc.synchronize(dev?). The reads
 * themselves are started by t:to("cpu", {non_blocking = true}) (l_tensor.c, nc_to_async). */
#include <stdio.h>
#include "l_common.h"

/* t:is_ready(): whether t's values are in place, i.e. whether t has no pending read. Never
 * waits. Using t before that is fine: every access waits for the read. */
static int t_is_ready(lua_State *L) {
  nc_tensor *t = nc_lua_checktensor_f(L, 1, "netcl.is_ready");
  lua_pushboolean(L, nc_storage_is_ready(t->storage));
  return 1;
}

/* nc.synchronize(dev?): waits for every queued command and pending read on dev (a Device or
 * spec), or on every device when dev is absent, and reads their pending device-side checks. */
static int l_synchronize(lua_State *L) {
  const char *fname = "netcl.synchronize";
  if (!lua_isnoneornil(L, 1)) {
    NC_LUA_CHECK(L, fname, nc_device_sync(nc_lua_checkdevice(L, 1, fname)));
    return 0;
  }
  nc_status first = NC_OK;
  char msg[512] = "";
  for (int i = 0; i < nc_device_count(); i++) {
    nc_status s = nc_device_sync(nc_device_get(i));
    if (s != NC_OK && first == NC_OK) {
      first = s;
      snprintf(msg, sizeof msg, "%s", nc_last_error());
    }
  }
  if (first != NC_OK) return nc_lua_errorf(L, "%s: %s", fname, msg);
  return 0;
}

void nc_lua_add_async(lua_State *L) {
  luaL_getmetatable(L, NC_TENSOR_MT);
  lua_getfield(L, -1, "methods");
  lua_pushcfunction(L, t_is_ready);
  lua_setfield(L, -2, "is_ready");
  lua_pop(L, 2);
  lua_pushcfunction(L, t_is_ready); /* a module function too, as every Tensor method is */
  lua_setfield(L, -2, "is_ready");
  lua_pushcfunction(L, l_synchronize);
  lua_setfield(L, -2, "synchronize");
}

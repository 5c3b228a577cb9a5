/* Uses both installed libraries: libnetcl directly, and the Lua binding with its compiled-in
 * modules (no LUA_PATH needed). Prints "ok" when both agree. */
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <netcl_lua.h>

int main(void) {
  nc_device *cpu;
  nc_tensor *t;
  int64_t shape[2] = {2, 3};
  if (nc_device_find("cpu", &cpu) != NC_OK || nc_tensor_empty(cpu, NC_FLOAT32, 2, shape, 0, &t) != NC_OK ||
      nc_fill(t, 2.5) != NC_OK) {
    fprintf(stderr, "consumer: %s\n", nc_last_error());
    return 1;
  }
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  netcl_lua_openlibs(L);
  if (luaL_dostring(L, "return function(t) return require('netcl').version, t:numel(), t[2][3]:item() end") !=
      LUA_OK) {
    fprintf(stderr, "consumer: %s\n", lua_tostring(L, -1));
    return 1;
  }
  netcl_lua_pushtensor(L, t);
  if (lua_pcall(L, 1, 3, 0) != LUA_OK) {
    fprintf(stderr, "consumer: %s\n", lua_tostring(L, -1));
    return 1;
  }
  int ok = lua_tointeger(L, -2) == 6 && lua_tonumber(L, -1) == 2.5;
  printf("netcl %s from Lua, %s from C\n", lua_tostring(L, -3), nc_version());
  lua_close(L);
  nc_tensor_release(t);
  puts(ok ? "ok" : "wrong values");
  return ok ? 0 : 1;
}

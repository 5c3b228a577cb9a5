// A C++ host: the public headers (netcl/netcl.h and the embedding API, netcl_lua.h) compile as
// C++ and their functions link with C linkage. Lua's own headers come through lua.hpp, as Lua
// intends for C++. Creates a tensor in C++, hands it to Lua and reads back a result.
#include <lua.hpp>

#include <cstdio>

#include "netcl/netcl.h"
#include "netcl_lua.h"

int main() {
  std::printf("netcl %s\n", nc_version());
  nc_device *cpu = nullptr;
  nc_tensor *t = nullptr;
  const int64_t shape[1] = {4};
  if (nc_device_find("cpu", &cpu) != NC_OK || nc_tensor_empty(cpu, NC_FLOAT32, 1, shape, 0, &t) != NC_OK ||
      nc_fill(t, 2.5) != NC_OK) {
    std::fprintf(stderr, "FAIL: %s\n", nc_last_error());
    return 1;
  }
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  netcl_lua_openlibs(L);
  netcl_lua_pushtensor(L, t);
  nc_tensor_release(t);
  lua_setglobal(L, "x");
  if (luaL_dostring(L, "return require('netcl').sum(x):item()") != LUA_OK) {
    std::fprintf(stderr, "FAIL: %s\n", lua_tostring(L, -1));
    lua_close(L);
    return 1;
  }
  double sum = lua_tonumber(L, -1);
  lua_close(L);
  if (sum != 10.0) {
    std::fprintf(stderr, "FAIL: sum is %g, expected 10\n", sum);
    return 1;
  }
  std::printf("ok\n");
  return 0;
}

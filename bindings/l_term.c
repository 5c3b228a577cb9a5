/* Terminal queries (core._term) for netcl.progress: a live bar on a terminal, log lines
 * otherwise. */
#include <limits.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include "l_common.h"

static int check_fd(lua_State *L, const char *fname) {
  lua_Integer fd = nc_lua_checkinteger(L, 1, fname);
  if (fd < 0 || fd > INT_MAX) nc_lua_argerror(L, fname, 1, "%lld is not a file descriptor", (long long)fd);
  return (int)fd;
}

/* isatty(fd) -> boolean */
static int l_isatty(lua_State *L) {
  lua_pushboolean(L, isatty(check_fd(L, "netcl._term.isatty")));
  return 1;
}

/* columns(fd) -> width in characters, or nil when fd is not a terminal */
static int l_columns(lua_State *L) {
  struct winsize ws;
  if (ioctl(check_fd(L, "netcl._term.columns"), TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0) return 0;
  lua_pushinteger(L, ws.ws_col);
  return 1;
}

void nc_lua_add_term(lua_State *L) {
  static const luaL_Reg funcs[] = {{"isatty", l_isatty}, {"columns", l_columns}, {NULL, NULL}};
  luaL_newlib(L, funcs);
  lua_setfield(L, -2, "_term");
}

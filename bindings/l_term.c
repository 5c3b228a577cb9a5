/* Terminal queries (core._term) for netcl.progress: a live bar on a terminal, log lines
 * otherwise; and Ctrl-C deferred to a point the script chooses (nc.defer_interrupts). */
#include <limits.h>
#include <signal.h>
#include <string.h>
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

/* ---- deferred Ctrl-C ---------------------------------------------------------------------------
 * nc.defer_interrupts(): from now on SIGINT only sets a flag that nc.interrupted() reads, so a
 * training loop can stop between two steps and save where it is, instead of being stopped
 * wherever the signal lands (netcl-lua raises "interrupted!" at the next Lua instruction). The
 * handler then restores the default action: a second Ctrl-C ends the process, as it would
 * without netcl. nc.defer_interrupts(false) puts the previous action back. Process-wide (a
 * signal's action is): every Lua state of the process shares it. */
static volatile sig_atomic_t interrupted;
static struct sigaction previous;
static int deferring;

static void on_sigint(int sig) {
  interrupted = 1;
  signal(sig, SIG_DFL);
}

static int l_defer_interrupts(lua_State *L) {
  int on = lua_isnoneornil(L, 1) ? 1 : lua_toboolean(L, 1);
  if (!lua_isnoneornil(L, 1) && !lua_isboolean(L, 1))
    return nc_lua_argerror(L, "netcl.defer_interrupts", 1, "expected a boolean, got %s", luaL_typename(L, 1));
  if (on && !deferring) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    interrupted = 0;
    if (sigaction(SIGINT, &sa, &previous) != 0)
      return nc_lua_errorf(L, "netcl.defer_interrupts: cannot set the SIGINT handler");
    deferring = 1;
  } else if (!on && deferring) {
    sigaction(SIGINT, &previous, NULL);
    deferring = 0;
  }
  return 0;
}

/* nc.interrupted() -> whether Ctrl-C came since nc.defer_interrupts() */
static int l_interrupted(lua_State *L) {
  lua_pushboolean(L, interrupted != 0);
  return 1;
}

void nc_lua_add_term(lua_State *L) {
  static const luaL_Reg funcs[] = {{"isatty", l_isatty}, {"columns", l_columns}, {NULL, NULL}};
  static const luaL_Reg module[] = {{"defer_interrupts", l_defer_interrupts}, {"interrupted", l_interrupted},
                                    {NULL, NULL}};
  luaL_setfuncs(L, module, 0);
  luaL_newlib(L, funcs);
  lua_setfield(L, -2, "_term");
}

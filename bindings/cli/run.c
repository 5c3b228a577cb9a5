/* Running Lua code for the command line and the REPL: protected calls with a traceback, Ctrl-C
 * while Lua runs, and error reports. */
#include <lauxlib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include "cli.h"

const char *cli_progname = "netcl-lua";

void cli_message(const char *msg) {
  fprintf(stderr, "%s: %s\n", cli_progname, msg);
  fflush(stderr);
}

int cli_report(lua_State *L, int status) {
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    cli_message(msg ? msg : "(error object is not a string)");
    lua_pop(L, 1);
  }
  return status;
}

static int msghandler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (!msg) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* ---- Ctrl-C while Lua runs -----------------------------------------------------------------
 * SIGINT sets a hook that raises "interrupted!" at the next Lua instruction, so a loop stops
 * between ops (a C op in progress finishes first). As in lua.c, the handler restores the
 * default action, so a second Ctrl-C ends a process stuck in C. (The REPL handles Ctrl-C while
 * it reads a line: repl.c.) */
static lua_State *globalL;
volatile sig_atomic_t cli_stopped_running;

static void lstop(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted!");
}

static void on_sigint_running(int sig) {
  cli_stopped_running = 1;
  signal(sig, SIG_DFL);
  lua_sethook(globalL, lstop, LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT, 1);
}

void cli_set_sigint(void (*handler)(int), struct sigaction *old) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, old);
}

int cli_docall(lua_State *L, int narg, int nres) {
  int base = lua_gettop(L) - narg;
  lua_pushcfunction(L, msghandler);
  lua_insert(L, base);
  struct sigaction old;
  globalL = L;
  cli_set_sigint(on_sigint_running, &old);
  int status = lua_pcall(L, narg, nres, base);
  sigaction(SIGINT, &old, NULL);
  /* A Ctrl-C that came after the last Lua instruction must not stop the next statement. */
  if (lua_gethook(L) == lstop) lua_sethook(L, NULL, 0, 0);
  lua_remove(L, base);
  return status;
}

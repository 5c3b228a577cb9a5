/* netcl-lua: runs scripts with netcl preloaded, and an interactive REPL.
 *   netcl-lua [options] [script [args]]
 *     -e stat  -l mod  -i  -v  --device SPEC  --list-devices  -  (stdin) */
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "netcl_lua.h"

static const char *progname = "netcl-lua";

static void usage(void) {
  fprintf(stderr,
          "usage: %s [options] [script [args]]\n"
          "  -e stat         execute string 'stat'\n"
          "  -l mod          require 'mod' into global 'mod'\n"
          "  -i              enter the REPL after running the script\n"
          "  -v              show version information\n"
          "  --device SPEC   default device: cpu, gpu, opencl or opencl:P:D\n"
          "  --list-devices  list the devices and exit\n"
          "  -               execute stdin\n",
          progname);
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

static int report(lua_State *L, int status) {
  if (status != LUA_OK) {
    fprintf(stderr, "%s: %s\n", progname, lua_tostring(L, -1));
    fflush(stderr);
    lua_pop(L, 1);
  }
  return status;
}

static int docall(lua_State *L, int narg, int nres) {
  int base = lua_gettop(L) - narg;
  lua_pushcfunction(L, msghandler);
  lua_insert(L, base);
  int status = lua_pcall(L, narg, nres, base);
  lua_remove(L, base);
  return status;
}

static int dostring(lua_State *L, const char *s, const char *name) {
  int status = luaL_loadbuffer(L, s, strlen(s), name);
  if (status == LUA_OK) status = docall(L, 0, 0);
  return report(L, status);
}

static int dorequire(lua_State *L, const char *name) {
  lua_getglobal(L, "require");
  lua_pushstring(L, name);
  int status = docall(L, 1, 1);
  if (status == LUA_OK) lua_setglobal(L, name);
  return report(L, status);
}

static int list_devices(lua_State *L) {
  nc_init();
  for (int i = 0; i < nc_device_count(); i++) {
    const nc_device_info *d = nc_device_info_of(nc_device_get(i));
    printf("%-14s %-6s %s | %s | %d compute units | %.1f GiB | fp64 %s | driver %s\n", d->spec,
           d->kind == NC_DEVICE_CPU ? "cpu" : (d->is_gpu ? "gpu" : "opencl"), d->name, d->vendor,
           d->compute_units, (double)d->memory / (1024.0 * 1024 * 1024), d->fp64 ? "yes" : "no",
           d->driver_version);
  }
  return 0;
}

/* The REPL: lines are tried as "return <line>" first (auto-print), then as statements;
 * incomplete input ("<eof>" errors) reads more lines, the way lua.c does. */
static int incomplete(lua_State *L, int status) {
  if (status == LUA_ERRSYNTAX) {
    size_t lmsg;
    const char *msg = lua_tolstring(L, -1, &lmsg);
    if (lmsg >= 5 && strcmp(msg + lmsg - 5, "<eof>") == 0) {
      lua_pop(L, 1);
      return 1;
    }
  }
  return 0;
}

static void print_results(lua_State *L, int n) {
  if (n == 0) return;
  lua_getglobal(L, "print");
  lua_insert(L, -(n + 1));
  if (lua_pcall(L, n, 0, 0) != LUA_OK) report(L, LUA_ERRRUN);
}

static void repl(lua_State *L) {
  char line[8192];
  luaL_Buffer unused;
  (void)unused;
  for (;;) {
    fputs("> ", stdout);
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) break;
    lua_pushstring(L, line);
    for (;;) {
      const char *code = lua_tostring(L, -1);
      const char *src = code[0] == '=' ? code + 1 : code;
      lua_pushfstring(L, "return %s", src);
      int status = luaL_loadbuffer(L, lua_tostring(L, -1), lua_rawlen(L, -1), "=stdin");
      lua_remove(L, -2);
      if (status != LUA_OK) {
        lua_pop(L, 1);
        status = luaL_loadbuffer(L, code, strlen(code), "=stdin");
      }
      if (incomplete(L, status)) {
        fputs(">> ", stdout);
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin)) {
          lua_pop(L, 1);
          return;
        }
        lua_pushstring(L, line);
        lua_concat(L, 2);
        continue;
      }
      lua_remove(L, -2);
      if (status == LUA_OK) {
        int base = lua_gettop(L);
        status = docall(L, 0, LUA_MULTRET);
        if (status == LUA_OK) print_results(L, lua_gettop(L) - base + 1);
      }
      report(L, status);
      break;
    }
    lua_settop(L, 0);
  }
  fputs("\n", stdout);
}

static int run_script(lua_State *L, char **argv, int script, int argc) {
  /* arg table as lua.c builds it: arg[0] = script, arg[-n..-1] = interpreter and options */
  lua_createtable(L, argc - script - 1, script + 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
  const char *fname = argv[script];
  if (strcmp(fname, "-") == 0 && strcmp(argv[script - 1], "--") != 0) fname = NULL;
  int status = luaL_loadfile(L, fname);
  if (status == LUA_OK) {
    int n = 0;
    for (int i = script + 1; i < argc; i++, n++) lua_pushstring(L, argv[i]);
    status = docall(L, n, LUA_MULTRET);
  }
  return report(L, status);
}

int main(int argc, char **argv) {
  if (argv[0] && argv[0][0]) progname = argv[0];
  lua_State *L = luaL_newstate();
  if (!L) {
    fprintf(stderr, "%s: cannot create a Lua state\n", progname);
    return 1;
  }
  luaL_openlibs(L);
  netcl_lua_openlibs(L);
  int interactive = 0, script = 0, ran = 0, version = 0;
  /* first pass: flags that change set-up */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-' || strcmp(a, "-") == 0) { script = i; break; }
    if (strcmp(a, "--") == 0) { if (i + 1 < argc) script = i + 1; break; }
    if (strcmp(a, "-i") == 0) interactive = 1;
    else if (strcmp(a, "-v") == 0) version = 1;
    else if (strcmp(a, "--list-devices") == 0) { list_devices(L); lua_close(L); return 0; }
    else if (strcmp(a, "--device") == 0 || strcmp(a, "-e") == 0 || strcmp(a, "-l") == 0) {
      if (++i >= argc) { usage(); lua_close(L); return 1; }
      if (strcmp(a, "--device") == 0) setenv("NETCL_DEVICE", argv[i], 1);
    } else { fprintf(stderr, "%s: unrecognized option '%s'\n", progname, a); usage(); lua_close(L); return 1; }
  }
  if (version) printf("netcl-lua %s (%s)\n", nc_version(), LUA_RELEASE);
  int status = LUA_OK;
  int stop = script ? script : argc;
  for (int i = 1; i < stop && status == LUA_OK; i++) {
    if (strcmp(argv[i], "-e") == 0) { status = dostring(L, argv[++i], "=(command line)"); ran = 1; }
    else if (strcmp(argv[i], "-l") == 0) status = dorequire(L, argv[++i]);
    else if (strcmp(argv[i], "--device") == 0) i++;
  }
  if (status == LUA_OK && script) status = run_script(L, argv, script, argc);
  if (status == LUA_OK && (interactive || (!script && !ran && !version))) repl(L);
  lua_close(L);
  return status == LUA_OK ? 0 : 1;
}

/* netcl-lua: runs scripts with netcl preloaded, and an interactive REPL.
 *
 *   netcl-lua [options] [script [args]]
 *
 * Option handling, the `arg` table and error reports follow lua.c (Lua 5.4), so scripts behave
 * as under lua5.4. This file is the command line: options, running chunks and scripts, and
 * Ctrl-C while Lua runs; repl.c is the REPL, complete.c its Tab completion. */
#include <lauxlib.h>
#include <lualib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "netcl_lua.h"


static void usage(FILE *f) {
  fprintf(f,
          "usage: %s [options] [script [args]]\n"
          "  -e stat         execute string 'stat'\n"
          "  -l mod          require 'mod' into global 'mod' (-l g=mod: into global 'g')\n"
          "  -i              enter the REPL after running the script\n"
          "  -v              show version information\n"
          "  --device SPEC   default device: cpu, gpu, opencl or opencl:P:D\n"
          "  --list-devices  list the devices and exit\n"
          "  --warmup        build and cache every kernel for the device, report the time\n"
          "  -h, --help      show this help and exit\n"
          "  --              stop handling options\n"
          "  -               execute stdin and stop handling options\n"
          "With no script and no -e, the REPL starts when stdin is a terminal; otherwise stdin\n"
          "runs as a script. REPL history goes to $NETCL_HISTORY (default ~/.netcl_history;\n"
          "empty = none).\n",
          cli_progname);
}

static int dochunk(lua_State *L, int status) {
  if (status == LUA_OK) status = cli_docall(L, 0, 0);
  return cli_report(L, status);
}

static int dostring(lua_State *L, const char *s, const char *name) {
  return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

/* -l mod: global mod = require "mod"; -l g=mod: global g = require "mod" (as lua.c 5.4.6). */
static int dolibrary(lua_State *L, const char *spec) {
  const char *eq = strchr(spec, '=');
  lua_getglobal(L, "require");
  lua_pushstring(L, eq ? eq + 1 : spec);
  int status = cli_docall(L, 1, 1);
  if (status == LUA_OK) {
    if (eq)
      lua_pushlstring(L, spec, (size_t)(eq - spec));
    else
      lua_pushstring(L, spec);
    lua_insert(L, -2);
    lua_setglobal(L, lua_tostring(L, -2));
    lua_pop(L, 1);
  }
  return cli_report(L, status);
}

/* arg as lua.c builds it: arg[0] = script, arg[1..] its arguments, arg[-n..-1] the
 * interpreter and options. Without a script, arg[0] is the interpreter. */
static void create_arg_table(lua_State *L, char **argv, int argc, int script) {
  int narg = argc - (script + 1);
  lua_createtable(L, narg > 0 ? narg : 0, script + 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

static int run_script(lua_State *L, char **argv, int argc, int script) {
  const char *fname = argv[script];
  if (strcmp(fname, "-") == 0 && strcmp(argv[script - 1], "--") != 0) fname = NULL; /* stdin */
  int status = luaL_loadfile(L, fname);
  if (status == LUA_OK) {
    int n = argc - script - 1;
    luaL_checkstack(L, n + 3, "too many arguments to script");
    for (int i = script + 1; i < argc; i++) lua_pushstring(L, argv[i]);
    status = cli_docall(L, n, LUA_MULTRET);
  }
  return cli_report(L, status);
}

static void list_devices(void) {
  nc_device *def = NULL;
  if (nc_device_find(NULL, &def) != NC_OK) {
    fprintf(stderr, "%s: no default device: %s\n", cli_progname, nc_last_error());
    def = NULL;
  }
  for (int i = 0; i < nc_device_count(); i++) {
    nc_device *dev = nc_device_get(i);
    const nc_device_info *d = nc_device_info_of(dev);
    printf("%c %-14s %-6s %s | %s | %d compute units | %.1f GiB | fp64 %s | driver %s\n",
           dev == def ? '*' : ' ', d->spec, d->kind == NC_DEVICE_CPU ? "cpu" : (d->is_gpu ? "gpu" : "opencl"),
           d->name, d->vendor, d->compute_units, (double)d->memory / (1024.0 * 1024 * 1024),
           d->fp64 ? "yes" : "no", d->driver_version);
  }
  printf("(* = default device)\n");
}

/* Builds every kernel program for the default device (after --device) into the memory and disk
 * caches, so the first real run does not pay for compilation. */
static int warmup(void) {
  nc_device *dev;
  double seconds = 0;
  if (nc_device_find(NULL, &dev) != NC_OK) {
    fprintf(stderr, "%s: --warmup: %s\n", cli_progname, nc_last_error());
    return -1;
  }
  const nc_device_info *d = nc_device_info_of(dev);
  if (nc_device_warmup(dev, &seconds) != NC_OK) {
    fprintf(stderr, "%s: --warmup on %s (%s): %s\n", cli_progname, d->spec, d->name, nc_last_error());
    return -1;
  }
  if (d->kind == NC_DEVICE_CPU)
    printf("warmup: %s (%s) runs compiled C: no kernels to build\n", d->spec, d->name);
  else
    printf("warmup: %s (%s): every kernel built and cached in %.2f s\n", d->spec, d->name, seconds);
  fflush(stdout);
  return 0;
}

/* ---- command line ------------------------------------------------------------------------------- */
typedef struct {
  char kind; /* 'e' or 'l' */
  const char *value;
} action;

typedef struct {
  int interactive, version, list_devices, warmup, help, script;
  const char *device;
  action *actions;
  int n_actions;
} options;

/* The value of an option given as "-eCODE" or "-e CODE"; NULL (after a message) if missing. */
static const char *option_value(int argc, char **argv, int *i, size_t optlen) {
  const char *a = argv[*i];
  if (a[optlen]) return a + optlen;
  if (*i + 1 >= argc) {
    fprintf(stderr, "%s: '%s' needs an argument\n", cli_progname, a);
    return NULL;
  }
  return argv[++*i];
}

static int parse_args(int argc, char **argv, options *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-' || strcmp(a, "-") == 0) {
      o->script = i;
      return 0;
    }
    if (strcmp(a, "--") == 0) {
      if (i + 1 < argc) o->script = i + 1;
      return 0;
    }
    if (strcmp(a, "-i") == 0)
      o->interactive = 1;
    else if (strcmp(a, "-v") == 0)
      o->version = 1;
    else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
      o->help = 1;
    else if (strcmp(a, "--list-devices") == 0)
      o->list_devices = 1;
    else if (strcmp(a, "--warmup") == 0)
      o->warmup = 1;
    else if (strncmp(a, "--device=", 9) == 0)
      o->device = a + 9;
    else if (strcmp(a, "--device") == 0) {
      if (!(o->device = option_value(argc, argv, &i, strlen(a)))) return -1;
    } else if (a[1] == 'e' || a[1] == 'l') {
      const char *v = option_value(argc, argv, &i, 2);
      if (!v) return -1;
      o->actions[o->n_actions++] = (action){a[1], v};
    } else {
      fprintf(stderr, "%s: unrecognized option '%s'\n", cli_progname, a);
      usage(stderr);
      return -1;
    }
  }
  return 0;
}

/* Everything that runs inside the state; main() keeps only set-up and tear-down. */
static int run(lua_State *L, int argc, char **argv, options *o) {
  if (o->version) printf("netcl-lua %s (%s)\n", nc_version(), LUA_RELEASE);
  if (o->device) {
    nc_device *dev;
    if (nc_device_find(o->device, &dev) != NC_OK) {
      fprintf(stderr, "%s: --device %s: %s\n", cli_progname, o->device, nc_last_error());
      return LUA_ERRRUN;
    }
    /* The state's default device comes from NETCL_DEVICE when the program has not set one. */
    setenv("NETCL_DEVICE", nc_device_info_of(dev)->spec, 1);
  }
  if (o->list_devices) {
    if (nc_init() != NC_OK) {
      cli_message(nc_last_error());
      return LUA_ERRRUN;
    }
    list_devices();
    return LUA_OK;
  }
  if (o->warmup && warmup() != 0) return LUA_ERRRUN;
  create_arg_table(L, argv, argc, o->script ? o->script : 0);
  int ran_e = 0;
  for (int i = 0; i < o->n_actions; i++) {
    int status = o->actions[i].kind == 'e' ? dostring(L, o->actions[i].value, "=(command line)")
                                           : dolibrary(L, o->actions[i].value);
    if (status != LUA_OK) return status;
    ran_e |= o->actions[i].kind == 'e';
  }
  if (o->script) {
    int status = run_script(L, argv, argc, o->script);
    if (status != LUA_OK) return status;
  }
  if (o->interactive) {
    cli_repl(L);
  } else if (!o->script && !ran_e && !o->version && !o->warmup) {
    if (isatty(STDIN_FILENO))
      cli_repl(L);
    else
      return dochunk(L, luaL_loadfile(L, NULL));
  }
  return LUA_OK;
}

int main(int argc, char **argv) {
  if (argv[0] && argv[0][0]) cli_progname = argv[0];
  options o;
  memset(&o, 0, sizeof o);
  o.actions = calloc((size_t)argc + 1, sizeof *o.actions);
  if (!o.actions) {
    cli_message("out of memory");
    return EXIT_FAILURE;
  }
  if (parse_args(argc, argv, &o) != 0) {
    free(o.actions);
    return EXIT_FAILURE;
  }
  if (o.help) {
    usage(stdout);
    free(o.actions);
    return EXIT_SUCCESS;
  }
  lua_State *L = luaL_newstate();
  if (!L) {
    cli_message("cannot create a Lua state: not enough memory");
    free(o.actions);
    return EXIT_FAILURE;
  }
  luaL_openlibs(L);
  netcl_lua_openlibs(L);
  int status = run(L, argc, argv, &o);
  lua_close(L);
  free(o.actions);
  return status == LUA_OK ? EXIT_SUCCESS : EXIT_FAILURE;
}

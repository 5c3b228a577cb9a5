/* netcl-lua: runs scripts with netcl preloaded, and an interactive REPL.
 *
 *   netcl-lua [options] [script [args]]
 *
 * Option handling, the `arg` table, error reports and the REPL's multi-line rule follow lua.c
 * (Lua 5.4), so scripts behave as under lua5.4. The REPL adds line editing and persistent
 * history (libedit), tab completion through metatables, auto-print and per-statement timing. */
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <limits.h>
#include <locale.h>
#include <lualib.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>
#include "netcl_lua.h"
#ifdef NC_HAVE_LIBEDIT
#include <histedit.h>
#endif

static const char *progname = "netcl-lua";

/* Statements slower than this get their wall time printed. */
#define REPORT_TIME_S 0.1

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
          progname);
}

static void message(const char *msg) {
  fprintf(stderr, "%s: %s\n", progname, msg);
  fflush(stderr);
}

static int report(lua_State *L, int status) {
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    message(msg ? msg : "(error object is not a string)");
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

/* ---- Ctrl-C ------------------------------------------------------------------------------
 * While Lua runs, SIGINT sets a hook that raises "interrupted!" at the next Lua instruction,
 * so a loop stops between ops (a C op in progress finishes first). As in lua.c, the handler
 * restores the default action, so a second Ctrl-C ends a process stuck in C. While the REPL
 * reads a line, SIGINT sets a flag and, for libedit, wakes the reader through a pipe (a
 * signal that lands just before the read blocks would otherwise be lost); the REPL then
 * drops the pending input. */
static lua_State *globalL;
static volatile sig_atomic_t got_sigint, stopped_running;
static int sigint_pipe[2] = {-1, -1};

static void lstop(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted!");
}

static void on_sigint_running(int sig) {
  stopped_running = 1;
  signal(sig, SIG_DFL);
  lua_sethook(globalL, lstop, LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT, 1);
}

static void on_sigint_reading(int sig) {
  (void)sig;
  got_sigint = 1;
  if (sigint_pipe[1] >= 0) {
    int saved = errno;
    ssize_t ignored = write(sigint_pipe[1], "", 1); /* full pipe: a wake-up is pending anyway */
    (void)ignored;
    errno = saved;
  }
}

static void set_sigint(void (*handler)(int), struct sigaction *old) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, old);
}

static int docall(lua_State *L, int narg, int nres) {
  int base = lua_gettop(L) - narg;
  lua_pushcfunction(L, msghandler);
  lua_insert(L, base);
  struct sigaction old;
  globalL = L;
  set_sigint(on_sigint_running, &old);
  int status = lua_pcall(L, narg, nres, base);
  sigaction(SIGINT, &old, NULL);
  /* A Ctrl-C that came after the last Lua instruction must not stop the next statement. */
  if (lua_gethook(L) == lstop) lua_sethook(L, NULL, 0, 0);
  lua_remove(L, base);
  return status;
}

static int dochunk(lua_State *L, int status) {
  if (status == LUA_OK) status = docall(L, 0, 0);
  return report(L, status);
}

static int dostring(lua_State *L, const char *s, const char *name) {
  return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

/* -l mod: global mod = require "mod"; -l g=mod: global g = require "mod" (as lua.c 5.4.6). */
static int dolibrary(lua_State *L, const char *spec) {
  const char *eq = strchr(spec, '=');
  lua_getglobal(L, "require");
  lua_pushstring(L, eq ? eq + 1 : spec);
  int status = docall(L, 1, 1);
  if (status == LUA_OK) {
    if (eq)
      lua_pushlstring(L, spec, (size_t)(eq - spec));
    else
      lua_pushstring(L, spec);
    lua_insert(L, -2);
    lua_setglobal(L, lua_tostring(L, -2));
    lua_pop(L, 1);
  }
  return report(L, status);
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
    status = docall(L, n, LUA_MULTRET);
  }
  return report(L, status);
}

static void list_devices(void) {
  nc_device *def = NULL;
  if (nc_device_find(NULL, &def) != NC_OK) {
    fprintf(stderr, "%s: no default device: %s\n", progname, nc_last_error());
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
    fprintf(stderr, "%s: --warmup: %s\n", progname, nc_last_error());
    return -1;
  }
  const nc_device_info *d = nc_device_info_of(dev);
  if (nc_device_warmup(dev, &seconds) != NC_OK) {
    fprintf(stderr, "%s: --warmup on %s (%s): %s\n", progname, d->spec, d->name, nc_last_error());
    return -1;
  }
  if (d->kind == NC_DEVICE_CPU)
    printf("warmup: %s (%s) runs compiled C: no kernels to build\n", d->spec, d->name);
  else
    printf("warmup: %s (%s): every kernel built and cached in %.2f s\n", d->spec, d->name, seconds);
  fflush(stdout);
  return 0;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#ifdef NC_HAVE_LIBEDIT
/* ---- tab completion ------------------------------------------------------------------------ */
static const char *const lua_keywords[] = {
    "and",   "break", "do",  "else", "elseif", "end",    "false", "for",  "function", "goto",  "if", "in",
    "local", "nil",   "not", "or",   "repeat", "return", "then",  "true", "until",    "while", NULL};

static int is_identifier(const char *s, size_t n) {
  if (n == 0 || (s[0] >= '0' && s[0] <= '9')) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return 0;
  }
  return 1;
}

static int is_callable(lua_State *L, int idx) {
  if (lua_type(L, idx) == LUA_TFUNCTION) return 1;
  int t = luaL_getmetafield(L, idx, "__call");
  if (t != LUA_TNIL) lua_pop(L, 1);
  return t != LUA_TNIL;
}

/* Adds to the set at `out` the identifier keys of the value at obj that start with partial,
 * following __index tables and, for an __index function, the metatable's `methods` table
 * (the convention of the netcl userdata types). */
static void collect_keys(lua_State *L, int obj, int out, const char *partial, size_t plen, int callables_only,
                         int depth) {
  obj = lua_absindex(L, obj);
  if (depth > 8) return; /* __index chains can loop */
  luaL_checkstack(L, 8, "completion");
  if (lua_type(L, obj) == LUA_TTABLE) {
    lua_pushnil(L);
    while (lua_next(L, obj)) {
      if (lua_type(L, -2) == LUA_TSTRING) {
        size_t kl;
        const char *k = lua_tolstring(L, -2, &kl);
        if (kl >= plen && memcmp(k, partial, plen) == 0 && is_identifier(k, kl) &&
            (!callables_only || is_callable(L, -1))) {
          lua_pushvalue(L, -2);
          lua_pushboolean(L, 1);
          lua_rawset(L, out);
        }
      }
      lua_pop(L, 1);
    }
  }
  if (!lua_getmetatable(L, obj)) return;
  int mt = lua_gettop(L);
  lua_pushliteral(L, "__index");
  int t = lua_rawget(L, mt);
  if (t == LUA_TTABLE) {
    collect_keys(L, -1, out, partial, plen, callables_only, depth + 1);
  } else if (t == LUA_TFUNCTION) {
    lua_pushliteral(L, "methods");
    if (lua_rawget(L, mt) == LUA_TTABLE) collect_keys(L, -1, out, partial, plen, callables_only, depth + 1);
  }
  lua_settop(L, mt - 1);
}

static int compare_strings(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* complete(word) -> sorted array of names that can replace the word's last component.
 * word is what precedes the cursor: "prefix", "a.b.pre" or "a.b:pre". Evaluating a.b may
 * run __index metamethods, hence the protected call around this function. */
static int l_complete(lua_State *L) {
  size_t n;
  const char *word = luaL_checklstring(L, 1, &n);
  const char *last = word;
  for (const char *p = word; p < word + n; p++)
    if (*p == '.' || *p == ':') last = p + 1;
  int method = last > word && last[-1] == ':';
  lua_newtable(L);
  int out = lua_gettop(L);
  lua_pushglobaltable(L);
  const char *p = word;
  while (p < last) {
    const char *sep = p;
    while (*sep != '.' && *sep != ':') sep++;
    if (*sep == ':' && sep + 1 != last) return 0; /* a:b.c is not an expression */
    if (!is_identifier(p, (size_t)(sep - p))) return 0;
    int t = lua_type(L, -1);
    if (t != LUA_TTABLE && !(t == LUA_TUSERDATA || t == LUA_TSTRING)) return 0;
    lua_pushlstring(L, p, (size_t)(sep - p));
    lua_gettable(L, -2);
    lua_remove(L, -2);
    if (lua_isnil(L, -1)) return 0;
    p = sep + 1;
  }
  size_t plen = (size_t)(word + n - last);
  collect_keys(L, -1, out, last, plen, method, 0);
  if (last == word)
    for (const char *const *k = lua_keywords; *k; k++)
      if (strncmp(*k, last, plen) == 0) {
        lua_pushstring(L, *k);
        lua_pushboolean(L, 1);
        lua_rawset(L, out);
      }
  /* set -> sorted array */
  int count = 0;
  lua_pushnil(L);
  while (lua_next(L, out)) count++, lua_pop(L, 1);
  const char **names = lua_newuserdatauv(L, sizeof(char *) * (size_t)(count ? count : 1), 0);
  int i = 0;
  lua_pushnil(L);
  while (lua_next(L, out)) {
    names[i++] = lua_tostring(L, -2); /* anchored by the set */
    lua_pop(L, 1);
  }
  qsort(names, (size_t)count, sizeof *names, compare_strings);
  lua_createtable(L, count, 0);
  for (i = 0; i < count; i++) {
    lua_pushstring(L, names[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}
#endif

/* ---- the REPL -------------------------------------------------------------------------------- */
typedef struct {
  lua_State *L;
  int use_prompts;
#ifdef NC_HAVE_LIBEDIT
  EditLine *el;
  History *hist;
  char *history_path; /* NULL: history is not saved */
  int history_warned;
#endif
  char *line; /* plain-mode getline buffer */
  size_t line_cap;
} repl_state;

static char prompt_buf[256];

static const char *get_prompt(lua_State *L, int firstline) {
  const char *def = firstline ? "> " : ">> ";
  if (lua_getglobal(L, firstline ? "_PROMPT" : "_PROMPT2") == LUA_TNIL) {
    lua_pop(L, 1);
    return def;
  }
  const char *p = lua_tostring(L, -1); /* as lua.c: any value with a string form */
  snprintf(prompt_buf, sizeof prompt_buf, "%s", p ? p : def);
  lua_pop(L, 1);
  return prompt_buf;
}

enum { READ_EOF = 0, READ_LINE = 1, READ_INTERRUPTED = -1 };

#ifdef NC_HAVE_LIBEDIT
static const char *el_prompt_text = "> ";
static char *el_prompt(EditLine *el) {
  (void)el;
  return (char *)el_prompt_text;
}

static int terminal_columns(void) {
  struct winsize ws;
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

static void print_columns(lua_State *L, int list, int count) {
  size_t width = 0;
  for (int i = 1; i <= count; i++) {
    lua_rawgeti(L, list, i);
    size_t len = lua_rawlen(L, -1);
    if (len > width) width = len;
    lua_pop(L, 1);
  }
  width += 2;
  int cols = (int)((size_t)terminal_columns() / width);
  if (cols < 1) cols = 1;
  int rows = (count + cols - 1) / cols;
  fputs("\n", stdout);
  for (int r = 0; r < rows; r++) {
    for (int c = 0; c < cols; c++) {
      int i = c * rows + r + 1;
      if (i > count) break;
      lua_rawgeti(L, list, i);
      printf("%-*s", c + 1 < cols ? (int)width : 0, lua_tostring(L, -1));
      lua_pop(L, 1);
    }
    fputs("\n", stdout);
  }
  fflush(stdout);
}

static unsigned char el_complete(EditLine *el, int ch) {
  (void)ch;
  repl_state *r;
  el_get(el, EL_CLIENTDATA, &r);
  lua_State *L = r->L;
  const LineInfo *li = el_line(el);
  const char *start = li->cursor;
  while (start > li->buffer) {
    unsigned char c = (unsigned char)start[-1];
    if (c == '_' || c == '.' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (c >= '0' && c <= '9'))
      start--;
    else
      break;
  }
  size_t wlen = (size_t)(li->cursor - start);
  if (wlen == 0) {
    /* Tab in leading blanks indents, as in an editor. */
    for (const char *p = li->buffer; p < li->cursor; p++)
      if (*p != ' ' && *p != '\t') return CC_ERROR;
    return el_insertstr(el, "  ") == 0 ? CC_REFRESH : CC_ERROR;
  }
  size_t plen = wlen;
  for (const char *p = start; p < li->cursor; p++)
    if (*p == '.' || *p == ':') plen = (size_t)(li->cursor - p - 1);
  int top = lua_gettop(L);
  lua_pushcfunction(L, l_complete);
  lua_pushlstring(L, start, wlen);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK || !lua_istable(L, -1)) {
    lua_settop(L, top);
    return CC_ERROR;
  }
  int list = lua_gettop(L);
  int count = (int)lua_rawlen(L, list);
  unsigned char ret = CC_ERROR;
  if (count > 0) {
    /* Longest common prefix of the candidates. */
    lua_rawgeti(L, list, 1);
    const char *first = lua_tostring(L, -1);
    size_t common = strlen(first);
    for (int i = 2; i <= count; i++) {
      lua_rawgeti(L, list, i);
      const char *s = lua_tostring(L, -1);
      size_t j = 0;
      while (j < common && s[j] == first[j]) j++;
      common = j;
      lua_pop(L, 1);
    }
    if (common > plen) {
      char buf[512];
      snprintf(buf, sizeof buf, "%.*s", (int)(common - plen), first + plen);
      ret = el_insertstr(el, buf) == 0 ? CC_REFRESH : CC_ERROR;
    } else if (count > 1) {
      print_columns(L, list, count);
      ret = CC_REDISPLAY;
    }
  }
  lua_settop(L, top);
  return ret;
}

static void history_add(repl_state *r, const char *chunk) {
  HistEvent ev;
  const char *p = chunk;
  while (*p == ' ' || *p == '\t' || *p == '\n') p++;
  if (!*p) return;
  history(r->hist, &ev, H_ENTER, chunk);
  /* Saved after every entry so a killed session keeps its history. */
  if (r->history_path && history(r->hist, &ev, H_SAVE, r->history_path) < 0 && !r->history_warned) {
    fprintf(stderr, "%s: cannot write the history file %s: %s\n", progname, r->history_path, strerror(errno));
    r->history_warned = 1;
  }
}

static char *history_file(void) {
  const char *env = getenv("NETCL_HISTORY");
  if (env) return *env ? strdup(env) : NULL;
  const char *home = getenv("HOME");
  if (!home || !*home) return NULL;
  size_t n = strlen(home) + sizeof "/.netcl_history";
  char *path = malloc(n);
  if (path) snprintf(path, n, "%s/.netcl_history", home);
  return path;
}

/* libedit's character reader, replaced so that Ctrl-C ends el_gets even when it arrives before
 * the read blocks: it waits on stdin and on the signal pipe together. Decodes multibyte
 * input as libedit's own reader does. */
static int read_key(EditLine *el, wchar_t *wc) {
  (void)el;
  char buf[MB_LEN_MAX];
  size_t n = 0;
  for (;;) {
    struct pollfd p[2] = {{STDIN_FILENO, POLLIN, 0}, {sigint_pipe[0], POLLIN, 0}};
    if (got_sigint || (poll(p, 2, -1) > 0 && (p[1].revents & POLLIN))) {
      errno = EINTR;
      return -1;
    }
    if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue; /* poll was interrupted */
    ssize_t k = read(STDIN_FILENO, buf + n, 1);
    if (k == 0) return 0;
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return -1;
    }
    n++;
    mbstate_t st;
    memset(&st, 0, sizeof st);
    size_t c = mbrtowc(wc, buf, n, &st);
    if (c == (size_t)-2 && n < sizeof buf) continue; /* incomplete sequence */
    if (c == (size_t)-1 || c == (size_t)-2) {        /* invalid: drop it */
      n = 0;
      continue;
    }
    if (c == 0) *wc = 0;
    return 1;
  }
}

static void drain_sigint_pipe(void) {
  char buf[64];
  while (read(sigint_pipe[0], buf, sizeof buf) > 0) {
  }
}

static void editline_open(repl_state *r) {
  HistEvent ev;
  setlocale(LC_CTYPE, ""); /* multibyte input in UTF-8 terminals */
  r->hist = history_init();
  history(r->hist, &ev, H_SETSIZE, 1000);
  history(r->hist, &ev, H_SETUNIQUE, 1);
  r->history_path = history_file();
  if (r->history_path) {
    struct stat st;
    int exists = stat(r->history_path, &st) == 0;
    /* Refuse to overwrite a file that is not ours (a typo in NETCL_HISTORY, say). */
    if (history(r->hist, &ev, H_LOAD, r->history_path) < 0 && exists && st.st_size > 0) {
      fprintf(stderr, "%s: %s is not a history file; this session's history will not be saved\n", progname,
              r->history_path);
      free(r->history_path);
      r->history_path = NULL;
    }
  }
  r->el = el_init(progname, stdin, stdout, stderr);
  el_set(r->el, EL_CLIENTDATA, r);
  el_set(r->el, EL_EDITOR, "emacs");
  el_set(r->el, EL_SIGNAL, 1); /* restores the terminal around signals and on resize */
  if (pipe2(sigint_pipe, O_CLOEXEC | O_NONBLOCK) == 0) el_set(r->el, EL_GETCFN, read_key);
  el_set(r->el, EL_PROMPT, el_prompt);
  el_set(r->el, EL_HIST, history, r->hist);
  /* The wide call: libedit's narrow EL_ADDFN copies the names and never frees them. */
  el_wset(r->el, EL_ADDFN, L"netcl-complete", L"complete globals, fields and methods", el_complete);
  el_set(r->el, EL_BIND, "^I", "netcl-complete", NULL);
  el_source(r->el, NULL); /* ~/.editrc */
}

static void editline_close(repl_state *r) {
  if (sigint_pipe[0] >= 0) {
    close(sigint_pipe[0]);
    close(sigint_pipe[1]);
    sigint_pipe[0] = sigint_pipe[1] = -1;
  }
  el_end(r->el);
  history_end(r->hist);
  free(r->history_path);
}
#endif

/* Reads one line (without its newline) onto the Lua stack. */
static int read_line(repl_state *r, int firstline) {
  lua_State *L = r->L;
  const char *prompt = get_prompt(L, firstline);
#ifdef NC_HAVE_LIBEDIT
  if (sigint_pipe[0] >= 0) drain_sigint_pipe();
#endif
  got_sigint = 0;
#ifdef NC_HAVE_LIBEDIT
  if (r->el) {
    el_prompt_text = prompt;
    int count = 0;
    const char *line = el_gets(r->el, &count);
    if (!line) {
      if (got_sigint) {
        fputs("\n", stdout);
        return READ_INTERRUPTED;
      }
      return READ_EOF;
    }
    size_t n = strlen(line);
    if (n > 0 && line[n - 1] == '\n') n--;
    lua_pushlstring(L, line, n);
    return READ_LINE;
  }
#endif
  if (r->use_prompts) {
    fputs(prompt, stdout);
    fflush(stdout);
  }
  ssize_t n = getline(&r->line, &r->line_cap, stdin);
  if (n < 0) {
    if (got_sigint) {
      clearerr(stdin);
      fputs("\n", stdout);
      return READ_INTERRUPTED;
    }
    return READ_EOF;
  }
  if (n > 0 && r->line[n - 1] == '\n') n--;
  lua_pushlstring(L, r->line, (size_t)n);
  return READ_LINE;
}

/* A syntax error at <eof> means the chunk is incomplete (lua.c's rule). */
static int incomplete(lua_State *L, int status) {
  if (status == LUA_ERRSYNTAX) {
    size_t lmsg;
    const char *msg = lua_tolstring(L, -1, &lmsg);
    if (lmsg >= 5 && strcmp(msg + lmsg - 5, "<eof>") == 0) return 1;
  }
  return 0;
}

/* Compiles the chunk at stack index 1. Expressions compile as "return <chunk>;" and so print
 * their values; "=expr" always does. Leaves the function or the error message on top. */
static int compile(lua_State *L) {
  const char *chunk = lua_tostring(L, 1);
  int forced = chunk[0] == '=';
  /* lua.c appends ';' to the guess; a forced expression may be incomplete, so not there. */
  const char *ret =
      forced ? lua_pushfstring(L, "return %s", chunk + 1) : lua_pushfstring(L, "return %s;", chunk);
  int status = luaL_loadbuffer(L, ret, strlen(ret), "=stdin");
  lua_remove(L, -2);
  if (status == LUA_OK || forced) return status;
  lua_pop(L, 1);
  return luaL_loadbuffer(L, chunk, lua_rawlen(L, 1), "=stdin");
}

/* Reads a complete chunk and compiles it. Returns a load status with the function or message
 * on top, READ_EOF or READ_INTERRUPTED (stack emptied). */
static int load_chunk(repl_state *r, int *status) {
  lua_State *L = r->L;
  lua_settop(L, 0);
  int rc = read_line(r, 1);
  if (rc != READ_LINE) return rc;
  for (;;) {
    *status = compile(L);
    if (!incomplete(L, *status)) break;
    lua_pop(L, 1);
    rc = read_line(r, 0);
    if (rc == READ_INTERRUPTED) {
      lua_settop(L, 0);
      return rc;
    }
    if (rc == READ_EOF) {
      *status = compile(L); /* reports the incomplete chunk, as lua.c does */
      break;
    }
    lua_pushliteral(L, "\n");
    lua_insert(L, -2);
    lua_concat(L, 3);
  }
#ifdef NC_HAVE_LIBEDIT
  if (r->el) history_add(r, lua_tostring(L, 1));
#endif
  lua_remove(L, 1);
  return READ_LINE;
}

static void print_results(lua_State *L, int n) {
  if (n <= 0) return;
  luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
  lua_getglobal(L, "print");
  lua_insert(L, -(n + 1));
  if (lua_pcall(L, n, 0, 0) != LUA_OK)
    message(lua_pushfstring(L, "error calling 'print' (%s)", lua_tostring(L, -1)));
}

/* Device work is queued asynchronously; waiting for it makes the printed time the real cost
 * of the statement. Only once netcl is loaded: syncing is then cheap for idle devices. */
static int sync_devices(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  int loaded = lua_getfield(L, -1, "netcl.core") != LUA_TNIL;
  lua_pop(L, 2);
  if (!loaded) return LUA_OK;
  for (int i = 0; i < nc_device_count(); i++)
    if (nc_device_sync(nc_device_get(i)) != NC_OK) {
      lua_pushfstring(L, "netcl.sync: %s", nc_last_error());
      return LUA_ERRRUN;
    }
  return LUA_OK;
}

static void repl(lua_State *L) {
  repl_state r;
  memset(&r, 0, sizeof r);
  r.L = L;
  int tty = isatty(STDIN_FILENO);
  r.use_prompts = tty;
#ifdef NC_HAVE_LIBEDIT
  if (tty && isatty(STDOUT_FILENO)) editline_open(&r);
#endif
  if (tty) {
    printf("netcl-lua %s (%s)  Tab completes, Ctrl-C interrupts, Ctrl-D exits\n", nc_version(), LUA_RELEASE);
    fflush(stdout);
  }
  struct sigaction old;
  set_sigint(on_sigint_reading, &old);
  for (;;) {
    int status = LUA_OK;
    int rc = load_chunk(&r, &status);
    if (rc == READ_EOF) break;
    if (rc == READ_INTERRUPTED) continue;
    if (status == LUA_OK) {
      double t0 = now();
      stopped_running = 0;
      status = docall(L, 0, LUA_MULTRET);
      if (status == LUA_OK) status = sync_devices(L);
      double dt = now() - t0;
      if (status == LUA_OK) {
        print_results(L, lua_gettop(L));
      } else {
        if (stopped_running && r.use_prompts) fputs("\n", stdout); /* past the echoed ^C */
        fflush(stdout);
        report(L, status);
      }
      if (dt > REPORT_TIME_S) printf("(%.2f s)\n", dt);
    } else {
      report(L, status);
    }
    fflush(stdout);
  }
  sigaction(SIGINT, &old, NULL);
  lua_settop(L, 0);
  fputs("\n", stdout);
  fflush(stdout);
#ifdef NC_HAVE_LIBEDIT
  if (r.el) editline_close(&r);
#endif
  free(r.line);
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
    fprintf(stderr, "%s: '%s' needs an argument\n", progname, a);
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
      fprintf(stderr, "%s: unrecognized option '%s'\n", progname, a);
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
      fprintf(stderr, "%s: --device %s: %s\n", progname, o->device, nc_last_error());
      return LUA_ERRRUN;
    }
    /* The state's default device comes from NETCL_DEVICE when the program has not set one. */
    setenv("NETCL_DEVICE", nc_device_info_of(dev)->spec, 1);
  }
  if (o->list_devices) {
    if (nc_init() != NC_OK) {
      message(nc_last_error());
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
    repl(L);
  } else if (!o->script && !ran_e && !o->version && !o->warmup) {
    if (isatty(STDIN_FILENO))
      repl(L);
    else
      return dochunk(L, luaL_loadfile(L, NULL));
  }
  return LUA_OK;
}

int main(int argc, char **argv) {
  if (argv[0] && argv[0][0]) progname = argv[0];
  options o;
  memset(&o, 0, sizeof o);
  o.actions = calloc((size_t)argc + 1, sizeof *o.actions);
  if (!o.actions) {
    message("out of memory");
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
    message("cannot create a Lua state: not enough memory");
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

/* netcl-lua: the REPL. Reads chunks line by line (through libedit when present: line editing,
 * persistent history, Tab completion), runs them with cli_docall, prints the values of
 * expressions and the wall time of slow statements. The multi-line rule and auto-print follow
 * lua.c (Lua 5.4). */
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <limits.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>
#include "cli.h"
#include "netcl/netcl.h"
#ifdef NC_HAVE_LIBEDIT
#include <histedit.h>
#endif

/* Statements slower than this get their wall time printed. */
#define REPORT_TIME_S 0.1

/* ---- Ctrl-C while reading -----------------------------------------------------------------
 * While the REPL reads a line, SIGINT sets a flag and, for libedit, wakes the reader through a
 * pipe (a signal that lands just before the read blocks would otherwise be lost); the REPL then
 * drops the pending input. While a statement runs, cli_docall handles SIGINT instead. */
static volatile sig_atomic_t got_sigint;
static int sigint_pipe[2] = {-1, -1};

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

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

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

static unsigned char el_complete(EditLine *el, int ch) {
  (void)ch;
  repl_state *r;
  el_get(el, EL_CLIENTDATA, &r);
  return cli_complete(el, r->L);
}

static void history_add(repl_state *r, const char *chunk) {
  HistEvent ev;
  const char *p = chunk;
  while (*p == ' ' || *p == '\t' || *p == '\n') p++;
  if (!*p) return;
  history(r->hist, &ev, H_ENTER, chunk);
  /* Saved after every entry so a killed session keeps its history. */
  if (r->history_path && history(r->hist, &ev, H_SAVE, r->history_path) < 0 && !r->history_warned) {
    fprintf(stderr, "%s: cannot write the history file %s: %s\n", cli_progname, r->history_path,
            strerror(errno));
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
      fprintf(stderr, "%s: %s is not a history file; this session's history will not be saved\n",
              cli_progname, r->history_path);
      free(r->history_path);
      r->history_path = NULL;
    }
  }
  r->el = el_init(cli_progname, stdin, stdout, stderr);
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
    cli_message(lua_pushfstring(L, "error calling 'print' (%s)", lua_tostring(L, -1)));
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

void cli_repl(lua_State *L) {
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
  cli_set_sigint(on_sigint_reading, &old);
  for (;;) {
    int status = LUA_OK;
    int rc = load_chunk(&r, &status);
    if (rc == READ_EOF) break;
    if (rc == READ_INTERRUPTED) continue;
    if (status == LUA_OK) {
      double t0 = now();
      cli_stopped_running = 0;
      status = cli_docall(L, 0, LUA_MULTRET);
      if (status == LUA_OK) status = sync_devices(L);
      double dt = now() - t0;
      if (status == LUA_OK) {
        print_results(L, lua_gettop(L));
      } else {
        if (cli_stopped_running && r.use_prompts) fputs("\n", stdout); /* past the echoed ^C */
        fflush(stdout);
        cli_report(L, status);
      }
      if (dt > REPORT_TIME_S) printf("(%.2f s)\n", dt);
    } else {
      cli_report(L, status);
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

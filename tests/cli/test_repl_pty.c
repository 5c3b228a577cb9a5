/* Drives the netcl-lua REPL through a pseudo-terminal, as a person at a terminal would:
 * line editing (libedit), multi-line input, auto-print, errors, Ctrl-C, tab completion,
 * timing and the history file.
 *   test_repl_pty PATH/TO/netcl-lua */
#include <errno.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#ifndef NC_HAVE_LIBEDIT
int main(void) {
  puts("netcl-lua was built without libedit (Debian: libedit-dev): no line editing to test");
  return 77;
}
#else

/* Generous: sanitizer builds start slowly. */
#define TIMEOUT_S 30.0

typedef struct {
  int fd;
  pid_t pid;
  char *out;            /* everything the terminal showed */
  size_t len, cap, pos; /* pos: end of the last match */
} term;

static const char *exe;
static char tmpdir[] = "/tmp/netcl-repl-XXXXXX";
static term *current;

static void dump(const term *t) {
  fprintf(stderr, "---- terminal transcript (%zu bytes) ----\n", t->len);
  for (size_t i = 0; i < t->len; i++) {
    unsigned char c = (unsigned char)t->out[i];
    if (c == '\n' || (c >= 32 && c < 127))
      fputc(c, stderr);
    else if (c != '\r')
      fprintf(stderr, "\\x%02x", c);
  }
  fprintf(stderr, "\n---- end ----\n");
}

static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("FAIL: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  if (current) {
    dump(current);
    kill(current->pid, SIGKILL);
  }
  exit(1);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Reads what the child wrote within `wait_s`; returns 0 at EOF (the child closed the pty). */
static int pump(term *t, double wait_s) {
  struct pollfd p = {t->fd, POLLIN, 0};
  int r = poll(&p, 1, (int)(wait_s * 1000));
  if (r <= 0) return 1;
  if (t->len + 4096 + 1 > t->cap) {
    t->cap = (t->cap + 4096) * 2;
    t->out = realloc(t->out, t->cap);
    if (!t->out) fail("out of memory");
  }
  ssize_t n = read(t->fd, t->out + t->len, 4096);
  if (n <= 0) return 0; /* EIO once the child is gone */
  t->len += (size_t)n;
  t->out[t->len] = 0;
  return 1;
}

static void expect(term *t, const char *s) {
  double end = now() + TIMEOUT_S;
  for (;;) {
    if (t->out) {
      char *m = strstr(t->out + t->pos, s);
      if (m) {
        t->pos = (size_t)(m - t->out) + strlen(s);
        return;
      }
    }
    if (now() > end) fail("timed out waiting for \"%s\"", s);
    if (!pump(t, 0.1)) {
      if (t->out && strstr(t->out + t->pos, s)) continue;
      fail("the REPL exited while we waited for \"%s\"", s);
    }
  }
}

/* Fails if s shows up in what the terminal showed since the last match. */
static void expect_absent(term *t, const char *s, double wait_s) {
  double end = now() + wait_s;
  while (now() < end && pump(t, 0.05)) {
  }
  if (t->out && strstr(t->out + t->pos, s)) fail("unexpected \"%s\"", s);
}

static void send(term *t, const char *s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = write(t->fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail("write to the pty: %s", strerror(errno));
    s += w;
    n -= (size_t)w;
  }
}

/* Types s once the line editor is reading: libedit prints its prompt before it switches the
 * terminal to raw mode, and text typed in between is handled by the terminal's cooked mode
 * (echoed twice; a ^C or ^D there acts as a terminal signal or EOF, not as an edit key). */
static void type(term *t, const char *s) {
  double end = now() + TIMEOUT_S;
  for (;;) {
    struct termios tio;
    if (tcgetattr(t->fd, &tio) != 0) fail("tcgetattr: %s", strerror(errno));
    if (!(tio.c_lflag & ICANON)) break;
    if (now() > end) fail("the line editor never put the terminal in raw mode");
    pump(t, 0.01);
  }
  send(t, s);
}

/* Starts netcl-lua on a new pty; history goes to `history` (NULL: leave NETCL_HISTORY unset,
 * so $HOME decides), HOME is `home`. */
static void spawn(term *t, const char *history, const char *home, const char *extra_arg) {
  memset(t, 0, sizeof *t);
  struct winsize ws = {24, 80, 0, 0};
  t->pid = forkpty(&t->fd, NULL, NULL, &ws);
  if (t->pid < 0) fail("forkpty: %s", strerror(errno));
  if (t->pid == 0) {
    if (history)
      setenv("NETCL_HISTORY", history, 1);
    else
      unsetenv("NETCL_HISTORY");
    setenv("HOME", home, 1);
    setenv("TERM", "xterm", 1);
    setenv("NETCL_DEVICE", "cpu", 1);
    unsetenv("LUA_INIT");
    if (extra_arg)
      execl(exe, exe, "-e", extra_arg, "-i", (char *)NULL);
    else
      execl(exe, exe, (char *)NULL);
    _exit(127);
  }
  current = t;
}

static void finish(term *t) {
  type(t, "\x04"); /* Ctrl-D at an empty prompt ends the session */
  double end = now() + TIMEOUT_S;
  int status;
  for (;;) {
    pid_t w = waitpid(t->pid, &status, WNOHANG);
    if (w == t->pid) break;
    if (now() > end) fail("the REPL did not exit on Ctrl-D");
    pump(t, 0.05);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail("the REPL exited with status 0x%x", status);
  close(t->fd);
  free(t->out);
  current = NULL;
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

/* libedit writes one entry per line, with blanks and control characters as \ooo (strvis). */
static int history_has(const char *path, const char *entry) {
  char *text = read_file(path);
  if (!text) fail("no history file at %s", path);
  if (strncmp(text, "_HiStOrY_V2_\n", 13) != 0) fail("%s does not start with libedit's header", path);
  for (char *line = strtok(text + 13, "\n"); line; line = strtok(NULL, "\n")) {
    char decoded[4096];
    size_t n = 0;
    for (const char *p = line; *p && n + 1 < sizeof decoded; p++) {
      if (p[0] == '\\' && p[1] >= '0' && p[1] <= '7' && p[2] >= '0' && p[2] <= '7' && p[3] >= '0' &&
          p[3] <= '7') {
        decoded[n++] = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
        p += 3;
      } else if (p[0] == '\\' && p[1] == '\\') {
        decoded[n++] = '\\';
        p++;
      } else {
        decoded[n++] = *p;
      }
    }
    decoded[n] = 0;
    if (strcmp(decoded, entry) == 0) return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s PATH/TO/netcl-lua\n", argv[0]);
    return 2;
  }
  exe = argv[1];
  if (!mkdtemp(tmpdir)) fail("mkdtemp: %s", strerror(errno));
  char hist[64], home[64], home_hist[128];
  snprintf(hist, sizeof hist, "%s/history", tmpdir);
  snprintf(home, sizeof home, "%s/home", tmpdir);
  snprintf(home_hist, sizeof home_hist, "%s/.netcl_history", home);
  if (mkdir(home, 0700) != 0) fail("mkdir %s: %s", home, strerror(errno));

  term t;
  /* P0/R0 remember the original print and require, to show the REPL leaves them alone. */
  spawn(&t, hist, home, "P0, R0 = print, require");
  expect(&t, "> ");

  /* a multi-line function definition */
  type(&t, "function sq(x)\r");
  expect(&t, ">> ");
  type(&t, "  return x * x\r");
  expect(&t, ">> ");
  type(&t, "end\r");
  expect(&t, "> ");

  /* auto-print of bare expressions and of =expr */
  type(&t, "sq(12)\r");
  expect(&t, "144");
  expect(&t, "> ");
  type(&t, "='multi' .. 'line'\r");
  expect(&t, "multiline");
  expect(&t, "> ");
  type(&t, "=(print == P0 and require == R0) and 'untou' .. 'ched'\r");
  expect(&t, "untouched");
  expect(&t, "> ");

  /* an error prints a traceback and the session goes on */
  type(&t, "error('bo' .. 'om')\r");
  expect(&t, "boom");
  expect(&t, "stack traceback:");
  expect(&t, "> ");
  type(&t, "=sq(5) + 1\r");
  expect(&t, "26");
  expect(&t, "> ");

  /* Ctrl-C stops a running loop and returns to the prompt */
  type(&t, "print('spin' .. 'ning') while true do end\r");
  expect(&t, "spinning");
  expect_absent(&t, "interrupted", 0.2);
  send(&t, "\x03"); /* the statement runs: the terminal is in cooked mode, ^C is SIGINT */
  expect(&t, "interrupted!");
  expect(&t, "> ");
  type(&t, "=sq(9)\r");
  expect(&t, "81");
  expect(&t, "> ");

  /* Ctrl-C at the prompt drops the pending input */
  type(&t, "garbage garbage");
  expect(&t, "garbage garbage");
  type(&t, "\x03");
  expect(&t, "> ");
  type(&t, "='after' .. 'ctrlc'\r");
  expect(&t, "afterctrlc");
  expect(&t, "> ");
  /* ...also when it comes as the prompt appears, before the editor reads */
  send(&t, "\x03");
  expect(&t, "> ");
  type(&t, "='still' .. 'alive'\r");
  expect(&t, "stillalive");
  expect(&t, "> ");

  /* statements over 0.1 s show their time */
  type(&t, "local t0 = os.clock() while os.clock() - t0 < 0.3 do end\r");
  expect(&t, " s)");
  expect(&t, "> ");

  /* tab completion: a unique field, a listing, a method found through two __index tables,
   * and a method of a userdata through its metatable's methods table */
  type(&t, "=string.reve\t");
  expect(&t, "rse");
  type(&t, "('abc')\r");
  expect(&t, "cba");
  expect(&t, "> ");
  type(&t, "=math.m\t");
  expect(&t, "mininteger");
  type(&t, "ax(3, 8) * 11\r");
  expect(&t, "88");
  expect(&t, "> ");
  type(&t,
       "Base = {greet_world = function() return 'hel' .. 'lo' end}; obj = setmetatable({}, {__index = "
       "setmetatable({}, {__index = Base})})\r");
  expect(&t, "> ");
  type(&t, "=obj:greet_w\t");
  expect(&t, "orld");
  type(&t, "()\r");
  expect(&t, "hello");
  expect(&t, "> ");
  type(&t, "nc = require 'netcl'; t = nc.zeros({2, 3})\r");
  expect(&t, "> ");
  type(&t, "=t:resh\t");
  expect(&t, "ape");
  type(&t, "({6}):numel() * 7\r");
  expect(&t, "42");
  expect(&t, "> ");
  type(&t, "=rawget(_G, 'sq') and 'same' .. 'session' or 'new' .. 'session'\r");
  expect(&t, "samesession");
  expect(&t, "> ");
  finish(&t);

  if (!history_has(hist, "function sq(x)\n  return x * x\nend"))
    fail("the multi-line definition is not one history entry");
  if (!history_has(hist, "sq(12)")) fail("'sq(12)' is not in the history");
  if (history_has(hist, "garbage garbage")) fail("interrupted input went into the history");

  /* A new session reads the history back: Up recalls the last entry. */
  spawn(&t, hist, home, NULL);
  expect(&t, "> ");
  type(&t, "\x1b[A\r");
  expect(&t, "newsession");
  expect(&t, "> ");
  finish(&t);

  /* Without NETCL_HISTORY the file is $HOME/.netcl_history. */
  spawn(&t, NULL, home, NULL);
  expect(&t, "> ");
  type(&t, "='home' .. 'history'\r");
  expect(&t, "homehistory");
  expect(&t, "> ");
  /* _PROMPT and _PROMPT2, as lua.c reads them */
  type(&t, "_PROMPT, _PROMPT2 = 'nc' .. '1> ', 'nc' .. '2> '\r");
  expect(&t, "nc1> ");
  type(&t, "do\r");
  expect(&t, "nc2> ");
  type(&t, "end\r");
  expect(&t, "nc1> ");
  finish(&t);
  if (!history_has(home_hist, "='home' .. 'history'")) fail("no entry in %s", home_hist);

  unlink(hist);
  unlink(home_hist);
  rmdir(home);
  rmdir(tmpdir);
  puts("ok");
  return 0;
}
#endif

/* Private to netcl-lua: what its command line (main.c), running Lua code (run.c), REPL (repl.c)
 * and Tab completion (complete.c) share. Not installed. */
#ifndef NETCL_CLI_H
#define NETCL_CLI_H

#include <lua.h>
#include <signal.h>

/* The program's name for messages (argv[0]). */
extern const char *cli_progname;

/* Prints "progname: msg" on stderr. */
void cli_message(const char *msg);

/* Unless status is LUA_OK, prints the error message on top of the stack and pops it. Returns
 * status. */
int cli_report(lua_State *L, int status);

/* lua_pcall with a traceback handler, during which Ctrl-C raises "interrupted!" at the next
 * Lua instruction (and sets cli_stopped_running). */
int cli_docall(lua_State *L, int narg, int nres);
extern volatile sig_atomic_t cli_stopped_running;

/* Installs handler for SIGINT (no flags, nothing blocked); the previous action goes to *old. */
void cli_set_sigint(void (*handler)(int), struct sigaction *old);

/* The read-eval-print loop; returns at the end of input (Ctrl-D). */
void cli_repl(lua_State *L);

#ifdef NC_HAVE_LIBEDIT
#include <histedit.h>

/* libedit's Tab handler on L's globals: completes the word before the cursor ("name",
 * "a.b.name" or "a.b:method") to the candidates' longest common prefix, or lists them all
 * below the line when there is nothing to add; Tab in a line's leading blanks indents.
 * Returns a CC_* code. */
unsigned char cli_complete(EditLine *el, lua_State *L);
#endif

#endif

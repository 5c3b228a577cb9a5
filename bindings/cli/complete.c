/* netcl-lua: Tab completion in the REPL (libedit builds only). Completes globals and keywords,
 * a.b.c fields and obj:method names, following __index tables through metatables and, for
 * userdata whose __index is a function (Tensor, Device), the metatable's `methods` table. */
#include <histedit.h>
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include "cli.h"

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

unsigned char cli_complete(EditLine *el, lua_State *L) {
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

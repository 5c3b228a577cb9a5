/* netcl.core.text: the Tokenizer userdata over runtime/text's byte-level BPE, and its
 * constructors (train, train_file, load, from_tiktoken, from_gpt2). lua/netcl/text wraps these
 * into BPETokenizer and ChatFormat. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "l_common.h"

#define NC_TOKENIZER_MT "netcl.Tokenizer"
#define NC_TEXT_GUARD_MT "netcl.text.Guard"

typedef struct {
  nc_bpe *tok; /* NULL once freed */
} tok_box;

/* A C allocation owned by a userdata until handed on, so a Lua error in between (a bad
 * argument, out of memory) does not leak it. */
typedef struct {
  void *p;
  void (*release)(void *);
} guard;

static int guard_gc(lua_State *L) {
  guard *g = lua_touserdata(L, 1);
  if (g && g->p) {
    g->release(g->p);
    g->p = NULL;
  }
  return 0;
}

static guard *push_guard(lua_State *L, void (*release)(void *)) {
  guard *g = lua_newuserdatauv(L, sizeof *g, 0);
  g->p = NULL;
  g->release = release;
  luaL_setmetatable(L, NC_TEXT_GUARD_MT);
  return g;
}

static void release_free(void *p) { free(p); }
static void release_trainer(void *p) { nc_bpe_trainer_free(p); }

/* Releases the guarded allocation now (the guard stays on the stack, empty). */
static void guard_release(guard *g) {
  if (g->p) g->release(g->p);
  g->p = NULL;
}

/* ---- argument helpers ------------------------------------------------------------------------ */

static nc_bpe *check_tok(lua_State *L, const char *fname) {
  tok_box *b = luaL_testudata(L, 1, NC_TOKENIZER_MT);
  if (!b) {
    nc_lua_argerror(L, fname, 1, "expected Tokenizer, got %s", luaL_typename(L, 1));
    return NULL;
  }
  if (!b->tok) nc_lua_argerror(L, fname, 1, "the tokenizer was freed");
  return b->tok;
}

static tok_box *push_box(lua_State *L) {
  tok_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->tok = NULL;
  luaL_setmetatable(L, NC_TOKENIZER_MT);
  return b;
}

/* A string without NUL bytes (C-level names and paths). */
static const char *check_cstring(lua_State *L, int idx, const char *fname, int arg, const char *what) {
  size_t len;
  if (lua_type(L, idx) != LUA_TSTRING) {
    nc_lua_argerror(L, fname, arg, "%s must be a string, got %s", what, luaL_typename(L, idx));
    return NULL;
  }
  const char *s = lua_tolstring(L, idx, &len);
  if (strlen(s) != len) nc_lua_argerror(L, fname, arg, "%s contains a NUL byte", what);
  return s;
}

/* Options tables are checked with nc_lua_checkopts first; opts is what it returned (0: none). */

/* opts[key] as a string (NULL when absent). */
static const char *opt_string(lua_State *L, int opts, const char *key, const char *fname) {
  if (!opts) return NULL;
  lua_getfield(L, opts, key);
  const char *s = NULL;
  if (!lua_isnil(L, -1)) {
    char what[64];
    snprintf(what, sizeof what, "option '%s'", key);
    s = check_cstring(L, -1, fname, opts, what);
  }
  lua_pop(L, 1); /* the string stays alive in opts */
  return s;
}

static lua_Integer opt_integer(lua_State *L, int opts, const char *key, lua_Integer def, const char *fname) {
  if (!opts) return def;
  lua_getfield(L, opts, key);
  lua_Integer v = def;
  if (!lua_isnil(L, -1)) {
    int ok;
    v = lua_tointegerx(L, -1, &ok);
    if (!ok)
      nc_lua_argerror(L, fname, opts, "option '%s' must be an integer, got %s", key, luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  return v;
}

/* opts[key] as a boolean (def when absent). */
static bool opt_boolean(lua_State *L, int opts, const char *key, bool def, const char *fname) {
  if (!opts) return def;
  bool v = def;
  if (lua_getfield(L, opts, key) != LUA_TNIL) {
    if (!lua_isboolean(L, -1))
      nc_lua_argerror(L, fname, opts, "option '%s' must be a boolean, got %s", key, luaL_typename(L, -1));
    v = lua_toboolean(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

/* ---- constructors --------------------------------------------------------------------------- */

/* opts.special_tokens as an array of names. The list and the array of pointers into it are left
 * on the stack, which keeps both alive for the rest of the call. */
static const char **special_names(lua_State *L, int opts, size_t *n, const char *fname) {
  *n = 0;
  if (!opts) return NULL;
  lua_getfield(L, opts, "special_tokens");
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return NULL;
  }
  if (!lua_istable(L, -1))
    nc_lua_argerror(L, fname, opts, "option 'special_tokens' must be an array of strings, got %s",
                    luaL_typename(L, -1));
  int t = lua_gettop(L);
  size_t count = (size_t)luaL_len(L, t);
  const char **names = lua_newuserdatauv(L, (count ? count : 1) * sizeof *names, 0);
  for (size_t i = 0; i < count; i++) {
    lua_geti(L, t, (lua_Integer)i + 1);
    char what[64];
    snprintf(what, sizeof what, "special_tokens[%zu]", i + 1);
    names[i] = check_cstring(L, -1, fname, opts, what);
    lua_pop(L, 1);
  }
  *n = count;
  return names;
}

static void train_common(lua_State *L, int is_file, const char *fname) {
  int opts = nc_lua_checkopts(L, 2, fname, "vocab_size min_frequency pattern special_tokens");
  lua_Integer vocab = opt_integer(L, opts, "vocab_size", -1, fname);
  if (vocab < 0) nc_lua_argerror(L, fname, 2, "option 'vocab_size' (a non-negative integer) is required");
  lua_Integer min_freq = opt_integer(L, opts, "min_frequency", 1, fname);
  if (min_freq < 1) nc_lua_argerror(L, fname, 2, "option 'min_frequency' must be at least 1");
  const char *pattern = opt_string(L, opts, "pattern", fname);
  size_t n_special;
  const char **specials = special_names(L, opts, &n_special, fname);
  guard *g = push_guard(L, release_trainer);
  nc_bpe_trainer *tr;
  NC_LUA_CHECK(L, fname, nc_bpe_trainer_new(pattern ? pattern : "cl100k", specials, n_special, &tr));
  g->p = tr;
  if (is_file && lua_type(L, 1) == LUA_TSTRING) {
    NC_LUA_CHECK(L, fname, nc_bpe_trainer_feed_file(tr, check_cstring(L, 1, fname, 1, "the path")));
  } else {
    if (!lua_istable(L, 1))
      nc_lua_argerror(L, fname, 1, "expected %s, got %s",
                      is_file ? "a path or an array of paths" : "an array of strings", luaL_typename(L, 1));
    lua_Integer n = luaL_len(L, 1);
    for (lua_Integer i = 1; i <= n; i++) {
      lua_geti(L, 1, i);
      if (lua_type(L, -1) != LUA_TSTRING)
        nc_lua_argerror(L, fname, 1, "element %lld is a %s, expected a string", (long long)i,
                        luaL_typename(L, -1));
      size_t len;
      const char *s = lua_tolstring(L, -1, &len);
      if (is_file)
        NC_LUA_CHECK(L, fname, nc_bpe_trainer_feed_file(tr, check_cstring(L, -1, fname, 1, "the path")));
      else
        NC_LUA_CHECK(L, fname, nc_bpe_trainer_feed(tr, s, len));
      lua_pop(L, 1);
    }
  }
  tok_box *b = push_box(L);
  NC_LUA_CHECK(L, fname, nc_bpe_trainer_train(tr, (size_t)vocab, (uint64_t)min_freq, &b->tok));
  guard_release(g);
}

/* text.train(texts, {vocab_size=, pattern=, special_tokens=, min_frequency=}) */
static int l_train(lua_State *L) {
  train_common(L, 0, "netcl.text.train");
  return 1;
}

/* text.train_file(path_or_paths, opts) */
static int l_train_file(lua_State *L) {
  train_common(L, 1, "netcl.text.train_file");
  return 1;
}

static int l_load(lua_State *L) {
  const char *fname = "netcl.text.load";
  const char *path = check_cstring(L, 1, fname, 1, "the path");
  tok_box *b = push_box(L);
  NC_LUA_CHECK(L, fname, nc_bpe_load(path, &b->tok));
  return 1;
}

/* text.from_tiktoken(path, {pattern=, special_tokens={[name]=id, ...}}) */
static int l_from_tiktoken(lua_State *L) {
  const char *fname = "netcl.text.from_tiktoken";
  const char *path = check_cstring(L, 1, fname, 1, "the path");
  int opts = nc_lua_checkopts(L, 2, fname, "pattern special_tokens");
  const char *pattern = opt_string(L, opts, "pattern", fname);
  nc_bpe_special *sp = NULL;
  size_t n = 0;
  if (opts) {
    lua_getfield(L, opts, "special_tokens");
    if (!lua_isnil(L, -1)) {
      int t = lua_gettop(L);
      if (!lua_istable(L, t))
        nc_lua_argerror(L, fname, 2, "option 'special_tokens' must be a table {[name] = id}, got %s",
                        luaL_typename(L, t));
      size_t count = 0;
      for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1)) count++;
      sp = lua_newuserdatauv(L, (count ? count : 1) * sizeof *sp, 0);
      for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1)) {
        if (lua_type(L, -2) != LUA_TSTRING)
          nc_lua_argerror(L, fname, 2, "special_tokens keys must be names (strings), got a %s",
                          luaL_typename(L, -2));
        const char *name = check_cstring(L, -2, fname, 2, "a special token name");
        int ok;
        lua_Integer id = lua_tointegerx(L, -1, &ok);
        if (!ok || id < 0 || id > NC_BPE_MAX_ID)
          nc_lua_argerror(L, fname, 2, "special token '%s': the id must be an integer in 0..%u", name,
                          NC_BPE_MAX_ID);
        sp[n].text = name;
        sp[n].id = (uint32_t)id;
        n++;
      }
    }
  }
  tok_box *b = push_box(L);
  NC_LUA_CHECK(L, fname, nc_bpe_from_tiktoken(path, pattern, sp, n, &b->tok));
  return 1;
}

static int l_from_gpt2(lua_State *L) {
  const char *fname = "netcl.text.from_gpt2";
  const char *enc = check_cstring(L, 1, fname, 1, "the encoder.json path");
  const char *voc = check_cstring(L, 2, fname, 2, "the vocab.bpe path");
  tok_box *b = push_box(L);
  NC_LUA_CHECK(L, fname, nc_bpe_from_gpt2(enc, voc, &b->tok));
  return 1;
}

/* ---- methods -------------------------------------------------------------------------------- */

/* encode's options: strict, as_tensor (returned), and allowed_special: "all", "none", an array
 * of names, or a set {[name] = true}. What it pushes (the list and an array of pointers into it)
 * stays on the stack for the call. */
static bool encode_opts(lua_State *L, int idx, nc_bpe_encode_opts *o, const char *fname) {
  memset(o, 0, sizeof *o);
  idx = nc_lua_checkopts(L, idx, fname, "allowed_special strict as_tensor");
  if (!idx) return false;
  o->lenient = !opt_boolean(L, idx, "strict", true, fname);
  bool as_tensor = opt_boolean(L, idx, "as_tensor", false, fname);
  lua_getfield(L, idx, "allowed_special");
  int t = lua_gettop(L);
  if (lua_type(L, t) == LUA_TSTRING) {
    const char *s = lua_tostring(L, t);
    if (!strcmp(s, "all"))
      o->allow_all = 1;
    else if (strcmp(s, "none") != 0)
      nc_lua_argerror(L, fname, idx,
                      "option 'allowed_special' must be \"all\", \"none\" or a table, got \"%s\"", s);
  } else if (lua_istable(L, t)) {
    size_t count = 0;
    for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1)) count++;
    const char **names = lua_newuserdatauv(L, (count ? count : 1) * sizeof *names, 0);
    size_t n = 0;
    for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1)) {
      /* array entries name tokens by value; set entries by key (with a true value) */
      int by_key = lua_type(L, -2) == LUA_TSTRING;
      if (by_key && !lua_toboolean(L, -1)) continue;
      int at = by_key ? -2 : -1;
      if (lua_type(L, at) != LUA_TSTRING)
        nc_lua_argerror(L, fname, idx, "option 'allowed_special' holds a %s, expected special token names",
                        luaL_typename(L, at));
      names[n++] = check_cstring(L, at, fname, idx, "a special token name");
    }
    o->allowed = names;
    o->n_allowed = n;
  } else if (!lua_isnil(L, t)) {
    nc_lua_argerror(L, fname, idx, "option 'allowed_special' must be \"all\", \"none\" or a table, got %s",
                    luaL_typename(L, t));
  }
  return as_tensor;
}

/* tok:encode(s, {allowed_special=, strict=true, as_tensor=false}) -> array of 0-based ids, or an
 * int64 Tensor [n] on the default device with as_tensor */
static int m_encode(lua_State *L) {
  const char *fname = "netcl.text.encode";
  nc_bpe *tok = check_tok(L, fname);
  size_t len;
  if (lua_type(L, 2) != LUA_TSTRING)
    return nc_lua_argerror(L, fname, 2, "expected a string, got %s", luaL_typename(L, 2));
  const char *s = lua_tolstring(L, 2, &len);
  nc_bpe_encode_opts o;
  bool as_tensor = encode_opts(L, 3, &o, fname);
  guard *g = push_guard(L, release_free);
  uint32_t *ids;
  size_t n;
  NC_LUA_CHECK(L, fname, nc_bpe_encode(tok, s, len, &o, &ids, &n));
  g->p = ids;
  if (as_tensor) {
    int64_t shape = (int64_t)n;
    int64_t *wide = lua_newuserdatauv(L, (n ? n : 1) * sizeof *wide, 0);
    for (size_t i = 0; i < n; i++) wide[i] = ids[i];
    guard_release(g);
    nc_tensor *t;
    NC_LUA_CHECK(L, fname, nc_tensor_empty(nc_lua_default_device(L), NC_INT64, 1, &shape, 0, &t));
    nc_lua_pushtensor_new(L, t);
    NC_LUA_CHECK(L, fname, nc_tensor_write_host(t, wide, n * sizeof *wide));
    return 1;
  }
  if (n > INT32_MAX) return nc_lua_errorf(L, "%s: %zu ids do not fit in a Lua table", fname, n);
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    lua_pushinteger(L, ids[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  guard_release(g);
  return 1;
}

/* tok:decode(ids) -> string */
static int m_decode(lua_State *L) {
  const char *fname = "netcl.text.decode";
  nc_bpe *tok = check_tok(L, fname);
  if (!lua_istable(L, 2))
    return nc_lua_argerror(L, fname, 2, "expected an array of ids, got %s", luaL_typename(L, 2));
  lua_Integer n = luaL_len(L, 2);
  uint32_t *ids = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof *ids, 0);
  for (lua_Integer i = 0; i < n; i++) {
    lua_geti(L, 2, i + 1);
    int ok;
    lua_Integer v = lua_tointegerx(L, -1, &ok);
    if (!ok || v < 0 || v > UINT32_MAX)
      return nc_lua_argerror(L, fname, 2, "element %lld is not a token id (a non-negative integer)",
                             (long long)i + 1);
    ids[i] = (uint32_t)v;
    lua_pop(L, 1);
  }
  guard *g = push_guard(L, release_free);
  char *out;
  size_t len;
  NC_LUA_CHECK(L, fname, nc_bpe_decode(tok, ids, (size_t)n, &out, &len));
  g->p = out;
  lua_pushlstring(L, out, len);
  guard_release(g);
  return 1;
}

static int m_save(lua_State *L) {
  const char *fname = "netcl.text.save";
  nc_bpe *tok = check_tok(L, fname);
  NC_LUA_CHECK(L, fname, nc_bpe_save(tok, check_cstring(L, 2, fname, 2, "the path")));
  return 0;
}

static int m_vocab_size(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)nc_bpe_vocab_size(check_tok(L, "netcl.text.vocab_size")));
  return 1;
}

static int m_token_to_id(lua_State *L) {
  const char *fname = "netcl.text.token_to_id";
  nc_bpe *tok = check_tok(L, fname);
  size_t len;
  if (lua_type(L, 2) != LUA_TSTRING)
    return nc_lua_argerror(L, fname, 2, "expected a string, got %s", luaL_typename(L, 2));
  const char *s = lua_tolstring(L, 2, &len);
  uint32_t id;
  if (nc_bpe_token_to_id(tok, s, len, &id))
    lua_pushinteger(L, id);
  else
    lua_pushnil(L);
  return 1;
}

static int m_id_to_token(lua_State *L) {
  const char *fname = "netcl.text.id_to_token";
  nc_bpe *tok = check_tok(L, fname);
  int ok;
  lua_Integer id = lua_tointegerx(L, 2, &ok);
  if (!ok) return nc_lua_argerror(L, fname, 2, "expected an integer id, got %s", luaL_typename(L, 2));
  size_t len;
  const char *t = id >= 0 && id <= UINT32_MAX ? nc_bpe_id_to_token(tok, (uint32_t)id, &len) : NULL;
  if (t)
    lua_pushlstring(L, t, len);
  else
    lua_pushnil(L);
  return 1;
}

static int m_is_special(lua_State *L) {
  const char *fname = "netcl.text.is_special";
  nc_bpe *tok = check_tok(L, fname);
  lua_Integer id = nc_lua_checkinteger(L, 2, fname);
  lua_pushboolean(L, id >= 0 && id <= UINT32_MAX && nc_bpe_is_special(tok, (uint32_t)id));
  return 1;
}

/* tok:special_tokens() -> {[name] = id} */
static int m_special_tokens(lua_State *L) {
  nc_bpe *tok = check_tok(L, "netcl.text.special_tokens");
  size_t n = nc_bpe_special_count(tok);
  lua_createtable(L, 0, (int)n);
  for (size_t i = 0; i < n; i++) {
    nc_bpe_special sp = nc_bpe_special_at(tok, i);
    lua_pushinteger(L, sp.id);
    lua_setfield(L, -2, sp.text);
  }
  return 1;
}

static int m_pattern(lua_State *L) {
  lua_pushstring(L, nc_bpe_pattern(check_tok(L, "netcl.text.pattern")));
  return 1;
}

/* The Tokenizer box at argument 1, live or freed. */
static tok_box *check_box(lua_State *L, const char *fname) {
  tok_box *b = luaL_testudata(L, 1, NC_TOKENIZER_MT);
  if (!b) nc_lua_argerror(L, fname, 1, "expected Tokenizer, got %s", luaL_typename(L, 1));
  return b;
}

static int m_free(lua_State *L) {
  tok_box *b = check_box(L, "netcl.text.free");
  nc_bpe_free(b->tok);
  b->tok = NULL;
  return 0;
}

static int m_gc(lua_State *L) {
  tok_box *b = lua_touserdata(L, 1);
  if (b) {
    nc_bpe_free(b->tok);
    b->tok = NULL;
  }
  return 0;
}

static int m_tostring(lua_State *L) {
  tok_box *b = check_box(L, "netcl.text.__tostring");
  if (!b->tok)
    lua_pushliteral(L, "Tokenizer(<freed>)");
  else
    lua_pushfstring(L, "Tokenizer(vocab_size=%I, special=%I)", (lua_Integer)nc_bpe_vocab_size(b->tok),
                    (lua_Integer)nc_bpe_special_count(b->tok));
  return 1;
}

void nc_lua_add_text(lua_State *L) {
  static const luaL_Reg methods[] = {{"encode", m_encode},
                                     {"decode", m_decode},
                                     {"save", m_save},
                                     {"vocab_size", m_vocab_size},
                                     {"token_to_id", m_token_to_id},
                                     {"id_to_token", m_id_to_token},
                                     {"is_special", m_is_special},
                                     {"special_tokens", m_special_tokens},
                                     {"pattern", m_pattern},
                                     {"free", m_free},
                                     {NULL, NULL}};
  static const luaL_Reg meta[] = {
      {"__gc", m_gc}, {"__close", m_gc}, {"__tostring", m_tostring}, {NULL, NULL}};
  static const luaL_Reg funcs[] = {{"train", l_train},         {"train_file", l_train_file},
                                   {"load", l_load},           {"from_tiktoken", l_from_tiktoken},
                                   {"from_gpt2", l_from_gpt2}, {NULL, NULL}};
  luaL_newmetatable(L, NC_TEXT_GUARD_MT);
  lua_pushcfunction(L, guard_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  luaL_newmetatable(L, NC_TOKENIZER_MT);
  luaL_setfuncs(L, meta, 0);
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  lua_setfield(L, -2, "text");
}

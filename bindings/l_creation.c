/* Creation functions: nc.tensor, zeros, ones, full, empty, arange, linspace, eye, rand, randn,
 * from_bytes; and the generator seed. */
#include <math.h>
#include <string.h>
#include <time.h>
#include "l_common.h"

#define CHECK(fname, expr) NC_LUA_CHECK(L, fname, expr)

/* The options every creation function takes (nc.tensor adds shape, nc.from_bytes takes only
 * device: its dtype is an argument). */
#define CREATE_KEYS "dtype device"

/* Allocates the result as a Lua-owned tensor first, so an error later frees it. */
static nc_tensor *new_tensor(lua_State *L, nc_device *dev, nc_dtype dt, int ndim, const int64_t *shape,
                             const char *fname) {
  nc_tensor *t;
  CHECK(fname, nc_tensor_empty(dev, dt, ndim, shape, 0, &t));
  nc_lua_pushtensor_owned(L, t);
  nc_lua_account(L, nc_tensor_nbytes(t));
  return t;
}

static int filled(lua_State *L, const char *fname, int opts_at, int has_value, double value) {
  int64_t shape[NC_MAX_DIMS];
  int n = nc_lua_checkshape(L, 1, shape, fname);
  int opts = nc_lua_checkopts(L, opts_at, fname, CREATE_KEYS);
  nc_dtype dt = nc_lua_opt_dtype(L, opts, NC_FLOAT32, fname);
  nc_device *dev = nc_lua_opt_device(L, opts, fname);
  nc_tensor *t = new_tensor(L, dev, dt, n, shape, fname);
  if (has_value) CHECK(fname, nc_fill(t, value));
  return 1;
}

static int l_zeros(lua_State *L) { return filled(L, "netcl.zeros", 2, 1, 0.0); }
static int l_ones(lua_State *L) { return filled(L, "netcl.ones", 2, 1, 1.0); }
static int l_empty(lua_State *L) { return filled(L, "netcl.empty", 2, 0, 0.0); }
static int l_full(lua_State *L) {
  double v = lua_isboolean(L, 2) ? lua_toboolean(L, 2) : nc_lua_checknumber(L, 2, "netcl.full");
  return filled(L, "netcl.full", 3, 1, v);
}

static int random_tensor(lua_State *L, const char *fname, int normal) {
  int64_t shape[NC_MAX_DIMS];
  int n = nc_lua_checkshape(L, 1, shape, fname);
  int opts = nc_lua_checkopts(L, 2, fname, CREATE_KEYS);
  nc_dtype dt = nc_lua_opt_dtype(L, opts, NC_FLOAT32, fname);
  nc_device *dev = nc_lua_opt_device(L, opts, fname);
  if (!nc_dtype_is_float(dt)) return nc_lua_errorf(L, "%s: needs a floating dtype, got %s", fname, nc_dtype_name(dt));
  nc_tensor *t = new_tensor(L, dev, dt, n, shape, fname);
  nc_rng *g = nc_lua_rng(L);
  CHECK(fname, normal ? nc_normal(t, g, 0.0, 1.0) : nc_uniform(t, g, 0.0, 1.0));
  return 1;
}
static int l_rand(lua_State *L) { return random_tensor(L, "netcl.rand", 0); }
static int l_randn(lua_State *L) { return random_tensor(L, "netcl.randn", 1); }

/* nc.arange(stop) | nc.arange(start, stop, step?, opts?) */
static int l_arange(lua_State *L) {
  const char *fname = "netcl.arange";
  double start = 0, stop, step = 1;
  int opts_at;
  if (!lua_isnumber(L, 2)) {
    stop = nc_lua_checknumber(L, 1, fname);
    opts_at = 2;
  } else {
    start = nc_lua_checknumber(L, 1, fname);
    stop = nc_lua_checknumber(L, 2, fname);
    if (lua_isnumber(L, 3)) {
      step = lua_tonumber(L, 3);
      opts_at = 4;
    } else {
      opts_at = 3;
    }
  }
  int opts = nc_lua_checkopts(L, opts_at, fname, CREATE_KEYS);
  if (step == 0 || !isfinite(step) || !isfinite(start) || !isfinite(stop))
    return nc_lua_errorf(L, "%s: needs finite start, stop and a non-zero step", fname);
  double count = ceil((stop - start) / step);
  if (count > 9.0e15) return nc_lua_errorf(L, "%s: range too large", fname);
  int64_t n = count > 0 ? (int64_t)count : 0;
  nc_dtype dt = nc_lua_opt_dtype(L, opts, NC_FLOAT32, fname);
  nc_device *dev = nc_lua_opt_device(L, opts, fname);
  nc_tensor *t = new_tensor(L, dev, dt, 1, &n, fname);
  CHECK(fname, nc_arange_fill(t, start, step));
  return 1;
}

static int l_linspace(lua_State *L) {
  const char *fname = "netcl.linspace";
  double a = nc_lua_checknumber(L, 1, fname), b = nc_lua_checknumber(L, 2, fname);
  lua_Integer n = nc_lua_checkinteger(L, 3, fname);
  if (n < 0) return nc_lua_argerror(L, fname, 3, "count %lld is negative", (long long)n);
  int opts = nc_lua_checkopts(L, 4, fname, CREATE_KEYS);
  nc_dtype dt = nc_lua_opt_dtype(L, opts, NC_FLOAT32, fname);
  nc_device *dev = nc_lua_opt_device(L, opts, fname);
  int64_t shape = n;
  nc_tensor *t = new_tensor(L, dev, dt, 1, &shape, fname);
  CHECK(fname, nc_arange_fill(t, a, n > 1 ? (b - a) / (double)(n - 1) : 0.0));
  return 1;
}

static int l_eye(lua_State *L) {
  const char *fname = "netcl.eye";
  lua_Integer n = nc_lua_checkinteger(L, 1, fname);
  int opts_at = 2;
  lua_Integer m = n;
  if (lua_isinteger(L, 2)) {
    m = lua_tointeger(L, 2);
    opts_at = 3;
  }
  if (n < 0 || m < 0) return nc_lua_errorf(L, "%s: sizes must be non-negative", fname);
  int opts = nc_lua_checkopts(L, opts_at, fname, CREATE_KEYS);
  int64_t shape[2] = {n, m};
  nc_dtype dt = nc_lua_opt_dtype(L, opts, NC_FLOAT32, fname);
  nc_device *dev = nc_lua_opt_device(L, opts, fname);
  nc_tensor *t = new_tensor(L, dev, dt, 2, shape, fname);
  CHECK(fname, nc_fill(t, 0));
  int64_t k = n < m ? n : m, stride = m + 1;
  if (k > 0) {
    nc_tensor *diag;
    CHECK(fname, nc_tensor_from_storage(t->storage, dt, 1, &k, &stride, 0, &diag));
    nc_status s = nc_fill(diag, 1);
    nc_tensor_release(diag);
    CHECK(fname, s);
  }
  return 1;
}

/* ---- nc.tensor(data, opts) ---------------------------------------------------------------------- */
typedef struct {
  int ndim;
  int64_t shape[NC_MAX_DIMS];
} nested_shape;

static void infer_shape(lua_State *L, int idx, nested_shape *s, const char *fname) {
  s->ndim = 0;
  lua_pushvalue(L, idx);
  while (lua_istable(L, -1)) {
    if (s->ndim == NC_MAX_DIMS) nc_lua_errorf(L, "%s: data nests deeper than %d dims", fname, NC_MAX_DIMS);
    s->shape[s->ndim++] = (int64_t)luaL_len(L, -1);
    if (luaL_len(L, -1) == 0) break;
    lua_geti(L, -1, 1);
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
}

static void store(lua_State *L, int idx, nc_dtype dt, char *dst, const char *fname) {
  int t = lua_type(L, idx);
  if (t != LUA_TNUMBER && t != LUA_TBOOLEAN)
    nc_lua_errorf(L, "%s: data holds a %s where a number was expected", fname, luaL_typename(L, idx));
  double v = t == LUA_TBOOLEAN ? lua_toboolean(L, idx) : lua_tonumber(L, idx);
  /* memcpy: dst is a byte buffer with no alignment promise */
  switch (dt) {
    case NC_FLOAT32: { float f = (float)v; memcpy(dst, &f, sizeof f); break; }
    case NC_FLOAT64: memcpy(dst, &v, sizeof v); break;
    case NC_INT32: { int32_t i = (int32_t)v; memcpy(dst, &i, sizeof i); break; }
    case NC_INT64: {
      int64_t i = lua_isinteger(L, idx) ? (int64_t)lua_tointeger(L, idx) : (int64_t)v;
      memcpy(dst, &i, sizeof i);
      break;
    }
    case NC_UINT8: *(uint8_t *)dst = (uint8_t)v; break;
    case NC_BFLOAT16:
    case NC_FLOAT16: { uint16_t h = nc_half_from_double(dt, v); memcpy(dst, &h, sizeof h); break; }
    default: *(uint8_t *)dst = v != 0; break;
  }
}

static void fill_nested(lua_State *L, int idx, const nested_shape *s, int dim, nc_dtype dt, char **p,
                        const char *fname) {
  if (dim == s->ndim) {
    store(L, idx, dt, *p, fname);
    *p += nc_dtype_size(dt);
    return;
  }
  if (!lua_istable(L, idx) || luaL_len(L, idx) != s->shape[dim])
    nc_lua_errorf(L, "%s: ragged data: expected %lld elements at depth %d", fname, (long long)s->shape[dim], dim + 1);
  nc_lua_checkstack(L, 4, fname, "nested data");
  for (int64_t i = 0; i < s->shape[dim]; i++) {
    lua_geti(L, idx, i + 1);
    fill_nested(L, lua_gettop(L), s, dim + 1, dt, p, fname);
    lua_pop(L, 1);
  }
}

static int l_tensor(lua_State *L) {
  const char *fname = "netcl.tensor";
  int opts = nc_lua_checkopts(L, 2, fname, CREATE_KEYS " shape");
  nc_dtype dt = nc_lua_opt_dtype(L, opts, NC_FLOAT32, fname);
  nc_device *dev = nc_lua_opt_device(L, opts, fname);
  nested_shape s;
  bool flat_with_shape = false;
  if (opts) {
    lua_getfield(L, opts, "shape");
    if (!lua_isnil(L, -1)) {
      if (!lua_istable(L, -1) && lua_type(L, -1) != LUA_TNUMBER)
        return nc_lua_argerror(L, fname, opts, "option 'shape' must be a table of sizes, got %s",
                               luaL_typename(L, -1));
      s.ndim = nc_lua_checkshape(L, lua_gettop(L), s.shape, fname);
      flat_with_shape = true;
    }
    lua_pop(L, 1);
  }
  if (!lua_istable(L, 1) && lua_type(L, 1) != LUA_TNUMBER && !lua_isboolean(L, 1))
    return nc_lua_argerror(L, fname, 1, "expected a number or a (nested) table, got %s", luaL_typename(L, 1));
  if (!flat_with_shape) infer_shape(L, 1, &s, fname);
  int64_t numel = 1;
  for (int i = 0; i < s.ndim; i++) numel *= s.shape[i];
  size_t nbytes = (size_t)numel * nc_dtype_size(dt);
  char *buf = lua_newuserdatauv(L, nbytes ? nbytes : 1, 0);
  char *p = buf;
  if (flat_with_shape) {
    if (!lua_istable(L, 1) || luaL_len(L, 1) != numel)
      return nc_lua_errorf(L, "%s: shape holds %lld elements but the flat data has %lld", fname, (long long)numel,
                        lua_istable(L, 1) ? (long long)luaL_len(L, 1) : 1LL);
    for (int64_t i = 0; i < numel; i++) {
      lua_geti(L, 1, i + 1);
      store(L, -1, dt, p, fname);
      p += nc_dtype_size(dt);
      lua_pop(L, 1);
    }
  } else {
    fill_nested(L, 1, &s, 0, dt, &p, fname);
  }
  nc_tensor *t = new_tensor(L, dev, dt, s.ndim, s.shape, fname);
  CHECK(fname, nc_tensor_write_host(t, buf, nbytes));
  return 1;
}

static int l_from_bytes(lua_State *L) {
  const char *fname = "netcl.from_bytes";
  size_t len;
  const char *str = nc_lua_checklstring(L, 1, &len, fname);
  int64_t shape[NC_MAX_DIMS];
  int n = nc_lua_checkshape(L, 2, shape, fname);
  nc_dtype dt = nc_lua_checkdtype(L, 3, fname);
  nc_device *dev = nc_lua_opt_device(L, nc_lua_checkopts(L, 4, fname, "device"), fname);
  int64_t numel = 1;
  for (int i = 0; i < n; i++) numel *= shape[i];
  if ((uint64_t)numel * nc_dtype_size(dt) != len)
    return nc_lua_errorf(L, "%s: %zu bytes do not hold %lld elements of %s (%lld bytes)", fname, len, (long long)numel,
                      nc_dtype_name(dt), (long long)numel * (long long)nc_dtype_size(dt));
  nc_tensor *t = new_tensor(L, dev, dt, n, shape, fname);
  CHECK(fname, nc_tensor_write_host(t, str, len));
  return 1;
}

static int l_manual_seed(lua_State *L) {
  lua_Integer seed = nc_lua_checkinteger(L, 1, "netcl.manual_seed");
  nc_rng_seed(nc_lua_rng(L), (uint64_t)seed);
  return 0;
}

/* get_rng_state() -> {seed=, offset=}: the generator's key and counter, so a run can be saved
 * and resumed with the same draws (set_rng_state puts them back). The 64-bit words travel as
 * Lua integers (two's complement for values above 2^63). */
static int l_get_rng_state(lua_State *L) {
  const nc_rng *g = nc_lua_rng(L);
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, (lua_Integer)g->seed);
  lua_setfield(L, -2, "seed");
  lua_pushinteger(L, (lua_Integer)g->offset);
  lua_setfield(L, -2, "offset");
  return 1;
}

static int l_set_rng_state(lua_State *L) {
  static const char *fname = "netcl.set_rng_state";
  if (!lua_istable(L, 1))
    return nc_lua_argerror(L, fname, 1, "expected a table {seed=, offset=} from netcl.get_rng_state, got %s",
                           luaL_typename(L, 1));
  lua_Integer v[2];
  static const char *const keys[2] = {"seed", "offset"};
  for (int i = 0; i < 2; i++) {
    int isint;
    lua_getfield(L, 1, keys[i]);
    v[i] = lua_tointegerx(L, -1, &isint);
    if (!isint) return nc_lua_errorf(L, "%s: field '%s' must be an integer, got %s", fname, keys[i], luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  nc_rng *g = nc_lua_rng(L);
  g->seed = (uint64_t)v[0];
  g->offset = (uint64_t)v[1];
  return 0;
}

static int l_clock(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9);
  return 1;
}

void nc_lua_add_creation(lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"tensor", l_tensor},   {"zeros", l_zeros},       {"ones", l_ones},     {"full", l_full},
      {"empty", l_empty},     {"arange", l_arange},     {"linspace", l_linspace}, {"eye", l_eye},
      {"rand", l_rand},       {"randn", l_randn},       {"from_bytes", l_from_bytes},
      {"manual_seed", l_manual_seed}, {"clock", l_clock},
      {"get_rng_state", l_get_rng_state}, {"set_rng_state", l_set_rng_state}, {NULL, NULL}};
  luaL_setfuncs(L, funcs, 0);
}

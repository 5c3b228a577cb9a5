/* Data-loader primitives (core._data): seeded permutations, row gathers, and seeds drawn from
 * the netcl generator. The DataLoader in lua/netcl/data/ is built on these. */
#include <errno.h>
#include <string.h>
#include <time.h>
#include "l_common.h"

#define CHECK(fname, expr) NC_LUA_CHECK(L, fname, expr)

/* permutation(n, seed, stream) -> int64 CPU Tensor [n] (0-based) */
static int l_permutation(lua_State *L) {
  const char *fname = "netcl.data.permutation";
  lua_Integer n = nc_lua_checkinteger(L, 1, fname), seed = nc_lua_checkinteger(L, 2, fname),
              stream = nc_lua_checkinteger(L, 3, fname);
  if (n < 0) return nc_lua_argerror(L, fname, 1, "size %lld is negative", (long long)n);
  int64_t shape = n;
  nc_tensor *t;
  CHECK(fname, nc_tensor_empty(nc_device_get(0), NC_INT64, 1, &shape, 0, &t));
  nc_lua_pushtensor_owned(L, t);
  nc_lua_account(L, nc_tensor_nbytes(t));
  nc_shuffle_permutation(nc_storage_host_ptr(t->storage), n, (uint64_t)seed, (uint64_t)stream);
  return 1;
}

/* gather(dst, src, perm, start): dst[k] = src[perm[start + k - 1]] for k = 1..#dst, with perm an
 * int64 CPU tensor of 0-based rows (start is 1-based). */
static int l_gather(lua_State *L) {
  const char *fname = "netcl.data.gather";
  nc_tensor *dst = nc_lua_checktensor_f(L, 1, fname), *src = nc_lua_checktensor_f(L, 2, fname);
  nc_tensor *perm = nc_lua_checktensor_f(L, 3, fname);
  lua_Integer start = nc_lua_checkinteger(L, 4, fname);
  if (perm->dtype != NC_INT64 || perm->ndim != 1 || !nc_storage_host_ptr(perm->storage) ||
      !nc_tensor_is_contiguous(perm))
    return nc_lua_argerror(L, fname, 3, "expected a contiguous 1-d int64 CPU tensor of rows");
  if (dst->ndim < 1) return nc_lua_argerror(L, fname, 1, "the batch needs at least one dim");
  int64_t n = dst->shape[0];
  if (start < 1 || n > perm->shape[0] || start - 1 > perm->shape[0] - n)
    return nc_lua_argerror(L, fname, 4, "rows %lld..%lld are outside the %lld of the permutation",
                           (long long)start, (long long)(start + n - 1), (long long)perm->shape[0]);
  const int64_t *rows = (const int64_t *)nc_storage_host_ptr(perm->storage) + perm->offset + (start - 1);
  CHECK(fname, nc_gather_rows(dst, src, rows, n));
  lua_settop(L, 1);
  return 1;
}

/* next_seed() -> integer: one draw from the per-state generator, so nc.manual_seed also fixes
 * the shuffles of loaders created without a seed. */
static int l_next_seed(lua_State *L) {
  nc_rng *g = nc_lua_rng(L);
  uint32_t w[4];
  nc_philox_element(g->seed, g->offset++, w);
  lua_pushinteger(L, (lua_Integer)((uint64_t)w[1] << 32 | w[0]));
  return 1;
}

/* uniforms(seed, call, n, k) -> {n * k numbers}: the per-sample draws of a random transform
 * (netcl/shuffle.h), sample j's d-th draw at [j * k + d + 1]. */
static int l_uniforms(lua_State *L) {
  const char *fname = "netcl.data.transforms";
  lua_Integer seed = nc_lua_checkinteger(L, 1, fname), call = nc_lua_checkinteger(L, 2, fname),
              n = nc_lua_checkinteger(L, 3, fname), k = nc_lua_checkinteger(L, 4, fname);
  if (n < 0 || k < 1 || k > 64 || n > (1 << 24)) return nc_lua_argerror(L, fname, 3, "bad draw count %lld x %lld", (long long)n, (long long)k);
  double *v = lua_newuserdatauv(L, (size_t)(n * k + 1) * sizeof(double), 0);
  nc_sample_uniforms(v, n, (int)k, (uint64_t)seed, (uint64_t)call);
  lua_createtable(L, (int)(n * k), 0);
  for (lua_Integer i = 0; i < n * k; i++) {
    lua_pushnumber(L, v[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* sleep(seconds): waits without using the CPU (stands for file I/O in benchmarks and tests of
 * the workers). */
static int l_sleep(lua_State *L) {
  double s = nc_lua_checknumber(L, 1, "netcl.data.sleep");
  if (!(s >= 0) || s > 3600) return nc_lua_argerror(L, "netcl.data.sleep", 1, "expected 0..3600 seconds, got %g", s);
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  return 0;
}

/* cifar10({paths...}, device) -> x uint8 [N, 3, 32, 32], y int64 [N]: the records of the
 * files, in order (netcl/cifar.h). */
static int l_cifar10(lua_State *L) {
  const char *fname = "netcl.data.cifar10";
  if (!lua_istable(L, 1)) return nc_lua_argerror(L, fname, 1, "expected a list of paths");
  int n = (int)luaL_len(L, 1);
  if (n < 1 || n > 64) return nc_lua_argerror(L, fname, 1, "expected 1..64 paths, got %d", n);
  const char *paths[64];
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, 1, i + 1);
    paths[i] = nc_lua_checklstring(L, -1, NULL, fname);
    lua_pop(L, 1); /* the table keeps the string alive */
  }
  nc_device *dev = nc_lua_checkdevice(L, 2, fname);
  nc_tensor *x, *y;
  CHECK(fname, nc_cifar10_load(paths, n, dev, &x, &y));
  nc_lua_pushtensor_new(L, x);
  nc_lua_pushtensor_new(L, y);
  return 2;
}

/* ---- worker processes: the ring of batches (netcl/workers.h) -------------------------------- */

#define RING_MT "netcl.data.Ring"
#define RING_FNAME "netcl.data.DataLoader"
#define RING_MAX_FIELDS 64

typedef struct {
  nc_ring *r; /* NULL once closed */
} ring_box;

static nc_ring *check_ring(lua_State *L) {
  ring_box *b = luaL_checkudata(L, 1, RING_MT);
  if (!b->r) nc_lua_errorf(L, "%s: the worker ring is closed", RING_FNAME);
  return b->r;
}

/* ring(workers, prefetch, slot_bytes) -> Ring */
static int l_ring(lua_State *L) {
  lua_Integer w = nc_lua_checkinteger(L, 1, RING_FNAME), p = nc_lua_checkinteger(L, 2, RING_FNAME),
              bytes = nc_lua_checkinteger(L, 3, RING_FNAME);
  if (w < 1 || w > 256 || p < 1 || p > 64 || bytes < 0)
    return nc_lua_errorf(L, "%s: bad ring geometry (%lld workers, %lld slots each, %lld bytes)", RING_FNAME,
                         (long long)w, (long long)p, (long long)bytes);
  ring_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->r = NULL;
  luaL_setmetatable(L, RING_MT);
  CHECK(RING_FNAME, nc_ring_create((int)w, (int)p, (size_t)bytes, &b->r));
  return 1;
}

/* ring:fork(w) -> pid in the main process, 0 in the new worker (w 0-based) */
static int l_ring_fork(lua_State *L) {
  nc_ring *r = check_ring(L);
  int pid = 0;
  CHECK(RING_FNAME, nc_ring_fork(r, (int)nc_lua_checkinteger(L, 2, RING_FNAME), &pid));
  lua_pushinteger(L, pid);
  return 1;
}

/* ring:put(b, t1, t2, ...) -> true, or false when the main process has gone (worker side) */
static int l_ring_put(lua_State *L) {
  nc_ring *r = check_ring(L);
  lua_Integer bn = nc_lua_checkinteger(L, 2, RING_FNAME);
  int n = lua_gettop(L) - 2;
  if (n > RING_MAX_FIELDS) return nc_lua_errorf(L, "%s: more than %d fields in a batch", RING_FNAME, RING_MAX_FIELDS);
  nc_tensor *t[RING_MAX_FIELDS];
  for (int i = 0; i < n; i++) t[i] = nc_lua_checktensor_f(L, 3 + i, RING_FNAME);
  void *buf;
  size_t cap, len;
  if (nc_ring_acquire(r, bn, &buf, &cap) != NC_OK) {
    lua_pushboolean(L, 0);
    return 1;
  }
  CHECK(RING_FNAME, nc_batch_pack(n, t, buf, cap, &len));
  lua_pushboolean(L, nc_ring_publish(r, bn, len, false) == NC_OK);
  return 1;
}

/* ring:put_error(b, message) -> true, or false when the main process has gone (worker side);
 * the message is cut to the slot's size */
static int l_ring_put_error(lua_State *L) {
  nc_ring *r = check_ring(L);
  lua_Integer bn = nc_lua_checkinteger(L, 2, RING_FNAME);
  size_t n;
  const char *msg = nc_lua_checklstring(L, 3, &n, RING_FNAME);
  void *buf;
  size_t cap;
  if (nc_ring_acquire(r, bn, &buf, &cap) != NC_OK) {
    lua_pushboolean(L, 0);
    return 1;
  }
  if (n > cap) n = cap;
  memcpy(buf, msg, n);
  lua_pushboolean(L, nc_ring_publish(r, bn, n, true) == NC_OK);
  return 1;
}

/* ring:take(b, device) -> true, tensors... on the device; or false, the worker's error message
 * (main side; the slot is given back to its worker at once: the copies to the device are staged) */
static int l_ring_take(lua_State *L) {
  nc_ring *r = check_ring(L);
  lua_Integer bn = nc_lua_checkinteger(L, 2, RING_FNAME);
  nc_device *dev = nc_lua_checkdevice(L, 3, RING_FNAME);
  const void *buf;
  size_t len;
  bool is_error;
  CHECK(RING_FNAME, nc_ring_wait(r, bn, &buf, &len, &is_error));
  if (is_error) {
    lua_pushboolean(L, 0);
    lua_pushlstring(L, buf, len);
    CHECK(RING_FNAME, nc_ring_release(r, bn));
    return 2;
  }
  nc_tensor *t[RING_MAX_FIELDS];
  int n = 0;
  CHECK(RING_FNAME, nc_batch_unpack(buf, len, dev, RING_MAX_FIELDS, t, &n));
  nc_lua_checkstack(L, n + 1, RING_FNAME, "batch fields");
  lua_pushboolean(L, 1);
  for (int i = 0; i < n; i++) nc_lua_pushtensor_new(L, t[i]);
  CHECK(RING_FNAME, nc_ring_release(r, bn));
  return n + 1;
}

/* ring:pid(w) -> the pid of worker w (0-based), 0 when it has been reaped */
static int l_ring_pid(lua_State *L) {
  nc_ring *r = check_ring(L);
  lua_pushinteger(L, nc_ring_pid(r, (int)nc_lua_checkinteger(L, 2, RING_FNAME)));
  return 1;
}

/* ring:close(): kills and reaps the workers still running, unmaps the ring (idempotent) */
static int l_ring_close(lua_State *L) {
  ring_box *b = luaL_checkudata(L, 1, RING_MT);
  nc_ring_destroy(b->r);
  b->r = NULL;
  return 0;
}

/* worker_exit(code): ends a worker process at once (no finalizers run on the copied state) */
static int l_worker_exit(lua_State *L) {
  nc_worker_exit((int)luaL_optinteger(L, 1, 0));
  return 0;
}

void nc_lua_add_data(lua_State *L) {
  static const luaL_Reg ring_methods[] = {{"fork", l_ring_fork}, {"put", l_ring_put},   {"put_error", l_ring_put_error},
                                          {"take", l_ring_take}, {"pid", l_ring_pid},   {"close", l_ring_close},
                                          {NULL, NULL}};
  if (luaL_newmetatable(L, RING_MT)) {
    luaL_newlib(L, ring_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_ring_close);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, l_ring_close);
    lua_setfield(L, -2, "__close");
  }
  lua_pop(L, 1);
  static const luaL_Reg funcs[] = {{"permutation", l_permutation}, {"gather", l_gather},
                                   {"next_seed", l_next_seed},     {"ring", l_ring}, {"uniforms", l_uniforms}, {"sleep", l_sleep}, {"cifar10", l_cifar10},
                                   {"worker_exit", l_worker_exit}, {NULL, NULL}};
  luaL_newlib(L, funcs);
  lua_setfield(L, -2, "_data");
}

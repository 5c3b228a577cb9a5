/* Collectives behind netcl.distributed (core._dist): between the devices of one process, and
 * between processes through MPI. The Lua module lua/netcl/distributed/ builds the user API on
 * these. Group positions (root) are 1-based here; MPI ranks are 0-based, as mpirun numbers them. */
#include <stdlib.h>
#include "l_common.h"

#define CHECK(fname, expr) NC_LUA_CHECK(L, fname, expr)

static nc_reduce_op check_op(lua_State *L, int idx, const char *fname) {
  nc_reduce_op op = NC_REDUCE_SUM;
  if (lua_isnoneornil(L, idx)) return op;
  const char *name = nc_lua_checklstring(L, idx, NULL, fname);
  if (nc_reduce_op_parse(name, &op) != NC_OK) nc_lua_argerror(L, fname, idx, "%s", nc_last_error());
  return op;
}

/* The tensors of a Lua array, kept alive by the array during the call. */
static nc_tensor **check_list(lua_State *L, int idx, int *n, const char *fname) {
  if (!lua_istable(L, idx))
    nc_lua_argerror(L, fname, idx, "expected an array of Tensors (one per device), got %s", luaL_typename(L, idx));
  *n = (int)lua_rawlen(L, idx);
  if (*n < 1) nc_lua_argerror(L, fname, idx, "expected an array of Tensors (one per device), got an empty table");
  nc_tensor **ts = lua_newuserdatauv(L, sizeof(nc_tensor *) * (size_t)*n, 0);
  for (int i = 0; i < *n; i++) {
    lua_rawgeti(L, idx, i + 1);
    ts[i] = nc_lua_totensor(L, -1);
    if (!ts[i]) nc_lua_argerror(L, fname, idx, "element %d is not a Tensor (%s)", i + 1, luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  return ts;
}

/* group_all_reduce(tensors, op) */
static int l_group_all_reduce(lua_State *L) {
  const char *fname = "netcl.distributed.DeviceGroup"; /* the C message names the collective */
  int n;
  nc_tensor **ts = check_list(L, 1, &n, fname);
  nc_reduce_op op = check_op(L, 2, fname);
  CHECK(fname, nc_group_all_reduce(ts, n, op));
  return 0;
}

/* group_broadcast(tensors, root) -- root 1-based */
static int l_group_broadcast(lua_State *L) {
  const char *fname = "netcl.distributed.DeviceGroup"; /* the C message names the collective */
  int n;
  nc_tensor **ts = check_list(L, 1, &n, fname);
  lua_Integer root = lua_isnoneornil(L, 2) ? 1 : nc_lua_checkinteger(L, 2, fname);
  if (root < 1 || root > n)
    return nc_lua_argerror(L, fname, 2, "root %lld is not a position in the group (1..%d)", (long long)root, n);
  CHECK(fname, nc_group_broadcast(ts, n, (int)root - 1));
  return 0;
}

/* ---- split all-reduces: handles that finish (or are abandoned) at most once ------------------- */
#define GROUP_REDUCE_MT "netcl.GroupReduce"
#define MPI_REDUCE_MT "netcl.MpiReduce"

typedef struct {
  nc_group_reduce *r;
} group_reduce_box;

typedef struct {
  nc_mpi_reduce *h;
} mpi_reduce_box;

static group_reduce_box *check_group_reduce(lua_State *L, int idx, const char *fname) {
  group_reduce_box *b = luaL_testudata(L, idx, GROUP_REDUCE_MT);
  if (!b) nc_lua_argerror(L, fname, idx, "expected a group reduction, got %s", luaL_typename(L, idx));
  if (!b->r) nc_lua_errorf(L, "%s: this reduction was already finished", fname);
  return b;
}

/* group_reduce_begin(n, op) -> handle */
static int l_group_reduce_begin(lua_State *L) {
  const char *fname = "netcl.distributed.DeviceGroup";
  lua_Integer n = nc_lua_checkinteger(L, 1, fname);
  nc_reduce_op op = check_op(L, 2, fname);
  if (n < 1 || n > 4096) return nc_lua_argerror(L, fname, 1, "a group of %lld devices", (long long)n);
  group_reduce_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->r = NULL;
  luaL_setmetatable(L, GROUP_REDUCE_MT);
  CHECK(fname, nc_group_reduce_begin((int)n, op, &b->r));
  return 1;
}

/* group_reduce_add(handle, i, t) -- i 1-based */
static int l_group_reduce_add(lua_State *L) {
  const char *fname = "netcl.distributed.DeviceGroup";
  group_reduce_box *b = check_group_reduce(L, 1, fname);
  lua_Integer i = nc_lua_checkinteger(L, 2, fname);
  nc_tensor *t = nc_lua_checktensor_f(L, 3, fname);
  if (i < 1 || i > 0x7fffffff) return nc_lua_argerror(L, fname, 2, "position %lld", (long long)i);
  CHECK(fname, nc_group_reduce_add(b->r, (int)i - 1, t));
  return 0;
}

static int l_group_reduce_added(lua_State *L) {
  lua_pushinteger(L, nc_group_reduce_added(check_group_reduce(L, 1, "netcl.distributed.DeviceGroup")->r));
  return 1;
}

static int l_group_reduce_finish(lua_State *L) {
  const char *fname = "netcl.distributed.DeviceGroup";
  group_reduce_box *b = check_group_reduce(L, 1, fname);
  nc_group_reduce *r = b->r;
  b->r = NULL; /* finish frees it, also on failure */
  CHECK(fname, nc_group_reduce_finish(r));
  return 0;
}

static int group_reduce_gc(lua_State *L) {
  group_reduce_box *b = luaL_checkudata(L, 1, GROUP_REDUCE_MT);
  nc_group_reduce_free(b->r); /* abandoned: waits for its reads, writes nothing */
  b->r = NULL;
  return 0;
}

/* all_reduce_start(t, op) -> handle */
static int l_mpi_all_reduce_start(lua_State *L) {
  const char *fname = "netcl.distributed";
  nc_tensor *t = nc_lua_checktensor_f(L, 1, fname);
  nc_reduce_op op = check_op(L, 2, fname);
  mpi_reduce_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->h = NULL;
  luaL_setmetatable(L, MPI_REDUCE_MT);
  CHECK(fname, nc_mpi_all_reduce_start(t, op, &b->h));
  return 1;
}

static int l_mpi_all_reduce_finish(lua_State *L) {
  const char *fname = "netcl.distributed";
  mpi_reduce_box *b = luaL_testudata(L, 1, MPI_REDUCE_MT);
  if (!b) return nc_lua_argerror(L, fname, 1, "expected a started all_reduce, got %s", luaL_typename(L, 1));
  if (!b->h) return nc_lua_errorf(L, "%s: this all_reduce was already finished", fname);
  nc_mpi_reduce *h = b->h;
  b->h = NULL;
  CHECK(fname, nc_mpi_all_reduce_finish(h));
  return 0;
}

static int mpi_reduce_gc(lua_State *L) {
  mpi_reduce_box *b = luaL_checkudata(L, 1, MPI_REDUCE_MT);
  /* a started collective must complete on every rank: an unfinished one is finished here */
  if (b->h) nc_mpi_all_reduce_finish(b->h);
  b->h = NULL;
  return 0;
}

static int l_mpi_available(lua_State *L) {
  lua_pushboolean(L, nc_mpi_available());
  return 1;
}

static int l_mpi_initialized(lua_State *L) {
  lua_pushboolean(L, nc_mpi_initialized());
  return 1;
}

/* mpi_init(timeout_s) -> rank, size, local_rank, local_size */
static int l_mpi_init(lua_State *L) {
  const char *fname = "netcl.distributed.init";
  double timeout = nc_lua_checknumber(L, 1, fname);
  int rank, size, lrank, lsize;
  CHECK(fname, nc_mpi_init(timeout, &rank, &size, &lrank, &lsize));
  lua_pushinteger(L, rank);
  lua_pushinteger(L, size);
  lua_pushinteger(L, lrank);
  lua_pushinteger(L, lsize);
  return 4;
}

static int l_mpi_all_reduce(lua_State *L) {
  const char *fname = "netcl.distributed"; /* the C message names the collective */
  nc_tensor *t = nc_lua_checktensor_f(L, 1, fname);
  nc_reduce_op op = check_op(L, 2, fname);
  CHECK(fname, nc_mpi_all_reduce(t, op));
  lua_settop(L, 1);
  return 1;
}

static int l_mpi_broadcast(lua_State *L) {
  const char *fname = "netcl.distributed"; /* the C message names the collective */
  nc_tensor *t = nc_lua_checktensor_f(L, 1, fname);
  lua_Integer root = lua_isnoneornil(L, 2) ? 0 : nc_lua_checkinteger(L, 2, fname);
  if (root < 0 || root > 0x7fffffff) return nc_lua_argerror(L, fname, 2, "root %lld is not a rank", (long long)root);
  CHECK(fname, nc_mpi_broadcast(t, (int)root));
  lua_settop(L, 1);
  return 1;
}

static int l_mpi_barrier(lua_State *L) {
  CHECK("netcl.distributed", nc_mpi_barrier());
  return 0;
}

/* mpi_gather(t, root?) -> Tensor [world, ...] (nil on ranks other than root) */
static int l_mpi_gather(lua_State *L) {
  const char *fname = "netcl.distributed"; /* the C message names the collective */
  nc_tensor *t = nc_lua_checktensor_f(L, 1, fname), *out;
  lua_Integer root = lua_isnoneornil(L, 2) ? -1 : nc_lua_checkinteger(L, 2, fname);
  if (root < -1 || root > 0x7fffffff) return nc_lua_argerror(L, fname, 2, "root %lld is not a rank", (long long)root);
  CHECK(fname, nc_mpi_gather(t, (int)root, &out));
  if (out) nc_lua_pushtensor_new(L, out);
  else lua_pushnil(L);
  return 1;
}

static int l_mpi_finalize(lua_State *L) {
  CHECK("netcl.distributed.finalize", nc_mpi_finalize());
  return 0;
}

void nc_lua_add_dist(lua_State *L) {
  if (luaL_newmetatable(L, GROUP_REDUCE_MT)) {
    lua_pushcfunction(L, group_reduce_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  if (luaL_newmetatable(L, MPI_REDUCE_MT)) {
    lua_pushcfunction(L, mpi_reduce_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  static const luaL_Reg funcs[] = {{"group_all_reduce", l_group_all_reduce},
                                   {"group_reduce_begin", l_group_reduce_begin},
                                   {"group_reduce_add", l_group_reduce_add},
                                   {"group_reduce_added", l_group_reduce_added},
                                   {"group_reduce_finish", l_group_reduce_finish},
                                   {"all_reduce_start", l_mpi_all_reduce_start},
                                   {"all_reduce_finish", l_mpi_all_reduce_finish},
                                   {"group_broadcast", l_group_broadcast},
                                   {"mpi_available", l_mpi_available},
                                   {"mpi_initialized", l_mpi_initialized},
                                   {"mpi_init", l_mpi_init},
                                   {"all_reduce", l_mpi_all_reduce},
                                   {"broadcast", l_mpi_broadcast},
                                   {"barrier", l_mpi_barrier},
                                   {"gather", l_mpi_gather},
                                   {"finalize", l_mpi_finalize},
                                   {NULL, NULL}};
  luaL_newlib(L, funcs);
  lua_setfield(L, -2, "_dist");
}

/* Data-loader primitives (core._data): seeded permutations, row gathers, and seeds drawn from
 * the netcl generator. The DataLoader in lua/netcl/data/ is built on these. */
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

void nc_lua_add_data(lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"permutation", l_permutation}, {"gather", l_gather}, {"next_seed", l_next_seed}, {NULL, NULL}};
  luaL_newlib(L, funcs);
  lua_setfield(L, -2, "_data");
}

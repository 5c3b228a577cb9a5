/* Shared helpers of the Lua binding: userdata boxes, argument checking, errors, module state.
 * Binding files hold no math: they check arguments, call libnetcl, and push results. */
#ifndef NETCL_L_COMMON_H
#define NETCL_L_COMMON_H

#include <lauxlib.h>
#include <lua.h>
#include "netcl/netcl.h"

#define NC_TENSOR_MT "netcl.Tensor"
#define NC_DEVICE_MT "netcl.Device"

typedef struct {
  nc_tensor *t;       /* NULL once freed */
  const char *owner;  /* non-NULL for a Node's value or gradient: what t:free() says owns it */
} nc_lua_tensor_box;

/* Raises "fname: <nc_last_error()>". */
int nc_lua_fail(lua_State *L, const char *fname);
__attribute__((noreturn)) void nc_lua_raise(lua_State *L, const char *fname);
#define NC_LUA_CHECK(L, fname, expr)              \
  do {                                            \
    if ((expr) != NC_OK) nc_lua_raise(L, fname);  \
  } while (0)

/* luaL_error with printf formats (%lld, %zu, ...), which lua_pushfstring lacks. */
int nc_lua_errorf(lua_State *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Marks the function at idx as a dispatch wrapper (a Lua function that forwards to bindings):
 * the position in front of errors raised below it is its caller's, not its own. Errors name the
 * first frame up the stack that runs Lua code and is not such a wrapper. */
void nc_lua_mark_wrapper(lua_State *L, int idx);

/* Argument errors that name the function and the argument: "fname: argument N: message". */
int nc_lua_argerror(lua_State *L, const char *fname, int arg, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Plain argument checks in the same format, in place of luaL_check* (whose "bad argument #n to
 * 'f'" messages do not name the netcl function). They convert as lua_tointegerx, lua_tonumberx
 * and lua_tolstring do (numeric strings are numbers, numbers are strings). */
lua_Integer nc_lua_checkinteger(lua_State *L, int idx, const char *fname);
double nc_lua_checknumber(lua_State *L, int idx, const char *fname);
const char *nc_lua_checklstring(lua_State *L, int idx, size_t *len, const char *fname);
/* lua_checkstack that raises "fname: stack overflow (what)". */
void nc_lua_checkstack(lua_State *L, int n, const char *fname, const char *what);

/* Tensors. pushtensor takes over the caller's reference. */
void nc_lua_pushtensor_owned(lua_State *L, nc_tensor *t);
/* Pushes a handle on a tensor another object owns (a Node's value or gradient; takes the
 * reference): t:free() on it raises, naming `owner`, a static string. */
void nc_lua_pushtensor_borrowed(lua_State *L, nc_tensor *t, const char *owner);
/* Pushes a tensor that owns new device memory (takes the reference), reporting its bytes to
 * the collector. */
void nc_lua_pushtensor_new(lua_State *L, nc_tensor *t);
nc_tensor *nc_lua_checktensor_f(lua_State *L, int idx, const char *fname);
nc_tensor *nc_lua_totensor(lua_State *L, int idx); /* NULL if not a live Tensor */

/* Devices. */
void nc_lua_pushdevice(lua_State *L, nc_device *dev);
nc_device *nc_lua_checkdevice(lua_State *L, int idx, const char *fname); /* Device or spec string */
nc_device *nc_lua_default_device(lua_State *L);
void nc_lua_set_default_device(lua_State *L, nc_device *dev);

/* Per-state random generator. */
nc_rng *nc_lua_rng(lua_State *L);

/* Shapes: a table of non-negative integers (or one integer). Returns ndim. */
int nc_lua_checkshape(lua_State *L, int idx, int64_t *shape, const char *fname);
void nc_lua_pushshape(lua_State *L, int ndim, const int64_t *v);

/* Dims: 1-based, negative from the end; returns 0-based. ndim is the rank to index into. */
int nc_lua_checkdim(lua_State *L, int idx, int ndim, const char *fname);
/* A position into a dim of size n: 1-based, negative from the end; returns it 0-based. */
int64_t nc_lua_checkpos(lua_State *L, int idx, int64_t n, const char *fname);

/* split's size argument at idx: a table of sizes, or one size cutting a dim of dim_size into
 * ceil(dim_size / size) pieces. Sizes live in a userdata left on the stack; returns the count. */
#define NC_LUA_MAX_PARTS 65536
int nc_lua_split_sizes(lua_State *L, int idx, int64_t dim_size, int64_t **sizes, const char *fname);

/* Options tables. Every binding that takes one checks it with nc_lua_checkopts: absent or nil
 * gives 0; anything else must be a table whose keys are all among keys (space-separated names,
 * e.g. "dtype device"), else the error names the offending key and lists the accepted ones.
 * Returns the absolute index of the table. */
int nc_lua_checkopts(lua_State *L, int idx, const char *fname, const char *keys);

/* Readers of one option. opts is what nc_lua_checkopts returned (0: no options), or the index
 * of an argument that is absent, nil or a table; they check no keys: the binding checks the
 * whole table with nc_lua_checkopts first, with every key it reads. A non-table raises. */
/* Pushes opts[key], or nil when there are no options. */
int nc_lua_opt_field(lua_State *L, int opts, const char *key);
double nc_lua_opt_number(lua_State *L, int opts, const char *key, double def, const char *fname);
int64_t nc_lua_opt_integer(lua_State *L, int opts, const char *key, int64_t def, const char *fname);
nc_dtype nc_lua_opt_dtype(lua_State *L, int opts, nc_dtype def, const char *fname); /* opts.dtype */
nc_device *nc_lua_opt_device(lua_State *L, int opts, const char *fname); /* opts.device, or the default */
nc_dtype nc_lua_checkdtype(lua_State *L, int idx, const char *fname);

/* Reports n bytes of device memory to Lua's collector so garbage tensors are reclaimed in
 * step with device allocations. */
void nc_lua_account(lua_State *L, size_t nbytes);

/* Registration of each binding file into the module table on the stack top. */
void nc_lua_add_device(lua_State *L);
void nc_lua_add_tensor(lua_State *L);
void nc_lua_add_creation(lua_State *L);
void nc_lua_add_autograd(lua_State *L);
/* Ops (l_ops.c and the per-family files it calls): module functions, Tensor methods and the
 * arithmetic metamethods. Runs after nc_lua_add_tensor (it extends the Tensor metatable). */
void nc_lua_add_ops(lua_State *L);
void nc_lua_add_text(lua_State *L);
void nc_lua_add_linalg(lua_State *L);
void nc_lua_add_io(lua_State *L);
void nc_lua_add_data(lua_State *L);
void nc_lua_add_json(lua_State *L);
void nc_lua_add_term(lua_State *L);
/* t:is_ready() and nc.synchronize (l_async.c); runs after nc_lua_add_tensor. */
void nc_lua_add_async(lua_State *L);
/* The ops defined by their op-table row (l_table_ops.c): nc.<name> and nc.autograd.<name>, or
 * nc.nn_ops.<name> for ops that are not differentiable. */
void nc_lua_add_table_ops(lua_State *L);
/* netcl.core._optim: the fused optimizer updates behind netcl.optim (l_optim.c). */
void nc_lua_add_optim(lua_State *L);
/* netcl.core._dist: the collectives behind netcl.distributed (l_dist.c). */
void nc_lua_add_dist(lua_State *L);

int nc_lua_open_core(lua_State *L);

#endif

/* Helpers shared by the op binding files (l_ops.c, l_reduce.c, l_index.c, l_view.c, l_random.c). */
#ifndef NETCL_L_OPS_H
#define NETCL_L_OPS_H

#include "l_common.h"

/* A Tensor or a number (integers stay exact) at idx. */
nc_operand nc_lua_checkoperand(lua_State *L, int idx, const char *fname);

/* A number or boolean at idx as a scalar (true = 1). */
nc_scalar nc_lua_checkscalar(lua_State *L, int idx, const char *fname);

/* opts.out: the destination Tensor, or NULL. */
nc_tensor *nc_lua_opt_out(lua_State *L, int opts, const char *fname);

/* opts[field] as a boolean (def when absent). */
bool nc_lua_opt_bool(lua_State *L, int opts, const char *field, bool def);

/* Pushes the result of an op: the destination (opts.out) when there was one, else the new
 * tensor r. Raises fname's error when s failed. */
int nc_lua_result(lua_State *L, nc_status s, int opts, nc_tensor *r, const char *fname);

/* Adds fn (with the op code as its upvalue) as module function and/or Tensor method `name`.
 * module and methods are absolute stack indices (0 = skip). */
void nc_lua_register_op(lua_State *L, int module, int methods, const char *name, lua_CFunction fn, int op);

/* Registers fn (with op as upvalue 1) as `name` on the surfaces where asks for, for Tensors and
 * Nodes alike: NC_LUA_FUNCTION: nc.<name> (module, an absolute index or negative) and
 * nc.autograd.<name>; NC_LUA_METHOD: Tensor and Node methods; NC_LUA_OPERATOR: the Tensor and
 * Node metatables (name is a metamethod). The Node metatable and nc.autograd must exist. */
enum { NC_LUA_FUNCTION = 1, NC_LUA_METHOD = 2, NC_LUA_BOTH = 3, NC_LUA_OPERATOR = 4 };
void nc_lua_bind_op(lua_State *L, int module, const char *name, lua_CFunction fn, int op, int where);

/* The op code given as upvalue 1; *fname is set to its Lua name, "netcl.<name>" (static). */
nc_op nc_lua_opname(lua_State *L, const char **fname);

/* Whether op has a differentiable form (DIFF in the op table's gradient column): a Node operand
 * then records it; otherwise the op applies to the Node's value. */
bool nc_lua_differentiable(nc_op op);

/* x[i] for a Tensor or a Node x at 1 and an integer at 2: the selection along dim 1 (a view;
 * a Node records the differentiable select). The Tensor's __index and the Node's
 * __index_number call it (l_view.c). */
int nc_lua_index_number(lua_State *L);

/* The family registrations nc_lua_add_ops calls (module: the module table's absolute index;
 * methods: the Tensor methods table, for Tensor-only in-place methods). */
void nc_lua_add_reduce(lua_State *L, int module);
void nc_lua_add_index(lua_State *L, int module, int methods);
void nc_lua_add_views(lua_State *L, int module);
void nc_lua_add_random(lua_State *L, int module, int methods);

#endif

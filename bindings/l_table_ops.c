/* The Lua bindings of the ops defined by their op-table row (KERNEL(name, (signature)),
 * netcl/optable.h), generated from the signature: one binding per op, for Tensors and Nodes
 * alike. Tensor arguments, optional tensors and integers are read positionally in signature
 * order; numbers and flags come from a trailing options table (checked: unknown keys are
 * errors). A differentiable op is nc.<name> and nc.autograd.<name>, and records on the active
 * tape when a tensor argument is a Node; any other is nc.nn_ops.<name> (backward ops and the
 * like). A differentiable op returns its one output; any other returns its output followed by its
 * saved outputs (kmeans_assign: labels, dist). */
#include "l_autograd.h"
#include "l_ops.h"

/* ---- per-argument code ------------------------------------------------------------------------- */
/* Locals. */
#define LB_DECL_tensor(x) nc_tensor *x##_t = NULL; nc_node *x##_n = NULL;
#define LB_DECL_opt_tensor(x) nc_tensor *x##_t = NULL; nc_node *x##_n = NULL;
#define LB_DECL_const_tensor(x) nc_tensor *x##_t = NULL;
#define LB_DECL_integer(x) int64_t x = 0;
#define LB_DECL_number(x, d) double x = (d);
#define LB_DECL_flag(x, d) bool x = (d);
#define LB_DECL_saved(x)

/* Positional arguments, counted. */
#define LB_COUNT_tensor(x) +1
#define LB_COUNT_opt_tensor(x) +1
#define LB_COUNT_const_tensor(x) +1
#define LB_COUNT_integer(x) +1
#define LB_COUNT_number(x, d)
#define LB_COUNT_flag(x, d)
#define LB_COUNT_saved(x)

/* Reading them (as_node: tensors become nodes, Tensors constant ones). */
#define LB_READ_tensor(x)                                 \
  if (as_node)                                            \
    x##_n = nc_lua_checknodelike(L, at, fname);           \
  else                                                    \
    x##_t = nc_lua_checktensor_f(L, at, fname);           \
  at++;
#define LB_READ_opt_tensor(x)                             \
  if (!lua_isnoneornil(L, at)) {                          \
    if (as_node)                                          \
      x##_n = nc_lua_checknodelike(L, at, fname);         \
    else                                                  \
      x##_t = nc_lua_checktensor_f(L, at, fname);         \
  }                                                       \
  at++;
#define LB_READ_const_tensor(x) x##_t = nc_lua_ag_checktensor(L, at++, fname);
#define LB_READ_integer(x) x = nc_lua_checkinteger(L, at++, fname);
#define LB_READ_number(x, d)
#define LB_READ_flag(x, d)
#define LB_READ_saved(x)

/* The options table's keys, and reading them. */
#define LB_KEY_tensor(x)
#define LB_KEY_opt_tensor(x)
#define LB_KEY_const_tensor(x)
#define LB_KEY_integer(x)
#define LB_KEY_number(x, d) " " #x
#define LB_KEY_flag(x, d) " " #x
#define LB_KEY_saved(x)
#define LB_OPT_tensor(x)
#define LB_OPT_opt_tensor(x)
#define LB_OPT_const_tensor(x)
#define LB_OPT_integer(x)
#define LB_OPT_number(x, d) x = nc_lua_opt_number(L, opts, #x, (d), fname);
#define LB_OPT_flag(x, d) x = nc_lua_opt_bool(L, opts, #x, (d));
#define LB_OPT_saved(x)

/* A binding of an op that is not differentiable never makes nodes. */
#define LB_UNUSED_tensor(x) (void)x##_n;
#define LB_UNUSED_opt_tensor(x) (void)x##_n;
#define LB_UNUSED_const_tensor(x)
#define LB_UNUSED_integer(x)
#define LB_UNUSED_number(x, d)
#define LB_UNUSED_flag(x, d)
#define LB_UNUSED_saved(x)

/* Arguments of the pure op (saved outputs not wanted) and of the differentiable one. */
#define LB_C_tensor(x) x##_t,
#define LB_C_opt_tensor(x) x##_t,
#define LB_C_const_tensor(x) x##_t,
#define LB_C_integer(x) x,
#define LB_C_number(x, d) x,
#define LB_C_flag(x, d) x,
#define LB_C_saved(x) NULL,
#define LB_AG_tensor(x) x##_n,
#define LB_AG_opt_tensor(x) x##_n,
#define LB_AG_const_tensor(x) x##_t,
#define LB_AG_integer(x) x,
#define LB_AG_number(x, d) x,
#define LB_AG_flag(x, d) x,
#define LB_AG_saved(x)

/* The part shared by both kinds of binding: reads every argument into locals. */
#define LB_READ_ALL(n, sig, diff)                                                     \
  const char *fname = "netcl." #n;                                                  \
  NC_PP_MAP(LB_DECL_, NC_PP_UNPAREN sig)                                            \
  const int npos = 0 NC_PP_MAP(LB_COUNT_, NC_PP_UNPAREN sig);                       \
  const bool as_node = (diff) && nc_lua_has_node(L, 1, npos);                       \
  int at = 1;                                                                       \
  NC_PP_MAP(LB_READ_, NC_PP_UNPAREN sig)                                            \
  int opts = nc_lua_checkopts(L, at, fname, "" NC_PP_MAP(LB_KEY_, NC_PP_UNPAREN sig)); \
  (void)opts;                                                                       \
  NC_PP_MAP(LB_OPT_, NC_PP_UNPAREN sig)

#define LB_PURE_RESULT(n, sig)                                   \
  nc_tensor *out;                                                \
  NC_LUA_CHECK(L, fname, nc_##n(NC_PP_MAP(LB_C_, NC_PP_UNPAREN sig) & out)); \
  nc_lua_pushtensor_new(L, out);                                 \
  return 1;

/* ---- the bindings --------------------------------------------------------------------------------- */
#define LB_FN_DIFF_ENTRY(...)
#define LB_FN_DIFF_KERNEL(n, sig)                                                         \
  static int lb_##n(lua_State *L) {                                                       \
    LB_READ_ALL(n, sig, true)                                                             \
    if (as_node) {                                                                        \
      nc_node *node;                                                                      \
      return nc_lua_ag_result(L, nc_ag_##n(nc_lua_active_tape(L), NC_PP_MAP(LB_AG_, NC_PP_UNPAREN sig) & node), \
                              &node, fname);                                              \
    }                                                                                     \
    LB_PURE_RESULT(n, sig)                                                                \
  }
/* A binding of an op that is not differentiable returns the saved outputs too. */
#define LB_SDECL_tensor(x)
#define LB_SDECL_opt_tensor(x)
#define LB_SDECL_const_tensor(x)
#define LB_SDECL_integer(x)
#define LB_SDECL_number(x, d)
#define LB_SDECL_flag(x, d)
#define LB_SDECL_saved(x) nc_tensor *x##_s = NULL;
#define LB_S_tensor(x) x##_t,
#define LB_S_opt_tensor(x) x##_t,
#define LB_S_const_tensor(x) x##_t,
#define LB_S_integer(x) x,
#define LB_S_number(x, d) x,
#define LB_S_flag(x, d) x,
#define LB_S_saved(x) &x##_s,
#define LB_SPUSH_tensor(x)
#define LB_SPUSH_opt_tensor(x)
#define LB_SPUSH_const_tensor(x)
#define LB_SPUSH_integer(x)
#define LB_SPUSH_number(x, d)
#define LB_SPUSH_flag(x, d)
#define LB_SPUSH_saved(x) nc_lua_pushtensor_new(L, x##_s), nres++;

#define LB_FN_NODIFF_ENTRY(...)
#define LB_FN_NODIFF_KERNEL(n, sig)                                              \
  static int lb_##n(lua_State *L) {                                              \
    LB_READ_ALL(n, sig, false)                                                   \
    NC_PP_MAP(LB_UNUSED_, NC_PP_UNPAREN sig)                                     \
    NC_PP_MAP(LB_SDECL_, NC_PP_UNPAREN sig)                                      \
    nc_tensor *out;                                                              \
    NC_LUA_CHECK(L, fname, nc_##n(NC_PP_MAP(LB_S_, NC_PP_UNPAREN sig) & out));   \
    int nres = 1;                                                                \
    nc_lua_pushtensor_new(L, out);                                               \
    NC_PP_MAP(LB_SPUSH_, NC_PP_UNPAREN sig)                                      \
    return nres;                                                                 \
  }
#define LB_FN_IF_DIFF(fn) LB_FN_DIFF_
#define LB_FN_IF_NODIFF LB_FN_NODIFF_
#define LB_FN_DIFF_(entry) NC_PP_CAT(LB_FN_DIFF_, entry)
#define LB_FN_NODIFF_(entry) NC_PP_CAT(LB_FN_NODIFF_, entry)
#define LB_FN_ROW(id, name, family, arity, dtypes, result, entry, grad, kernel, cpu) LB_FN_IF_##grad(entry)
NC_OPS(LB_FN_ROW)

/* {name, binding, differentiable} of every KERNEL row. */
typedef struct {
  const char *name;
  lua_CFunction fn;
  bool diff;
} table_binding;
#define LB_ROW_ENTRY(...)
#define LB_ROW_KERNEL(n, sig) {#n, lb_##n, LB_DIFF_FLAG
#define LB_FLAG_DIFF(fn) true},
#define LB_FLAG_NODIFF false},
#define LB_REG_ROW(id, name, family, arity, dtypes, result, entry, grad, kernel, cpu) \
  NC_PP_CAT(LB_ROW_, entry) NC_PP_CAT(LB_IF_KERNEL_, entry)(LB_FLAG_##grad)
#define LB_IF_KERNEL_ENTRY(...) LB_DROP_
#define LB_IF_KERNEL_KERNEL(n, sig) LB_KEEP_
#define LB_KEEP_(x) x
#define LB_DROP_(x)
#define LB_DIFF_FLAG
static const table_binding bindings[] = {NC_OPS(LB_REG_ROW){NULL, NULL, false}};

void nc_lua_add_table_ops(lua_State *L) {
  int module = lua_gettop(L);
  luaL_getsubtable(L, module, "nn_ops");
  int nn_ops = lua_gettop(L);
  for (const table_binding *b = bindings; b->name; b++) {
    const nc_op_info *o = nc_op_find(b->name);
    if (b->diff) {
      nc_lua_bind_op(L, module, b->name, b->fn, o->op, NC_LUA_FUNCTION);
    } else {
      lua_pushinteger(L, o->op);
      lua_pushcclosure(L, b->fn, 1);
      lua_setfield(L, nn_ops, b->name);
    }
  }
  lua_settop(L, module);
}

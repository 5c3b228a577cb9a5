/* Argument signatures in the op table, and the preprocessor that turns one into the declarations
 * and the Lua binding of an op, so that an op defined by its row (backend entry
 * KERNEL(name, (args...)), netcl/optable.h) needs no hand-written prototype, binding or
 * registration.
 *
 * A signature is a parenthesized list of arguments, in the order the C function takes them and
 * the Lua binding reads them:
 *   tensor(x)          an input tensor (a Node in the differentiable form)
 *   opt_tensor(x)      an optional input tensor (NULL / nil when absent)
 *   const_tensor(x)    an input that takes no gradient (indices, targets, saved statistics)
 *   integer(x)         a required integer, given positionally in Lua
 *   number(x, d)       a number, option `x` in Lua's trailing options table (default d)
 *   flag(x, d)         a boolean option `x` (default d)
 *   saved(x)           an extra output of the pure op (nc_tensor **x; NULL: not wanted)
 * The pure op is nc_<name>(args..., nc_tensor **out) and its differentiable form (a DIFF row)
 * nc_ag_<name>(nc_tape *t, args without the saved ones..., nc_node **out).
 * None of the argument kinds' names may be defined as a macro. */
#ifndef NETCL_OP_SIG_H
#define NETCL_OP_SIG_H

/* The parameter types the signatures expand to. */
#include <stdbool.h>
#include <stdint.h>

/* Two pasting macros: NC_PP_CAT picks a row's generator by its entry or gradient column, and
 * NC_PP_MAP counts with NC_PP_JOIN, which must differ (a macro does not expand inside itself). */
#define NC_PP_CAT_(a, b) a##b
#define NC_PP_CAT(a, b) NC_PP_CAT_(a, b)
#define NC_PP_JOIN_(a, b) a##b
#define NC_PP_JOIN(a, b) NC_PP_JOIN_(a, b)
#define NC_PP_UNPAREN(...) __VA_ARGS__
#define NC_PP_NARGS(...) NC_PP_NARGS_(__VA_ARGS__, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define NC_PP_NARGS_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, n, ...) n

/* NC_PP_MAP(P, a, b, ...) is P##a P##b ...: each argument's kind pasted onto the prefix P (so
 * P##tensor(x) becomes, say, NC_SIG_C_tensor(x)), for up to 12 arguments. */
#define NC_PP_MAP(P, ...) NC_PP_MAP_N(NC_PP_NARGS(__VA_ARGS__), P, __VA_ARGS__)
#define NC_PP_MAP_N(n, P, ...) NC_PP_JOIN(NC_PP_MAP_, n)(P, __VA_ARGS__)
#define NC_PP_MAP_1(P, a) P##a
#define NC_PP_MAP_2(P, a, ...) P##a NC_PP_MAP_1(P, __VA_ARGS__)
#define NC_PP_MAP_3(P, a, ...) P##a NC_PP_MAP_2(P, __VA_ARGS__)
#define NC_PP_MAP_4(P, a, ...) P##a NC_PP_MAP_3(P, __VA_ARGS__)
#define NC_PP_MAP_5(P, a, ...) P##a NC_PP_MAP_4(P, __VA_ARGS__)
#define NC_PP_MAP_6(P, a, ...) P##a NC_PP_MAP_5(P, __VA_ARGS__)
#define NC_PP_MAP_7(P, a, ...) P##a NC_PP_MAP_6(P, __VA_ARGS__)
#define NC_PP_MAP_8(P, a, ...) P##a NC_PP_MAP_7(P, __VA_ARGS__)
#define NC_PP_MAP_9(P, a, ...) P##a NC_PP_MAP_8(P, __VA_ARGS__)
#define NC_PP_MAP_10(P, a, ...) P##a NC_PP_MAP_9(P, __VA_ARGS__)
#define NC_PP_MAP_11(P, a, ...) P##a NC_PP_MAP_10(P, __VA_ARGS__)
#define NC_PP_MAP_12(P, a, ...) P##a NC_PP_MAP_11(P, __VA_ARGS__)

/* Parameters of the pure op, each followed by a comma. */
#define NC_SIG_C_tensor(x) nc_tensor *x,
#define NC_SIG_C_opt_tensor(x) nc_tensor *x,
#define NC_SIG_C_const_tensor(x) nc_tensor *x,
#define NC_SIG_C_integer(x) int64_t x,
#define NC_SIG_C_number(x, d) double x,
#define NC_SIG_C_flag(x, d) bool x,
#define NC_SIG_C_saved(x) nc_tensor **x,

/* Parameters of the differentiable op. */
#define NC_SIG_AG_tensor(x) nc_node *x,
#define NC_SIG_AG_opt_tensor(x) nc_node *x,
#define NC_SIG_AG_const_tensor(x) nc_tensor *x,
#define NC_SIG_AG_integer(x) int64_t x,
#define NC_SIG_AG_number(x, d) double x,
#define NC_SIG_AG_flag(x, d) bool x,
#define NC_SIG_AG_saved(x)

/* The declarations of a row's ops: KERNEL rows declare nc_<name> (NC_SIG_DECLARE_ENTRY) and,
 * when differentiable, nc_ag_<name> (NC_SIG_DECLARE_AG); other rows declare nothing here. */
#define NC_SIG_DECL_ENTRY(...)
#define NC_SIG_DECL_KERNEL(n, sig) nc_status nc_##n(NC_PP_MAP(NC_SIG_C_, NC_PP_UNPAREN sig) nc_tensor **out);
#define NC_SIG_DECLARE_PURE_(id, name, family, arity, dtypes, result, entry, grad, kernel, cpu) \
  NC_PP_CAT(NC_SIG_DECL_, entry)

#define NC_SIG_AGD_ENTRY(...)
#define NC_SIG_AGD_KERNEL(n, sig) \
  nc_status nc_ag_##n(nc_tape *t, NC_PP_MAP(NC_SIG_AG_, NC_PP_UNPAREN sig) nc_node **out);
#define NC_SIG_AGD_IF_DIFF(fn) NC_SIG_AGD_KEEP_
#define NC_SIG_AGD_IF_NODIFF NC_SIG_AGD_DROP_
#define NC_SIG_AGD_KEEP_(entry) NC_PP_CAT(NC_SIG_AGD_, entry)
#define NC_SIG_AGD_DROP_(entry)
#define NC_SIG_DECLARE_AG_(id, name, family, arity, dtypes, result, entry, grad, kernel, cpu) \
  NC_SIG_AGD_IF_##grad(entry)

#endif

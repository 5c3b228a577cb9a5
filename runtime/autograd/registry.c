/* The differentiable ops as data, generated from the op table's gradient column: the names the
 * Lua binding registers and the gradient-check suite walks. Each DIFF row also names its
 * differentiable op here, so a row whose function does not exist fails the build. */
#include <string.h>
#include "netcl/autograd_ops.h"

/* NC_AG_DIFF(fn)(x) keeps x, NC_AG_NODIFF(x) drops it. */
#define NC_AG_KEEP_(x) x,
#define NC_AG_DROP_(x)
#define NC_AG_DIFF(fn) NC_AG_KEEP_
#define NC_AG_NODIFF NC_AG_DROP_

#define NC_AG_NAME_(id, name, family, arity, dtypes, result, entry, grad, kernel, cpu) NC_AG_##grad(name)
const char *const nc_ag_op_names[] = {NC_OPS(NC_AG_NAME_)};
#undef NC_AG_NAME_
const int nc_ag_op_count = (int)(sizeof nc_ag_op_names / sizeof nc_ag_op_names[0]);

/* Every DIFF row's function, named so that an undeclared one is a compile error (sizeof: no
 * reference to the symbol, so this file depends on none of the rules). */
#define NC_AG_FN_DIFF(fn) sizeof(&(fn)),
#define NC_AG_FN_NODIFF
#define NC_AG_FN_(id, name, family, arity, dtypes, result, entry, grad, kernel, cpu) NC_AG_FN_##grad
static const size_t differentiable_ops[] = {NC_OPS(NC_AG_FN_)};
#undef NC_AG_FN_

bool nc_ag_op_known(const char *name) {
  (void)differentiable_ops;
  for (int i = 0; i < nc_ag_op_count; i++)
    if (!strcmp(nc_ag_op_names[i], name)) return true;
  return false;
}

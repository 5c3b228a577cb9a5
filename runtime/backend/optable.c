/* The op table's rows. It belongs to the backend dispatch layer: backends read it (their kernels
 * take op codes from it, their dispatch tables are indexed by it) and the ops above use it. */
#include <string.h>
#include "netcl/optable.h"

static const nc_op_info table[NC_OP_COUNT] = {
#define NC_OP_ROW_(id, name, family, arity, dtypes, result, entry, grad, kernel, cpu) \
  {NC_OP_##id, #id, name, NC_FAMILY_##family, arity, dtypes, result, kernel, cpu},
    NC_OPS(NC_OP_ROW_)
#undef NC_OP_ROW_
};

const nc_op_info *nc_op_get(nc_op op) { return (unsigned)op < NC_OP_COUNT ? &table[op] : NULL; }

const nc_op_info *nc_op_find(const char *name) {
  for (int i = 0; i < NC_OP_COUNT; i++)
    if (strcmp(table[i].name, name) == 0) return &table[i];
  return NULL;
}

const char *nc_op_family_name(nc_op_family f) {
  static const char *const names[NC_FAMILY_COUNT] = {"unary", "binary", "where", "reduce", "scan",
                                                     "softmax", "index", "shape", "sort", "random",
                                                     "linalg", "conv", "pool", "norm", "loss",
                                                     "data", "optim", "view", "activation", "image",
                                                     "attention", "cluster"};
  return (unsigned)f < NC_FAMILY_COUNT ? names[f] : "unknown";
}

bool nc_op_accepts(nc_op op, nc_dtype d) {
  const nc_op_info *o = nc_op_get(op);
  if (!o || !nc_dtype_valid(d)) return false;
  return (o->dtypes & (1u << d)) || (nc_dtype_is_storage(d) && (o->dtypes & NC_DT_WIDEN));
}

nc_status nc_op_check_dtype(nc_op op, nc_dtype d) {
  if (nc_op_accepts(op, d)) return NC_OK;
  if (nc_dtype_is_storage(d)) return nc_storage_dtype_error(d);
  const nc_op_info *o = nc_op_get(op);
  return nc_error(NC_ERR_DTYPE, "%s does not take %s tensors", o ? o->name : "this op", nc_dtype_name(d));
}

nc_status nc_storage_dtype_error(nc_dtype d) {
  return nc_error(NC_ERR_DTYPE, "dtype %s is a storage type; convert it with t:float() first", nc_dtype_name(d));
}

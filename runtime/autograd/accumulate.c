#include "accumulate.h"
#include "netcl/elementwise.h"

nc_status nc_ag_accumulate(nc_tensor *a, nc_tensor *b, nc_tensor **out) {
  return nc_binary(NC_OP_ADD, nc_operand_tensor(a), nc_operand_tensor(b), out);
}

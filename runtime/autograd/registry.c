/* The list of differentiable ops (NC_AG_OPS) as data, for the binding and the test suite. */
#include <string.h>
#include "netcl/autograd_ops.h"

#define NC_AG_NAME_(name) #name,
const char *const nc_ag_op_names[] = {NC_AG_OPS(NC_AG_NAME_)};
#undef NC_AG_NAME_
const int nc_ag_op_count = (int)(sizeof nc_ag_op_names / sizeof nc_ag_op_names[0]);

bool nc_ag_op_known(const char *name) {
  for (int i = 0; i < nc_ag_op_count; i++)
    if (!strcmp(nc_ag_op_names[i], name)) return true;
  return false;
}

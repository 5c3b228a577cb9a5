/* The ops defined by their op-table row (KERNEL(name, (signature)) in netcl/optable.h): their
 * declarations are generated from the signature (netcl/op_sig.h), so an op of this kind is
 * declared by its row alone. For each such row:
 *   nc_status nc_<name>(inputs and options in signature order, saved outputs, nc_tensor **out);
 * *out receives the op's result, a new contiguous tensor; each saved output (statistics a
 * backward op needs) is returned likewise, or skipped when its pointer is NULL. The rows'
 * comments in netcl/optable.h say what each op computes and which errors it reports. */
#ifndef NETCL_TABLE_OPS_H
#define NETCL_TABLE_OPS_H

#include <stdbool.h>
#include "optable.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

NC_OPS(NC_SIG_DECLARE_PURE_)

#ifdef __cplusplus
}
#endif

#endif

/* libnetcl: tensors, devices and ops in C. Include this one header. */
#ifndef NETCL_H
#define NETCL_H

#include "status.h"
#include "dtype.h"
#include "half.h"
#include "device.h"
#include "memory.h"
#include "storage.h"
#include "tensor.h"
#include "random.h"
#include "threads.h"
#include "creation.h"
#include "copy.h"
#include "format.h"
#include "autograd.h"
#include "autograd_ops.h"
#include "optable.h"
#include "table_ops.h"
#include "elementwise.h"
#include "reduce.h"
#include "index.h"
#include "join.h"
#include "sort.h"
#include "bpe.h"
#include "linalg.h"
#include "conv.h"
#include "pool.h"
#include "norm.h"
#include "embedding.h"
#include "loss.h"
#include "safetensors.h"
#include "npy.h"
#include "idx.h"
#include "batch.h"
#include "shuffle.h"
#include "workers.h"
#include "cifar.h"
#include "optim.h"
#include "dist.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library version ("x.y.z"). */
const char *nc_version(void);

#ifdef __cplusplus
}
#endif

#endif

/* Embedding lookup and its backward (a scatter-add). */
#ifndef NETCL_EMBEDDING_H
#define NETCL_EMBEDDING_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out[..., :] = weight[idx[...], :]: weight [V, D] (float32/float64), idx int64 or int32 of
 * any shape holding 0-based rows. Result idx.shape + [D]. Errors: NC_ERR_INDEX naming the
 * first index outside [0, V). */
nc_status nc_embedding(nc_tensor *weight, nc_tensor *idx, nc_tensor **out);

/* d weight [V, D] = sum over positions of dout rows into the rows idx names; positions with
 * idx == padding_idx contribute nothing (padding_idx < 0: none). */
nc_status nc_embedding_backward(nc_tensor *dout, nc_tensor *idx, int64_t num_embeddings, int64_t padding_idx,
                                nc_tensor **dweight);

#ifdef __cplusplus
}
#endif

#endif

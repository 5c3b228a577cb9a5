/* Embedding lookup and its scatter-add backward: checks, allocation, dispatch. */
#include "backend/dispatch.h"
#include "core/check.h"
#include "core/device_impl.h"
#include "netcl/creation.h"
#include "netcl/embedding.h"
#include "ops/dense.h"
#include "ops/support.h"

static nc_status check_idx(const nc_tensor *idx, const nc_device *dev) {
  if (idx->dtype != NC_INT64 && idx->dtype != NC_INT32)
    return nc_error(NC_ERR_DTYPE, "indices must be int64 or int32, got %s", nc_dtype_name(idx->dtype));
  if (nc_tensor_device(idx) != dev) return nc_error(NC_ERR_DEVICE, "indices are on another device");
  if (idx->ndim + 1 > NC_MAX_DIMS) return nc_error(NC_ERR_SHAPE, "indices have too many dims");
  return NC_OK;
}

nc_status nc_embedding(nc_tensor *weight, nc_tensor *idx, nc_tensor **out) {
  if (!nc_dtype_is_float(weight->dtype))
    return nc_error(NC_ERR_DTYPE, "weight must be float32 or float64, got %s", nc_dtype_name(weight->dtype));
  if (weight->ndim != 2)
    return nc_error(NC_ERR_SHAPE, "weight must be 2-D [num_embeddings, dim], got %d dims", weight->ndim);
  nc_device *dev = nc_tensor_device(weight);
  NC_TRY(check_idx(idx, dev));
  int64_t shape[NC_MAX_DIMS];
  for (int i = 0; i < idx->ndim; i++) shape[i] = idx->shape[i];
  shape[idx->ndim] = weight->shape[1];
  nc_tensor *r = NULL, *dw = NULL, *di = NULL;
  nc_status s = nc_tensor_empty(dev, weight->dtype, idx->ndim + 1, shape, 0, &r);
  if (s == NC_OK) s = nc_dense_operand(weight, &dw);
  if (s == NC_OK) s = nc_dense_operand(idx, &di);
  nc_index_verdict bad = {0, NULL};
  if (s == NC_OK && nc_tensor_numel(r) > 0) s = nc_bk_embedding(dw, di, r, &bad);
  if (s == NC_OK)
    s = nc_index_verdict_settle(&bad, "embedding", di,
                                "index %lld at position %lld is out of range for %lld embeddings (0-based)",
                                weight->shape[0], 0);
  nc_tensor_release(bad.flag);
  nc_tensor_release(dw), nc_tensor_release(di);
  if (s != NC_OK) {
    nc_tensor_release(r);
    return s;
  }
  *out = r;
  return NC_OK;
}

nc_status nc_embedding_backward(nc_tensor *dout, nc_tensor *idx, int64_t num_embeddings, int64_t padding_idx,
                                nc_tensor **dweight) {
  if (!nc_dtype_is_float(dout->dtype))
    return nc_error(NC_ERR_DTYPE, "the gradient must be float32 or float64, got %s",
                    nc_dtype_name(dout->dtype));
  nc_device *dev = nc_tensor_device(dout);
  NC_TRY(check_idx(idx, dev));
  bool ok = dout->ndim == idx->ndim + 1;
  for (int i = 0; ok && i < idx->ndim; i++) ok = dout->shape[i] == idx->shape[i];
  if (!ok) return nc_error(NC_ERR_SHAPE, "the gradient must have the indices' shape plus the embedding dim");
  if (num_embeddings < 0) return nc_error(NC_ERR_ARG, "negative num_embeddings");
  int64_t shape[2] = {num_embeddings, dout->shape[dout->ndim - 1]};
  nc_tensor *r = NULL, *dd = NULL, *di = NULL;
  nc_status s = nc_tensor_empty(dev, dout->dtype, 2, shape, 0, &r);
  if (s == NC_OK) s = nc_dense_operand(dout, &dd);
  if (s == NC_OK) s = nc_dense_operand(idx, &di);
  if (s == NC_OK && nc_tensor_numel(r) > 0) s = nc_bk_embedding_bwd(dd, di, padding_idx, r);
  nc_tensor_release(dd), nc_tensor_release(di);
  if (s != NC_OK) {
    nc_tensor_release(r);
    return s;
  }
  *dweight = r;
  return NC_OK;
}

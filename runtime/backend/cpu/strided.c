#include "strided.h"

void nc_cpu_iter_init(nc_cpu_iter *it, int nops, const nc_tensor *const *ts) {
  const nc_tensor *t0 = ts[0];
  it->nops = nops;
  for (int k = 0; k < nops; k++) it->offset[k] = ts[k]->offset;
  int n = 0;
  for (int d = 0; d < t0->ndim; d++) {
    if (t0->shape[d] == 1) continue;
    if (n > 0) {
      bool merge = true;
      for (int k = 0; k < nops; k++)
        if (it->strides[k][n - 1] != ts[k]->strides[d] * t0->shape[d]) merge = false;
      if (merge) {
        it->shape[n - 1] *= t0->shape[d];
        for (int k = 0; k < nops; k++) it->strides[k][n - 1] = ts[k]->strides[d];
        continue;
      }
    }
    it->shape[n] = t0->shape[d];
    for (int k = 0; k < nops; k++) it->strides[k][n] = ts[k]->strides[d];
    n++;
  }
  if (n == 0) {
    it->shape[0] = 1;
    for (int k = 0; k < nops; k++) it->strides[k][0] = 1;
    n = 1;
  }
  it->ndim = n;
  it->inner = it->shape[n - 1];
  it->rows = 1;
  for (int d = 0; d < n - 1; d++) it->rows *= it->shape[d];
  if (nc_tensor_numel(t0) == 0) it->rows = 0;
}

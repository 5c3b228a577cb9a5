/* The CPU backend's linear-algebra and layer entries (gemm, conv, pool, norm, embedding,
 * loss), and the host GEMM they share. */
#ifndef NETCL_CPU_LINALG_H
#define NETCL_CPU_LINALG_H

#include "backend/dispatch.h"
#include "core/device_impl.h"

/* C = alpha * A @ B + beta * C on host memory with any element strides (A: sam, sak; B: sbk,
 * sbn; C: csm, csn, non-overlapping). OpenBLAS when the build has it (unless NETCL_BLAS=0 in
 * the environment), else the blocked C GEMM. */
nc_status nc_cpu_sgemm(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t sam, int64_t sak,
                       const float *b, int64_t sbk, int64_t sbn, float beta, float *c, int64_t csm,
                       int64_t csn);
nc_status nc_cpu_dgemm(int64_t m, int64_t n, int64_t k, double alpha, const double *a, int64_t sam,
                       int64_t sak, const double *b, int64_t sbk, int64_t sbn, double beta, double *c,
                       int64_t csm, int64_t csn);

/* float32 and float64 products of a descriptor (cpu_gemm.c). */
nc_status nc_cpu_gemm(const nc_gemm_desc *g);
/* bfloat16 and float16 products (cpu_gemm_lowp.c): through float32 and nc_cpu_sgemm, the result
 * rounded once into C. */
nc_status nc_cpu_gemm_lowp(const nc_gemm_desc *g);
/* The backend's GEMM entry (cpu_gemm_lowp.c): nc_cpu_gemm_lowp for the storage dtypes, else
 * nc_cpu_gemm. */
nc_status nc_cpu_gemm_entry(const nc_gemm_desc *g);
nc_status nc_cpu_conv2d(const nc_conv2d_desc *p, const nc_tensor *x, const nc_tensor *w,
                        const nc_tensor *bias, nc_tensor *y);
nc_status nc_cpu_conv2d_backward_input(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *w,
                                       nc_tensor *dx);
nc_status nc_cpu_conv2d_backward_weight(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *x,
                                        nc_tensor *dw);
nc_status nc_cpu_pool2d(const nc_pool2d_desc *p, const nc_tensor *x, nc_tensor *y, nc_tensor *indices);
nc_status nc_cpu_pool2d_backward(const nc_pool2d_desc *p, const nc_tensor *dy, const nc_tensor *indices,
                                 nc_tensor *dx);
nc_status nc_cpu_batch_norm(const nc_tensor *x, const nc_tensor *weight, const nc_tensor *bias,
                            nc_tensor *running_mean, nc_tensor *running_var, bool training, double momentum,
                            double eps, nc_tensor *y, nc_tensor *save_mean, nc_tensor *save_invstd);
nc_status nc_cpu_batch_norm_backward(const nc_tensor *dy, const nc_tensor *x, const nc_tensor *weight,
                                     const nc_tensor *mean, const nc_tensor *invstd, bool training,
                                     nc_tensor *dx, nc_tensor *dweight, nc_tensor *dbias);
nc_status nc_cpu_row_norm(bool rms, const nc_tensor *x, const nc_tensor *weight, const nc_tensor *bias,
                          double eps, nc_tensor *y, nc_tensor *mean, nc_tensor *rstd);
nc_status nc_cpu_row_norm_backward(bool rms, const nc_tensor *dy, const nc_tensor *x, const nc_tensor *weight,
                                   const nc_tensor *mean, const nc_tensor *rstd, nc_tensor *dx,
                                   nc_tensor *dweight, nc_tensor *dbias);
nc_status nc_cpu_embedding(const nc_tensor *weight, const nc_tensor *idx, nc_tensor *out, nc_index_verdict *bad);
nc_status nc_cpu_embedding_backward(const nc_tensor *dout, const nc_tensor *idx, int64_t padding_idx,
                                    nc_tensor *dweight);
nc_status nc_cpu_cross_entropy(const nc_tensor *logits, const nc_tensor *targets, int64_t ignore_index,
                               double label_smoothing, int reduction, nc_tensor *loss, nc_tensor *lse,
                               nc_index_verdict *bad);
nc_status nc_cpu_cross_entropy_backward(const nc_tensor *dloss, const nc_tensor *logits,
                                        const nc_tensor *targets, const nc_tensor *lse, int64_t ignore_index,
                                        double label_smoothing, int reduction, nc_tensor *dlogits);

/* Host pointer of element 0 of a CPU tensor's storage (add t->offset yourself). */
static inline void *nc_cpu_base(const nc_tensor *t) { return nc_storage_host_ptr(t->storage); }

#endif

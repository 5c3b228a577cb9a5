/* The CPU backend: plain C with OpenMP; the reference every other backend is tested against. */
#ifndef NETCL_CPU_BACKEND_H
#define NETCL_CPU_BACKEND_H

#include "backend/dispatch.h"
#include "core/device_impl.h"

nc_status nc_cpu_device_create(nc_device **out);

/* The device interface: host memory (cpu_backend.c). */
nc_status nc_cpu_alloc(nc_device *d, size_t n, void **h);
void nc_cpu_release(nc_device *d, void *h);
void *nc_cpu_host_ptr(nc_device *d, void *h);
nc_status nc_cpu_write(nc_device *d, void *h, size_t off, const void *src, size_t n);
nc_status nc_cpu_read(nc_device *d, void *h, size_t off, void *dst, size_t n);
nc_status nc_cpu_sync(nc_device *d);

/* The foundation ops (cpu_backend.c). */
nc_status nc_cpu_fill(nc_tensor *t, double v);
nc_status nc_cpu_copy(nc_tensor *dst, const nc_tensor *src);
nc_status nc_cpu_arange(nc_tensor *t, double start, double step);
nc_status nc_cpu_random(nc_tensor *t, int kind, uint64_t seed, uint64_t offset, double a, double b);
/* fill and copy where a storage dtype (bfloat16, float16) is involved (cpu_half.c). */
nc_status nc_cpu_fill_half(nc_tensor *t, double v);
nc_status nc_cpu_copy_half(nc_tensor *dst, const nc_tensor *src);
/* The row conversions those use (cpu_half.c), for backend code that converts by itself (the
 * bfloat16 and float16 GEMM): n elements of storage dtype dt at s (stride ss) into float32 at d
 * (stride ds), exactly; and float32 into dt, rounded to nearest, ties to even. */
void nc_cpu_half_to_f32(nc_dtype dt, float *d, int64_t ds, const uint16_t *s, int64_t ss, int64_t n);
void nc_cpu_f32_to_half(nc_dtype dt, uint16_t *d, int64_t ds, const float *s, int64_t ss, int64_t n);

/* Ops defined by their op-table row (KERNEL(name, sig)): nc_cpu_<name>, one per row. */
#define NC_CPU_KDECL_ENTRY(...)
#define NC_CPU_KDECL_KERNEL(n, sig) nc_status nc_cpu_##n(const nc_kernel_call *c);
#define NC_CPU_KDECL_(id, name, family, arity, dtypes, result, entry, grad, kernel, cpu) \
  NC_PP_CAT(NC_CPU_KDECL_, entry)
NC_OPS(NC_CPU_KDECL_)

/* Op entries (backend/dispatch.h), one file per family. */
nc_status nc_cpu_unary(nc_op op, nc_tensor *out, const nc_tensor *x, const nc_scalar *p);
nc_status nc_cpu_binary(nc_op op, nc_tensor *out, const nc_operand *a, const nc_operand *b);
nc_status nc_cpu_where(nc_tensor *out, const nc_tensor *cond, const nc_operand *a, const nc_operand *b);
nc_status nc_cpu_reduce(nc_op op, nc_tensor *out, nc_tensor *idx, const nc_tensor *x, int nred,
                        const nc_reduce_args *args);
nc_status nc_cpu_scan(nc_op op, nc_tensor *out, const nc_tensor *x);
nc_status nc_cpu_softmax(nc_op op, nc_tensor *out, const nc_tensor *x);
nc_status nc_cpu_index(nc_op op, nc_tensor *out, const nc_tensor *x, const nc_tensor *idx, int dim);
nc_status nc_cpu_sort(nc_tensor *indices, const nc_tensor *x, bool descending);
nc_status nc_cpu_sample(nc_op op, nc_tensor *out, const nc_tensor *p, uint64_t seed, uint64_t offset, int64_t lo,
                        uint64_t range);
nc_status nc_cpu_sgd_step(nc_tensor *param, const nc_tensor *grad, nc_tensor *buf,
                          const nc_sgd_kernel_args *a);
nc_status nc_cpu_rmsprop_step(nc_tensor *param, const nc_tensor *grad, nc_tensor *square_avg,
                              nc_tensor *grad_avg, nc_tensor *buf, const nc_rmsprop_kernel_args *a);
nc_status nc_cpu_adam_step(nc_tensor *param, const nc_tensor *grad, nc_tensor *exp_avg, nc_tensor *exp_avg_sq,
                           nc_tensor *max_exp_avg_sq, const nc_adam_kernel_args *a);
nc_status nc_cpu_sum_squares(nc_tensor *parts, int64_t at, const nc_tensor *x);

#endif

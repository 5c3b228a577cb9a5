/* oneDNN's convolutions for the CPU backend (cpu_dnnl.c), in builds configured with it
 * (NC_HAVE_DNNL). Each returns true when it computed the result (into *status), false when the
 * case is not one it takes: then the caller runs its own im2col + GEMM path. It takes float32
 * only, outside parallel regions; the environment variable NETCL_DNNL=0 makes every call
 * decline (the tests compare both paths with it). */
#ifndef NETCL_CPU_DNNL_H
#define NETCL_CPU_DNNL_H

#include <stdbool.h>
#include "cpu_linalg.h"

#ifdef NC_HAVE_DNNL
bool nc_cpu_dnnl_conv2d(const nc_conv2d_desc *p, const nc_tensor *x, const nc_tensor *w, const nc_tensor *bias,
                        nc_tensor *y, nc_status *status);
bool nc_cpu_dnnl_conv2d_backward_input(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *w,
                                       nc_tensor *dx, nc_status *status);
bool nc_cpu_dnnl_conv2d_backward_weight(const nc_conv2d_desc *p, const nc_tensor *dy, const nc_tensor *x,
                                        nc_tensor *dw, nc_status *status);
#else
static inline bool nc_cpu_dnnl_conv2d(const nc_conv2d_desc *p, const nc_tensor *x, const nc_tensor *w,
                                      const nc_tensor *bias, nc_tensor *y, nc_status *status) {
  (void)p, (void)x, (void)w, (void)bias, (void)y, (void)status;
  return false;
}
static inline bool nc_cpu_dnnl_conv2d_backward_input(const nc_conv2d_desc *p, const nc_tensor *dy,
                                                     const nc_tensor *w, nc_tensor *dx, nc_status *status) {
  (void)p, (void)dy, (void)w, (void)dx, (void)status;
  return false;
}
static inline bool nc_cpu_dnnl_conv2d_backward_weight(const nc_conv2d_desc *p, const nc_tensor *dy,
                                                      const nc_tensor *x, nc_tensor *dw, nc_status *status) {
  (void)p, (void)dy, (void)x, (void)dw, (void)status;
  return false;
}
#endif

#endif

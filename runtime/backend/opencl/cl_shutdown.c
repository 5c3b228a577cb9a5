/* The OpenCL device at process exit (the device interface's shutdown): the queue drained and
 * pending reads completed, then the staging buffers, kernels, programs, queue and context
 * released, in that order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cl_backend.h"

void nc_cl_shutdown(nc_device *dev) {
  nc_cl_device *cd = dev->impl;
  pthread_mutex_lock(&cd->init_lock);
  if (cd->ready) {
    pthread_mutex_lock(&dev->lock);
    nc_cl.clFinish(cd->queue);
    nc_cl_forget_mark(cd);
    nc_cl_profile_report(cd, dev->info.name);
    (void)nc_cl_reads_complete(dev, cd); /* pending reads land in their storages, which outlive the device */
    nc_cl_staging_free(cd);
    pthread_mutex_lock(&cd->programs_lock);
    memset(cd->handles, 0, sizeof cd->handles);
    while (cd->handle_list) {
      nc_cl_handle *h = cd->handle_list;
      cd->handle_list = h->next;
      free(h);
    }
    while (cd->programs) { /* kernels, then their program */
      nc_cl_program *p = cd->programs;
      cd->programs = p->next;
      while (p->kernels) {
        nc_cl_kernel_entry *k = p->kernels;
        p->kernels = k->next;
        nc_cl.clReleaseKernel(k->kernel);
        free(k);
      }
      nc_cl.clReleaseProgram(p->program);
      free(p);
    }
    pthread_mutex_unlock(&cd->programs_lock);
    nc_cl.clReleaseCommandQueue(cd->queue);
    nc_cl_context_release(cd); /* buffers still held by live tensors keep it until released */
    cd->queue = NULL;
    __atomic_store_n(&cd->ready, false, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&dev->lock);
  }
  cd->init_status = NC_ERR_STATE;
  snprintf(cd->init_error, sizeof cd->init_error, "%s was shut down at process exit", dev->info.name);
  pthread_mutex_unlock(&cd->init_lock);
}

/* Reads to the host that do not wait (the device interface's read_start, read_ready, read_end):
 * a non-blocking clEnqueueReadBuffer into a held pinned staging buffer, with an event. Its
 * bytes are copied to the destination when the read is completed: by read_ready once the event
 * has fired, by read_end (the destination storage's first access), or, for every pending read
 * of the device, by nc_cl_sync and nc_cl_shutdown. Completion releases the staging buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "cl_backend.h"

typedef struct nc_cl_pending_read {
  cl_event done;      /* NULL once completed */
  nc_cl_staging *buf; /* held until completed */
  void *pinned, *dst;
  size_t n;
  nc_status status; /* of the completion, with its message */
  char error[512];
  struct nc_cl_pending_read *prev, *next; /* cd->reads, while pending */
} pending_read;

/* With dev->lock held. */
static void complete(nc_device *dev, pending_read *r) {
  nc_cl_device *cd = dev->impl;
  cl_int exec = CL_COMPLETE;
  cl_int err = nc_cl.clWaitForEvents(1, &r->done);
  if (err == CL_SUCCESS)
    err = nc_cl.clGetEventInfo(r->done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof exec, &exec, NULL);
  if (err == CL_SUCCESS && exec < 0) err = exec; /* a failed command reports its error here */
  if (err == CL_SUCCESS) {
    memcpy(r->dst, r->pinned, r->n);
  } else {
    r->status = nc_cl_fail(err, "an asynchronous read from a device buffer", dev);
    snprintf(r->error, sizeof r->error, "%s", nc_last_error());
  }
  nc_cl.clReleaseEvent(r->done);
  r->done = NULL;
  nc_cl_staging_unhold(r->buf);
  r->buf = NULL;
  if (r->prev) r->prev->next = r->next;
  else cd->reads = r->next;
  if (r->next) r->next->prev = r->prev;
  r->prev = r->next = NULL;
}

nc_status nc_cl_read_start(nc_device *dev, void *h, size_t off, void *dst, size_t n, void **token) {
  *token = NULL;
  nc_cl_device *cd;
  NC_TRY(nc_cl_ready(dev, &cd));
  pending_read *r = calloc(1, sizeof *r);
  if (!r) return nc_error(NC_ERR_OOM, "out of host memory for an asynchronous read");
  pthread_mutex_lock(&dev->lock);
  r->buf = nc_cl_staging_hold(cd, n, &r->pinned);
  if (!r->buf) { /* pinned memory all taken by pending reads: the caller reads blocking */
    pthread_mutex_unlock(&dev->lock);
    free(r);
    return NC_OK;
  }
  cl_int err = nc_cl.clEnqueueReadBuffer(cd->queue, (cl_mem)h, CL_FALSE, off, n, r->pinned, 0, NULL, &r->done);
  nc_status q = NC_OK;
  if (err == CL_SUCCESS) {
    nc_cl.clFlush(cd->queue); /* submitted now, not at the next wait: read_ready can see it land */
    r->dst = dst;
    r->n = n;
    r->next = cd->reads;
    if (cd->reads) cd->reads->prev = r;
    cd->reads = r;
    q = nc_cl_enqueued(dev, cd);
  } else {
    nc_cl_staging_unhold(r->buf);
  }
  pthread_mutex_unlock(&dev->lock);
  if (err != CL_SUCCESS) {
    free(r);
    return nc_cl_fail(err, "starting an asynchronous read from a device buffer", dev);
  }
  *token = r; /* started, even when the bounded queue's marker failed (q) */
  return q;
}

bool nc_cl_read_ready(nc_device *dev, void *token) {
  pending_read *r = token;
  pthread_mutex_lock(&dev->lock);
  bool ready = !r->done;
  if (!ready) {
    cl_int st = CL_QUEUED;
    ready = nc_cl.clGetEventInfo(r->done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL) != CL_SUCCESS ||
            st <= CL_COMPLETE;
    if (ready) complete(dev, r); /* landed (or failed, which read_end reports): copy it out now */
  }
  pthread_mutex_unlock(&dev->lock);
  return ready;
}

nc_status nc_cl_read_end(nc_device *dev, void *token) {
  pending_read *r = token;
  pthread_mutex_lock(&dev->lock);
  cl_event ev = r->done;
  if (ev) nc_cl.clRetainEvent(ev); /* a sync on another thread may complete r meanwhile */
  pthread_mutex_unlock(&dev->lock);
  if (ev) { /* waited for outside the lock, so other threads keep launching */
    nc_cl.clWaitForEvents(1, &ev);
    nc_cl.clReleaseEvent(ev);
  }
  pthread_mutex_lock(&dev->lock);
  if (r->done) complete(dev, r);
  pthread_mutex_unlock(&dev->lock);
  nc_status s = r->status == NC_OK ? NC_OK : nc_error(r->status, "%s", r->error);
  free(r);
  return s;
}

nc_status nc_cl_reads_complete(nc_device *dev, nc_cl_device *cd) {
  nc_status first = NC_OK;
  char msg[512] = "";
  while (cd->reads) {
    pending_read *r = cd->reads;
    complete(dev, r);
    if (r->status != NC_OK && first == NC_OK) {
      first = r->status;
      snprintf(msg, sizeof msg, "%s", r->error);
    }
  }
  return first == NC_OK ? NC_OK : nc_error(first, "%s", msg);
}

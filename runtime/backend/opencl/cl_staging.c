/* PinnedBufferPool: page-locked (CL_MEM_ALLOC_HOST_PTR, mapped) staging buffers for
 * host-to-device writes and for reads that do not wait. A write copies the caller's bytes into
 * a free staging buffer and enqueues a non-blocking transfer; the buffer is busy until the
 * transfer's event completes, so the caller's memory is free at once and the copy overlaps with
 * compute. A read that does not wait (cl_read_async.c) holds a buffer from its start until its
 * bytes are copied out. */
#include <stdlib.h>
#include <string.h>
#include "cl_backend.h"

#define STAGING_MIN ((size_t)1 << 20)
#define STAGING_READ_MIN ((size_t)4 << 10) /* reads are mostly a few scalars: metrics, losses */
#define STAGING_CAP ((size_t)256 << 20) /* total pinned bytes kept */

typedef struct nc_cl_staging {
  cl_mem mem;
  void *host;
  size_t size;
  cl_event busy; /* NULL when free */
  bool held;     /* by a pending read (nc_cl_staging_hold) */
  struct nc_cl_staging *next;
} staging_buf;

static bool is_done(staging_buf *b) {
  if (b->held) return false;
  if (!b->busy) return true;
  cl_int st = CL_QUEUED;
  if (nc_cl.clGetEventInfo(b->busy, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL) != CL_SUCCESS || st <= CL_COMPLETE) {
    /* complete, or failed (negative): either way the buffer is no longer read */
    nc_cl.clReleaseEvent(b->busy);
    b->busy = NULL;
    return true;
  }
  return false;
}

uint64_t nc_cl_staging_bytes(nc_cl_device *cd) {
  uint64_t n = 0;
  for (staging_buf *b = cd->staging; b; b = b->next) n += b->size;
  return n;
}

static void free_buf(nc_cl_device *cd, staging_buf *b) {
  if (b->busy) {
    nc_cl.clWaitForEvents(1, &b->busy);
    nc_cl.clReleaseEvent(b->busy);
  }
  /* unmapped first: a driver keeps a buffer with a live mapping (PoCL did, past shutdown) */
  cl_event unmapped = NULL;
  if (nc_cl.clEnqueueUnmapMemObject(cd->queue, b->mem, b->host, 0, NULL, &unmapped) == CL_SUCCESS) {
    nc_cl.clWaitForEvents(1, &unmapped);
    nc_cl.clReleaseEvent(unmapped);
  }
  nc_cl.clReleaseMemObject(b->mem); /* also drops the pinned pages */
  free(b);
}

void nc_cl_staging_free(nc_cl_device *cd) {
  while (cd->staging) {
    staging_buf *b = cd->staging;
    cd->staging = b->next;
    free_buf(cd, b);
  }
}

static staging_buf *new_buf(nc_cl_device *cd, size_t n, size_t min) {
  size_t size = min;
  while (size < n) size *= 2;
  cl_int err;
  cl_mem mem = nc_cl.clCreateBuffer(cd->ctx, CL_MEM_ALLOC_HOST_PTR | CL_MEM_READ_WRITE, size, NULL, &err);
  if (err != CL_SUCCESS) return NULL;
  void *host = nc_cl.clEnqueueMapBuffer(cd->queue, mem, CL_TRUE, CL_MAP_WRITE, 0, size, 0, NULL, NULL, &err);
  staging_buf *b = err == CL_SUCCESS ? calloc(1, sizeof *b) : NULL;
  if (!b) {
    nc_cl.clReleaseMemObject(mem);
    return NULL;
  }
  b->mem = mem;
  b->host = host;
  b->size = size;
  return b;
}

/* A free staging buffer of at least n bytes, or NULL when pinned memory is at its cap. */
static staging_buf *acquire(nc_cl_device *cd, size_t n, size_t min) {
  staging_buf *best = NULL;
  for (staging_buf *b = cd->staging; b; b = b->next)
    if (b->size >= n && is_done(b) && (!best || b->size < best->size)) best = b;
  if (best) return best;
  if (nc_cl_staging_bytes(cd) + n > STAGING_CAP) {
    /* Trade the smallest free buffers for one that fits, if that keeps us under the cap. */
    for (staging_buf **pp = &cd->staging; *pp;) {
      staging_buf *b = *pp;
      if (is_done(b) && b->size < n) {
        *pp = b->next;
        free_buf(cd, b);
      } else {
        pp = &b->next;
      }
    }
    if (nc_cl_staging_bytes(cd) + n > STAGING_CAP) return NULL;
  }
  staging_buf *b = new_buf(cd, n, min);
  if (b) {
    b->next = cd->staging;
    cd->staging = b;
  }
  return b;
}

nc_status nc_cl_staging_write(nc_device *dev, nc_cl_device *cd, cl_mem dst, size_t off, const void *src, size_t n) {
  pthread_mutex_lock(&dev->lock);
  staging_buf *b = n <= STAGING_CAP / 2 ? acquire(cd, n, STAGING_MIN) : NULL;
  cl_int err;
  if (b) {
    memcpy(b->host, src, n);
    err = nc_cl.clEnqueueWriteBuffer(cd->queue, dst, CL_FALSE, off, n, b->host, 0, NULL, &b->busy);
    if (err != CL_SUCCESS) b->busy = NULL;
    else nc_cl.clFlush(cd->queue);
    if (err == CL_SUCCESS) {
      nc_status q = nc_cl_enqueued(dev, cd);
      pthread_mutex_unlock(&dev->lock);
      return q;
    }
  } else {
    /* Larger than the staging cap: a blocking write straight from the caller's memory. */
    err = nc_cl.clEnqueueWriteBuffer(cd->queue, dst, CL_TRUE, off, n, src, 0, NULL, NULL);
  }
  pthread_mutex_unlock(&dev->lock);
  if (err != CL_SUCCESS) return nc_cl_fail(err, "writing to a device buffer", dev);
  return NC_OK;
}

nc_cl_staging *nc_cl_staging_hold(nc_cl_device *cd, size_t n, void **host) {
  staging_buf *b = n <= STAGING_CAP / 2 ? acquire(cd, n, STAGING_READ_MIN) : NULL;
  if (!b) return NULL;
  b->held = true;
  *host = b->host;
  return b;
}

void nc_cl_staging_unhold(nc_cl_staging *b) { b->held = false; }

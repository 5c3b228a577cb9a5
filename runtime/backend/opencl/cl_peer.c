/* Device-to-device copies between OpenCL devices that share a context (the devices of one
 * platform, cl_device.c): clEnqueueCopyBuffer between the two buffers, with no host memory in
 * between.
 *
 * Each device has one in-order queue, and the copy has to fit both orders. It goes on the
 * destination's queue, after everything queued there before it (earlier writers and readers of
 * the destination buffer). A marker on the source's queue, which the copy waits for, orders it
 * after the source's queued work (the writes that made the values); a barrier on the source's
 * queue, waiting for the copy, orders the source's later work after it (the source buffer
 * recycled by the pool and overwritten, in the source's queue order). Nothing blocks the host:
 * both queues are flushed so that the events can complete. The two devices' locks are taken one
 * at a time, never together. */
#include "core/check.h"
#include "cl_backend.h"

bool nc_cl_peers(nc_device *a, nc_device *b) {
  nc_cl_device *ca, *cb;
  if (a == b || nc_cl_ready(a, &ca) != NC_OK || nc_cl_ready(b, &cb) != NC_OK) return false;
  return ca->shared && cb->shared && ca->ctx == cb->ctx;
}

/* Enqueues a marker (wait == NULL) or a barrier waiting for *wait on dev's queue; *ev gets the
 * marker's event when ev is not NULL. */
static nc_status order(nc_device *dev, nc_cl_device *cd, const cl_event *wait, cl_event *ev) {
  pthread_mutex_lock(&dev->lock);
  cl_int err = wait ? nc_cl.clEnqueueBarrierWithWaitList(cd->queue, 1, wait, ev)
                    : nc_cl.clEnqueueMarkerWithWaitList(cd->queue, 0, NULL, ev);
  if (err == CL_SUCCESS) err = nc_cl.clFlush(cd->queue);
  nc_status s = err == CL_SUCCESS ? nc_cl_enqueued(dev, cd) : nc_cl_fail(err, "ordering a device-to-device copy", dev);
  pthread_mutex_unlock(&dev->lock);
  return s;
}

nc_status nc_cl_peer_copy(nc_device *dst, void *dh, size_t doff, nc_device *src, void *sh, size_t soff, size_t n) {
  nc_cl_device *dc, *sc;
  NC_TRY(nc_cl_ready(dst, &dc));
  NC_TRY(nc_cl_ready(src, &sc));
  if (!nc_cl_peers(dst, src))
    return nc_error(NC_ERR_STATE, "%s and %s share no OpenCL context: no device-to-device copy between them",
                    src->info.name, dst->info.name);
  if (n == 0) return NC_OK;
  cl_event ready = NULL, copied = NULL;
  NC_TRY(order(src, sc, NULL, &ready));
  pthread_mutex_lock(&dst->lock);
  cl_int err = nc_cl.clEnqueueCopyBuffer(dc->queue, (cl_mem)sh, (cl_mem)dh, soff, doff, n, 1, &ready, &copied);
  if (err == CL_SUCCESS) err = nc_cl.clFlush(dc->queue);
  nc_status s = err == CL_SUCCESS ? nc_cl_enqueued(dst, dc) : nc_cl_fail(err, "copying between devices", dst);
  pthread_mutex_unlock(&dst->lock);
  nc_cl.clReleaseEvent(ready);
  if (copied) {
    nc_status b = order(src, sc, &copied, NULL);
    if (s == NC_OK) s = b;
    nc_cl.clReleaseEvent(copied);
  }
  return s;
}

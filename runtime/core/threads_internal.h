/* The thread pool's internal entries for code that runs another library's OpenMP regions on it
 * (runtime/backend/cpu/cpu_dnnl.c). */
#ifndef NETCL_CORE_THREADS_INTERNAL_H
#define NETCL_CORE_THREADS_INTERNAL_H

#include <stdbool.h>

/* Waits until no other host thread runs a region on the pool, then keeps the pool for the
 * calling thread: its regions get every thread of nc_get_num_threads() until
 * nc_threads_release. False (nothing kept) inside a parallel region, when the pool cannot
 * start that many threads, or when the caller already holds it. Work whose split over threads
 * is fixed in advance (oneDNN's primitives) needs that guarantee: a region started while
 * another thread's region runs otherwise gets a team of one. */
bool nc_threads_reserve(void);
void nc_threads_release(void);

#endif

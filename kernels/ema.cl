/* The momentum (EMA) update of netcl.ssl's target networks, an op defined by its op-table row
 * (ema_update), through the generic launcher's convention: each tensor as (buffer, element
 * offset), then the integers (n elements, chunk), then the momentum. target and online are
 * contiguous; work-group g updates the elements [g * chunk, min((g + 1) * chunk, n)), its
 * work-items striding by the local size. No local memory, no barriers. The expression matches
 * runtime/backend/cpu/cpu_ema.c term for term. -DREAL=double for float64. */
#ifndef REAL
#define REAL float
#endif

__kernel void ema_update(__global REAL *target, const long to, __global const REAL *online, const long oo,
                         const long n, const long chunk, const REAL m) {
  const long start = (long)get_group_id(0) * chunk, end = min(start + chunk, n);
  for (long i = start + (long)get_local_id(0); i < end; i += (long)get_local_size(0))
    target[to + i] = m * target[to + i] + ((REAL)1 - m) * online[oo + i];
}

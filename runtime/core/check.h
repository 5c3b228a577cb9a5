/* Internal helpers of libnetcl: status propagation and invariant checks. Any layer of the
 * runtime may include this (core is the lowest); it is not installed, and code outside
 * libnetcl has no use for it. */
#ifndef NETCL_CORE_CHECK_H
#define NETCL_CORE_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include "netcl/status.h"

/* Evaluates expr (an nc_status) and returns it from the calling function unless it is NC_OK. */
#define NC_TRY(expr)                          \
  do {                                        \
    nc_status nc_try_s_ = (expr);             \
    if (nc_try_s_ != NC_OK) return nc_try_s_; \
  } while (0)

/* Internal invariants: checked in debug and sanitizer builds, never for user errors. */
#ifdef NC_DEBUG_ASSERTS
#define NC_ASSERT(c)                                                                             \
  do {                                                                                           \
    if (!(c)) {                                                                                  \
      fprintf(stderr, "netcl: internal invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__); \
      abort();                                                                                   \
    }                                                                                            \
  } while (0)
#else
#define NC_ASSERT(c) ((void)0)
#endif

#endif

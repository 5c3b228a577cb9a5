/* The CPU backend: plain C with OpenMP; the reference every other backend is tested against. */
#ifndef NETCL_CPU_BACKEND_H
#define NETCL_CPU_BACKEND_H

#include "core/device_impl.h"

nc_status nc_cpu_device_create(nc_device **out);

#endif

/* The storage dtypes' conversions by dtype (the bit algorithms are netcl/half.h's). */
#include "netcl/half.h"

uint16_t nc_half_from_double(nc_dtype dt, double v) {
  return dt == NC_BFLOAT16 ? nc_f32_to_bf16((float)v) : nc_f32_to_f16((float)v);
}

double nc_half_to_double(nc_dtype dt, uint16_t h) { return dt == NC_BFLOAT16 ? nc_bf16_to_f32(h) : nc_f16_to_f32(h); }

#include <string.h>
#include "netcl/dtype.h"

static const struct {
  const char *name;
  size_t size;
  bool is_float, is_storage;
} dtypes[NC_DTYPE_COUNT] = {
    [NC_FLOAT32] = {"float32", 4, true, false},    [NC_FLOAT64] = {"float64", 8, true, false},
    [NC_INT32] = {"int32", 4, false, false},       [NC_INT64] = {"int64", 8, false, false},
    [NC_UINT8] = {"uint8", 1, false, false},       [NC_BOOL] = {"bool", 1, false, false},
    [NC_BFLOAT16] = {"bfloat16", 2, true, true},   [NC_FLOAT16] = {"float16", 2, true, true},
};

bool nc_dtype_valid(int d) { return d >= 0 && d < NC_DTYPE_COUNT; }
size_t nc_dtype_size(nc_dtype d) { return nc_dtype_valid(d) ? dtypes[d].size : 0; }
const char *nc_dtype_name(nc_dtype d) { return nc_dtype_valid(d) ? dtypes[d].name : "invalid"; }
bool nc_dtype_is_float(nc_dtype d) { return nc_dtype_valid(d) && dtypes[d].is_float; }
bool nc_dtype_is_storage(nc_dtype d) { return nc_dtype_valid(d) && dtypes[d].is_storage; }

nc_status nc_dtype_parse(const char *name, nc_dtype *out) {
  static const struct { const char *alias; nc_dtype d; } aliases[] = {
      {"float", NC_FLOAT32}, {"double", NC_FLOAT64}, {"int", NC_INT32}, {"long", NC_INT64},
      {"byte", NC_UINT8},    {"half", NC_FLOAT16},   {"bf16", NC_BFLOAT16}};
  for (int i = 0; i < NC_DTYPE_COUNT; i++)
    if (strcmp(name, dtypes[i].name) == 0) return *out = (nc_dtype)i, NC_OK;
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
    if (strcmp(name, aliases[i].alias) == 0) return *out = aliases[i].d, NC_OK;
  return nc_error(NC_ERR_DTYPE,
                  "unknown dtype '%s' (expected float32, float64, int32, int64, uint8, bool, bfloat16 or "
                  "float16)",
                  name);
}

nc_dtype nc_dtype_promote(nc_dtype a, nc_dtype b) {
  static const int rank[NC_DTYPE_COUNT] = {[NC_BOOL] = 0,     [NC_UINT8] = 1,    [NC_INT32] = 2,
                                           [NC_INT64] = 3,    [NC_FLOAT16] = 4,  [NC_BFLOAT16] = 4,
                                           [NC_FLOAT32] = 5,  [NC_FLOAT64] = 6};
  if (a != b && rank[a] == rank[b]) return NC_FLOAT32; /* float16 with bfloat16 */
  return rank[a] >= rank[b] ? a : b;
}

/* A built program's binary for one device of its context (nc_cl_program_binary): what the
 * binary cache stores (cl_program.c) and what the PTX directives patch (cl_ptx.c). */
#include <stdlib.h>
#include "cl_backend.h"

unsigned char *nc_cl_program_binary(nc_cl_device *cd, cl_program prog, size_t *len) {
  cl_uint nd = 0;
  if (nc_cl.clGetProgramInfo(prog, CL_PROGRAM_NUM_DEVICES, sizeof nd, &nd, NULL) != CL_SUCCESS || nd == 0) return NULL;
  cl_device_id *ids = calloc(nd, sizeof *ids);
  size_t *sizes = calloc(nd, sizeof *sizes);
  unsigned char **bins = calloc(nd, sizeof *bins);
  unsigned char *out = NULL;
  cl_uint at = nd;
  if (ids && sizes && bins &&
      nc_cl.clGetProgramInfo(prog, CL_PROGRAM_DEVICES, nd * sizeof *ids, ids, NULL) == CL_SUCCESS &&
      nc_cl.clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, nd * sizeof *sizes, sizes, NULL) == CL_SUCCESS)
    for (cl_uint i = 0; i < nd; i++)
      if (ids[i] == cd->id) at = i;
  if (at < nd && sizes[at] > 0 && (bins[at] = malloc(sizes[at])) &&
      nc_cl.clGetProgramInfo(prog, CL_PROGRAM_BINARIES, nd * sizeof *bins, bins, NULL) == CL_SUCCESS) {
    out = bins[at];
    *len = sizes[at];
  } else if (bins && at < nd) {
    free(bins[at]);
  }
  free(ids), free(sizes), free(bins);
  return out;
}

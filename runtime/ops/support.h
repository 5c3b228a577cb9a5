/* Helpers shared by the ops layer: shape strings for messages, device and destination checks,
 * aliasing, dtype conversion of inputs, and dims. Internal to runtime/ops. */
#ifndef NETCL_OPS_SUPPORT_H
#define NETCL_OPS_SUPPORT_H

#include "backend/dispatch.h"
#include "core/device_impl.h"
#include "netcl/copy.h"
#include "netcl/elementwise.h"

/* "[2,3]" into buf (always terminated). Returns buf. */
const char *nc_shape_str(int ndim, const int64_t *shape, char *buf, size_t n);

/* NC_ERR_DEVICE unless every non-NULL tensor lives on dev. */
nc_status nc_check_devices(nc_device *dev, int n, nc_tensor *const *ts);

/* Whether the memory a and b may touch overlaps (conservative: by extent). */
bool nc_tensors_overlap(const nc_tensor *a, const nc_tensor *b);

/* Same storage, offset, shape and strides: element i of one is element i of the other. */
bool nc_same_layout(const nc_tensor *a, const nc_tensor *b);

/* A destination must not be an expanded view (elements sharing memory). */
/* Ops that check their float operands themselves call this first, so that a storage dtype
 * (bfloat16, float16) gets the message every other op gives (nc_storage_dtype_error); NULLs are
 * skipped. */
nc_status nc_check_not_storage(const nc_tensor *a, const nc_tensor *b);

nc_status nc_check_writable(const nc_tensor *dst);

/* ---- the storage dtypes through an op's float32 path ----------------------------------------------
 * Ops without storage-dtype kernels of their own (convolution, pooling, the normalizations other
 * than batch norm, cross_entropy, the activations) take bfloat16 and float16 as PyTorch computes
 * them: each storage operand widened to float32 (exactly: one conversion pass), the op's float32
 * path run on the widened operands, and each result that has a storage dtype rounded once into it
 * (to nearest even: a second pass). The backends see float32 only. */

/* out[i]: a float32 copy of in[i] when in[i] has a storage dtype, else in[i] retained (NULL stays
 * NULL). On failure out[] holds nothing. */
nc_status nc_widen_n(int n, nc_tensor *const *in, nc_tensor **out);

/* Releases t[0 .. n) (NULLs skipped) and sets them to NULL. */
void nc_release_n(int n, nc_tensor **t);

/* Hands r, a float32 path's result (its reference is taken), to *out: converted into dt (the one
 * rounding) when r has another dtype, else as is. s is the float32 path's status: when it is an
 * error, or the conversion fails, r is released and the error returned. out NULL: r is released. */
nc_status nc_round_result(nc_status s, nc_tensor *r, nc_dtype dt, nc_tensor **out);

/* Whether a value of dtype from may be stored in to by an _into op (floats only in floats,
 * integers in integers or floats, bool anywhere). */
bool nc_dtype_castable(nc_dtype from, nc_dtype to);

/* dst's shape must equal (ndim, shape) and dst must hold dtype res. */
nc_status nc_check_dst(const nc_tensor *dst, int ndim, const int64_t *shape, nc_dtype res);

/* x ready to be read while dst is written: x itself (retained) when it has dtype dt and does
 * not overlap dst other than element for element; otherwise a contiguous copy in dt. dst may
 * be NULL. */
nc_status nc_input_for(nc_tensor *x, nc_dtype dt, const nc_tensor *dst, nc_tensor **out);

/* The matmul precision set by nc_set_matmul_precision, for the descriptors handed to backends. */
nc_precision nc_matmul_precision_level(void);

/* s converted to a value dtype dt can hold (bool: 0/1; integers: truncated, nan -> 0). */
nc_scalar nc_scalar_cast(nc_scalar s, nc_dtype dt);

/* Range of an integer dtype (bool: 0..1). */
void nc_dtype_int_range(nc_dtype dt, int64_t *lo, int64_t *hi);

/* Dims: 0-based dim of ndim (NC_ERR_INDEX otherwise). */
nc_status nc_check_dim(int dim, int ndim);

/* NC_ERR_INDEX unless every value of idx lies in [0, size); dim names the dim in the message.
 * Waits for the device. */
nc_status nc_check_indices(nc_tensor *idx, int64_t size, int dim);

/* Acts on the verdict of an op's index check (backend/dispatch.h): a bad position known now is
 * an NC_ERR_INDEX error at once; a device flag becomes a check of idx's device read at its next
 * sync point, failing that call. The message is fmt (printf, taking the bad index's value, its
 * 1-based position, then a and b, all as long long); the deferred form says which op it was and
 * when. Takes the verdict's flag; retains idx while the check waits. */
nc_status nc_index_verdict_settle(nc_index_verdict *v, const char *op, nc_tensor *idx, const char *fmt, int64_t a,
                                  int64_t b);

#endif

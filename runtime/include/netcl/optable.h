/* The op table: one row per op with its name, family, arity, accepted input dtypes, result
 * rule, OpenCL kernel and CPU function. The op enum, the kernels' op codes (NC_OP_<ID> is
 * defined in every OpenCL program), the Lua bindings of the generic families and the parity
 * harness's coverage check are all generated from this list, so adding an op is one row here
 * plus its kernel and CPU cases (see tests/parity/README.md). */
#ifndef NETCL_OPTABLE_H
#define NETCL_OPTABLE_H

#include <stdbool.h>
#include "device.h"
#include "dtype.h"
#include "op_sig.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Accepted input dtypes, as bit masks over nc_dtype. */
#define NC_DT_F32 (1u << NC_FLOAT32)
#define NC_DT_FLOAT ((1u << NC_FLOAT32) | (1u << NC_FLOAT64))
#define NC_DT_INT ((1u << NC_INT32) | (1u << NC_INT64) | (1u << NC_UINT8))
#define NC_DT_BOOL (1u << NC_BOOL)
#define NC_DT_NUM (NC_DT_FLOAT | NC_DT_INT)
#define NC_DT_ALL (NC_DT_NUM | NC_DT_BOOL)
/* The storage dtypes (nc_dtype_is_storage): the ops that move elements take them (fill, copy,
 * views and the copies that make layouts), and so do the ops that compute in float32 and round
 * once into the storage dtype: the matrix products (matmul, mm, bmm, linear, whose backends sum
 * in float32: docs/linalg.md), the unary and binary elementwise families with the comparisons
 * (NC_DT_EW_*: each element computed by the float32 expression from the widened inputs), the
 * activations elu, softplus, mish and leaky_relu, and batch_norm with its backward op (float32's
 * arithmetic on the elements read as float32: ops/norm.c); the NC_DT_WIDEN ops below take them
 * in the op layer. The dispatch layer refuses them to every other backend call. */
#define NC_DT_STORAGE ((1u << NC_BFLOAT16) | (1u << NC_FLOAT16))
/* Ops that take the storage dtypes in the op layer only, through their float32 path (ops/support.h:
 * the operands widened to float32, the result rounded once into the storage dtype): convolution,
 * pooling, layer, RMS and group norm, cross_entropy, the float reductions, softmax and
 * log_softmax. nc_op_accepts says yes for them, but their backend calls see float32 only: the
 * dispatch layer still refuses a storage tensor there (the row's storage bits are not set). */
#define NC_DT_WIDEN (1u << 31)
/* conv2d and its gradients also set the bfloat16 bit: the op layer hands bfloat16 tensors (the
 * weights of the forward and the input gradient widened) to a backend whose conv2d_storage answer
 * takes them (OpenCL under "medium": backend/dispatch.h), and widens them otherwise. */
#define NC_DT_BF16 (1u << NC_BFLOAT16)
#define NC_DT_MOVE (NC_DT_ALL | NC_DT_STORAGE)
#define NC_DT_EW_NUM (NC_DT_NUM | NC_DT_STORAGE)
#define NC_DT_EW_ALL (NC_DT_ALL | NC_DT_STORAGE)

typedef enum {
  NC_FAMILY_UNARY,   /* out = f(x [, params]) elementwise */
  NC_FAMILY_BINARY,  /* out = f(a, b), NumPy broadcasting, tensors or scalars */
  NC_FAMILY_WHERE,   /* out = cond ? a : b */
  NC_FAMILY_REDUCE,  /* over any set of dims, keepdim */
  NC_FAMILY_SCAN,    /* prefix along one dim */
  NC_FAMILY_SOFTMAX, /* normalized along one dim */
  NC_FAMILY_INDEX,   /* index tensors select, gather or scatter elements */
  NC_FAMILY_SHAPE,   /* joins and splits tensors (copies and views) */
  NC_FAMILY_SORT,    /* sort and top-k along one dim */
  NC_FAMILY_RANDOM,  /* Philox draws */
  NC_FAMILY_LINALG,  /* matrix products (linalg.h) */
  NC_FAMILY_CONV,    /* convolution and its gradients (conv.h) */
  NC_FAMILY_POOL,    /* pooling and its gradients (pool.h) */
  NC_FAMILY_NORM,    /* normalization layers and their fused backward ops (norm.h) */
  NC_FAMILY_LOSS,    /* losses with their backward ops (loss.h) */
  NC_FAMILY_DATA,    /* fill, copy with dtype conversion, arange (creation.h, copy.h) */
  NC_FAMILY_OPTIM,   /* fused optimizer updates and the gradient-norm partial sums (optim.h) */
  NC_FAMILY_VIEW,    /* views of a tensor's storage and the copies that make layouts contiguous */
  NC_FAMILY_ACTIVATION, /* elementwise activations with kernels of their own (KERNEL rows) */
  NC_FAMILY_IMAGE,      /* per-sample image transforms on batches [N, C, H, W] (data augmentation) */
  NC_FAMILY_ATTENTION,  /* rotary embeddings and fused attention (KERNEL rows, docs/transformer.md) */
  NC_FAMILY_CLUSTER,    /* k-means assignment and update steps (KERNEL rows; netcl.cluster) */
  NC_FAMILY_COUNT
} nc_op_family;

/* How the output dtype follows from the (promoted) input dtype. */
typedef enum {
  NC_RES_SAME,  /* the promoted input dtype */
  NC_RES_FLOAT, /* integers and bool become float32 */
  NC_RES_BOOL,  /* bool (comparisons, predicates) */
  NC_RES_INDEX, /* int64 positions */
  NC_RES_SUM,   /* integers and bool accumulate in int64 */
  NC_RES_ARG    /* set by an argument (dtype option, or the destination) */
} nc_result_rule;

/* OpenCL kernels (<T>: dtype name, <op>: op name): contiguous elementwise operands take the
 * per-op fast kernel, other layouts the general one. */
#define NC_K_UNARY "elementwise.cl:<op>_<T>|unary_<T>"
#define NC_K_BINARY "elementwise.cl:<op>_<T>|binary_<T>"
#define NC_K_COMPARE "elementwise.cl:compare_<T>"
#define NC_K_REDUCE "reduce.cl:reduce_rows_<T>|reduce_groups_<T>+reduce_partials_<T>"

/* X(ID, name, family, arity, accepted dtypes, result rule, backend entry, gradient, OpenCL kernel,
 *   CPU function)
 * The backend entry is ENTRY(<name>): the dispatch signature a backend implements the op with
 * (runtime/backend/dispatch.h; ENTRY(NONE): composed of other ops, no entry of its own), or
 * KERNEL(<name>, (<signature>)): an op defined by its row. Such an op's C declarations, its Lua
 * binding and its backends' registration are generated from the signature (netcl/op_sig.h);
 * backends implement it as one function of an nc_kernel_call (the CPU backend's
 * nc_cpu_<name>; OpenCL launches the row's kernel through one generic launcher). The gradient
 * is DIFF(nc_ag_<fn>), the differentiable op that records the op's backward rule (netcl/
 * autograd_ops.h), or NODIFF: the list of differentiable ops, which the Lua binding and the
 * gradient checks walk, is generated from it, and a DIFF row whose function is missing fails the
 * build. */
#define NC_OPS(X)                                                                                          \
  X(ABS, "abs", UNARY, 1, NC_DT_EW_NUM, NC_RES_SAME, ENTRY(UNARY), DIFF(nc_ag_unary), NC_K_UNARY, "cpu_unary")                                 \
  X(NEG, "neg", UNARY, 1, NC_DT_EW_NUM, NC_RES_SAME, ENTRY(UNARY), DIFF(nc_ag_unary), NC_K_UNARY, "cpu_unary")                                 \
  X(EXP, "exp", UNARY, 1, NC_DT_EW_ALL, NC_RES_FLOAT, ENTRY(UNARY), DIFF(nc_ag_unary), NC_K_UNARY, "cpu_unary")                                \
  X(LOG, "log", UNARY, 1, NC_DT_EW_ALL, NC_RES_FLOAT, ENTRY(UNARY), DIFF(nc_ag_unary), NC_K_UNARY, "cpu_unary")                                \
  X(LOG1P, "log1p", UNARY, 1, NC_DT_EW_ALL, NC_RES_FLOAT, ENTRY(UNARY), DIFF(nc_ag_unary), NC_K_UNARY, "cpu_unary")                            \
  X(SQRT, "sqrt", UNARY, 1, NC_DT_EW_ALL, NC_RES_FLOAT, ENTRY(UNARY), DIFF(nc_ag_unary), NC_K_UNARY, "cpu_unary")                              \
  X(RSQRT, "rsqrt", UNARY, 1, NC_DT_EW_ALL, NC_RES_FLOAT, ENTRY(UNARY), DIFF(nc_ag_unary), NC_K_UNARY, "cpu_unary")                            \
  X(SIN, "sin", UNARY, 1, NC_DT_EW_ALL, NC_RES_FLOAT, ENTRY(UNARY), DIFF(nc_ag_unary), NC_K_UNARY, "cpu_unary")                                \
  X(COS, "cos", UNARY, 1, NC_DT_EW_ALL, NC_RES_FLOAT, ENTRY(UNARY), DIFF(nc_ag_unary), NC_K_UNARY, "cpu_unary")                                \
  X(TANH, "tanh", UNARY, 1, NC_DT_EW_ALL, NC_RES_FLOAT, ENTRY(UNARY), DIFF(nc_ag_unary), NC_K_UNARY, "cpu_unary")                              \
  X(SIGMOID, "sigmoid", UNARY, 1, NC_DT_EW_ALL, NC_RES_FLOAT, ENTRY(UNARY), DIFF(nc_ag_unary), NC_K_UNARY, "cpu_unary")                        \
  X(RELU, "relu", UNARY, 1, NC_DT_EW_NUM, NC_RES_SAME, ENTRY(UNARY), DIFF(nc_ag_unary), NC_K_UNARY, "cpu_unary")                               \
  X(GELU, "gelu", UNARY, 1, NC_DT_EW_ALL, NC_RES_FLOAT, ENTRY(UNARY), DIFF(nc_ag_unary), NC_K_UNARY, "cpu_unary")                              \
  X(GELU_TANH, "gelu_tanh", UNARY, 1, NC_DT_EW_ALL, NC_RES_FLOAT, ENTRY(UNARY), DIFF(nc_ag_unary), NC_K_UNARY, "cpu_unary")                    \
  X(SILU, "silu", UNARY, 1, NC_DT_EW_ALL, NC_RES_FLOAT, ENTRY(UNARY), DIFF(nc_ag_unary), NC_K_UNARY, "cpu_unary")                              \
  X(FLOOR, "floor", UNARY, 1, NC_DT_EW_NUM, NC_RES_SAME, ENTRY(UNARY), DIFF(nc_ag_unary), NC_K_UNARY, "cpu_unary")                             \
  X(CEIL, "ceil", UNARY, 1, NC_DT_EW_NUM, NC_RES_SAME, ENTRY(UNARY), DIFF(nc_ag_unary), NC_K_UNARY, "cpu_unary")                               \
  X(ROUND, "round", UNARY, 1, NC_DT_EW_NUM, NC_RES_SAME, ENTRY(UNARY), DIFF(nc_ag_unary), NC_K_UNARY, "cpu_unary")                             \
  X(SIGN, "sign", UNARY, 1, NC_DT_EW_NUM, NC_RES_SAME, ENTRY(UNARY), DIFF(nc_ag_unary), NC_K_UNARY, "cpu_unary")                               \
  X(CLAMP, "clamp", UNARY, 1, NC_DT_EW_NUM, NC_RES_SAME, ENTRY(UNARY), DIFF(nc_ag_clamp), NC_K_UNARY, "cpu_unary")                             \
  X(ISNAN, "isnan", UNARY, 1, NC_DT_EW_ALL, NC_RES_BOOL, ENTRY(UNARY), NODIFF, NC_K_COMPARE, "cpu_unary")                           \
  X(ISINF, "isinf", UNARY, 1, NC_DT_EW_ALL, NC_RES_BOOL, ENTRY(UNARY), NODIFF, NC_K_COMPARE, "cpu_unary")                           \
  X(ADD, "add", BINARY, 2, NC_DT_EW_ALL, NC_RES_SAME, ENTRY(BINARY), DIFF(nc_ag_binary), NC_K_BINARY, "cpu_binary")                              \
  X(SUB, "sub", BINARY, 2, NC_DT_EW_NUM, NC_RES_SAME, ENTRY(BINARY), DIFF(nc_ag_binary), NC_K_BINARY, "cpu_binary")                              \
  X(MUL, "mul", BINARY, 2, NC_DT_EW_ALL, NC_RES_SAME, ENTRY(BINARY), DIFF(nc_ag_binary), NC_K_BINARY, "cpu_binary")                              \
  X(DIV, "div", BINARY, 2, NC_DT_EW_ALL, NC_RES_FLOAT, ENTRY(BINARY), DIFF(nc_ag_binary), NC_K_BINARY, "cpu_binary")                             \
  X(POW, "pow", BINARY, 2, NC_DT_EW_NUM, NC_RES_SAME, ENTRY(BINARY), DIFF(nc_ag_binary), NC_K_BINARY, "cpu_binary")                              \
  X(MAXIMUM, "maximum", BINARY, 2, NC_DT_EW_ALL, NC_RES_SAME, ENTRY(BINARY), DIFF(nc_ag_binary), NC_K_BINARY, "cpu_binary")                      \
  X(MINIMUM, "minimum", BINARY, 2, NC_DT_EW_ALL, NC_RES_SAME, ENTRY(BINARY), DIFF(nc_ag_binary), NC_K_BINARY, "cpu_binary")                      \
  X(FLOOR_DIVIDE, "floor_divide", BINARY, 2, NC_DT_EW_NUM, NC_RES_SAME, ENTRY(BINARY), DIFF(nc_ag_binary), NC_K_BINARY, "cpu_binary")       \
  X(REMAINDER, "remainder", BINARY, 2, NC_DT_EW_NUM, NC_RES_SAME, ENTRY(BINARY), DIFF(nc_ag_binary), NC_K_BINARY, "cpu_binary")              \
  X(EQ, "eq", BINARY, 2, NC_DT_EW_ALL, NC_RES_BOOL, ENTRY(BINARY), NODIFF, NC_K_COMPARE, "cpu_binary")                               \
  X(NE, "ne", BINARY, 2, NC_DT_EW_ALL, NC_RES_BOOL, ENTRY(BINARY), NODIFF, NC_K_COMPARE, "cpu_binary")                               \
  X(LT, "lt", BINARY, 2, NC_DT_EW_ALL, NC_RES_BOOL, ENTRY(BINARY), NODIFF, NC_K_COMPARE, "cpu_binary")                               \
  X(LE, "le", BINARY, 2, NC_DT_EW_ALL, NC_RES_BOOL, ENTRY(BINARY), NODIFF, NC_K_COMPARE, "cpu_binary")                               \
  X(GT, "gt", BINARY, 2, NC_DT_EW_ALL, NC_RES_BOOL, ENTRY(BINARY), NODIFF, NC_K_COMPARE, "cpu_binary")                               \
  X(GE, "ge", BINARY, 2, NC_DT_EW_ALL, NC_RES_BOOL, ENTRY(BINARY), NODIFF, NC_K_COMPARE, "cpu_binary")                               \
  X(WHERE, "where", WHERE, 3, NC_DT_ALL, NC_RES_SAME, ENTRY(WHERE), DIFF(nc_ag_where), "elementwise.cl:where_<T>", "cpu_where")             \
  X(MASKED_FILL, "masked_fill", WHERE, 2, NC_DT_ALL, NC_RES_SAME, ENTRY(WHERE), DIFF(nc_ag_masked_fill), "elementwise.cl:where_<T>", "cpu_where") \
  X(SUM, "sum", REDUCE, 1, NC_DT_ALL | NC_DT_WIDEN, NC_RES_SUM, ENTRY(REDUCE), DIFF(nc_ag_reduce),                                                          \
    "reduce.cl:reduce_rows_<T>|reduce_sum_<T>+reduce_partials_<T>", "cpu_reduce")                          \
  X(MEAN, "mean", REDUCE, 1, NC_DT_ALL | NC_DT_WIDEN, NC_RES_FLOAT, ENTRY(REDUCE), DIFF(nc_ag_reduce),                                                      \
    "reduce.cl:reduce_rows_<T>|reduce_sum_<T>+reduce_partials_<T>", "cpu_reduce")                          \
  X(PROD, "prod", REDUCE, 1, NC_DT_ALL | NC_DT_WIDEN, NC_RES_SUM, ENTRY(REDUCE), DIFF(nc_ag_reduce), NC_K_REDUCE, "cpu_reduce")                             \
  X(MAX, "max", REDUCE, 1, NC_DT_ALL | NC_DT_WIDEN, NC_RES_SAME, ENTRY(REDUCE), DIFF(nc_ag_reduce), NC_K_REDUCE, "cpu_reduce")                              \
  X(MIN, "min", REDUCE, 1, NC_DT_ALL | NC_DT_WIDEN, NC_RES_SAME, ENTRY(REDUCE), DIFF(nc_ag_reduce), NC_K_REDUCE, "cpu_reduce")                              \
  X(ARGMAX, "argmax", REDUCE, 1, NC_DT_ALL | NC_DT_WIDEN, NC_RES_INDEX, ENTRY(REDUCE), NODIFF, NC_K_REDUCE, "cpu_reduce")                       \
  X(ARGMIN, "argmin", REDUCE, 1, NC_DT_ALL | NC_DT_WIDEN, NC_RES_INDEX, ENTRY(REDUCE), NODIFF, NC_K_REDUCE, "cpu_reduce")                       \
  X(VAR, "var", REDUCE, 1, NC_DT_ALL | NC_DT_WIDEN, NC_RES_FLOAT, ENTRY(REDUCE), DIFF(nc_ag_reduce), NC_K_REDUCE, "cpu_reduce")                             \
  X(STD, "std", REDUCE, 1, NC_DT_ALL | NC_DT_WIDEN, NC_RES_FLOAT, ENTRY(REDUCE), DIFF(nc_ag_reduce), NC_K_REDUCE, "cpu_reduce")                             \
  X(NORM, "norm", REDUCE, 1, NC_DT_ALL | NC_DT_WIDEN, NC_RES_FLOAT, ENTRY(REDUCE), DIFF(nc_ag_reduce), NC_K_REDUCE, "cpu_reduce")                           \
  X(LOGSUMEXP, "logsumexp", REDUCE, 1, NC_DT_ALL | NC_DT_WIDEN, NC_RES_FLOAT, ENTRY(REDUCE), DIFF(nc_ag_reduce), NC_K_REDUCE, "cpu_reduce")                 \
  X(ANY, "any", REDUCE, 1, NC_DT_ALL, NC_RES_BOOL, ENTRY(REDUCE), NODIFF, NC_K_REDUCE, "cpu_reduce")                              \
  X(ALL, "all", REDUCE, 1, NC_DT_ALL, NC_RES_BOOL, ENTRY(REDUCE), NODIFF, NC_K_REDUCE, "cpu_reduce")                              \
  X(CUMSUM, "cumsum", SCAN, 1, NC_DT_ALL, NC_RES_SUM, ENTRY(SCAN), DIFF(nc_ag_cumsum), "reduce.cl:cumsum_rows_<T>|cumsum_groups_<T>",       \
    "cpu_scan")                                                                                            \
  X(SOFTMAX, "softmax", SOFTMAX, 1, NC_DT_ALL | NC_DT_WIDEN, NC_RES_FLOAT, ENTRY(SOFTMAX), DIFF(nc_ag_softmax),                                               \
    "reduce.cl:softmax_rows_<T>|softmax_groups_<T>", "cpu_softmax")                                        \
  X(LOG_SOFTMAX, "log_softmax", SOFTMAX, 1, NC_DT_ALL | NC_DT_WIDEN, NC_RES_FLOAT, ENTRY(SOFTMAX), DIFF(nc_ag_softmax),                                       \
    "reduce.cl:softmax_rows_<T>|softmax_groups_<T>", "cpu_softmax")                                        \
  X(INDEX_SELECT, "index_select", INDEX, 2, NC_DT_ALL, NC_RES_SAME, ENTRY(INDEX), DIFF(nc_ag_index_select), "index.cl:take_<element bytes>",       \
    "cpu_index")                                                                                           \
  X(GATHER, "gather", INDEX, 2, NC_DT_ALL, NC_RES_SAME, ENTRY(INDEX), DIFF(nc_ag_gather), "index.cl:take_<element bytes>", "cpu_index")      \
  X(SCATTER_ADD, "scatter_add", INDEX, 3, NC_DT_ALL, NC_RES_SAME, ENTRY(INDEX), DIFF(nc_ag_scatter_add), "index.cl:scatter_add_<T>", "cpu_index") \
  X(ONE_HOT, "one_hot", INDEX, 1, NC_DT_INT, NC_RES_INDEX, ENTRY(NONE), NODIFF, "elementwise.cl:compare_int64",                 \
    "cpu_binary (eq with arange)")                                                                         \
  X(CAT, "cat", SHAPE, -1, NC_DT_ALL, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_cat), "core.cl:copy_<T>_<S> (into slices)", "cpu_copy")       \
  X(STACK, "stack", SHAPE, -1, NC_DT_ALL, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_stack), "core.cl:copy_<T>_<S> (into slices)", "cpu_copy")   \
  X(SPLIT, "split", SHAPE, 1, NC_DT_ALL, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_split), "(views)", "(views)")                                \
  X(CHUNK, "chunk", SHAPE, 1, NC_DT_ALL, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_split), "(views)", "(views)")                                \
  X(SORT, "sort", SORT, 1, NC_DT_ALL, NC_RES_SAME, ENTRY(SORT), NODIFF, "sort.cl:sort_init_<T>+sort_step_<T>, index.cl:take_*", \
    "cpu_sort")                                                                                            \
  X(TOPK, "topk", SORT, 1, NC_DT_ALL, NC_RES_SAME, ENTRY(SORT), NODIFF, "sort.cl:sort_init_<T>+sort_step_<T>, index.cl:take_*", \
    "cpu_sort")                                                                                            \
  X(UNIFORM, "uniform", RANDOM, 0, NC_DT_FLOAT, NC_RES_ARG, ENTRY(RANDOM), NODIFF, "core.cl:uniform_<T>", "cpu_random")           \
  X(NORMAL, "normal", RANDOM, 0, NC_DT_FLOAT, NC_RES_ARG, ENTRY(RANDOM), NODIFF, "core.cl:normal_<T>", "cpu_random")              \
  X(BERNOULLI, "bernoulli", RANDOM, 1, NC_DT_FLOAT, NC_RES_ARG, ENTRY(SAMPLE), NODIFF, "random.cl:bernoulli_<T>", "cpu_sample")   \
  X(RANDINT, "randint", RANDOM, 0, NC_DT_ALL, NC_RES_ARG, ENTRY(SAMPLE), NODIFF, "random.cl:randint_<T>", "cpu_sample")           \
  X(RANDPERM, "randperm", RANDOM, 0, NC_DT_NUM, NC_RES_ARG, ENTRY(NONE), NODIFF,                                                \
    "random.cl:randint_int64, sort.cl (sorts random keys)", "cpu_sample, cpu_sort") \
  X(MATMUL, "matmul", LINALG, 2, NC_DT_FLOAT | NC_DT_STORAGE, NC_RES_SAME, ENTRY(GEMM), DIFF(nc_ag_matmul), "gemm.cl:gemm", "cpu_gemm")                         \
  X(MM, "mm", LINALG, 2, NC_DT_FLOAT | NC_DT_STORAGE, NC_RES_SAME, ENTRY(GEMM), DIFF(nc_ag_mm), "gemm.cl:gemm", "cpu_gemm")                                 \
  X(BMM, "bmm", LINALG, 2, NC_DT_FLOAT | NC_DT_STORAGE, NC_RES_SAME, ENTRY(GEMM), DIFF(nc_ag_bmm), "gemm.cl:gemm", "cpu_gemm")                               \
  X(LINEAR, "linear", LINALG, 3, NC_DT_FLOAT | NC_DT_STORAGE, NC_RES_SAME, ENTRY(GEMM), DIFF(nc_ag_linear), "gemm.cl:gemm", "cpu_gemm")                         \
  X(CONV2D, "conv2d", CONV, 3, NC_DT_FLOAT | NC_DT_WIDEN | NC_DT_BF16, NC_RES_SAME, ENTRY(CONV2D), DIFF(nc_ag_conv2d), "conv.cl:conv2d_fwd", "cpu_conv2d")                   \
  X(CONV2D_BWD_INPUT, "conv2d_backward_input", CONV, 2, NC_DT_FLOAT | NC_DT_WIDEN | NC_DT_BF16, NC_RES_SAME, ENTRY(CONV2D_BWD_INPUT), NODIFF, "conv.cl:conv2d_bwd_input", "cpu_conv2d_bwd") \
  X(CONV2D_BWD_WEIGHT, "conv2d_backward_weight", CONV, 2, NC_DT_FLOAT | NC_DT_WIDEN | NC_DT_BF16, NC_RES_SAME, ENTRY(CONV2D_BWD_WEIGHT), NODIFF, "conv.cl:conv2d_bwd_weight", "cpu_conv2d_bwd") \
  X(MAX_POOL2D, "max_pool2d", POOL, 1, NC_DT_FLOAT | NC_DT_WIDEN, NC_RES_SAME, ENTRY(POOL2D), DIFF(nc_ag_pool2d), "pool.cl:max_pool_fwd", "cpu_pool2d")         \
  X(MAX_POOL2D_BWD, "max_pool2d_backward", POOL, 2, NC_DT_FLOAT | NC_DT_WIDEN, NC_RES_SAME, ENTRY(POOL2D_BWD), NODIFF, "pool.cl:max_pool_bwd", "cpu_pool2d_bwd") \
  X(AVG_POOL2D, "avg_pool2d", POOL, 1, NC_DT_FLOAT | NC_DT_WIDEN, NC_RES_SAME, ENTRY(POOL2D), DIFF(nc_ag_pool2d), "pool.cl:avg_pool_fwd", "cpu_pool2d")         \
  X(AVG_POOL2D_BWD, "avg_pool2d_backward", POOL, 1, NC_DT_FLOAT | NC_DT_WIDEN, NC_RES_SAME, ENTRY(POOL2D_BWD), NODIFF, "pool.cl:avg_pool_bwd", "cpu_pool2d_bwd") \
  X(ADAPTIVE_AVG_POOL2D, "adaptive_avg_pool2d", POOL, 1, NC_DT_FLOAT | NC_DT_WIDEN, NC_RES_SAME, ENTRY(POOL2D), DIFF(nc_ag_pool2d), "pool.cl:avg_pool_fwd", "cpu_pool2d") \
  X(ADAPTIVE_AVG_POOL2D_BWD, "adaptive_avg_pool2d_backward", POOL, 1, NC_DT_FLOAT | NC_DT_WIDEN, NC_RES_SAME, ENTRY(POOL2D_BWD), NODIFF, "pool.cl:avg_pool_bwd", "cpu_pool2d_bwd") \
  X(BATCH_NORM, "batch_norm", NORM, 5, NC_DT_FLOAT | NC_DT_STORAGE, NC_RES_SAME, ENTRY(BATCH_NORM), DIFF(nc_ag_batch_norm), "norm.cl:bn_stats", "cpu_batch_norm")   \
  X(BATCH_NORM_BWD, "batch_norm_backward", NORM, 5, NC_DT_FLOAT | NC_DT_STORAGE, NC_RES_SAME, ENTRY(BATCH_NORM_BWD), NODIFF, "norm.cl:bn_bwd_sums", "cpu_batch_norm_bwd") \
  X(LAYER_NORM, "layer_norm", NORM, 3, NC_DT_FLOAT | NC_DT_WIDEN, NC_RES_SAME, ENTRY(ROW_NORM), DIFF(nc_ag_layer_norm), "norm.cl:row_norm_fwd", "cpu_row_norm")       \
  X(LAYER_NORM_BWD, "layer_norm_backward", NORM, 5, NC_DT_FLOAT | NC_DT_WIDEN, NC_RES_SAME, ENTRY(ROW_NORM_BWD), NODIFF, "norm.cl:row_norm_bwd_*, norm.cl:row_norm_dw_*", "cpu_row_norm_bwd") \
  X(RMS_NORM, "rms_norm", NORM, 2, NC_DT_FLOAT | NC_DT_WIDEN, NC_RES_SAME, ENTRY(ROW_NORM), DIFF(nc_ag_rms_norm), "norm.cl:row_norm_fwd", "cpu_row_norm")           \
  X(RMS_NORM_BWD, "rms_norm_backward", NORM, 4, NC_DT_FLOAT | NC_DT_WIDEN, NC_RES_SAME, ENTRY(ROW_NORM_BWD), NODIFF, "norm.cl:row_norm_bwd_*, norm.cl:row_norm_dw_*", "cpu_row_norm_bwd") \
  X(EMBEDDING, "embedding", INDEX, 2, NC_DT_FLOAT, NC_RES_SAME, ENTRY(EMBEDDING), DIFF(nc_ag_embedding), "embedding.cl:embedding_fwd_<I>", "cpu_embedding") \
  X(EMBEDDING_BWD, "embedding_backward", INDEX, 2, NC_DT_FLOAT, NC_RES_SAME, ENTRY(EMBEDDING_BWD), NODIFF, "embedding.cl:embedding_bwd_<I>", "cpu_embedding_bwd") \
  X(CROSS_ENTROPY, "cross_entropy", LOSS, 2, NC_DT_FLOAT | NC_DT_WIDEN, NC_RES_SAME, ENTRY(CROSS_ENTROPY), DIFF(nc_ag_cross_entropy), "loss.cl:ce_fwd", "cpu_cross_entropy")  \
  X(CROSS_ENTROPY_BWD, "cross_entropy_backward", LOSS, 4, NC_DT_FLOAT | NC_DT_WIDEN, NC_RES_SAME, ENTRY(CROSS_ENTROPY_BWD), NODIFF, "loss.cl:ce_bwd", "cpu_cross_entropy_bwd") \
  X(FILL, "fill", DATA, 1, NC_DT_MOVE, NC_RES_SAME, ENTRY(FILL), NODIFF, "core.cl:fill_<T>", "cpu_fill")                       \
  X(COPY, "copy", DATA, 1, NC_DT_MOVE, NC_RES_ARG, ENTRY(COPY), NODIFF, "core.cl:copy_<T>_<S>, strided_copy_<size>", "cpu_copy")                  \
  X(ARANGE, "arange", DATA, 0, NC_DT_NUM, NC_RES_ARG, ENTRY(ARANGE), NODIFF, "core.cl:arange_<T>", "cpu_arange")             \
  X(SGD_STEP, "sgd_step", OPTIM, 3, NC_DT_FLOAT, NC_RES_SAME, ENTRY(SGD_STEP), NODIFF, "optim.cl:sgd_<T>", "cpu_sgd_step")     \
  X(RMSPROP_STEP, "rmsprop_step", OPTIM, 5, NC_DT_FLOAT, NC_RES_SAME, ENTRY(RMSPROP_STEP), NODIFF, "optim.cl:rmsprop_<T>", "cpu_rmsprop_step") \
  X(ADAM_STEP, "adam_step", OPTIM, 5, NC_DT_FLOAT, NC_RES_SAME, ENTRY(ADAM_STEP), NODIFF, "optim.cl:adam_<T>", "cpu_adam_step") \
  X(SUM_SQUARES, "sum_squares", OPTIM, 1, NC_DT_FLOAT, NC_RES_ARG, ENTRY(SUM_SQUARES), NODIFF, "optim.cl:sum_squares_<T>", "cpu_sum_squares") \
  X(VIEW, "view", VIEW, 1, NC_DT_MOVE, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_view), "(views)", "(views)")                 \
  X(RESHAPE, "reshape", VIEW, 1, NC_DT_MOVE, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_reshape), "(a view, or a copy)", "cpu_copy") \
  X(TRANSPOSE, "transpose", VIEW, 1, NC_DT_MOVE, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_transpose), "(views)", "(views)")  \
  X(PERMUTE, "permute", VIEW, 1, NC_DT_MOVE, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_permute), "(views)", "(views)")        \
  X(NARROW, "narrow", VIEW, 1, NC_DT_MOVE, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_narrow), "(views)", "(views)")           \
  X(SELECT, "select", VIEW, 1, NC_DT_MOVE, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_select), "(views)", "(views)")           \
  X(EXPAND, "expand", VIEW, 1, NC_DT_MOVE, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_expand), "(views)", "(views)")           \
  X(SQUEEZE, "squeeze", VIEW, 1, NC_DT_MOVE, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_squeeze), "(views)", "(views)")        \
  X(UNSQUEEZE, "unsqueeze", VIEW, 1, NC_DT_MOVE, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_unsqueeze), "(views)", "(views)")  \
  X(FLATTEN, "flatten", VIEW, 1, NC_DT_MOVE, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_flatten), "(a view, or a copy)", "cpu_copy") \
  X(CONTIGUOUS, "contiguous", VIEW, 1, NC_DT_MOVE, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_contiguous), "core.cl:copy_<T>_<S>, strided_copy_<size>", "cpu_copy") \
  X(CLONE, "clone", VIEW, 1, NC_DT_MOVE, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_clone), "core.cl:copy_<T>_<S>, strided_copy_<size>", "cpu_copy") \
  X(DROPOUT, "dropout", RANDOM, 1, NC_DT_FLOAT, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_dropout), "random.cl:bernoulli_<T>, elementwise.cl", "cpu_sample, cpu_binary") \
  X(NLL_LOSS, "nll_loss", LOSS, 2, NC_DT_FLOAT, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_nll_loss), "index.cl:take_*, reduce.cl", "cpu_index, cpu_reduce") \
  X(MSE_LOSS, "mse_loss", LOSS, 2, NC_DT_FLOAT, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_mse_loss), "elementwise.cl, reduce.cl", "cpu_binary, cpu_reduce") \
  X(L1_LOSS, "l1_loss", LOSS, 2, NC_DT_FLOAT, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_l1_loss), "elementwise.cl, reduce.cl", "cpu_binary, cpu_reduce") \
  X(BCE_WITH_LOGITS, "bce_with_logits", LOSS, 2, NC_DT_FLOAT, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_bce_with_logits), "elementwise.cl, reduce.cl", "cpu_unary, cpu_reduce") \
  X(COSINE_SIMILARITY, "cosine_similarity", LOSS, 2, NC_DT_FLOAT, NC_RES_SAME, ENTRY(NONE), DIFF(nc_ag_cosine_similarity), "elementwise.cl, reduce.cl", "cpu_binary, cpu_reduce") \
  /* group_norm(x [N, C, ...], num_groups dividing C, weight [C]?, bias [C]?, {eps = 1e-5}): each    \
   * sample's channels in num_groups groups, normalized by the group's mean and biased variance   \
   * (saved: mean, rstd [N, num_groups]), then scaled and shifted per channel. */                 \
  X(GROUP_NORM, "group_norm", NORM, 3, NC_DT_FLOAT | NC_DT_WIDEN, NC_RES_SAME,                                    \
    KERNEL(group_norm, (tensor(x), integer(num_groups), opt_tensor(weight), opt_tensor(bias),       \
                        number(eps, 1e-5), saved(mean), saved(rstd))),                              \
    DIFF(nc_ag_group_norm), "norm.cl:group_norm_fwd", "cpu_group_norm")                             \
  /* The input gradient of group_norm from dy and the saved statistics (fused; the affine         \
   * gradients are sums the rule composes). */                                                     \
  X(GROUP_NORM_BWD, "group_norm_backward", NORM, 5, NC_DT_FLOAT | NC_DT_WIDEN, NC_RES_SAME,                       \
    KERNEL(group_norm_backward, (tensor(dy), tensor(x), integer(num_groups), opt_tensor(weight),    \
                                 const_tensor(mean), const_tensor(rstd))),                          \
    NODIFF, "norm.cl:group_norm_bwd", "cpu_group_norm_backward")                                 \
  /* Activations as torch.nn.functional's: a new tensor of x's shape and dtype (float32 or       \
   * float64, else NC_ERR_DTYPE; numbers not finite: NC_ERR_ARG). The kernels run over contiguous \
   * x in chunks, one work-group each; the gradients are composed of ops.                         \
   * elu: x > 0 ? x : alpha (exp(x) - 1). */                                                      \
  X(ELU, "elu", ACTIVATION, 1, NC_DT_FLOAT | NC_DT_STORAGE, NC_RES_SAME, KERNEL(elu, (tensor(x), number(alpha, 1.0))), \
    DIFF(nc_ag_elu), "activation.cl:elu_fwd", "cpu_elu")                                           \
  /* softplus: log1p(exp(beta x)) / beta, and x itself where beta x > threshold (beta 0:         \
   * NC_ERR_ARG). */                                                                              \
  X(SOFTPLUS, "softplus", ACTIVATION, 1, NC_DT_FLOAT | NC_DT_STORAGE, NC_RES_SAME,                                 \
    KERNEL(softplus, (tensor(x), number(beta, 1.0), number(threshold, 20.0))), DIFF(nc_ag_softplus), \
    "activation.cl:softplus_fwd", "cpu_softplus")                                                  \
  /* mish: x tanh(softplus(x)), softplus with beta 1 and threshold 20. */                         \
  X(MISH, "mish", ACTIVATION, 1, NC_DT_FLOAT | NC_DT_STORAGE, NC_RES_SAME, KERNEL(mish, (tensor(x))), DIFF(nc_ag_mish), \
    "activation.cl:mish_fwd", "cpu_mish")                                                          \
  /* leaky_relu: x > 0 ? x : negative_slope x. */                                                  \
  X(LEAKY_RELU, "leaky_relu", ACTIVATION, 1, NC_DT_FLOAT | NC_DT_STORAGE, NC_RES_SAME,                             \
    KERNEL(leaky_relu, (tensor(x), number(negative_slope, 0.01))), DIFF(nc_ag_leaky_relu),         \
    "activation.cl:leaky_relu_fwd", "cpu_leaky_relu")                                              \
  /* relu_backward(dy, y): dy where y > 0, else 0: relu's input gradient from its output y, in   \
   * one pass (torch's threshold_backward: 0 wherever y <= 0, whatever dy holds). dy float32 or   \
   * float64; y of dy's shape and device, in any float dtype: a bfloat16 or float16 y beside a    \
   * float32 dy is read as it is (the kernels' storage build). The result has dy's dtype. */      \
  X(RELU_BWD, "relu_backward", ACTIVATION, 2, NC_DT_FLOAT | NC_DT_STORAGE, NC_RES_SAME,            \
    KERNEL(relu_backward, (tensor(dy), const_tensor(y))), NODIFF, "activation.cl:relu_bwd",        \
    "cpu_relu_backward")                                                                           \
  /* Image transforms (netcl.data.transforms), one set of parameters per sample, on float32 or    \
   * float64 batches x [N, C, H, W]; parameter tensors have x's dtype and device.                \
   * resized_crop: y [N, C, height, width] is the box {top, left, box_height, box_width, flip} of  \
   * boxes [N, 5] (integers; parts outside the image read as fill) resized bilinearly            \
   * (align_corners false, as torch's interpolate), mirrored left-right where flip is not 0. */   \
  X(RESIZED_CROP, "resized_crop", IMAGE, 2, NC_DT_FLOAT, NC_RES_SAME,                              \
    KERNEL(resized_crop, (tensor(x), const_tensor(boxes), integer(height), integer(width),         \
                          number(fill, 0.0))),                                                     \
    NODIFF, "image.cl:resized_crop", "cpu_resized_crop")                                           \
  /* adjust_color: x [N, 3, H, W] in [0, 1]; factors [N, 6] = {brightness, contrast, saturation,   \
   * hue, order, grayscale}: the first four as torchvision's adjust_* (each result clamped to     \
   * [0, 1]; an identity factor skips its step), applied in the order whose k-th step is          \
   * (order >> 2k) & 3 (0 brightness, 1 contrast, 2 saturation, 3 hue); then, where grayscale is  \
   * not 0, every channel becomes 0.2989 r + 0.587 g + 0.114 b. */                                \
  X(ADJUST_COLOR, "adjust_color", IMAGE, 2, NC_DT_FLOAT, NC_RES_SAME,                              \
    KERNEL(adjust_color, (tensor(x), const_tensor(factors))), NODIFF, "image.cl:adjust_color",    \
    "cpu_adjust_color")                                                                            \
  /* gaussian_blur: each sample convolved with the normalized Gaussian of odd size kernel_size    \
   * (<= 63) and standard deviation sigmas[n] (> 0), in both directions, the borders reflected    \
   * (torchvision's gaussian_blur). */                                                            \
  X(GAUSSIAN_BLUR, "gaussian_blur", IMAGE, 2, NC_DT_FLOAT, NC_RES_SAME,                            \
    KERNEL(gaussian_blur, (tensor(x), const_tensor(sigmas), integer(kernel_size))), NODIFF,        \
    "image.cl:gaussian_blur", "cpu_gaussian_blur")                                                 \
  /* rope(x [..., T, Dh], positions [T] (integers), {theta = 10000, inverse = false}): rotary      \
   * embedding in Meta's Llama layout: each pair (x[2p], x[2p+1]) of a row at position pos turns   \
   * by the angle pos * theta^(-2p / Dh) (inverse: by minus that angle, the gradient). */         \
  X(ROPE, "rope", ATTENTION, 2, NC_DT_FLOAT, NC_RES_SAME,                                            \
    KERNEL(rope, (tensor(x), const_tensor(positions), number(theta, 10000.0), flag(inverse, false))), \
    DIFF(nc_ag_rope), "attention.cl:rope_fwd", "cpu_rope")                                          \
  /* flash_attention(q [B, H, Tq, D], k, v [B, Hkv, Tk, D], {causal = true, scale = 0}): softmax(  \
   * scale q k^T) v per head, with Hkv dividing H (query head h reads key head h / (H / Hkv)),      \
   * scale 0 meaning 1 / sqrt(D), D <= 256. Causal: query i sees keys j <= i + Tk - Tq. Online      \
   * softmax over blocks of keys (the Tq x Tk scores are never stored); saved: lse [B, H, Tq], the \
   * log-sum-exp of each query's scores. */                                                         \
  X(FLASH_ATTENTION, "flash_attention", ATTENTION, 3, NC_DT_FLOAT, NC_RES_SAME,                     \
    KERNEL(flash_attention, (tensor(q), tensor(k), tensor(v), flag(causal, true), number(scale, 0.0), \
                             saved(lse))),                                                          \
    DIFF(nc_ag_flash_attention), "attention.cl:flash_attention_fwd", "cpu_flash_attention")        \
  /* The backward of flash_attention, recomputing the probabilities block by block from the saved  \
   * lse; delta [B, H, Tq] is rowsum(dout * out). _q: dq [B, H, Tq, D]; _kv: dk and dv stacked,     \
   * [2, B, Hkv, Tk, D] (dk summed over the query heads sharing a key head). */                     \
  X(FLASH_ATTENTION_BWD_Q, "flash_attention_backward_q", ATTENTION, 6, NC_DT_FLOAT, NC_RES_SAME,    \
    KERNEL(flash_attention_backward_q, (tensor(dout), tensor(q), tensor(k), tensor(v), const_tensor(lse), \
                                        const_tensor(delta), flag(causal, true), number(scale, 0.0))),   \
    NODIFF, "attention.cl:flash_attention_bwd_q", "cpu_flash_attention_backward_q")                \
  X(FLASH_ATTENTION_BWD_KV, "flash_attention_backward_kv", ATTENTION, 6, NC_DT_FLOAT, NC_RES_SAME,  \
    KERNEL(flash_attention_backward_kv, (tensor(dout), tensor(q), tensor(k), tensor(v), const_tensor(lse), \
                                         const_tensor(delta), flag(causal, true), number(scale, 0.0))),   \
    NODIFF, "attention.cl:flash_attention_bwd_kv", "cpu_flash_attention_backward_kv")              \
  /* ema_update(target, online, {momentum = 0.99}): target = momentum target + (1 - momentum)     \
   * online, in place, in one launch (the momentum encoders of netcl.ssl keep their parameters in \
   * one flat buffer each); target contiguous, online of its shape, dtype and device, any layout; \
   * momentum in [0, 1]. Returns target. */                                                       \
  X(EMA_UPDATE, "ema_update", OPTIM, 2, NC_DT_FLOAT, NC_RES_SAME,                                  \
    KERNEL(ema_update, (tensor(target), tensor(online), number(momentum, 0.99))), NODIFF,          \
    "ema.cl:ema_update", "cpu_ema_update")                                                         \
  /* kmeans_assign(x [N, D], centroids [K, D], labels [N]?, bounds [N, 2]?, moves [K, 2]?): the    \
   * nearest centroid of each point (int64, ties to the lower index), never an N x K matrix;       \
   * saved dist [N, 2]: the Euclidean distance to it and to the second nearest (inf when K = 1).   \
   * With labels, bounds (a previous call's dist) and moves (per centroid: how far it moved since,  \
   * half its distance to the nearest other centroid), Hamerly's bounds skip the points they prove \
   * unchanged; their dist is then an upper and a lower bound. */                                 \
  X(KMEANS_ASSIGN, "kmeans_assign", CLUSTER, 5, NC_DT_FLOAT, NC_RES_INDEX,                         \
    KERNEL(kmeans_assign, (tensor(x), tensor(centroids), opt_tensor(labels), opt_tensor(bounds),     \
                           opt_tensor(moves), saved(dist))),                                        \
    NODIFF, "cluster.cl:kmeans_assign", "cpu_kmeans_assign")                                        \
  /* kmeans_update(x [N, D], labels [N] int64, k): per cluster the sum of its points [K, D] (saved: \
   * counts [K], int64); points labelled outside [0, k) (DBSCAN's -1) are left out. Deterministic: \
   * fixed chunks of points, each summed in order, then the chunks summed in order. */            \
  X(KMEANS_UPDATE, "kmeans_update", CLUSTER, 2, NC_DT_FLOAT, NC_RES_SAME,                          \
    KERNEL(kmeans_update, (tensor(x), tensor(labels), integer(k), saved(counts))), NODIFF,          \
    "cluster.cl:kmeans_update", "cpu_kmeans_update")

typedef enum {
#define NC_OP_ENUM_(id, name, family, arity, dtypes, result, entry, grad, kernel, cpu) NC_OP_##id,
  NC_OPS(NC_OP_ENUM_)
#undef NC_OP_ENUM_
      NC_OP_COUNT
} nc_op;

typedef struct {
  nc_op op;
  const char *id;   /* "ADD": the kernels' NC_OP_ADD */
  const char *name; /* "add": the Lua name */
  nc_op_family family;
  int arity;       /* tensor inputs; -1 = a list */
  unsigned dtypes; /* accepted input dtypes (NC_DT_* mask) */
  nc_result_rule result;
  const char *kernel; /* "program.cl:kernel" (<T> = dtype name) */
  const char *cpu;    /* CPU backend function */
} nc_op_info;

/* The row of op (NULL when op is out of range). */
const nc_op_info *nc_op_get(nc_op op);

/* Looks an op up by its Lua name; NULL when there is none. */
const nc_op_info *nc_op_find(const char *name);

const char *nc_op_family_name(nc_op_family f); /* "unary", ... */

/* Whether op takes inputs of dtype d. */
bool nc_op_accepts(nc_op op, nc_dtype d);

/* NC_OK when op takes inputs of dtype d, else NC_ERR_DTYPE: "dtype bfloat16 is a storage type;
 * convert it with t:float() first" for a storage dtype, "<op> does not take <dtype> tensors"
 * otherwise. The dispatch layer checks every tensor of every backend call with it. */
nc_status nc_op_check_dtype(nc_op op, nc_dtype d);

/* The NC_ERR_DTYPE of a storage dtype given to an op that computes. */
nc_status nc_storage_dtype_error(nc_dtype d);

/* Whether dev's backend implements op (an op composed of others counts as implemented; its
 * parts report their own errors). Calling an op the backend lacks fails with
 * NC_ERR_UNSUPPORTED, naming the op and the backend. */
bool nc_device_supports_op(const nc_device *dev, nc_op op);

#ifdef __cplusplus
}
#endif

#endif

/* The op table: one row per op with its name, family, arity, accepted input dtypes, result
 * rule, OpenCL kernel and CPU function. The op enum, the kernels' op codes (NC_OP_<ID> is
 * defined in every OpenCL program), the Lua bindings of the generic families and the parity
 * harness's coverage check are all generated from this list, so adding an op is one row here
 * plus its kernel and CPU cases (see tests/parity/README.md). */
#ifndef NETCL_OPTABLE_H
#define NETCL_OPTABLE_H

#include <stdbool.h>
#include "dtype.h"

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

/* X(ID, name, family, arity, accepted dtypes, result rule, OpenCL kernel, CPU function) */
#define NC_OPS(X)                                                                                          \
  X(ABS, "abs", UNARY, 1, NC_DT_NUM, NC_RES_SAME, NC_K_UNARY, "cpu_unary")                                 \
  X(NEG, "neg", UNARY, 1, NC_DT_NUM, NC_RES_SAME, NC_K_UNARY, "cpu_unary")                                 \
  X(EXP, "exp", UNARY, 1, NC_DT_ALL, NC_RES_FLOAT, NC_K_UNARY, "cpu_unary")                                \
  X(LOG, "log", UNARY, 1, NC_DT_ALL, NC_RES_FLOAT, NC_K_UNARY, "cpu_unary")                                \
  X(LOG1P, "log1p", UNARY, 1, NC_DT_ALL, NC_RES_FLOAT, NC_K_UNARY, "cpu_unary")                            \
  X(SQRT, "sqrt", UNARY, 1, NC_DT_ALL, NC_RES_FLOAT, NC_K_UNARY, "cpu_unary")                              \
  X(RSQRT, "rsqrt", UNARY, 1, NC_DT_ALL, NC_RES_FLOAT, NC_K_UNARY, "cpu_unary")                            \
  X(SIN, "sin", UNARY, 1, NC_DT_ALL, NC_RES_FLOAT, NC_K_UNARY, "cpu_unary")                                \
  X(COS, "cos", UNARY, 1, NC_DT_ALL, NC_RES_FLOAT, NC_K_UNARY, "cpu_unary")                                \
  X(TANH, "tanh", UNARY, 1, NC_DT_ALL, NC_RES_FLOAT, NC_K_UNARY, "cpu_unary")                              \
  X(SIGMOID, "sigmoid", UNARY, 1, NC_DT_ALL, NC_RES_FLOAT, NC_K_UNARY, "cpu_unary")                        \
  X(RELU, "relu", UNARY, 1, NC_DT_NUM, NC_RES_SAME, NC_K_UNARY, "cpu_unary")                               \
  X(GELU, "gelu", UNARY, 1, NC_DT_ALL, NC_RES_FLOAT, NC_K_UNARY, "cpu_unary")                              \
  X(GELU_TANH, "gelu_tanh", UNARY, 1, NC_DT_ALL, NC_RES_FLOAT, NC_K_UNARY, "cpu_unary")                    \
  X(SILU, "silu", UNARY, 1, NC_DT_ALL, NC_RES_FLOAT, NC_K_UNARY, "cpu_unary")                              \
  X(FLOOR, "floor", UNARY, 1, NC_DT_NUM, NC_RES_SAME, NC_K_UNARY, "cpu_unary")                             \
  X(CEIL, "ceil", UNARY, 1, NC_DT_NUM, NC_RES_SAME, NC_K_UNARY, "cpu_unary")                               \
  X(ROUND, "round", UNARY, 1, NC_DT_NUM, NC_RES_SAME, NC_K_UNARY, "cpu_unary")                             \
  X(SIGN, "sign", UNARY, 1, NC_DT_NUM, NC_RES_SAME, NC_K_UNARY, "cpu_unary")                               \
  X(CLAMP, "clamp", UNARY, 1, NC_DT_NUM, NC_RES_SAME, NC_K_UNARY, "cpu_unary")                             \
  X(ISNAN, "isnan", UNARY, 1, NC_DT_ALL, NC_RES_BOOL, NC_K_COMPARE, "cpu_unary")                           \
  X(ISINF, "isinf", UNARY, 1, NC_DT_ALL, NC_RES_BOOL, NC_K_COMPARE, "cpu_unary")                           \
  X(ADD, "add", BINARY, 2, NC_DT_ALL, NC_RES_SAME, NC_K_BINARY, "cpu_binary")                              \
  X(SUB, "sub", BINARY, 2, NC_DT_NUM, NC_RES_SAME, NC_K_BINARY, "cpu_binary")                              \
  X(MUL, "mul", BINARY, 2, NC_DT_ALL, NC_RES_SAME, NC_K_BINARY, "cpu_binary")                              \
  X(DIV, "div", BINARY, 2, NC_DT_ALL, NC_RES_FLOAT, NC_K_BINARY, "cpu_binary")                             \
  X(POW, "pow", BINARY, 2, NC_DT_NUM, NC_RES_SAME, NC_K_BINARY, "cpu_binary")                              \
  X(MAXIMUM, "maximum", BINARY, 2, NC_DT_ALL, NC_RES_SAME, NC_K_BINARY, "cpu_binary")                      \
  X(MINIMUM, "minimum", BINARY, 2, NC_DT_ALL, NC_RES_SAME, NC_K_BINARY, "cpu_binary")                      \
  X(EQ, "eq", BINARY, 2, NC_DT_ALL, NC_RES_BOOL, NC_K_COMPARE, "cpu_binary")                               \
  X(NE, "ne", BINARY, 2, NC_DT_ALL, NC_RES_BOOL, NC_K_COMPARE, "cpu_binary")                               \
  X(LT, "lt", BINARY, 2, NC_DT_ALL, NC_RES_BOOL, NC_K_COMPARE, "cpu_binary")                               \
  X(LE, "le", BINARY, 2, NC_DT_ALL, NC_RES_BOOL, NC_K_COMPARE, "cpu_binary")                               \
  X(GT, "gt", BINARY, 2, NC_DT_ALL, NC_RES_BOOL, NC_K_COMPARE, "cpu_binary")                               \
  X(GE, "ge", BINARY, 2, NC_DT_ALL, NC_RES_BOOL, NC_K_COMPARE, "cpu_binary")                               \
  X(WHERE, "where", WHERE, 3, NC_DT_ALL, NC_RES_SAME, "elementwise.cl:where_<T>", "cpu_where")             \
  X(MASKED_FILL, "masked_fill", WHERE, 2, NC_DT_ALL, NC_RES_SAME, "elementwise.cl:where_<T>", "cpu_where") \
  X(SUM, "sum", REDUCE, 1, NC_DT_ALL, NC_RES_SUM,                                                          \
    "reduce.cl:reduce_rows_<T>|reduce_sum_<T>+reduce_partials_<T>", "cpu_reduce")                          \
  X(MEAN, "mean", REDUCE, 1, NC_DT_ALL, NC_RES_FLOAT,                                                      \
    "reduce.cl:reduce_rows_<T>|reduce_sum_<T>+reduce_partials_<T>", "cpu_reduce")                          \
  X(PROD, "prod", REDUCE, 1, NC_DT_ALL, NC_RES_SUM, NC_K_REDUCE, "cpu_reduce")                             \
  X(MAX, "max", REDUCE, 1, NC_DT_ALL, NC_RES_SAME, NC_K_REDUCE, "cpu_reduce")                              \
  X(MIN, "min", REDUCE, 1, NC_DT_ALL, NC_RES_SAME, NC_K_REDUCE, "cpu_reduce")                              \
  X(ARGMAX, "argmax", REDUCE, 1, NC_DT_ALL, NC_RES_INDEX, NC_K_REDUCE, "cpu_reduce")                       \
  X(ARGMIN, "argmin", REDUCE, 1, NC_DT_ALL, NC_RES_INDEX, NC_K_REDUCE, "cpu_reduce")                       \
  X(VAR, "var", REDUCE, 1, NC_DT_ALL, NC_RES_FLOAT, NC_K_REDUCE, "cpu_reduce")                             \
  X(STD, "std", REDUCE, 1, NC_DT_ALL, NC_RES_FLOAT, NC_K_REDUCE, "cpu_reduce")                             \
  X(NORM, "norm", REDUCE, 1, NC_DT_ALL, NC_RES_FLOAT, NC_K_REDUCE, "cpu_reduce")                           \
  X(LOGSUMEXP, "logsumexp", REDUCE, 1, NC_DT_ALL, NC_RES_FLOAT, NC_K_REDUCE, "cpu_reduce")                 \
  X(ANY, "any", REDUCE, 1, NC_DT_ALL, NC_RES_BOOL, NC_K_REDUCE, "cpu_reduce")                              \
  X(ALL, "all", REDUCE, 1, NC_DT_ALL, NC_RES_BOOL, NC_K_REDUCE, "cpu_reduce")                              \
  X(CUMSUM, "cumsum", SCAN, 1, NC_DT_ALL, NC_RES_SUM, "reduce.cl:cumsum_rows_<T>|cumsum_groups_<T>",       \
    "cpu_scan")                                                                                            \
  X(SOFTMAX, "softmax", SOFTMAX, 1, NC_DT_ALL, NC_RES_FLOAT,                                               \
    "reduce.cl:softmax_rows_<T>|softmax_groups_<T>", "cpu_softmax")                                        \
  X(LOG_SOFTMAX, "log_softmax", SOFTMAX, 1, NC_DT_ALL, NC_RES_FLOAT,                                       \
    "reduce.cl:softmax_rows_<T>|softmax_groups_<T>", "cpu_softmax")                                        \
  X(INDEX_SELECT, "index_select", INDEX, 2, NC_DT_ALL, NC_RES_SAME, "index.cl:take_<element bytes>",       \
    "cpu_index")                                                                                           \
  X(GATHER, "gather", INDEX, 2, NC_DT_ALL, NC_RES_SAME, "index.cl:take_<element bytes>", "cpu_index")      \
  X(SCATTER_ADD, "scatter_add", INDEX, 3, NC_DT_ALL, NC_RES_SAME, "index.cl:scatter_add_<T>", "cpu_index") \
  X(ONE_HOT, "one_hot", INDEX, 1, NC_DT_INT, NC_RES_INDEX, "elementwise.cl:compare_int64",                 \
    "cpu_binary (eq with arange)")                                                                         \
  X(CAT, "cat", SHAPE, -1, NC_DT_ALL, NC_RES_SAME, "core.cl:copy_<T>_<S> (into slices)", "cpu_copy")       \
  X(STACK, "stack", SHAPE, -1, NC_DT_ALL, NC_RES_SAME, "core.cl:copy_<T>_<S> (into slices)", "cpu_copy")   \
  X(SPLIT, "split", SHAPE, 1, NC_DT_ALL, NC_RES_SAME, "(views)", "(views)")                                \
  X(CHUNK, "chunk", SHAPE, 1, NC_DT_ALL, NC_RES_SAME, "(views)", "(views)")                                \
  X(SORT, "sort", SORT, 1, NC_DT_ALL, NC_RES_SAME, "sort.cl:sort_init_<T>+sort_step_<T>, index.cl:take_*", \
    "cpu_sort")                                                                                            \
  X(TOPK, "topk", SORT, 1, NC_DT_ALL, NC_RES_SAME, "sort.cl:sort_init_<T>+sort_step_<T>, index.cl:take_*", \
    "cpu_sort")                                                                                            \
  X(UNIFORM, "uniform", RANDOM, 0, NC_DT_FLOAT, NC_RES_ARG, "core.cl:uniform_<T>", "cpu_random")           \
  X(NORMAL, "normal", RANDOM, 0, NC_DT_FLOAT, NC_RES_ARG, "core.cl:normal_<T>", "cpu_random")              \
  X(BERNOULLI, "bernoulli", RANDOM, 1, NC_DT_FLOAT, NC_RES_ARG, "random.cl:bernoulli_<T>", "cpu_sample")   \
  X(RANDINT, "randint", RANDOM, 0, NC_DT_ALL, NC_RES_ARG, "random.cl:randint_<T>", "cpu_sample")           \
  X(RANDPERM, "randperm", RANDOM, 0, NC_DT_NUM, NC_RES_ARG,                                                \
    "random.cl:randint_int64, sort.cl (sorts random keys)", "cpu_sample, cpu_sort") \
  X(MATMUL, "matmul", LINALG, 2, NC_DT_FLOAT, NC_RES_SAME, "gemm.cl:gemm", "cpu_gemm")                         \
  X(MM, "mm", LINALG, 2, NC_DT_FLOAT, NC_RES_SAME, "gemm.cl:gemm", "cpu_gemm")                                 \
  X(BMM, "bmm", LINALG, 2, NC_DT_FLOAT, NC_RES_SAME, "gemm.cl:gemm", "cpu_gemm")                               \
  X(LINEAR, "linear", LINALG, 3, NC_DT_FLOAT, NC_RES_SAME, "gemm.cl:gemm", "cpu_gemm")                         \
  X(CONV2D, "conv2d", CONV, 3, NC_DT_FLOAT, NC_RES_SAME, "conv.cl:conv2d_fwd", "cpu_conv2d")                   \
  X(CONV2D_BWD_INPUT, "conv2d_backward_input", CONV, 2, NC_DT_FLOAT, NC_RES_SAME, "conv.cl:conv2d_bwd_input", "cpu_conv2d_bwd") \
  X(CONV2D_BWD_WEIGHT, "conv2d_backward_weight", CONV, 2, NC_DT_FLOAT, NC_RES_SAME, "conv.cl:conv2d_bwd_weight", "cpu_conv2d_bwd") \
  X(MAX_POOL2D, "max_pool2d", POOL, 1, NC_DT_FLOAT, NC_RES_SAME, "pool.cl:max_pool_fwd", "cpu_pool2d")         \
  X(MAX_POOL2D_BWD, "max_pool2d_backward", POOL, 2, NC_DT_FLOAT, NC_RES_SAME, "pool.cl:max_pool_bwd", "cpu_pool2d_bwd") \
  X(AVG_POOL2D, "avg_pool2d", POOL, 1, NC_DT_FLOAT, NC_RES_SAME, "pool.cl:avg_pool_fwd", "cpu_pool2d")         \
  X(AVG_POOL2D_BWD, "avg_pool2d_backward", POOL, 1, NC_DT_FLOAT, NC_RES_SAME, "pool.cl:avg_pool_bwd", "cpu_pool2d_bwd") \
  X(ADAPTIVE_AVG_POOL2D, "adaptive_avg_pool2d", POOL, 1, NC_DT_FLOAT, NC_RES_SAME, "pool.cl:avg_pool_fwd", "cpu_pool2d") \
  X(ADAPTIVE_AVG_POOL2D_BWD, "adaptive_avg_pool2d_backward", POOL, 1, NC_DT_FLOAT, NC_RES_SAME, "pool.cl:avg_pool_bwd", "cpu_pool2d_bwd") \
  X(BATCH_NORM, "batch_norm", NORM, 5, NC_DT_FLOAT, NC_RES_SAME, "norm.cl:batch_norm_fwd", "cpu_batch_norm")   \
  X(BATCH_NORM_BWD, "batch_norm_backward", NORM, 5, NC_DT_FLOAT, NC_RES_SAME, "norm.cl:batch_norm_bwd", "cpu_batch_norm_bwd") \
  X(LAYER_NORM, "layer_norm", NORM, 3, NC_DT_FLOAT, NC_RES_SAME, "norm.cl:row_norm_fwd", "cpu_row_norm")       \
  X(LAYER_NORM_BWD, "layer_norm_backward", NORM, 5, NC_DT_FLOAT, NC_RES_SAME, "norm.cl:row_norm_bwd_*", "cpu_row_norm_bwd") \
  X(RMS_NORM, "rms_norm", NORM, 2, NC_DT_FLOAT, NC_RES_SAME, "norm.cl:row_norm_fwd", "cpu_row_norm")           \
  X(RMS_NORM_BWD, "rms_norm_backward", NORM, 4, NC_DT_FLOAT, NC_RES_SAME, "norm.cl:row_norm_bwd_*", "cpu_row_norm_bwd") \
  X(EMBEDDING, "embedding", INDEX, 2, NC_DT_FLOAT, NC_RES_SAME, "embedding.cl:embedding_fwd_<I>", "cpu_embedding") \
  X(EMBEDDING_BWD, "embedding_backward", INDEX, 2, NC_DT_FLOAT, NC_RES_SAME, "embedding.cl:embedding_bwd_<I>", "cpu_embedding_bwd") \
  X(CROSS_ENTROPY, "cross_entropy", LOSS, 2, NC_DT_FLOAT, NC_RES_SAME, "loss.cl:ce_fwd", "cpu_cross_entropy")  \
  X(CROSS_ENTROPY_BWD, "cross_entropy_backward", LOSS, 4, NC_DT_FLOAT, NC_RES_SAME, "loss.cl:ce_bwd", "cpu_cross_entropy_bwd")

typedef enum {
#define NC_OP_ENUM_(id, name, family, arity, dtypes, result, kernel, cpu) NC_OP_##id,
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

#ifdef __cplusplus
}
#endif

#endif

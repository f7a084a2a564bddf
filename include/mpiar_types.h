/**
 * @file mpiar_types.h
 * @brief mpiar's element types, operations, error codes and local reduction: everything of the
 * public API that needs no MPI (mpiar.h includes this header and adds the calls on communicators).
 *
 * Every public name carries the prefix `mpiar_` (types `mpiar_*_t`, constants `MPIAR_*`).
 * Every function that can fail returns an error code: `MPIAR_SUCCESS` (0) or a negative
 * `MPIAR_ERR_*` value. No function aborts the process. `mpiar_strerror()` names a code and
 * `mpiar_last_error()` gives the detail of the last failure on the calling thread.
 */
#ifndef MPIAR_TYPES_H
#define MPIAR_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "mpiar_version.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @return the run-time library version as "MAJOR.MINOR.PATCH" (a static string). */
const char *mpiar_version(void);

/** @return the run-time library version as MPIAR_VERSION_HEX of the library that is loaded. */
unsigned mpiar_version_hex(void);

/**
 * Element types. f16 is IEEE 754 binary16, bf16 is the upper half of a binary32.
 * f16 and bf16 are reduced in f32 and rounded back to nearest, ties to even.
 */
typedef enum mpiar_dtype {
  MPIAR_INT8 = 0,
  MPIAR_UINT8,
  MPIAR_INT32,
  MPIAR_UINT32,
  MPIAR_INT64,
  MPIAR_UINT64,
  MPIAR_FLOAT16,
  MPIAR_BFLOAT16,
  MPIAR_FLOAT32,
  MPIAR_FLOAT64
} mpiar_dtype_t;

/**
 * Reduction operations.
 *
 * - SUM, PROD, MIN, MAX: every type. Integer SUM and PROD wrap modulo 2^bits (signed types too,
 *   in two's complement); they never trap.
 * - BAND, BOR, BXOR: integer types only.
 * - AVG: floating types only. In an allreduce it is the sum over all ranks divided by the
 *   number of ranks. In mpiar_reduce_local() it is the mean of the two operands, (a + b) / 2.
 *
 * Floating MIN and MAX order values as IEEE 754-2019 minimum/maximum do (-0 is smaller than
 * +0) and propagate NaN: a NaN operand is returned with its bits unchanged, the first operand's
 * when both are NaN. Floating SUM, PROD and AVG return the first NaN operand quieted (payload
 * kept). f16 and bf16 keep subnormals; bf16 AVG is computed in f32 as (a + b) * 0.5 and overflows
 * to infinity only where f32 would.
 */
typedef enum mpiar_op {
  MPIAR_SUM = 0,
  MPIAR_PROD,
  MPIAR_MIN,
  MPIAR_MAX,
  MPIAR_BAND,
  MPIAR_BOR,
  MPIAR_BXOR,
  MPIAR_AVG
} mpiar_op_t;

/**
 * Every error code, generated from one list: X(NAME, value, "description").
 * The values are stable and negative; MPIAR_SUCCESS is 0.
 */
#define MPIAR_ERRNO_MAP(X)                                                              \
  X(SUCCESS, 0, "success")                                                              \
  X(ERR_INVALID_ARG, -1, "invalid argument")                                            \
  X(ERR_NULL_BUFFER, -2, "null buffer with a non-zero count")                           \
  X(ERR_UNSUPPORTED, -3, "operation not supported")                                     \
  X(ERR_BAD_DTYPE_OP, -4, "unsupported datatype and operation pair")                    \
  X(ERR_OVERLAP, -5, "send and receive buffers partially overlap")                      \
  X(ERR_NOMEM, -6, "out of memory")                                                     \
  X(ERR_MPI, -7, "an MPI call failed")                                                  \
  X(ERR_MPI_STATE, -8, "MPI is not initialized or already finalized")                   \
  X(ERR_COMM, -9, "invalid communicator")                                               \
  X(ERR_UNKNOWN_ALGORITHM, -10, "unknown algorithm name")                               \
  X(ERR_TIMEOUT, -11, "deadline passed before the operation completed")                 \
  X(ERR_COMM_BROKEN, -12, "communicator context is broken by an earlier failure")       \
  X(ERR_ENV, -13, "malformed environment variable")                                     \
  X(ERR_ISA_UNAVAILABLE, -14, "requested instruction set is not available on this CPU") \
  X(ERR_KEY_UNKNOWN, -15, "unknown key")                                                \
  X(ERR_KEY_EXISTS, -16, "key already initialized")                                     \
  X(ERR_MISMATCH, -17, "arguments differ between ranks or from the registered ones")    \
  X(ERR_CORRUPT, -18, "corrupt or mismatched data")                                     \
  X(ERR_IO, -19, "input/output error")                                                  \
  X(ERR_INTERNAL, -20, "internal error")                                                \
  X(ERR_CONCURRENT, -21, "another thread is starting an operation on this communicator")  \
  X(ERR_THREAD_LEVEL, -22, "the MPI thread support level is too low for this feature")  \
  X(ERR_INTERRUPTED, -23, "the wait was interrupted by the caller's interrupt check")

/** Error codes (see MPIAR_ERRNO_MAP). */
typedef enum mpiar_error {
#define MPIAR_ERRNO_ENUM_(name, value, text) MPIAR_##name = value,
  MPIAR_ERRNO_MAP(MPIAR_ERRNO_ENUM_)
#undef MPIAR_ERRNO_ENUM_
} mpiar_error_t;

/** @return a static description of an error code ("unknown error" for other values). */
const char *mpiar_strerror(int err);

/** @return the code's name, e.g. "MPIAR_ERR_TIMEOUT" ("MPIAR_ERR_UNKNOWN" for other values). */
const char *mpiar_err_name(int err);

/**
 * @return the detail message of the last failure of an mpiar call on the calling thread
 * (thread-local storage, valid until the next failing call on this thread); "" if none.
 */
const char *mpiar_last_error(void);

/** @return the size in bytes of one element of @p dtype, or 0 for an invalid type. */
size_t mpiar_dtype_size(mpiar_dtype_t dtype);

/** @return the name of @p dtype ("float32", "bfloat16", ...), or NULL for an invalid type. */
const char *mpiar_dtype_name(mpiar_dtype_t dtype);

/** @return the name of @p op ("sum", "avg", ...), or NULL for an invalid operation. */
const char *mpiar_op_name(mpiar_op_t op);

/**
 * Parse a datatype name as printed by mpiar_dtype_name() (also "f32", "f64", "f16", "bf16",
 * "i8", "u8", "i32", "u32", "i64", "u64").
 * @return MPIAR_SUCCESS, or MPIAR_ERR_INVALID_ARG for an unknown name.
 */
int mpiar_dtype_from_name(const char *name, mpiar_dtype_t *dtype);

/** Parse an operation name as printed by mpiar_op_name(). @return as mpiar_dtype_from_name(). */
int mpiar_op_from_name(const char *name, mpiar_op_t *op);

/** @return 1 if @p op is defined on @p dtype, 0 otherwise (also for invalid values). */
int mpiar_op_supported(mpiar_dtype_t dtype, mpiar_op_t op);

/**
 * The reduction kernel as a public call: dst[i] = a[i] op b[i] for i < count.
 *
 * @p dst may be the same pointer as @p a or @p b (in place); other overlap is undefined.
 * Uses the fastest kernel the CPU supports (see MPIAR_KERNEL) and, for long spans, several
 * OpenMP threads (see MPIAR_NUM_THREADS); the result bits never depend on either choice.
 * Needs no MPI.
 *
 * @return MPIAR_SUCCESS, MPIAR_ERR_NULL_BUFFER, MPIAR_ERR_INVALID_ARG, MPIAR_ERR_BAD_DTYPE_OP,
 *         MPIAR_ERR_ENV or MPIAR_ERR_ISA_UNAVAILABLE (bad MPIAR_KERNEL).
 */
int mpiar_reduce_local(void *dst, const void *a, const void *b, size_t count, mpiar_dtype_t dtype,
                       mpiar_op_t op);

/**
 * The result of a reproducible allreduce over @p nranks ranks, computed on one process:
 * dst[i] = the canonical combination of inputs[0][i], ..., inputs[nranks-1][i].
 *
 * The canonical order: with p' the largest power of two <= nranks and rem = nranks - p', the
 * leaves are y_i = x_{2i} op x_{2i+1} for i < rem and y_i = x_{i+rem} for rem <= i < p'; the
 * result is the balanced pairwise tree over y_0 .. y_{p'-1}, Y(lo, hi) = Y(lo, mid) op Y(mid, hi)
 * with mid = (lo + hi) / 2 (for example ((x0 x1) x2)(x3 x4) for 5 ranks). Every "a op b" is
 * mpiar_reduce_local(dst, a, b, ...) with a first, so the same bits come from those calls made by
 * hand in that order. MPIAR_AVG is the canonical MPIAR_SUM divided once by nranks in the element
 * type (f16 and bf16 through f32); with one rank the result is inputs[0] unchanged.
 *
 * @p dst may be one of the inputs; no other overlap. Needs no MPI.
 *
 * @return MPIAR_SUCCESS, MPIAR_ERR_INVALID_ARG (nranks < 1, bad dtype or op),
 *         MPIAR_ERR_BAD_DTYPE_OP, MPIAR_ERR_NULL_BUFFER, MPIAR_ERR_NOMEM, or the kernel layer's
 *         MPIAR_ERR_ENV / MPIAR_ERR_ISA_UNAVAILABLE (bad MPIAR_KERNEL).
 */
int mpiar_reduce_canonical(void *dst, const void *const inputs[], int nranks, size_t count,
                           mpiar_dtype_t dtype, mpiar_op_t op);

/**
 * @return the name of the kernel level in use: "reference", "avx2" or "avx512"; NULL if the
 * kernel layer failed to initialize (mpiar_last_error() says why).
 */
const char *mpiar_kernel_level(void);

/**
 * @return the number of allreduce algorithms in the registry; with mpiar_algorithm_name() it
 * enumerates them.
 */
int mpiar_algorithm_count(void);

/** @return the name of algorithm @p index (0 <= index < mpiar_algorithm_count()), or NULL. */
const char *mpiar_algorithm_name(int index);

/**
 * Check an allreduce algorithm name as the calls take it: NULL, "auto", a registry name, or a
 * parameterised one (NAME/k=N within the entry's range, as "recursive_multiplying/k=3").
 * @return MPIAR_SUCCESS, or MPIAR_ERR_UNKNOWN_ALGORITHM with mpiar_last_error() saying what is
 *         wrong and which names and ranges exist.
 */
int mpiar_algorithm_check(const char *name);

#ifdef __cplusplus
}
#endif

#endif /* MPIAR_TYPES_H */

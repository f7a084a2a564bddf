/*
 * Internal helpers shared by every module: error reporting and the check-and-jump pattern.
 * Internal non-static names carry the prefix mpiar__ (two underscores).
 */
#ifndef MPIAR_COMMON_H
#define MPIAR_COMMON_H

#include <stddef.h>

#include "mpiar_types.h"

/* Numbers of element types and operations (the public enums end at MPIAR_FLOAT64 / MPIAR_AVG). */
#define MPIAR__DTYPE_COUNT ((int)MPIAR_FLOAT64 + 1)
#define MPIAR__OP_COUNT ((int)MPIAR_AVG + 1)

/* MPIAR__COLD marks error reporting, so that the branches leading to it leave the hot path. */
#if defined(__GNUC__)
#define MPIAR__PRINTF(f, a) __attribute__((format(printf, f, a)))
#define MPIAR__LIKELY(x) __builtin_expect(!!(x), 1)
#define MPIAR__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define MPIAR__COLD __attribute__((cold))
#else
#define MPIAR__PRINTF(f, a)
#define MPIAR__LIKELY(x) (x)
#define MPIAR__UNLIKELY(x) (x)
#define MPIAR__COLD
#endif

/*
 * Record a detail message for mpiar_last_error() on this thread and return @p code, so that a
 * failure is reported in one line: `return mpiar__error(MPIAR_ERR_NOMEM, "plan of %zu", n);`.
 */
int mpiar__error(int code, const char *fmt, ...) MPIAR__PRINTF(2, 3) MPIAR__COLD;

/* Clear this thread's detail message (public calls do this on entry). */
void mpiar__error_clear(void);

/* Evaluate an expression returning an mpiar code; on failure store it in `rc` and jump to cleanup.
 */
#define MPIAR__CHECK(expr)          \
  do {                              \
    rc = (expr);                    \
    if (MPIAR__UNLIKELY(rc != 0)) { \
      goto cleanup;                 \
    }                               \
  } while (0)

/* Fail with a code and detail and jump to cleanup. */
#define MPIAR__FAIL(code, ...)              \
  do {                                      \
    rc = mpiar__error((code), __VA_ARGS__); \
    goto cleanup;                           \
  } while (0)

/*
 * Checks shared by every call that reduces: a valid datatype and operation, the pair defined,
 * and a count whose byte length fits a size_t. @p fn names the call in the detail.
 * @return MPIAR_SUCCESS, MPIAR_ERR_INVALID_ARG or MPIAR_ERR_BAD_DTYPE_OP.
 */
int mpiar__check_reduction(const char *fn, mpiar_dtype_t dtype, mpiar_op_t op, size_t count);

/* The class of a datatype, from the datatype table. */
typedef enum mpiar__dtype_class {
  MPIAR__DTYPE_INVALID = 0, /* not a datatype */
  MPIAR__DTYPE_INTEGER,     /* every operation is exact: any order gives the same bits */
  MPIAR__DTYPE_FLOAT,       /* float32, float64 */
  MPIAR__DTYPE_FLOAT16      /* the 16-bit floats (float16, bfloat16): no native arithmetic */
} mpiar__dtype_class_t;
int mpiar__dtype_class(mpiar_dtype_t dtype);

/* A floating-point type (of either class): its reductions depend on the order. */
static inline int mpiar__dtype_is_float(mpiar_dtype_t dtype) {
  int c = mpiar__dtype_class(dtype);
  return c == MPIAR__DTYPE_FLOAT || c == MPIAR__DTYPE_FLOAT16;
}

#endif /* MPIAR_COMMON_H */

/* Datatype and operation names, sizes and the table of which operations each type supports. */
#include <stdint.h>
#include <string.h>

#include "base/common.h"

/* The operations defined on integer and on floating-point types (bit op of a mask). */
#define OPS_COMMON ((1u << MPIAR_SUM) | (1u << MPIAR_PROD) | (1u << MPIAR_MIN) | (1u << MPIAR_MAX))
#define OPS_INTEGER (OPS_COMMON | (1u << MPIAR_BAND) | (1u << MPIAR_BOR) | (1u << MPIAR_BXOR))
#define OPS_FLOATING (OPS_COMMON | (1u << MPIAR_AVG))

static const struct {
  const char *name;
  const char *short_name;
  size_t size;
  unsigned ops;     /* the operations defined on the type */
  int cls;          /* mpiar__dtype_class_t */
  size_t max_count; /* the largest count: its byte length, twice over, fits a size_t */
} dtypes[MPIAR__DTYPE_COUNT] = {
#define DTYPE(id, name, short_name, size, ops, cls) \
  [id] = {name, short_name, size, ops, cls, SIZE_MAX / (size) / 2}
    DTYPE(MPIAR_INT8, "int8", "i8", 1, OPS_INTEGER, MPIAR__DTYPE_INTEGER),
    DTYPE(MPIAR_UINT8, "uint8", "u8", 1, OPS_INTEGER, MPIAR__DTYPE_INTEGER),
    DTYPE(MPIAR_INT32, "int32", "i32", 4, OPS_INTEGER, MPIAR__DTYPE_INTEGER),
    DTYPE(MPIAR_UINT32, "uint32", "u32", 4, OPS_INTEGER, MPIAR__DTYPE_INTEGER),
    DTYPE(MPIAR_INT64, "int64", "i64", 8, OPS_INTEGER, MPIAR__DTYPE_INTEGER),
    DTYPE(MPIAR_UINT64, "uint64", "u64", 8, OPS_INTEGER, MPIAR__DTYPE_INTEGER),
    DTYPE(MPIAR_FLOAT16, "float16", "f16", 2, OPS_FLOATING, MPIAR__DTYPE_FLOAT16),
    DTYPE(MPIAR_BFLOAT16, "bfloat16", "bf16", 2, OPS_FLOATING, MPIAR__DTYPE_FLOAT16),
    DTYPE(MPIAR_FLOAT32, "float32", "f32", 4, OPS_FLOATING, MPIAR__DTYPE_FLOAT),
    DTYPE(MPIAR_FLOAT64, "float64", "f64", 8, OPS_FLOATING, MPIAR__DTYPE_FLOAT),
#undef DTYPE
};

static const char *const op_names[MPIAR__OP_COUNT] = {
    [MPIAR_SUM] = "sum",   [MPIAR_PROD] = "prod", [MPIAR_MIN] = "min",   [MPIAR_MAX] = "max",
    [MPIAR_BAND] = "band", [MPIAR_BOR] = "bor",   [MPIAR_BXOR] = "bxor", [MPIAR_AVG] = "avg",
};

size_t mpiar_dtype_size(mpiar_dtype_t dtype) {
  return ((unsigned)dtype < MPIAR__DTYPE_COUNT) ? dtypes[dtype].size : 0;
}

int mpiar__dtype_class(mpiar_dtype_t dtype) {
  return ((unsigned)dtype < MPIAR__DTYPE_COUNT) ? dtypes[dtype].cls : MPIAR__DTYPE_INVALID;
}

const char *mpiar_dtype_name(mpiar_dtype_t dtype) {
  return ((unsigned)dtype < MPIAR__DTYPE_COUNT) ? dtypes[dtype].name : NULL;
}

const char *mpiar_op_name(mpiar_op_t op) {
  return ((unsigned)op < MPIAR__OP_COUNT) ? op_names[op] : NULL;
}

int mpiar_dtype_from_name(const char *name, mpiar_dtype_t *dtype) {
  if (name == NULL || dtype == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "null datatype name or result pointer");
  }
  for (int i = 0; i < MPIAR__DTYPE_COUNT; i++) {
    if (strcmp(name, dtypes[i].name) == 0 || strcmp(name, dtypes[i].short_name) == 0) {
      *dtype = (mpiar_dtype_t)i;
      return MPIAR_SUCCESS;
    }
  }
  return mpiar__error(MPIAR_ERR_INVALID_ARG, "unknown datatype '%s'", name);
}

int mpiar_op_from_name(const char *name, mpiar_op_t *op) {
  if (name == NULL || op == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "null operation name or result pointer");
  }
  for (int i = 0; i < MPIAR__OP_COUNT; i++) {
    if (strcmp(name, op_names[i]) == 0) {
      *op = (mpiar_op_t)i;
      return MPIAR_SUCCESS;
    }
  }
  return mpiar__error(MPIAR_ERR_INVALID_ARG, "unknown operation '%s'", name);
}

int mpiar_op_supported(mpiar_dtype_t dtype, mpiar_op_t op) {
  if ((unsigned)dtype >= MPIAR__DTYPE_COUNT || (unsigned)op >= MPIAR__OP_COUNT) {
    return 0;
  }
  return (int)((dtypes[dtype].ops >> op) & 1u);
}

int mpiar__check_reduction(const char *fn, mpiar_dtype_t dtype, mpiar_op_t op, size_t count) {
  if (MPIAR__LIKELY((unsigned)dtype < MPIAR__DTYPE_COUNT && (unsigned)op < MPIAR__OP_COUNT &&
                    ((dtypes[dtype].ops >> op) & 1u) && count <= dtypes[dtype].max_count)) {
    return MPIAR_SUCCESS;
  }
  if ((unsigned)dtype >= MPIAR__DTYPE_COUNT) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "%s: invalid datatype %d", fn, (int)dtype);
  }
  if ((unsigned)op >= MPIAR__OP_COUNT) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "%s: invalid operation %d", fn, (int)op);
  }
  if (!mpiar_op_supported(dtype, op)) {
    return mpiar__error(MPIAR_ERR_BAD_DTYPE_OP, "%s: operation %s is not defined on %s", fn,
                        mpiar_op_name(op), mpiar_dtype_name(dtype));
  }
  /* The byte length of a buffer must be a size_t, with room to spare for offsets. */
  if (count > dtypes[dtype].max_count) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "%s: count %zu of %zu-byte elements is too large",
                        fn, count, dtypes[dtype].size);
  }
  return MPIAR_SUCCESS;
}

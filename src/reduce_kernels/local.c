/* The kernel layer as a public call: mpiar_reduce_local() and mpiar_kernel_level(). */
#include <stdint.h>

#include "base/common.h"
#include "reduce_kernels/kernels.h"

int mpiar_reduce_local(void *dst, const void *a, const void *b, size_t count, mpiar_dtype_t dtype,
                       mpiar_op_t op) {
  mpiar__error_clear();
  if ((unsigned)dtype >= MPIAR__DTYPE_COUNT) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "invalid datatype %d", (int)dtype);
  }
  if ((unsigned)op >= MPIAR__OP_COUNT) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "invalid operation %d", (int)op);
  }
  if (!mpiar_op_supported(dtype, op)) {
    return mpiar__error(MPIAR_ERR_BAD_DTYPE_OP, "operation %s is not defined on %s",
                        mpiar_op_name(op), mpiar_dtype_name(dtype));
  }
  /* The byte length of each operand must be a size_t, as for the collectives. */
  if (count > SIZE_MAX / mpiar_dtype_size(dtype) / 2) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG,
                        "mpiar_reduce_local: count %zu of %zu-byte elements is too large", count,
                        mpiar_dtype_size(dtype));
  }
  if (count > 0 && (dst == NULL || a == NULL || b == NULL)) {
    return mpiar__error(MPIAR_ERR_NULL_BUFFER, "mpiar_reduce_local of %zu elements with a null %s",
                        count, dst == NULL ? "dst" : (a == NULL ? "a" : "b"));
  }
  int rc = mpiar__kernels_init();
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  if (count > 0) {
    mpiar__reduce(dst, a, b, count, dtype, op);
  }
  return MPIAR_SUCCESS;
}

const char *mpiar_kernel_level(void) {
  if (mpiar__kernels_init() != MPIAR_SUCCESS) {
    return NULL;
  }
  return mpiar__isa_name(mpiar__kernels()->isa);
}

/* The kernel layer as a public call: mpiar_reduce_local() and mpiar_kernel_level(). */
#include <stdint.h>

#include "base/common.h"
#include "reduce_kernels/kernels.h"

int mpiar_reduce_local(void *dst, const void *a, const void *b, size_t count, mpiar_dtype_t dtype,
                       mpiar_op_t op) {
  mpiar__error_clear();
  int rc = mpiar__check_reduction("mpiar_reduce_local", dtype, op, count);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  if (count > 0 && (dst == NULL || a == NULL || b == NULL)) {
    return mpiar__error(MPIAR_ERR_NULL_BUFFER, "mpiar_reduce_local of %zu elements with a null %s",
                        count, dst == NULL ? "dst" : (a == NULL ? "a" : "b"));
  }
  rc = mpiar__kernels_init();
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

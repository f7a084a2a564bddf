/*
 * MPIAR_KERNEL and MPIAR_NUM_THREADS handling. The level is chosen once per process, so CTest
 * runs this program once per case, with the environment set by the test:
 *   default      MPIAR_KERNEL unset: the best level this CPU supports
 *   forced L     MPIAR_KERNEL=L: that level, or MPIAR_ERR_ISA_UNAVAILABLE where unsupported
 *   bogus        MPIAR_KERNEL=<unknown name>: MPIAR_ERR_ENV naming the variable
 *   unavailable  MPIAR_KERNEL=avx512 with AVX-512 masked off: MPIAR_ERR_ISA_UNAVAILABLE
 *   bad_threads  MPIAR_NUM_THREADS=<not a number>: MPIAR_ERR_ENV naming the variable
 * After a failed initialisation the process table still holds the reference kernels.
 */
#include "kernel_test_util.h"

static void check_still_usable(void) {
  /* mpiar__reduce must not crash even after a failed initialisation. */
  float a[5] = {1, 2, 3, 4, 5}, b[5] = {1, 1, 1, 1, 1}, d[5];
  CHECK(mpiar__kernels()->isa == MPIAR__ISA_REFERENCE);
  mpiar__reduce(d, a, b, 5, MPIAR_FLOAT32, MPIAR_SUM);
  CHECK(d[0] == 2.0f && d[4] == 6.0f);
}

static void expect_failure(int code, const char *var) {
  int rc = mpiar__kernels_init();
  CHECK_EQ_HEX(rc, code);
  CHECK(strstr(mpiar_last_error(), var) != NULL);
  CHECK(mpiar_kernel_level() == NULL);
  /* The outcome is sticky, and the public call reports it with its detail. */
  float x = 1, y = 2, z = 0;
  CHECK_EQ_HEX(mpiar_reduce_local(&z, &x, &y, 1, MPIAR_FLOAT32, MPIAR_SUM), code);
  CHECK(strstr(mpiar_last_error(), var) != NULL);
  check_still_usable();
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s default | forced LEVEL | bogus | unavailable | bad_threads\n",
            argv[0]);
    return 2;
  }
  const char *mode = argv[1];
  if (strcmp(mode, "default") == 0) {
    CHECK(mpiar__kernels_init() == MPIAR_SUCCESS);
    mpiar__isa_t best = mpiar__isa_supported(MPIAR__ISA_AVX512) ? MPIAR__ISA_AVX512
                        : mpiar__isa_supported(MPIAR__ISA_AVX2) ? MPIAR__ISA_AVX2
                                                                : MPIAR__ISA_REFERENCE;
    CHECK(mpiar__kernels()->isa == best);
    CHECK(mpiar_kernel_level() != NULL && strcmp(mpiar_kernel_level(), mpiar__isa_name(best)) == 0);
    printf("default level: %s\n", mpiar_kernel_level());
  } else if (strcmp(mode, "forced") == 0 && argc == 3) {
    mpiar__isa_t want = MPIAR__ISA_COUNT;
    for (int i = 0; i < MPIAR__ISA_COUNT; i++) {
      if (strcmp(argv[2], mpiar__isa_name((mpiar__isa_t)i)) == 0) {
        want = (mpiar__isa_t)i;
      }
    }
    CHECK(want != MPIAR__ISA_COUNT);
    if (want != MPIAR__ISA_COUNT && mpiar__isa_supported(want)) {
      CHECK(mpiar__kernels_init() == MPIAR_SUCCESS);
      CHECK(mpiar__kernels()->isa == want);
      CHECK(mpiar_kernel_level() != NULL && strcmp(mpiar_kernel_level(), argv[2]) == 0);
      /* The forced table matches a fresh fill of that level, slot for slot. */
      mpiar__kernel_table_t t;
      CHECK(mpiar__kernel_table_fill(want, &t) == MPIAR_SUCCESS);
      CHECK(memcmp(t.fn, mpiar__kernels()->fn, sizeof t.fn) == 0);
      printf("forced level: %s\n", mpiar_kernel_level());
    } else if (want != MPIAR__ISA_COUNT) {
      printf("%s is not supported here; checking the error instead\n", argv[2]);
      expect_failure(MPIAR_ERR_ISA_UNAVAILABLE, "MPIAR_KERNEL");
    }
  } else if (strcmp(mode, "bogus") == 0) {
    expect_failure(MPIAR_ERR_ENV, "MPIAR_KERNEL");
  } else if (strcmp(mode, "unavailable") == 0) {
    mpiar__kernels_disable_features(MPIAR__FEAT_AVX512);
    CHECK(!mpiar__isa_supported(MPIAR__ISA_AVX512));
    mpiar__kernel_table_t t;
    CHECK(mpiar__kernel_table_fill(MPIAR__ISA_AVX512, &t) == MPIAR_ERR_ISA_UNAVAILABLE);
    expect_failure(MPIAR_ERR_ISA_UNAVAILABLE, "MPIAR_KERNEL");
  } else if (strcmp(mode, "bad_threads") == 0) {
    expect_failure(MPIAR_ERR_ENV, "MPIAR_NUM_THREADS");
  } else {
    fprintf(stderr, "unknown mode '%s'\n", mode);
    return 2;
  }
  if (failures != 0) {
    fprintf(stderr, "%d failures\n", failures);
    return 1;
  }
  return 0;
}

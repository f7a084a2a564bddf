/*
 * mpiar_reduce_local(): argument errors, results against the reference, and the threaded split
 * (MPIAR_NUM_THREADS = 1, 2, 3 and the default-thread setting) giving identical bits.
 */
#include "base/settings.h"
#include "kernel_test_util.h"

static mpiar__kernel_table_t ref;

static void check_errors(void) {
  float a[4] = {1, 2, 3, 4}, b[4] = {4, 3, 2, 1}, d[4];
  CHECK_EQ_HEX(mpiar_reduce_local(NULL, a, b, 4, MPIAR_FLOAT32, MPIAR_SUM), MPIAR_ERR_NULL_BUFFER);
  CHECK(strstr(mpiar_last_error(), "dst") != NULL);
  CHECK_EQ_HEX(mpiar_reduce_local(d, NULL, b, 4, MPIAR_FLOAT32, MPIAR_SUM), MPIAR_ERR_NULL_BUFFER);
  CHECK_EQ_HEX(mpiar_reduce_local(d, a, NULL, 4, MPIAR_FLOAT32, MPIAR_SUM), MPIAR_ERR_NULL_BUFFER);
  CHECK_EQ_HEX(mpiar_reduce_local(NULL, NULL, NULL, 0, MPIAR_FLOAT32, MPIAR_SUM), MPIAR_SUCCESS);
  CHECK(strcmp(mpiar_last_error(), "") == 0);
  CHECK_EQ_HEX(mpiar_reduce_local(d, a, b, 4, (mpiar_dtype_t)-1, MPIAR_SUM), MPIAR_ERR_INVALID_ARG);
  CHECK_EQ_HEX(mpiar_reduce_local(d, a, b, 4, MPIAR__DTYPE_COUNT, MPIAR_SUM), MPIAR_ERR_INVALID_ARG);
  /* Counts whose byte length does not fit a size_t are refused, not silently skipped. */
  CHECK_EQ_HEX(mpiar_reduce_local(d, a, b, SIZE_MAX, MPIAR_INT8, MPIAR_SUM), MPIAR_ERR_INVALID_ARG);
  CHECK_EQ_HEX(mpiar_reduce_local(d, a, b, SIZE_MAX / 4 + 1, MPIAR_FLOAT32, MPIAR_SUM),
               MPIAR_ERR_INVALID_ARG);
  CHECK(strstr(mpiar_last_error(), "too large") != NULL);
  CHECK_EQ_HEX(mpiar_reduce_local(d, a, b, 4, MPIAR_FLOAT32, MPIAR__OP_COUNT),
               MPIAR_ERR_INVALID_ARG);
  CHECK_EQ_HEX(mpiar_reduce_local(d, a, b, 4, MPIAR_FLOAT32, MPIAR_BXOR), MPIAR_ERR_BAD_DTYPE_OP);
  CHECK(strstr(mpiar_last_error(), "bxor") != NULL);
  CHECK_EQ_HEX(mpiar_reduce_local(d, a, b, 4, MPIAR_INT32, MPIAR_AVG), MPIAR_ERR_BAD_DTYPE_OP);
  /* A bad pair is reported even with null buffers: the pair is checked first. */
  CHECK_EQ_HEX(mpiar_reduce_local(NULL, NULL, NULL, 4, MPIAR_INT8, MPIAR_AVG),
               MPIAR_ERR_BAD_DTYPE_OP);
  CHECK_EQ_HEX(mpiar_reduce_local(d, a, b, 4, MPIAR_FLOAT32, MPIAR_SUM), MPIAR_SUCCESS);
  CHECK(strcmp(mpiar_last_error(), "") == 0);
  CHECK(d[0] == 5.0f && d[3] == 5.0f);
  /* In place on either operand. */
  CHECK_EQ_HEX(mpiar_reduce_local(a, a, b, 4, MPIAR_FLOAT32, MPIAR_PROD), MPIAR_SUCCESS);
  CHECK(a[0] == 4.0f && a[1] == 6.0f);
  CHECK_EQ_HEX(mpiar_reduce_local(b, a, b, 4, MPIAR_FLOAT32, MPIAR_MAX), MPIAR_SUCCESS);
  CHECK(b[0] == 4.0f && b[3] == 4.0f);
}

/* Every supported pair on a short span: the process table equals the reference. */
static void check_pairs(void) {
  unsigned char a[8 * 67], b[8 * 67], d[8 * 67], w[8 * 67];
  for (int dt = 0; dt < MPIAR__DTYPE_COUNT; dt++) {
    for (int op = 0; op < MPIAR__OP_COUNT; op++) {
      if (!mpiar_op_supported((mpiar_dtype_t)dt, (mpiar_op_t)op)) {
        continue;
      }
      fill_values(a, 67, (mpiar_dtype_t)dt);
      fill_values(b, 67, (mpiar_dtype_t)dt);
      ref.fn[dt][op](w, a, b, 67);
      CHECK(mpiar_reduce_local(d, a, b, 67, (mpiar_dtype_t)dt, (mpiar_op_t)op) == MPIAR_SUCCESS);
      if (memcmp(d, w, 67 * mpiar_dtype_size((mpiar_dtype_t)dt)) != 0) {
        fprintf(stderr, "%s %s differs from the reference\n", mpiar_dtype_name((mpiar_dtype_t)dt),
                mpiar_op_name((mpiar_op_t)op));
        failures++;
      }
    }
  }
}

/* Long spans (several times the parallel threshold, odd length, unaligned dst) on 1, 2, 3 threads.
 */
static void check_threads(void) {
  static const mpiar_dtype_t dts[] = {MPIAR_FLOAT32, MPIAR_BFLOAT16, MPIAR_FLOAT64, MPIAR_INT8};
  size_t bytes = 3 * MPIAR__KERNEL_PARALLEL_BYTES + 40;
  unsigned char *a = malloc(bytes), *b = malloc(bytes), *w = malloc(bytes + 8),
                *d = malloc(bytes + 8);
  CHECK(a && b && w && d);
  for (size_t k = 0; k < NELEMS(dts) && a && b && w && d; k++) {
    mpiar_dtype_t dt = dts[k];
    size_t es = mpiar_dtype_size(dt);
    size_t n = bytes / es - 3;
    fill_values(a, n, dt);
    fill_values(b, n, dt);
    ref.fn[dt][MPIAR_SUM](w, a, b, n);
    static const char *const counts[] = {"1", "2", "3"};
    for (size_t t = 0; t < 3; t++) {
      setenv("MPIAR_NUM_THREADS", counts[t], 1);
      mpiar__settings_reload(); /* settings are read once per process */
      /* MPIAR_NUM_THREADS is capped at the CPUs this process may use. */
      int cpus = mpiar__usable_cpus();
      CHECK(mpiar__kernel_threads() == ((int)t + 1 < cpus ? (int)t + 1 : cpus));
      memset(d, 0, bytes + 8);
      CHECK(mpiar_reduce_local(d + es, a, b, n, dt, MPIAR_SUM) == MPIAR_SUCCESS);
      if (memcmp(d + es, w, n * es) != 0) {
        fprintf(stderr, "%s sum on %s threads differs\n", mpiar_dtype_name(dt), counts[t]);
        failures++;
      }
      if (ref.div[dt] != NULL) {
        ref.div[dt](w + es, a, n, 3.0);
        mpiar__divide(d, a, n, dt, 3.0);
        if (memcmp(d, w + es, n * es) != 0) {
          fprintf(stderr, "%s divide on %s threads differs\n", mpiar_dtype_name(dt), counts[t]);
          failures++;
        }
        ref.fn[dt][MPIAR_SUM](w, a, b, n);
      }
    }
    /* Without the variable, the default set by the executor applies. */
    unsetenv("MPIAR_NUM_THREADS");
    mpiar__settings_reload(); /* settings are read once per process */
    mpiar__kernel_set_default_threads(2);
#if defined(MPIAR_HAVE_OPENMP)
    CHECK(mpiar__kernel_threads() == 2);
#endif
    CHECK(mpiar_reduce_local(d, a, b, n, dt, MPIAR_SUM) == MPIAR_SUCCESS);
    CHECK(memcmp(d, w, n * es) == 0);
    mpiar__kernel_set_default_threads(0);
  }
  free(a);
  free(b);
  free(w);
  free(d);
}

int main(void) {
  rng_seed(2024);
  CHECK(mpiar__kernel_table_fill(MPIAR__ISA_REFERENCE, &ref) == MPIAR_SUCCESS);
  check_errors();
  check_pairs();
  check_threads();
  printf("kernel level %s\n", mpiar_kernel_level());
  if (failures != 0) {
    fprintf(stderr, "%d failures\n", failures);
    return 1;
  }
  return 0;
}

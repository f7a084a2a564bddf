/*
 * Assertions for the kvstore tests: each prints the file, line, both values and, for mpiar
 * codes, the error name and detail, then exits with a failure status (under MPI it aborts the
 * job, so that no rank is left waiting). The generators are ../common/test_random.h's.
 */
#ifndef MPIAR_KV_TEST_H
#define MPIAR_KV_TEST_H

#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>

#include "../common/test_random.h"
#include "base/common.h"
#include "mpiar.h"

static inline void kv_test_fail(void) {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  fflush(stdout);
  fflush(stderr);
  if (init && !fin) {
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  exit(1);
}

/* Check that an mpiar call returned `want`. */
#define KV_EXPECT_RC(call, want)                                                                   \
  do {                                                                                             \
    int kv_rc_ = (call);                                                                           \
    int kv_want_ = (want);                                                                         \
    if (kv_rc_ != kv_want_) {                                                                      \
      fprintf(stderr, "%s:%d: %s returned %s (%d), expected %s (%d); detail: %s\n", __FILE__,      \
              __LINE__, #call, mpiar_err_name(kv_rc_), kv_rc_, mpiar_err_name(kv_want_), kv_want_, \
              mpiar_last_error());                                                                 \
      kv_test_fail();                                                                              \
    }                                                                                              \
  } while (0)

#define KV_OK(call) KV_EXPECT_RC(call, MPIAR_SUCCESS)

/* Check an integer equality, printing both values. */
#define KV_EXPECT_EQ(a, b)                                                                         \
  do {                                                                                             \
    long long kv_a_ = (long long)(a), kv_b_ = (long long)(b);                                      \
    if (kv_a_ != kv_b_) {                                                                          \
      fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a, #b, kv_a_, \
              kv_b_);                                                                              \
      kv_test_fail();                                                                              \
    }                                                                                              \
  } while (0)

/* Check a condition with a formatted explanation. */
#define KV_EXPECT(cond, ...)                                            \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "%s:%d: %s failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                     \
      fprintf(stderr, "\n");                                            \
      kv_test_fail();                                                   \
    }                                                                   \
  } while (0)

#endif /* MPIAR_KV_TEST_H */

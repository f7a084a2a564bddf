/*
 * Helpers for the MPI tests: checks that print the rank and both values, and a verdict that all
 * ranks agree on (a failing rank fails the whole test); the generators are
 * ../common/test_random.h's.
 */
#ifndef MPIAR_MPI_TEST_H
#define MPIAR_MPI_TEST_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/test_random.h"
#include "base/common.h"
#include "mpiar.h"

static int mt_failures;
static int mt_rank;

#define MT_CHECK(cond, ...)                                                                        \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      if (mt_failures++ < 20) {                                                                    \
        fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", mt_rank, __FILE__, __LINE__, #cond); \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
      }                                                                                            \
    }                                                                                              \
  } while (0)

/* Check an mpiar return code, printing its name and detail when it is not the expected one. */
#define MT_RC(expected, call)                                                       \
  do {                                                                              \
    int mt_rc_ = (call);                                                            \
    MT_CHECK(mt_rc_ == (expected), "%s returned %s (%s), expected %s", #call,       \
             mpiar_err_name(mt_rc_), mpiar_last_error(), mpiar_err_name(expected)); \
  } while (0)

static inline void mt_init(int *argc, char ***argv) {
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
}

/* Finalize and return the exit code: 0 only if no rank saw a failure. */
static inline int mt_finish(const char *name) {
  int total = 0;
  MPI_Allreduce(&mt_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (mt_rank == 0) {
    printf("%s on %d ranks: %s (%d failed checks)\n", name, size, total ? "FAILED" : "passed",
           total);
  }
  MPI_Finalize();
  return total ? 1 : 0;
}

#endif /* MPIAR_MPI_TEST_H */

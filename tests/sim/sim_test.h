/*
 * The simulator tests' one check macro: EXPECT(cond, printf-like message) counts a failure in
 * the test's `failures` and prints the file, line and message; main returns nonzero when any
 * check failed.
 */
#ifndef MPIAR_SIM_TEST_H
#define MPIAR_SIM_TEST_H

#include <stdio.h>

static int failures;

#define EXPECT(cond, ...)                                  \
  do {                                                     \
    if (!(cond)) {                                         \
      failures++;                                          \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, "\n");                               \
    }                                                      \
  } while (0)

#endif /* MPIAR_SIM_TEST_H */

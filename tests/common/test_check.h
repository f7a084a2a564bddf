/*
 * The check the tests without MPI share (an area's header includes it and adds its own helpers):
 * a failed check counts in `failures` and prints where it failed; main returns nonzero when any
 * check failed.
 *
 *   CHECK(cond, fmt, ...)   "file:line: cond: message" (TEST_CHECK_WORDS, if defined before
 *                           this header, comes before cond: "check failed: ")
 *   EXPECT(cond, fmt, ...)  "FAIL file:line: message"
 *   CHECK_COND(cond)        "file:line: check failed: cond"
 *
 * An area whose CHECK takes no message defines CHECK (as CHECK_COND) before this header.
 */
#ifndef MPIAR_TEST_CHECK_H
#define MPIAR_TEST_CHECK_H

#include <stdio.h>

static int failures;

#ifndef TEST_CHECK_WORDS
#define TEST_CHECK_WORDS ""
#endif

/* Count a failure and print "<lead>file:line: <words>", the message (printf arguments), '\n'. */
#define TEST_FAIL(lead, words, ...)                                  \
  do {                                                               \
    failures++;                                                      \
    fprintf(stderr, "%s%s:%d: %s", lead, __FILE__, __LINE__, words); \
    fprintf(stderr, __VA_ARGS__);                                    \
    fprintf(stderr, "\n");                                           \
  } while (0)

#ifndef CHECK
#define CHECK(cond, ...)                                       \
  do {                                                         \
    if (!(cond)) {                                             \
      TEST_FAIL("", TEST_CHECK_WORDS #cond ": ", __VA_ARGS__); \
    }                                                          \
  } while (0)
#endif

#define EXPECT(cond, ...)                  \
  do {                                     \
    if (!(cond)) {                         \
      TEST_FAIL("FAIL ", "", __VA_ARGS__); \
    }                                      \
  } while (0)

#define CHECK_COND(cond)                            \
  do {                                              \
    if (!(cond)) {                                  \
      TEST_FAIL("", "check failed: ", "%s", #cond); \
    }                                               \
  } while (0)

#endif /* MPIAR_TEST_CHECK_H */

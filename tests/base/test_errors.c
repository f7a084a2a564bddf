/*
 * The error detail (label base): a detail that quotes the previous one (callers add context to
 * the last error with mpiar_last_error() as an argument) reads it whole, never the text being
 * written over it.
 */
#include <stdio.h>
#include <string.h>

#include "base/common.h"

static int failures;

static void expect(const char *got, const char *want) {
  if (strcmp(got, want) != 0) {
    fprintf(stderr, "detail '%s', expected '%s'\n", got, want);
    failures++;
  }
}

int main(void) {
  mpiar__error(MPIAR_ERR_COMM_BROKEN, "the communicator's context broke: rank 2 failed");
  int rc = mpiar__error(MPIAR_ERR_COMM_BROKEN, "request %d: %s", 3, mpiar_last_error());
  expect(mpiar_last_error(), "request 3: the communicator's context broke: rank 2 failed");
  if (rc != MPIAR_ERR_COMM_BROKEN) {
    fprintf(stderr, "code %d\n", rc);
    failures++;
  }
  /* Twice over, and a detail that fills the buffer: cut at its end, still terminated. */
  mpiar__error(MPIAR_ERR_MPI, "%s; %s", mpiar_last_error(), mpiar_last_error());
  expect(mpiar_last_error(), "request 3: the communicator's context broke: rank 2 failed; request "
                             "3: the communicator's context broke: rank 2 failed");
  char longer[2000];
  memset(longer, 'x', sizeof longer - 1);
  longer[sizeof longer - 1] = '\0';
  mpiar__error(MPIAR_ERR_MPI, "%s", longer);
  mpiar__error(MPIAR_ERR_MPI, "y%s", mpiar_last_error());
  size_t n = strlen(mpiar_last_error());
  if (n != 511 || mpiar_last_error()[0] != 'y' || mpiar_last_error()[1] != 'x') {
    fprintf(stderr, "long detail: %zu characters, starting '%.3s'\n", n, mpiar_last_error());
    failures++;
  }
  mpiar__error_clear();
  expect(mpiar_last_error(), "");
  printf("errors: %s (%d failed checks)\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}

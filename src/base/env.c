/* Environment variables: one parser, so that every malformed value is an error naming its variable.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/common.h"

int mpiar__parse_size(const char *text, size_t *out) {
  if (text == NULL || *text < '0' || *text > '9') {
    return -1;
  }
  errno = 0;
  char *end = NULL;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno != 0 || end == text) {
    return -1;
  }
  unsigned shift = 0;
  switch (*end) {
  case '\0':
    break;
  case 'k':
  case 'K':
    shift = 10;
    end++;
    break;
  case 'm':
  case 'M':
    shift = 20;
    end++;
    break;
  case 'g':
  case 'G':
    shift = 30;
    end++;
    break;
  default:
    return -1;
  }
  /* Accept "64K", "64KB", "64KiB"; nothing else may follow. */
  if (shift != 0 && (*end == 'i' || *end == 'I')) {
    end++;
  }
  if (shift != 0 && (*end == 'b' || *end == 'B')) {
    end++;
  }
  if (*end != '\0') {
    return -1;
  }
  if (shift != 0 && v > (SIZE_MAX >> shift)) {
    return -1;
  }
  if (v > SIZE_MAX) {
    return -1;
  }
  *out = (size_t)v << shift;
  return 0;
}

int mpiar__env_size(const char *name, size_t dflt, size_t *out) {
  const char *v = getenv(name);
  if (v == NULL || *v == '\0') {
    *out = dflt;
    return MPIAR_SUCCESS;
  }
  if (mpiar__parse_size(v, out) != 0) {
    return mpiar__error(MPIAR_ERR_ENV,
                        "%s='%s' is not a size (a non-negative integer, optionally with K, M or G)",
                        name, v);
  }
  return MPIAR_SUCCESS;
}

int mpiar__env_int(const char *name, long dflt, long lo, long hi, long *out) {
  const char *v = getenv(name);
  if (v == NULL || *v == '\0') {
    *out = dflt;
    return MPIAR_SUCCESS;
  }
  errno = 0;
  char *end = NULL;
  long x = strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi) {
    return mpiar__error(MPIAR_ERR_ENV, "%s='%s' is not an integer in [%ld, %ld]", name, v, lo, hi);
  }
  *out = x;
  return MPIAR_SUCCESS;
}

/*
 * Fuzz target: mpiar__parse_size, the size grammar of every setting and tool ("4096", "64K",
 * "1M", "2GiB"), against an independent reading of the same grammar: the two must agree on
 * which texts are sizes and on their values. Any disagreement, crash or undefined behaviour
 * ends the run.
 *
 * Grammar: one or more decimal digits, then optionally K, M or G (either case; powers of 1024),
 * then optionally i or I, then optionally b or B (the last two only after K, M or G), then the
 * end; the value must fit in size_t.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/settings.h"

/* The grammar read character by character, with explicit overflow checks. @return 0 or -1. */
static int reference(const char *s, size_t *out) {
  if (*s < '0' || *s > '9') {
    return -1;
  }
  size_t v = 0;
  int overflow = 0;
  for (; *s >= '0' && *s <= '9'; s++) {
    size_t d = (size_t)(*s - '0');
    if (v > (SIZE_MAX - d) / 10) {
      overflow = 1;
    }
    v = v * 10 + d;
  }
  unsigned shift = 0;
  switch (*s) {
  case 'k':
  case 'K':
    shift = 10;
    break;
  case 'm':
  case 'M':
    shift = 20;
    break;
  case 'g':
  case 'G':
    shift = 30;
    break;
  default:
    break;
  }
  if (shift != 0) {
    s++;
    if (*s == 'i' || *s == 'I') {
      s++;
    }
    if (*s == 'b' || *s == 'B') {
      s++;
    }
  }
  if (*s != '\0' || overflow || v > (SIZE_MAX >> shift)) {
    return -1;
  }
  *out = v << shift;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char text[128];
  if (size >= sizeof text) {
    return 0;
  }
  memcpy(text, data, size);
  text[size] = '\0';
  size_t got = 0;
  size_t want = 0;
  int rc = mpiar__parse_size(text, &got);
  int ref = reference(text, &want);
  if (rc != ref || (rc == 0 && got != want)) {
    abort();
  }
  return 0;
}
